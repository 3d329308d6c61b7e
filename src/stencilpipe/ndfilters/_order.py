"""Order statistics: minimum, maximum, median, rank and percentile filters.

scipy has three ways to fill ``constant``'s outside, and each is kept here:
a box (``size``, or a footprint that is all True) runs 1-D passes that read
``cval`` as a double; any other footprint reads ``cval`` cast into the input's
dtype (``-1`` is 255 for uint8); a rank filter on a 1-D array reads it cast to
int64 (integer inputs) or the input's float type.
"""

from __future__ import annotations

import functools
import operator
import warnings
from typing import Any

import numpy as np

from ..library import _extremum_kind
from ..stencils.dask_apply import is_dask_array
from ._apply import (
    Pass,
    ShapeError,
    _fits,
    as_array,
    check_axes,
    check_real,
    dtypes_of,
    filter_mode,
    filtered,
    normalize_sequence,
)
from ._correlate import axis_index, window_origin
from ._kernels import (
    Offset,
    box_3x3,
    box_extremum_kernel,
    median_3x3_kernel,
    rank_kernel,
    window_extremum_kernel,
    window_rank_kernel,
)

__all__ = [
    "maximum_filter",
    "maximum_filter1d",
    "median_filter",
    "minimum_filter",
    "minimum_filter1d",
    "percentile_filter",
    "rank_filter",
    "box_or_footprint",
    "cast_cval",
    "expand",
    "offsets_of",
    "warn_size_ignored",
    "min_or_max",
]


def _line(size: int, origin: int) -> tuple[Offset, ...]:
    """Offsets of a 1-D ``size`` window placed as scipy places it."""
    return tuple((k - size // 2 - origin,) for k in range(size))


#: Windows of more elements than this (up to 3 axes, any footprint) select their rank with
#: the window loops (:func:`._kernels.window_rank_kernel`, compiled once per dtype) instead
#: of a selection network written out per window, where the input is read as stored.
#: Measured on a loaded 2-core machine, first call on an empty cache / run, 512x512
#: frames: written-out network 5x5 uint16 11 s / 2.8 ms, 7x7 float32 17 s / 6.2 ms, 3x3x3
#: uint16 (32x128x128) 13 s / 10 ms, 9x9 float32 under wrap 24 s; the network run as data
#: 3.5 s / 2.4 ms, 3.2 s / 9.0 ms, 0.2 s (loop already compiled for uint16) / 4.8 ms.
WINDOW_RANK_ABOVE = 25


#: Box minima and maxima longer than this along an axis run van Herk/Gil-Werman
#: (:func:`._kernels.window_extremum_kernel`, compiled once per dtype) instead of a chain
#: of ``min`` written out per length and mode.
EXTREMUM_PASS_ABOVE = 3


def _rank_pass(
    offsets: tuple[Offset, ...], rank: int, store: np.dtype, mode: Any, axis: int | None = None
) -> Pass:
    """A pass selecting ``rank`` over ``offsets``, cast to ``store`` unless it reads it; with
    ``axis``, a line pass over 1-D ``offsets`` (see :class:`._apply.Pass`)."""
    if axis is None:
        window = len(offsets) > WINDOW_RANK_ABOVE and len(offsets[0]) <= 3

        def build_nd(dtype: np.dtype) -> Any:
            if window and dtype == store:
                return window_rank_kernel(offsets, rank, store)
            ndim = len(offsets[0])
            if rank == 4 and ndim in (2, 3) and offsets == box_3x3(ndim) and dtype == store:
                return median_3x3_kernel(store, ndim)
            return rank_kernel(offsets, rank, store, dtype != store)

        return Pass(build_nd, mode)

    extremum = rank in (0, len(offsets) - 1) and len(offsets) > EXTREMUM_PASS_ABOVE

    def build(dtype: np.dtype, across: bool) -> Any:
        if extremum and dtype == store:
            return window_extremum_kernel(offsets, rank > 0, store, across)
        line = tuple((k, 0) for (k,) in offsets) if across else offsets
        return rank_kernel(line, rank, store, dtype != store)

    return Pass(build, mode, axis)


def _box_pass(array, lines, dtypes, cval, minimum: bool) -> Pass | None:
    """One :func:`._kernels.box_extremum_kernel` pass for the box of ``lines`` (``(axis,
    offsets, mode)`` of each axis whose size exceeds 1), where it replaces their line passes:
    a NumPy or Dask array, the box over its last two axes (others as a batch) in one mode,
    per point or as one pass (not one per axis, :func:`stencilpipe.library._extremum_kind`),
    the input read as stored (``cval`` one of its values)."""
    if sorted(axis for axis, _, _ in lines) != [array.ndim - 2, array.ndim - 1]:
        return None
    (_, rows, mode), (_, columns, other) = sorted(lines, key=lambda line: line[0])
    # window_origin keeps each side's window over its centre: both reaches are >= 0.
    rows_range = (rows[0][0], rows[-1][0])
    columns_range = (columns[0][0], columns[-1][0])
    reach = ((-rows_range[0], rows_range[1]), (-columns_range[0], columns_range[1]))
    if filter_mode(mode) != filter_mode(other) or _extremum_kind(reach) == "axes":
        return None
    if not (isinstance(array, np.ndarray) or is_dask_array(array)):
        return None  # the GPU runs the line passes (the box's kernel reads every point)
    if dtypes.compute != dtypes.store:
        return None
    if filter_mode(mode) == "constant" and not _fits(cval, dtypes.compute):
        return None
    kernel = box_extremum_kernel(rows_range, columns_range, not minimum, dtypes.store)
    return Pass(lambda dtype: kernel, mode)


def _separable(array, sizes, origins, modes, axes, output, cval, minimum: bool, name: str):
    """Box minimum or maximum: one pass over a 2-D box (:func:`_box_pass`), else 1-D passes
    along each axis whose size exceeds 1."""
    dtypes = dtypes_of(array, output, name)
    lines = []
    for axis, size, origin, mode in zip(axes, sizes, origins, modes):
        size = operator.index(size)
        origin = window_origin(size, origin)  # on every axis, as dask-image checks
        filter_mode(mode)
        if size > 1:
            lines.append((axis, _line(size, origin), mode))
    box = _box_pass(array, lines, dtypes, cval, minimum)
    if box is not None:
        passes = [box]
    else:
        passes = [
            _rank_pass(offsets, 0 if minimum else len(offsets) - 1, dtypes.store, mode, axis)
            for axis, offsets, mode in lines
        ]
    return filtered(array, passes, dtypes, cval, output)


def expand(array, footprint, origin, axes) -> tuple[np.ndarray, list[int]]:
    """The footprint and origins over every axis of ``array`` (size 1 along unfiltered axes)."""
    origins = normalize_sequence(origin, len(axes))
    if len(axes) < array.ndim:
        if footprint.ndim != len(axes):
            raise ShapeError(
                f"footprint.ndim ({footprint.ndim}) must match len(axes) ({len(axes)})"
            )
        footprint = np.expand_dims(footprint, tuple(a for a in range(array.ndim) if a not in axes))
        full = [0] * array.ndim
        for o, ax in zip(origins, axes):
            full[ax] = o
        origins = full
    if footprint.ndim != array.ndim or 0 in footprint.shape:
        raise ShapeError(f"footprint.ndim ({footprint.ndim}) must match len(axes) ({len(axes)})")
    origins = [window_origin(n, o) for n, o in zip(footprint.shape, origins)]
    return footprint, origins


def offsets_of(footprint: np.ndarray, origins: list[int]) -> tuple[Offset, ...]:
    """The footprint's True places as offsets from the (shifted) centre, in C order.

    Remembered per footprint and origins: a filter called frame by frame asks for the same
    ones each time (a 16x16 uint8 rank_filter 3x3 call 162 -> 80 us)."""
    mask = np.asarray(footprint, dtype=bool)
    return _offsets(mask.shape, mask.tobytes(), tuple(int(o) for o in origins))


@functools.lru_cache(maxsize=256)
def _offsets(shape: tuple[int, ...], mask: bytes, origins: tuple[int, ...]) -> tuple[Offset, ...]:
    """:func:`offsets_of` of the footprint of ``shape`` whose bools are ``mask``."""
    footprint = np.frombuffer(mask, dtype=bool).reshape(shape)
    return tuple(
        tuple(int(i) - n // 2 - o for i, n, o in zip(index, shape, origins))
        for index in np.argwhere(footprint)
    )


def cast_cval(cval: Any, dtype: np.dtype) -> Any:
    """``cval`` as scipy's C code casts it into ``dtype``."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(cval, np.float64).astype(dtype)[()]


def _footprint_filter(array, offsets, rank, mode, cval, output, name, cval_dtype):
    """Rank ``rank`` over ``offsets``, ``cval`` cast to ``cval_dtype`` first (see module)."""
    if not isinstance(mode, str):
        raise RuntimeError("A sequence of modes is not supported for non-separable footprints")
    dtypes = dtypes_of(array, output, name)
    fill = cast_cval(cval, cval_dtype) if filter_mode(mode) == "constant" else 0
    step = _rank_pass(offsets, rank, dtypes.store, mode)
    return filtered(array, [step], dtypes, fill, output)


def warn_size_ignored(size: Any, footprint: Any) -> None:
    if size is not None and footprint is not None:
        warnings.warn("ignoring size because footprint is set", UserWarning, stacklevel=4)


def min_or_max(image, size, footprint, mode, cval, origin, output, axes, minimum, name):
    """scipy's ``_min_or_max_filter`` without a structure: a box (``size``, or an all-True
    footprint) as one 2-D pass or 1-D passes (:func:`_separable`), any other footprint as
    one kernel; ``name`` names the caller in errors."""
    warn_size_ignored(size, footprint)
    array = as_array(image)
    check_real(array, name)
    axes = check_axes(axes, array.ndim)
    if footprint is None:
        if size is None:
            raise RuntimeError("no footprint provided")
    else:
        footprint = np.asarray(footprint, dtype=bool)
        if footprint.ndim != len(axes) or 0 in footprint.shape:
            raise ShapeError(
                f"footprint.ndim ({footprint.ndim}) must match len(axes) ({len(axes)})"
            )
        if not footprint.any():
            raise ValueError("All-zero footprint is not supported.")
        if footprint.all():
            size, footprint = footprint.shape, None
    if footprint is None:
        sizes = normalize_sequence(size, len(axes))
        origins = normalize_sequence(origin, len(axes))
        modes = normalize_sequence(mode, len(axes))
        return _separable(array, sizes, origins, modes, axes, output, cval, minimum, name)
    footprint, origins = expand(array, footprint, origin, axes)
    offsets = offsets_of(footprint, origins)
    rank = 0 if minimum else len(offsets) - 1
    return _footprint_filter(array, offsets, rank, mode, cval, output, name, array.dtype)


def minimum_filter(
    image, size=None, footprint=None, mode="reflect", cval=0.0, origin=0, *, output=None, axes=None
):
    """Minimum over a window (dask_image / scipy.ndimage ``minimum_filter``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    size : int or sequence of int, optional
        Box size (1-D passes), for all axes or per axis.
    footprint : array_like of bool, optional
        The window's shape; overrides ``size``.
    mode : str or sequence of str
        Boundary mode; per axis only with ``size``.
    cval : scalar
        Value outside the array under ``constant``.
    origin : int or sequence of int
        Shift of the window.
    output : dtype or ndarray, optional
        Output dtype or a NumPy array to write into.
    axes : sequence of int, optional
        The axes filtered.

    Returns
    -------
    array
        Of the input's array type.
    """
    return min_or_max(
        image, size, footprint, mode, cval, origin, output, axes, True, "minimum_filter"
    )


def maximum_filter(
    image, size=None, footprint=None, mode="reflect", cval=0.0, origin=0, *, output=None, axes=None
):
    """Maximum over a window (dask_image / scipy.ndimage ``maximum_filter``).

    Parameters are those of :func:`minimum_filter`.
    """
    return min_or_max(
        image, size, footprint, mode, cval, origin, output, axes, False, "maximum_filter"
    )


def _filter1d(input, size, axis, output, mode, cval, origin, minimum, name):
    array = as_array(input)
    check_real(array, name)
    axis = axis_index(axis, array.ndim)
    if size < 1:
        raise RuntimeError("incorrect filter size")
    window_origin(int(size), origin)
    return _separable(array, [size], [origin], [mode], [axis], output, cval, minimum, name)


def minimum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Minimum over ``size`` elements along one axis (scipy.ndimage.minimum_filter1d).

    Parameters
    ----------
    input : array_like
        NumPy, Dask or CuPy array.
    size : int
        Window length.
    axis, output, mode, cval, origin
        As for :func:`stencilpipe.ndfilters.correlate1d`.
    """
    return _filter1d(input, size, axis, output, mode, cval, origin, True, "minimum_filter1d")


def maximum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):
    """Maximum over ``size`` elements along one axis (scipy.ndimage.maximum_filter1d).

    Parameters are those of :func:`minimum_filter1d`.
    """
    return _filter1d(input, size, axis, output, mode, cval, origin, False, "maximum_filter1d")


def box_or_footprint(size: Any, footprint: Any, n_axes: int) -> np.ndarray:
    """``footprint`` as bools, or an all-True box of ``size`` (per axis) without one."""
    if footprint is not None:
        return np.asarray(footprint, dtype=bool)
    if size is None:
        raise RuntimeError("no footprint or filter size provided")
    return np.ones(normalize_sequence(size, n_axes), dtype=bool)


def _rank_of(operation: str, rank: Any, count: int) -> int:
    if operation == "median":
        rank = count // 2
    elif operation == "percentile":
        percentile = rank + 100.0 if rank < 0.0 else rank
        if percentile < 0 or percentile > 100:
            raise RuntimeError("invalid percentile")
        rank = count - 1 if percentile == 100.0 else int(float(count) * percentile / 100.0)
    rank = int(rank)
    if rank < 0:
        rank += count
    if rank < 0 or rank >= count:
        raise RuntimeError("rank not within filter footprint size")
    return rank


def _rank_filter(image, rank, size, footprint, mode, cval, origin, output, axes, operation):
    warn_size_ignored(size, footprint)
    array = as_array(image)
    name = f"{operation}_filter"
    check_real(array, name)
    axes = check_axes(axes, array.ndim)
    footprint = box_or_footprint(size, footprint, len(axes))
    if len(axes) < array.ndim and not isinstance(mode, str):
        full = ["constant"] * array.ndim
        for m, ax in zip(normalize_sequence(mode, len(axes)), axes):
            full[ax] = m
        mode = full
    footprint, origins = expand(array, footprint, origin, axes)
    offsets = offsets_of(footprint, origins)
    rank = _rank_of(operation, rank, len(offsets))
    if rank in (0, len(offsets) - 1):
        minimum = rank == 0
        return min_or_max(array, None, footprint, mode, cval, origins, output, None, minimum, name)
    cval_dtype = array.dtype
    fast_1d = array.size - ((footprint.size - 1) // 2 - origins[0]) >= 0 or array.size == 1
    if array.ndim == 1 and fast_1d and array.dtype.kind in "biu":
        cval_dtype = np.dtype(np.int64)  # scipy's 1-D rank filter reads integers as int64
    return _footprint_filter(array, offsets, rank, mode, cval, output, name, cval_dtype)


def rank_filter(
    image,
    rank,
    size=None,
    footprint=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    output=None,
    axes=None,
):
    """The ``rank``-th smallest value in a window (dask_image / scipy.ndimage ``rank_filter``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    rank : int
        0 is the minimum; negative ranks count from the maximum (-1).
    size, footprint, mode, cval, origin, output, axes
        As for :func:`minimum_filter`.
    """
    return _rank_filter(image, rank, size, footprint, mode, cval, origin, output, axes, "rank")


def median_filter(
    image, size=None, footprint=None, mode="reflect", cval=0.0, origin=0, *, output=None, axes=None
):
    """Median over a window (dask_image / scipy.ndimage ``median_filter``; the upper median
    of an even count).

    Parameters are those of :func:`minimum_filter`.
    """
    return _rank_filter(image, 0, size, footprint, mode, cval, origin, output, axes, "median")


def percentile_filter(
    image,
    percentile,
    size=None,
    footprint=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    output=None,
    axes=None,
):
    """A percentile over a window (dask_image / scipy.ndimage ``percentile_filter``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    percentile : float
        In [-100, 100]; negative values count from 100.
    size, footprint, mode, cval, origin, output, axes
        As for :func:`minimum_filter`.
    """
    return _rank_filter(
        image, percentile, size, footprint, mode, cval, origin, output, axes, "percentile"
    )
