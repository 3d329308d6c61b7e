"""Weighted filters: correlate, convolve (N-D and 1-D) and the uniform (box) filter."""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np

from ._apply import (
    Pass,
    ShapeError,
    as_array,
    check_axes,
    dtypes_of,
    filtered,
    finish,
    normalize_sequence,
)
from ._complex import is_complex, via_parts
from ._kernels import correlate1d_kernel, correlate_kernel, uniform1d_kernel

__all__ = [
    "convolve",
    "convolve1d",
    "correlate",
    "correlate1d",
    "uniform_filter",
    "uniform_filter1d",
    "axis_index",
    "run_1d",
]


def axis_index(axis: Any, ndim: int) -> int:
    """``axis`` as a non-negative axis of an ``ndim``-D array (NumPy's AxisError otherwise)."""
    try:
        axis = operator.index(axis)
    except TypeError:
        raise AxisTypeError(f"The axis must be of integral type, got {axis!r}") from None
    return int(np.lib.array_utils.normalize_axis_index(axis, ndim))


class AxisTypeError(TypeError, ValueError):
    """A non-integer axis: scipy raises a TypeError, dask-image a ValueError."""


def _origin_1d(origin: Any, length: int) -> int:
    origin = operator.index(origin)
    if origin < -(length // 2) or origin > (length - 1) // 2:
        raise ValueError(
            "Invalid origin; origin must satisfy -(len(weights) // 2) <= origin <= "
            "(len(weights)-1) // 2"
        )
    return origin


def run_1d(
    array: Any,
    name: str,
    output: Any,
    steps: list[tuple[Any, Any, int]],
    cval: Any,
) -> Any:
    """``array`` through 1-D ``steps`` (``(build(store, across) -> Stencil, mode, axis)`` each,
    see :class:`._apply.Pass`), every
    pass storing the output dtype as scipy's separable filters do; the identity without steps.
    A complex ``array`` runs its real and imaginary parts through the steps."""
    if is_complex(array):

        def part(values, _weights, dtype, fill):
            return run_1d(values, name, dtype, steps, fill)

        return via_parts(part, array, None, output, cval)
    dtypes = dtypes_of(array, output, name)
    store = dtypes.store
    passes = [
        Pass(lambda _dtype, across, build=build: build(store, across), mode, axis)
        for build, mode, axis in steps
    ]
    return filtered(array, passes, dtypes, cval, output)


def correlate1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Correlate along one axis with 1-D ``weights`` (scipy.ndimage.correlate1d).

    Parameters
    ----------
    input : array_like
        NumPy, Dask or CuPy array.
    weights : array_like
        1-D weights.
    axis : int
        The axis filtered.
    output : dtype or ndarray, optional
        The output dtype (or a NumPy array to write into); default the input's.
    mode : str
        Boundary mode: reflect, constant, nearest, mirror, wrap (and scipy's grid-* aliases).
    cval : scalar
        Value outside the array under ``constant``.
    origin : int
        Shift of the window.

    Returns
    -------
    array
        Of the input's array type; values as scipy's.
    """
    array = as_array(input)
    weights = np.asarray(weights)
    if is_complex(array) or is_complex(weights):
        if is_complex(weights):
            weights = weights.conj().astype(np.complex128)  # as np.correlate

        def part(values, real_weights, dtype, fill):
            return correlate1d(values, real_weights, axis, dtype, mode, fill, origin)

        return via_parts(part, array, weights, output, cval)
    weights = weights.astype(np.float64)
    if weights.ndim != 1 or weights.shape[0] < 1:
        raise RuntimeError("no filter weights given")
    axis = axis_index(axis, array.ndim)
    origin = _origin_1d(origin, len(weights))
    terms = tuple(float(w) for w in weights)
    build = functools.partial(correlate1d_kernel, terms, origin)
    return run_1d(array, "correlate1d", output, [(build, mode, axis)], cval)


def convolve1d(input, weights, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Convolve along one axis with 1-D ``weights`` (scipy.ndimage.convolve1d).

    Parameters are those of :func:`correlate1d`; the weights are reversed.
    """
    weights = np.asarray(weights)
    if weights.ndim < 1 or weights.shape[0] < 1:  # the rest is correlate1d's to check (scipy's)
        raise RuntimeError("no filter weights given")
    origin = -int(origin) - (0 if len(weights) % 2 else 1)
    weights = weights[::-1].conj() if is_complex(weights) else weights[::-1]  # undone there
    return correlate1d(input, weights, axis, output, mode, cval, origin)


def _correlate_nd(image, weights, mode, cval, origin, output, axes, convolution, name):
    array = as_array(image)
    weights = np.asarray(weights)
    if is_complex(array) or is_complex(weights):
        if is_complex(weights) and not convolution:
            weights = weights.conj()  # as np.correlate

        def part(values, real_weights, dtype, fill):
            args = (mode, fill, origin, dtype, axes, convolution, name)
            return _correlate_nd(values, real_weights, *args)

        return via_parts(part, array, weights, output, cval)
    weights = weights.astype(np.float64)
    axes = check_axes(axes, array.ndim)
    origins = normalize_sequence(origin, len(axes))
    if len(axes) < array.ndim:
        if weights.ndim != len(axes):
            raise RuntimeError(f"weights.ndim ({weights.ndim}) must match len(axes) ({len(axes)})")
        weights = np.expand_dims(weights, tuple(a for a in range(array.ndim) if a not in axes))
        full = [0] * array.ndim
        for o, ax in zip(origins, axes):
            full[ax] = o
        origins = full
    if weights.ndim != array.ndim or 0 in weights.shape:
        raise ShapeError("filter weights array has incorrect shape.")
    origins = [operator.index(o) for o in origins]
    if convolution:
        weights = weights[(slice(None, None, -1),) * weights.ndim]
        origins = [-o - (0 if n % 2 else 1) for o, n in zip(origins, weights.shape)]
    for o, n in zip(origins, weights.shape):
        if o < -(n // 2) or o > (n - 1) // 2:
            raise ValueError(
                "Invalid origin; origin must satisfy -(weights.shape[k] // 2) <= origin[k] <= "
                "(weights.shape[k]-1) // 2"
            )
    if not isinstance(mode, str):
        raise RuntimeError("A sequence of modes is not supported for non-separable footprints")
    terms = tuple(
        (tuple(i - n // 2 - o for i, n, o in zip(index, weights.shape, origins)), float(w))
        for index, w in np.ndenumerate(weights)
    )
    dtypes = dtypes_of(array, output, name)
    if not any(abs(w) > np.finfo(np.float64).eps for _, w in terms):
        # scipy sums no term at all: zeros, whatever the input.
        return finish(np.zeros_like(array, dtype=dtypes.store), dtypes, output)
    store = dtypes.store
    step = Pass(lambda _dtype: correlate_kernel(terms, store), mode)
    return filtered(array, [step], dtypes, cval, output)


def correlate(image, weights, mode="reflect", cval=0.0, origin=0, *, output=None, axes=None):
    """Multidimensional correlation (dask_image / scipy.ndimage ``correlate``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    weights : array_like
        Weights, one axis per image axis (or per entry of ``axes``).
    mode : str
        Boundary mode (scipy's names, grid-* aliases included).
    cval : scalar
        Value outside the array under ``constant``.
    origin : int or sequence of int
        Shift of the window, per axis.
    output : dtype or ndarray, optional
        Output dtype (or a NumPy array to write into); default the input's.
    axes : sequence of int, optional
        The axes filtered; default all.

    Returns
    -------
    array
        Of the input's array type.
    """
    return _correlate_nd(image, weights, mode, cval, origin, output, axes, False, "correlate")


def convolve(image, weights, mode="reflect", cval=0.0, origin=0, *, output=None, axes=None):
    """Multidimensional convolution (dask_image / scipy.ndimage ``convolve``).

    Parameters are those of :func:`correlate`; the weights are mirrored.
    """
    return _correlate_nd(image, weights, mode, cval, origin, output, axes, True, "convolve")


def window_origin(size: int, origin: Any) -> int:
    """``origin`` as an int, checked to keep a window of ``size`` over its centre element
    (scipy's rule for box and footprint filters)."""
    origin = operator.index(origin)
    if size // 2 + origin < 0 or size // 2 + origin >= size:
        raise ValueError("invalid origin")
    return origin


def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Mean over ``size`` elements along one axis (scipy.ndimage.uniform_filter1d).

    Parameters
    ----------
    input : array_like
        NumPy, Dask or CuPy array.
    size : int
        Window length.
    axis, output, mode, cval, origin
        As for :func:`correlate1d`.

    Notes
    -----
    scipy keeps a running sum along each line, whose rounding drifts; stencilpipe
    sums each window exactly (integers) or in order (floats). Integer outputs can
    then differ by one where the mean is an integer that scipy's drift truncates.
    """
    array = as_array(input)
    axis = axis_index(axis, array.ndim)
    if size < 1:
        raise RuntimeError("incorrect filter size")
    origin = window_origin(int(size), origin)
    build = functools.partial(uniform1d_kernel, int(size), origin)
    return run_1d(array, "uniform_filter1d", output, [(build, mode, axis)], cval)


def uniform_filter(image, size=3, mode="reflect", cval=0.0, origin=0, *, output=None, axes=None):
    """Multidimensional mean (dask_image / scipy.ndimage ``uniform_filter``): 1-D passes.

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    size : int or sequence of int
        Window size, for all axes or per axis.
    mode : str or sequence of str
        Boundary mode, for all axes or per axis.
    cval, origin, output, axes
        As for :func:`correlate`.

    Notes
    -----
    See :func:`uniform_filter1d` for integer outputs.
    """
    array = as_array(image)
    axes = check_axes(axes, array.ndim)
    sizes = normalize_sequence(size, len(axes))
    origins = normalize_sequence(origin, len(axes))
    modes = normalize_sequence(mode, len(axes))
    steps = []
    for axis, n, o, m in zip(axes, sizes, origins, modes):
        if n > 1:
            build = functools.partial(uniform1d_kernel, int(n), window_origin(int(n), o))
            steps.append((build, m, axis))
    return run_1d(array, "uniform_filter", output, steps, cval)
