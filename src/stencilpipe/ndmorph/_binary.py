"""Binary morphology: dask_image.ndmorph's (and scipy.ndimage's) binary_erosion,
binary_dilation, binary_opening and binary_closing.

An erosion is the minimum of the 0/1 image over the structure's True places,
a dilation the maximum over the mirrored structure (scipy's definition, origin
mirrored too), both with ``border_value`` outside: ndfilters' minimum and maximum
filters, compiled as stencils. ``brute_force`` is accepted and changes nothing
(scipy's two algorithms give the same values).
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

import dask.array as da
import numpy as np

from ..ndfilters._apply import as_array, check_axes, normalize_sequence
from ..ndfilters._order import expand
from ..stencils.dask_apply import is_dask_array
from ._grey import mirrored
from ._iterate import Step, iterate

__all__ = [
    "ArgumentError",
    "binary_closing",
    "binary_dilation",
    "binary_erosion",
    "binary_opening",
    "binary_structure",
]


class ArgumentError(RuntimeError, TypeError):
    """A scalar where an array is wanted (structure, a non-bool mask): scipy raises a
    RuntimeError, dask-image a TypeError; code written for either catches this."""


def binary_structure(rank: int) -> np.ndarray:
    """scipy's ``generate_binary_structure(rank, 1)``: the centre and its face neighbours."""
    if rank < 1:
        return np.array(True)
    return np.abs(np.indices((3,) * rank) - 1).sum(0) <= 1


def _mask_like(mask: Any, array: Any) -> Any:
    """``mask`` as booleans of ``array``'s array type; None where it keeps nothing."""
    if mask is None:
        return None
    if isinstance(mask, (bool, np.bool_)):
        return None if mask else np.zeros(array.shape, bool)
    if is_dask_array(array):
        mask = da.asarray(mask)
    elif hasattr(array, "__cuda_array_interface__"):
        import cupy

        mask = cupy.asarray(mask)
    elif not is_dask_array(mask):
        mask = np.asarray(mask)
    if mask.ndim == 0 and array.ndim > 0:
        raise ArgumentError(f"mask must be a bool or an array of the input's shape, got {mask!r}")
    if tuple(mask.shape) != tuple(array.shape):
        raise RuntimeError("mask and input must have equal sizes")
    return mask != 0


def _binary(image, structure, iterations, mask, border_value, origin, axes, output, erosion):
    try:
        iterations = operator.index(iterations)
    except TypeError:
        raise TypeError("iterations parameter should be an integer") from None
    if not isinstance(border_value, (numbers.Integral, np.bool_)):
        raise TypeError("border_value must be of integral type")
    array = as_array(image)
    if array.dtype.kind == "c":
        raise TypeError("Complex type not supported")
    axes = check_axes(axes, array.ndim)
    if structure is None:
        structure = binary_structure(len(axes))
    elif np.ndim(structure) == 0 and len(axes) > 0:
        raise ArgumentError(f"structure must be an array, got {structure!r}")
    else:
        structure = np.asarray(structure) != 0
    if structure.ndim != len(axes):
        raise RuntimeError("structure and input must have same dimensionality")
    if structure.size < 1:
        raise RuntimeError("structure must not be empty")
    origins = normalize_sequence(origin, len(axes))
    if not erosion:  # scipy's dilation: erosion of the complement by the mirrored structure
        structure, _, origins = mirrored(None, structure, None, origins, len(axes))
    structure, origins = expand(array, structure, origins, axes)
    step = Step(structure, origins, int(border_value != 0), minimum=erosion)
    values = (array != 0).astype(np.uint8)
    result = iterate(step, iterations, values, _mask_like(mask, array)).astype(bool)
    if output is None or isinstance(output, (str, type, np.dtype)):
        return result  # scipy returns bool unless given an array
    if is_dask_array(result):
        raise TypeError("output= must be None for a Dask input (the result is lazy)")
    if tuple(output.shape) != tuple(result.shape):
        raise RuntimeError("output shape not correct")
    output[...] = result
    return output


def binary_erosion(
    image,
    structure=None,
    iterations=1,
    mask=None,
    border_value=0,
    origin=0,
    brute_force=False,
    *,
    output=None,
    axes=None,
):
    """Binary erosion (dask_image.ndmorph / scipy.ndimage ``binary_erosion``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array; nonzero is True.
    structure : array_like, optional
        The structuring element (nonzero is True); default the centre and its face
        neighbours.
    iterations : int
        How many times to erode; below 1, until nothing changes (on Dask each round
        is computed to know).
    mask : array_like or bool, optional
        Only places where it is True change.
    border_value : int
        The value outside the array (0 or 1).
    origin : int or sequence of int
        Shift of the structure.
    brute_force : bool
        Accepted for compatibility; the values do not depend on it.
    output : ndarray, optional
        A NumPy array to write into (scipy's); the result is bool otherwise.
    axes : sequence of int, optional
        The axes eroded (the structure has one axis per entry).

    Returns
    -------
    array
        Bool, of the input's array type.
    """
    return _binary(image, structure, iterations, mask, border_value, origin, axes, output, True)


def binary_dilation(
    image,
    structure=None,
    iterations=1,
    mask=None,
    border_value=0,
    origin=0,
    brute_force=False,
    *,
    output=None,
    axes=None,
):
    """Binary dilation (dask_image.ndmorph / scipy.ndimage ``binary_dilation``).

    Parameters are those of :func:`binary_erosion`.
    """
    return _binary(image, structure, iterations, mask, border_value, origin, axes, output, False)


def _compose(first, second, image, structure, iterations, origin, mask, border_value, axes, out):
    array = as_array(image)
    if structure is None:
        structure = binary_structure(len(check_axes(axes, array.ndim)))
    options = dict(iterations=iterations, mask=mask, border_value=border_value, origin=origin)
    tmp = first(array, structure, axes=axes, **options)
    return second(tmp, structure, axes=axes, output=out, **options)


def binary_opening(
    image,
    structure=None,
    iterations=1,
    origin=0,
    mask=None,
    border_value=0,
    brute_force=False,
    *,
    output=None,
    axes=None,
):
    """Binary opening (dask_image.ndmorph / scipy.ndimage ``binary_opening``): erosion,
    then dilation, each ``iterations`` times.

    Parameters are those of :func:`binary_erosion` (in dask-image's order).
    """
    args = (image, structure, iterations, origin, mask, border_value, axes, output)
    return _compose(binary_erosion, binary_dilation, *args)


def binary_closing(
    image,
    structure=None,
    iterations=1,
    origin=0,
    mask=None,
    border_value=0,
    brute_force=False,
    *,
    output=None,
    axes=None,
):
    """Binary closing (dask_image.ndmorph / scipy.ndimage ``binary_closing``): dilation,
    then erosion, each ``iterations`` times.

    Parameters are those of :func:`binary_erosion` (in dask-image's order).
    """
    args = (image, structure, iterations, origin, mask, border_value, axes, output)
    return _compose(binary_dilation, binary_erosion, *args)
