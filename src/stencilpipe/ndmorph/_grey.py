"""Grey morphology: scipy.ndimage's grey_erosion, grey_dilation, grey_opening, grey_closing.

A flat structuring element (``size`` or ``footprint``) is ndfilters' minimum
or maximum filter, compiled as ndfilters compiles it; a non-flat ``structure``
is a kernel of its own (:func:`stencilpipe.ndfilters._kernels.structured_kernel`).
Dilation is scipy's: the maximum over the mirrored element, with the origin
mirrored too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ndfilters._apply import (
    Pass,
    as_array,
    check_axes,
    check_real,
    dtypes_of,
    filter_mode,
    filtered,
    normalize_sequence,
)
from ..ndfilters._kernels import structured_kernel
from ..ndfilters._order import cast_cval, expand, min_or_max, offsets_of, warn_size_ignored

__all__ = ["grey_closing", "grey_dilation", "grey_erosion", "grey_opening", "mirrored"]


def _structured(array, footprint, structure, output, mode, cval, origin, axes, minimum, name):
    """scipy's min/max filter with a non-flat ``structure`` (``footprint`` picks its entries)."""
    structure = np.asarray(structure, dtype=np.float64)
    footprint = np.ones(structure.shape, bool) if footprint is None else np.asarray(footprint, bool)
    if structure.ndim != len(axes):
        raise RuntimeError("structure array has incorrect shape")
    if footprint.shape != structure.shape:
        raise RuntimeError("footprint and structure must have the same shape")
    if not footprint.any():
        raise ValueError("All-zero footprint is not supported.")
    values = tuple(float(v) for v in structure[footprint])
    footprint, origins = expand(array, footprint, origin, axes)
    if not isinstance(mode, str):
        raise RuntimeError("A sequence of modes is not supported for non-separable footprints")
    dtypes = dtypes_of(array, output, name)
    offsets = offsets_of(footprint, origins)
    store = dtypes.store
    fill = cast_cval(cval, array.dtype) if filter_mode(mode) == "constant" else 0
    step = Pass(lambda dtype: structured_kernel(offsets, values, minimum, dtype, store), mode)
    return filtered(array, [step], dtypes, fill, output)


def _grey(input, size, footprint, structure, output, mode, cval, origin, axes, minimum, name):
    if size is None and footprint is None and structure is None:
        raise ValueError("size, footprint, or structure must be specified")
    if structure is None:
        return min_or_max(input, size, footprint, mode, cval, origin, output, axes, minimum, name)
    warn_size_ignored(size, footprint)
    array = as_array(input)
    check_real(array, name)
    axes = check_axes(axes, array.ndim)
    return _structured(array, footprint, structure, output, mode, cval, origin, axes, minimum, name)


def _mirror(element: Any) -> Any:
    if element is None:
        return None
    element = np.asarray(element)
    return element[(slice(None, None, -1),) * element.ndim]


def mirrored(size, footprint, structure, origin, n_axes: int) -> tuple[Any, Any, list[int]]:
    """The (footprint, structure, origins) that scipy's dilation takes the maximum over: the
    element mirrored, its origin negated (and moved back one along even extents)."""
    structure, footprint = _mirror(structure), _mirror(footprint)
    for element in (footprint, structure):
        if element is not None and element.ndim != n_axes:  # scipy: an IndexError
            raise RuntimeError(f"footprint.ndim ({element.ndim}) must match len(axes) ({n_axes})")
    origins = []
    for ii, o in enumerate(normalize_sequence(origin, n_axes)):
        if footprint is not None:
            extent = footprint.shape[ii]
        elif structure is not None:
            extent = structure.shape[ii]
        else:
            extent = size if np.isscalar(size) else size[ii]
        origins.append(-o - (0 if extent & 1 else 1))
    return footprint, structure, origins


def grey_erosion(
    input,
    size=None,
    footprint=None,
    structure=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    axes=None,
):
    """Greyscale erosion (scipy.ndimage.grey_erosion): the minimum over a flat element
    (``size`` or ``footprint``), or of ``input - structure`` over a non-flat one.

    Parameters
    ----------
    input : array_like
        NumPy, Dask or CuPy array.
    size : int or sequence of int, optional
        A flat, full (box) element.
    footprint : array_like of bool, optional
        A flat element's shape (overrides ``size``); with ``structure``, the entries used.
    structure : array_like, optional
        A non-flat element: values subtracted (erosion) or added (dilation).
    output : dtype or ndarray, optional
        Output dtype or a NumPy array to write into; default the input's dtype.
    mode : str or sequence of str
        Boundary mode (scipy's names); per axis only for a box.
    cval : scalar
        Value outside the array under ``constant``.
    origin : int or sequence of int
        Shift of the element.
    axes : sequence of int, optional
        The axes filtered.

    Returns
    -------
    array
        Of the input's array type; values as scipy's.
    """
    return _grey(
        input, size, footprint, structure, output, mode, cval, origin, axes, True, "grey_erosion"
    )


def grey_dilation(
    input,
    size=None,
    footprint=None,
    structure=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    axes=None,
):
    """Greyscale dilation (scipy.ndimage.grey_dilation): the maximum over the mirrored
    element (of ``input + structure`` for a non-flat one).

    Parameters are those of :func:`grey_erosion`.
    """
    if size is None and footprint is None and structure is None:
        raise ValueError("size, footprint, or structure must be specified")
    n_axes = len(check_axes(axes, as_array(input).ndim))
    footprint, structure, origins = mirrored(size, footprint, structure, origin, n_axes)
    return _grey(
        input, size, footprint, structure, output, mode, cval, origins, axes, False, "grey_dilation"
    )


def _compose(first, second, input, size, footprint, structure, output, mode, cval, origin, axes):
    warn_size_ignored(size, footprint)
    tmp = first(input, size, footprint, structure, None, mode, cval, origin, axes=axes)
    return second(tmp, size, footprint, structure, output, mode, cval, origin, axes=axes)


def grey_opening(
    input,
    size=None,
    footprint=None,
    structure=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    axes=None,
):
    """Greyscale opening (scipy.ndimage.grey_opening): erosion, then dilation.

    Parameters are those of :func:`grey_erosion`.
    """
    args = (input, size, footprint, structure, output, mode, cval, origin, axes)
    return _compose(grey_erosion, grey_dilation, *args)


def grey_closing(
    input,
    size=None,
    footprint=None,
    structure=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    axes=None,
):
    """Greyscale closing (scipy.ndimage.grey_closing): dilation, then erosion.

    Parameters are those of :func:`grey_erosion`.
    """
    args = (input, size, footprint, structure, output, mode, cval, origin, axes)
    return _compose(grey_dilation, grey_erosion, *args)
