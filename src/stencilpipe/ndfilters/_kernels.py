"""Kernel source for scipy's filters, written from weights and footprints, compiled once.

Each builder writes the kernel a user would write (``t += 0.25 * x[-1, 0]``),
doing scipy's arithmetic in scipy's order, so float results are the same
doubles and integer results the same truncations; the last lines store the
double as scipy's C code does (:func:`._casting.store_lines`). Builders are
cached on their (hashable) arguments: a kernel is generated and compiled once
per process (and Numba's disk cache keeps it across processes).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..library import _big_median, _extremum_kind, _from_source, _selection_network, median
from ..stencils import Stencil
from ..stencils.correlate_passes import CorrelatePass, CorrelateWindow
from ..stencils.stencil import ACROSS_ROWS
from ..stencils.windows import SCIPY_STORES, BoxExtremum, ExtremumPass, MeanPass, RankWindow
from ._casting import store_lines

__all__ = [
    "Offset",
    "correlate_kernel",
    "correlate1d_kernel",
    "uniform1d_kernel",
    "binary_kernel",
    "box_places",
    "box_extremum_kernel",
    "rank_kernel",
    "window_extremum_kernel",
    "window_rank_kernel",
    "store_kernel",
    "structured_kernel",
]

Offset = tuple[int, ...]

#: scipy drops weights within this of zero from an N-D correlation (ni_filters.c).
_EPSILON = float(np.finfo(np.float64).eps)


def _read(offset: Offset) -> str:
    return "x[" + ", ".join(map(str, offset)) + "]"


def _as_double(read: str) -> str:
    """A read of a weighted sum, converted to a double first as scipy's line buffers are.

    Integers read as int64 otherwise, and their sums convert one by one (AVX2 has no packed
    int64 -> double; int32 -> double it has): 2048x2048 uint8 gaussian_filter, 2 threads,
    sigma 8 69 -> 54 ms, uint16 89 -> 58. Sums of values below 2**53 are exact either way."""
    return f"float({read})"


def _line_read(k: int, across: bool) -> str:
    """The read ``k`` along a line: of a 1-D kernel, or with ``across`` of a 2-D kernel whose
    line is its first axis (the caller views the array as (before, line, after), so the
    kernel's loops run along the contiguous last axis)."""
    return f"x[{k}, 0]" if across else f"x[{k}]"


def _kernel(name: str, body: list[str], store: np.dtype) -> Stencil:
    """The stencil of ``def name(x):`` + ``body`` (which leaves the double in ``t``)."""
    kernel_store = np.dtype(np.uint8) if store.kind == "b" else store
    source = "\n".join([f"def {name}(x):", *body, *store_lines("t", store)]) + "\n"
    return _from_source(name, source, {}, dtype=kernel_store)


@functools.lru_cache(maxsize=512)
def correlate_kernel(terms: tuple[tuple[Offset, float], ...], store: np.dtype) -> Stencil:
    """scipy's N-D correlation: ``sum(w * x[offset])`` in the footprint's C order.

    ``terms`` are (offset, weight) in that order; weights within machine epsilon
    of zero are left out as scipy leaves them out. The GPU, and the CPU on big calls, run
    the kernel written out; the CPU's small calls (see
    :data:`~stencilpipe.stencils.stencil.SMALL_CALL`), for 1 to 3 axes, the same sums
    from the weights as data (:class:`~stencilpipe.stencils.correlate_passes.CorrelateWindow`,
    compiled once per dtype whatever the weights), for outputs of
    :data:`~stencilpipe.stencils.windows.SCIPY_STORES`.
    """
    kept = [(offset, w) for offset, w in terms if abs(w) > _EPSILON]
    body = ["    t = 0.0"] + [f"    t += {w!r} * {_as_double(_read(offset))}" for offset, w in kept]
    made = _kernel("correlate", body, store)
    if store in SCIPY_STORES and len(terms[0][0]) <= 3 and kept:
        reach, places = box_places(tuple(offset for offset, _ in kept))
        made.passes = {"small": (CorrelateWindow(reach, places, tuple(w for _, w in kept)),)}
    return made


def _symmetry(weights: tuple[float, ...]) -> int:
    """1 for symmetric, -1 for antisymmetric odd-length weights, else 0 (as ni_filters.c)."""
    if not len(weights) % 2:
        return 0
    centre = len(weights) // 2
    pairs = [(weights[centre + k], weights[centre - k]) for k in range(1, centre + 1)]
    if all(abs(after - before) <= _EPSILON for after, before in pairs):
        return 1
    if all(abs(after + before) <= _EPSILON for after, before in pairs):
        return -1
    return 0


@functools.lru_cache(maxsize=512)
def correlate1d_kernel(
    weights: tuple[float, ...], origin: int, store: np.dtype, across: bool = False
) -> Stencil:
    """scipy's 1-D correlation (a line kernel, see :func:`_line_read`), with its three
    summation orders.

    Symmetric and antisymmetric odd weights sum the pairs around the centre first,
    ``(x[-k] + x[k]) * w[-k]``; other weights start from the last one. The GPU, and the
    CPU on big calls, run the kernel written out; the CPU's small calls (see
    :data:`~stencilpipe.stencils.stencil.SMALL_CALL`) the same sums from the weights as
    data (:class:`~stencilpipe.stencils.correlate_passes.CorrelatePass`, compiled once
    per dtype whatever the weights), for outputs of
    :data:`~stencilpipe.stencils.windows.SCIPY_STORES`; so do calls of more than
    :data:`~stencilpipe.stencils.stencil.ACROSS_ROWS` weights across rows that share
    cache sets.
    """
    before = len(weights) // 2
    after = len(weights) - before - 1

    def read(k: int) -> str:
        return _as_double(_line_read(k - origin, across))

    def w(k: int) -> str:
        return repr(weights[before + k])

    symmetry = _symmetry(weights)
    if symmetry:
        sign = "+" if symmetry > 0 else "-"
        body = [f"    t = {read(0)} * {w(0)}"]
        body += [f"    t += ({read(k)} {sign} {read(-k)}) * {w(k)}" for k in range(-before, 0)]
    else:
        body = [f"    t = {read(after)} * {w(after)}"]
        body += [f"    t += {read(k)} * {w(k)}" for k in range(-before, after)]
    made = _kernel("correlate1d", body, store)
    if store in SCIPY_STORES:
        reach = (before + origin, after - origin)
        step = CorrelatePass(0, *reach, 2 if across else 1, weights, symmetry)
        made.passes = {"small": (step,)}
        if across and len(weights) > ACROSS_ROWS:
            made.passes["shared_sets"] = (step,)
    return made


#: Means longer than this run scipy's running sum on the CPU (:class:`MeanPass`): across
#: lines (the array viewed as (before, line, after), vectorised along ``after``) and along
#: the last axis (4 lines' running sums side by side, which costs more). Measured per
#: pass, 2048x2048, 1 thread, interleaved, per-point sums / running sum: across, float32
#: 2 3.09 / 3.85 ms, 3 4.06 / 4.63, 4 3.72 / 4.15, 5 4.39 / 4.24 (float64 5 7.78 / 6.84);
#: along the last axis, float32 5 3.35 / 6.05, 9 4.60 / 6.82, 15 6.31 / 5.99 (float64 15
#: 7.76 / 9.32).
RUNNING_MEAN_ABOVE = {True: 3, False: 15}

#: 8- and 16-bit integer outputs (of integer inputs: exact integer window sums,
#: :func:`~stencilpipe.stencils.window_kernels.running_mean_integers` along the last axis,
#: :func:`~stencilpipe.stencils.window_kernels.running_mean` across) run those above these
#: sizes instead, in both directions. On an AVX2 machine (no packed conversion of doubles
#: to int64: the per-point store converted one by one until it went through int32) the
#: window sums are faster from size 2: 2048x2048, 1 thread, interleaved best of 11,
#: per-point / window sums ms, across / along: uint8 size 2 3.01 / 2.40, 2.84 / 2.28;
#: 3 3.81 / 1.83, 3.70 / 2.31; 4 1.82 / 1.74 (already sums), 4.06 / 2.44; uint16 3
#: 3.67 / 2.13, 3.62 / 3.09; 5 along 5.05 / 3.59; 7 along 6.24 / 3.83. (On an AVX-512
#: machine, round 7, window sums / per-point time along rows: uint8 size 3 0.78-1.08, uint16
#: size 5 1.15-1.21, whence the sizes there, 4 and 8.) int32 keeps
#: the per-point sum up to 15 (its int64 running sum: 1.5-2.3).
RUNNING_INTEGER_MEAN_ABOVE = {1: 1, 2: 1}


@functools.lru_cache(maxsize=128)
def uniform1d_kernel(size: int, origin: int, store: np.dtype, across: bool = False) -> Stencil:
    """The mean of ``size`` elements along a line (see :func:`_line_read`).

    The CPU runs scipy's running sum (:class:`~stencilpipe.stencils.windows.MeanPass`,
    compiled once per dtype whatever the size and mode) for sizes above
    :data:`RUNNING_MEAN_ABOVE` (:data:`RUNNING_INTEGER_MEAN_ABOVE`) into
    :data:`~stencilpipe.stencils.windows.SCIPY_STORES`; the GPU, and other sizes and outputs,
    a sum in order divided once, which is exact for integers and equals scipy's at each
    line's start.
    """
    before = size // 2
    reads = [_line_read(k - before - origin, across) for k in range(size)]
    body = [f"    t = np.float64({reads[0]})"]
    body += [f"    t += {read}" for read in reads[1:]]
    body.append(f"    t = t / {float(size)!r}")
    made = _kernel("uniform1d", body, store)
    above = RUNNING_MEAN_ABOVE[across]
    if store.kind in "iu":
        above = RUNNING_INTEGER_MEAN_ABOVE.get(store.itemsize, above)
    if size > above and store in SCIPY_STORES:
        reach = (before + origin, size - 1 - before - origin)
        made.passes = {"cpu": (MeanPass(0, *reach, 2 if across else 1),)}
    return made


@functools.lru_cache(maxsize=256)
def rank_kernel(
    offsets: tuple[Offset, ...], rank: int, store: np.dtype | None, cast: bool
) -> Stencil:
    """The ``rank``-th smallest value over ``offsets`` (0: minimum).

    Minimum and maximum are a chain of ``min``/``max``; other ranks a selection
    network. With ``cast`` the value is stored as scipy stores a double in
    ``store``; without, it is returned as read (the output is ``store``, or the
    input's dtype for None), and the CPU's small calls (see
    :data:`~stencilpipe.stencils.stencil.SMALL_CALL`) over up to 3 axes select with
    :class:`~stencilpipe.stencils.windows.RankWindow` (compiled once per dtype, where
    the kernel written out compiles for seconds per window).
    """
    reads = [_read(offset) for offset in offsets]
    if rank in (0, len(reads) - 1):
        which = "min" if rank == 0 else "max"
        body = [f"    v = {reads[0]}"] + [f"    v = {which}(v, {read})" for read in reads[1:]]
        result = "v"
    else:
        body = [f"    v{k} = {read}" for k, read in enumerate(reads)]
        body += [
            f"    v{a}, v{b} = min(v{a}, v{b}), max(v{a}, v{b})"
            for a, b in _selection_network(len(reads), rank)
        ]
        result = f"v{rank}"
    if not cast:
        source = "\n".join(["def rank(x):", *body, f"    return {result}"]) + "\n"
        made = _from_source("rank", source, {}, dtype=store)
        if len(offsets[0]) <= 3:
            made.passes = {"small": (_rank_window(offsets, rank),)}
        return made
    return _kernel("rank", [*body, f"    t = np.float64({result})"], store)


def box_places(offsets: tuple[Offset, ...]) -> tuple[tuple[tuple[int, int], ...], tuple[int, ...]]:
    """The reach of the box holding ``offsets`` (before and after each element, per axis)
    and their places in it (flat, C order), for the window loops."""
    array = np.array(offsets)
    first, last = array.min(0), array.max(0)
    places = np.ravel_multi_index(tuple((array - first).T), tuple(last - first + 1))
    return tuple((-int(f), int(la)) for f, la in zip(first, last)), tuple(map(int, places))


def _rank_window(offsets: tuple[Offset, ...], rank: int) -> RankWindow:
    """The window loop selecting ``rank`` over ``offsets`` (up to 3 axes)."""
    reach, places = box_places(offsets)
    full = len(places) == math.prod(before + 1 + after for before, after in reach)
    return RankWindow(reach, rank, None if full else places)


@functools.lru_cache(maxsize=64)
def window_rank_kernel(offsets: tuple[Offset, ...], rank: int, store: np.dtype) -> Stencil:
    """The ``rank``-th smallest value over ``offsets`` (up to 3 axes), for an input of dtype
    ``store``: the CPU runs a window loop of :mod:`stencilpipe.stencils.windows`, compiled
    once per dtype whatever the window (sorted columns for big boxes, a selection network
    run as data, or a sliding histogram for big 8/16-bit windows: see
    :meth:`~stencilpipe.stencils.windows.RankWindow.loop_name`); the GPU a counting kernel
    for a box, else
    :func:`rank_kernel`'s."""
    window = _rank_window(offsets, rank)
    if window.points is None:
        box = [(-before, after) for before, after in window.reach]
        made = _big_median(box, rank, {"dtype": store})
    else:
        made = rank_kernel.__wrapped__(offsets, rank, store, False)
    made.passes = {"cpu": (window,)}
    return made


def box_3x3(ndim: int) -> tuple[Offset, ...]:
    """The offsets of a 3x3 box over the last two of ``ndim`` axes, in the C order of its
    footprint."""
    return tuple((0,) * (ndim - 2) + (i, j) for i in (-1, 0, 1) for j in (-1, 0, 1))


@functools.lru_cache(maxsize=16)
def median_3x3_kernel(store: np.dtype, ndim: int) -> Stencil:
    """The median of a 3x3 box over the last two of ``ndim`` (2 or 3) axes, for an input of
    dtype ``store``: the library's (:func:`stencilpipe.library.median`), whose CPU pass
    takes Paeth's median of three sorted columns."""
    return median((1,) * (ndim - 2) + (3, 3), ndim=ndim, dtype=store)


@functools.lru_cache(maxsize=128)
def window_extremum_kernel(
    offsets: tuple[Offset, ...], largest: bool, store: np.dtype, across: bool = False
) -> Stencil:
    """The minimum (or maximum) over 1-D ``offsets`` (consecutive) along a line (see
    :func:`_line_read`), for an input of dtype ``store``: the CPU runs van Herk/Gil-Werman
    (:class:`stencilpipe.stencils.windows.ExtremumPass`, compiled once per dtype whatever
    the window's length and mode), the GPU :func:`rank_kernel`'s chain."""
    line = tuple((k, 0) for (k,) in offsets) if across else offsets
    made = rank_kernel.__wrapped__(line, len(offsets) - 1 if largest else 0, store, False)
    before, after = -offsets[0][0], offsets[-1][0]
    made.passes = {"cpu": (ExtremumPass(0, before, after, largest, 2 if across else 1),)}
    return made


@functools.lru_cache(maxsize=128)
def box_extremum_kernel(
    rows: tuple[int, int], columns: tuple[int, int], largest: bool, store: np.dtype
) -> Stencil:
    """The minimum (or maximum) over the 2-D box of offsets ``rows[0]..rows[1]`` by
    ``columns[0]..columns[1]`` (each range holding 0), for an input of dtype ``store``, as
    the library's: :func:`rank_kernel`'s chain per point, where the CPU runs
    :class:`stencilpipe.stencils.windows.BoxExtremum` (one read and write of the frame,
    compiled once per dtype whatever the box and mode) for the boxes
    :func:`stencilpipe.library._extremum_kind` runs as one."""
    offsets = tuple(
        (i, j) for i in range(rows[0], rows[1] + 1) for j in range(columns[0], columns[1] + 1)
    )
    made = rank_kernel.__wrapped__(offsets, len(offsets) - 1 if largest else 0, store, False)
    reach = ((-rows[0], rows[1]), (-columns[0], columns[1]))
    if _extremum_kind(reach) == "box":
        made.passes = {"cpu": (BoxExtremum(reach, largest),)}
    return made


@functools.lru_cache(maxsize=128)
def structured_kernel(
    offsets: tuple[Offset, ...],
    values: tuple[float, ...],
    minimum: bool,
    dtype: np.dtype,
    store: np.dtype,
) -> Stencil:
    """scipy's grey morphology with a non-flat structure: the minimum of ``x - s`` (or the
    maximum of ``x + s``) over ``offsets``, for an input of ``dtype``.

    scipy's C code adds the first value in double and the others in the input's
    type (wrapping integers, float32 sums for float32), then keeps the smallest
    (largest) as a double: the kernel does the same, in the same order.
    """
    dtype = np.dtype(dtype)
    signed = [-v if minimum else v for v in values]
    with np.errstate(all="ignore"):  # scipy's (_type)double cast of each value
        typed = np.asarray(signed[1:], np.float64).astype(dtype).tolist()
    kind = f"np.{dtype.name}"
    compare = "<" if minimum else ">"
    body = [f"    t = np.float64({_read(offsets[0])}) + {float(signed[0])!r}"]
    for offset, value in zip(offsets[1:], typed):
        # The read cast too: the compiler reads uint64 as float64.
        body.append(f"    v = np.float64({kind}({kind}({_read(offset)}) + {kind}({value!r})))")
        body.append(f"    t = v if v {compare} t else t")
    return _kernel("structured", body, store)


@functools.lru_cache(maxsize=128)
def binary_kernel(offsets: tuple[Offset, ...], every: bool) -> Stencil:
    """1 (uint8) where every (erosion) or any (dilation) value at ``offsets`` is nonzero, else 0."""
    test = (" and " if every else " or ").join(f"{_read(offset)} != 0" for offset in offsets)
    source = f"def binary(x):\n    return 1 if {test} else 0\n"
    return _from_source("binary", source, {}, dtype=np.uint8)


@functools.lru_cache(maxsize=32)
def store_kernel(store: np.dtype) -> Stencil:
    """Each double stored in ``store`` as scipy's C code stores it (a 1-D kernel reading only
    its own element)."""
    return _kernel("store", ["    t = np.float64(x[0])"], store)
