"""Morphology as pipeline stages: each operation as the stencils a chain runs on each frame.

A stage factory takes the operation's parameters (scipy's names) and returns
its stencils in order: ``iterations`` erosions are that many stencils, an
opening is erosions then dilations. Binary stages write uint8 0/1 (outside the
frame: ``border_value``); grey stages keep the input's dtype and take the
pipeline's ``boundary`` and ``cval``. Masks (a second image) and non-flat grey
structures (whose scipy arithmetic depends on the input's dtype) are left to
:mod:`stencilpipe.ndmorph` called on arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ndfilters._correlate import window_origin
from ..ndfilters._kernels import binary_kernel, rank_kernel
from ..ndfilters._order import box_or_footprint, offsets_of
from ..stencils import Stencil
from ._binary import binary_structure
from ._grey import mirrored

__all__ = ["STAGES"]

Element = Sequence[Any] | None
Origin = int | Sequence[int]


def _offsets(footprint: np.ndarray, origin: Any) -> tuple[tuple[int, ...], ...]:
    given = [origin] * footprint.ndim if np.isscalar(origin) else list(origin)
    if len(given) != footprint.ndim:
        raise ValueError(f"origin has {len(given)} entries, expected {footprint.ndim}")
    origins = [window_origin(n, o) for n, o in zip(footprint.shape, given)]
    if not footprint.any():
        raise ValueError("the structuring element has no True place")
    return offsets_of(footprint, origins)


def _binary(structure, iterations, border_value, origin, ndim, order: str):
    """The stencils of ``order`` (``e``: erosion, ``d``: dilation), each ``iterations`` times."""
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be a positive integer in a stage, got {iterations!r}")
    element = binary_structure(ndim) if structure is None else np.asarray(structure) != 0
    if element.ndim != ndim:
        raise ValueError(f"structure has {element.ndim} axes, expected ndim={ndim}")
    options = {"boundary": "constant", "cval": int(border_value != 0)}
    mirror, _, origins = mirrored(None, element, None, origin, ndim)
    kernels = {
        "e": binary_kernel(_offsets(element, origin), True).with_options(**options),
        "d": binary_kernel(_offsets(mirror, origins), False).with_options(**options),
    }
    return tuple(kernels[step] for step in order for _ in range(iterations))


def binary_erosion(
    structure: Element = None,
    iterations: int = 1,
    border_value: int = 0,
    origin: Origin = 0,
    *,
    ndim: int = 2,
) -> tuple[Stencil, ...]:
    """Binary erosion (scipy.ndimage.binary_erosion) of each frame; uint8 0/1 out.

    Parameters
    ----------
    structure : nested sequence, optional
        The structuring element (nonzero is True); default the centre and its face
        neighbours.
    iterations : int
        How many erosions (at least 1 in a stage).
    border_value : int
        The value outside the frame (0 or 1).
    origin : int or sequence of int
        Shift of the structure.
    ndim : int
        Number of core dimensions (2 for frames, 3 for volumes).
    """
    return _binary(structure, iterations, border_value, origin, ndim, "e")


def binary_dilation(
    structure: Element = None,
    iterations: int = 1,
    border_value: int = 0,
    origin: Origin = 0,
    *,
    ndim: int = 2,
) -> tuple[Stencil, ...]:
    """Binary dilation (scipy.ndimage.binary_dilation) of each frame; uint8 0/1 out.

    Parameters are those of :func:`binary_erosion`.
    """
    return _binary(structure, iterations, border_value, origin, ndim, "d")


def binary_opening(
    structure: Element = None,
    iterations: int = 1,
    border_value: int = 0,
    origin: Origin = 0,
    *,
    ndim: int = 2,
) -> tuple[Stencil, ...]:
    """Binary opening (scipy.ndimage.binary_opening): erosions, then dilations.

    Parameters are those of :func:`binary_erosion`.
    """
    return _binary(structure, iterations, border_value, origin, ndim, "ed")


def binary_closing(
    structure: Element = None,
    iterations: int = 1,
    border_value: int = 0,
    origin: Origin = 0,
    *,
    ndim: int = 2,
) -> tuple[Stencil, ...]:
    """Binary closing (scipy.ndimage.binary_closing): dilations, then erosions.

    Parameters are those of :func:`binary_erosion`.
    """
    return _binary(structure, iterations, border_value, origin, ndim, "de")


def _grey(size, footprint, origin, ndim, options, order: str) -> tuple[Stencil, ...]:
    """The stencils of ``order`` (``e``: minimum, ``d``: maximum over the mirrored element)."""
    if size is None and footprint is None:
        raise ValueError("give size or footprint")
    element = box_or_footprint(size, footprint, ndim)
    if element.ndim != ndim:
        raise ValueError(f"footprint has {element.ndim} axes, expected ndim={ndim}")
    offsets = _offsets(element, origin)
    mirror, _, origins = mirrored(None, element, None, origin, ndim)
    mirror_offsets = _offsets(mirror, origins)
    kernels = {
        "e": rank_kernel(offsets, 0, None, False),
        "d": rank_kernel(mirror_offsets, len(mirror_offsets) - 1, None, False),
    }
    return tuple(kernels[step].with_options(**options) for step in order)


def grey_erosion(
    size: int | Sequence[int] | None = None,
    footprint: Element = None,
    origin: Origin = 0,
    *,
    ndim: int = 2,
    **options: Any,
) -> tuple[Stencil, ...]:
    """Greyscale erosion (scipy.ndimage.grey_erosion) of each frame over a flat element.

    Parameters
    ----------
    size : int or sequence of int, optional
        A box element.
    footprint : nested sequence, optional
        The element's shape (nonzero is True); overrides ``size``.
    origin : int or sequence of int
        Shift of the element.
    ndim : int
        Number of core dimensions.
    **options
        ``boundary``, ``cval``, ``dtype`` as for :func:`~stencilpipe.stencil`.
    """
    return _grey(size, footprint, origin, ndim, options, "e")


def grey_dilation(
    size: int | Sequence[int] | None = None,
    footprint: Element = None,
    origin: Origin = 0,
    *,
    ndim: int = 2,
    **options: Any,
) -> tuple[Stencil, ...]:
    """Greyscale dilation (scipy.ndimage.grey_dilation) of each frame over a flat element.

    Parameters are those of :func:`grey_erosion`.
    """
    return _grey(size, footprint, origin, ndim, options, "d")


def grey_opening(
    size: int | Sequence[int] | None = None,
    footprint: Element = None,
    origin: Origin = 0,
    *,
    ndim: int = 2,
    **options: Any,
) -> tuple[Stencil, ...]:
    """Greyscale opening (scipy.ndimage.grey_opening): erosion, then dilation.

    Parameters are those of :func:`grey_erosion`.
    """
    return _grey(size, footprint, origin, ndim, options, "ed")


def grey_closing(
    size: int | Sequence[int] | None = None,
    footprint: Element = None,
    origin: Origin = 0,
    *,
    ndim: int = 2,
    **options: Any,
) -> tuple[Stencil, ...]:
    """Greyscale closing (scipy.ndimage.grey_closing): dilation, then erosion.

    Parameters are those of :func:`grey_erosion`.
    """
    return _grey(size, footprint, origin, ndim, options, "de")


#: The morphology stages by name, as configs refer to them (beside library.FILTERS).
STAGES = {
    "binary_erosion": binary_erosion,
    "binary_dilation": binary_dilation,
    "binary_opening": binary_opening,
    "binary_closing": binary_closing,
    "grey_erosion": grey_erosion,
    "grey_dilation": grey_dilation,
    "grey_opening": grey_opening,
    "grey_closing": grey_closing,
}
