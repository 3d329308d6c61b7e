"""Window filters whose cost grows slowly with the window: the CPU passes of big order statistics.

A per-point kernel of a 15x15 median holds 225 values and thousands of
compare-exchanges: minutes of compiling, and time that grows with the window's
area. :class:`ExtremumPass` (a minimum or maximum along one axis, van
Herk/Gil-Werman) and :class:`RankWindow` (any rank over a window: sorted columns for
2-D and 3-D boxes, a sliding histogram for other 8/16-bit windows, a selection network run as
data for the rest) are loops written once
(:mod:`.window_kernels`), compiled once per dtype, whatever the window.

Both are passes of :func:`.fused.run_passes`, as a separable filter's 1-D
stencils are: a library filter lists them in its stencil's ``passes``, and the
CPU runs them on NumPy arrays, on each chunk of a Dask array and inside fused
chains, with the results of the stencil's own per-point kernel (which the GPU
runs) bit for bit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .boundary import MODE_CODES
from .modules import load_module
from .order import key_bounds, key_dtype
from .threads import run_rows

__all__ = [
    "BOX_ROWS_UP_TO",
    "BoxExtremum",
    "BoxMean",
    "BoxMedian3",
    "BoxPass",
    "box_frames",
    "box_reach",
    "CachedPass",
    "ExtremumPass",
    "HISTOGRAM_ABOVE",
    "SCIPY_STORES",
    "scipy_store",
    "MeanPass",
    "RankWindow",
    "SORTED_ABOVE",
    "truncating_reciprocal",
    "window_loops",
]


@functools.cache
def window_loops() -> ModuleType:
    """:mod:`.window_kernels`, loaded (and disk-cached) as a generated module."""
    source = (Path(__file__).parent / "window_kernels.py").read_text()
    return load_module("window_kernels", source)


def _view(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` reshaped without a copy (a copy would lose what the loops write)."""
    view = array.view()
    view.shape = shape
    return view


class _Rows:
    """A window loop bound to its parameters, called as a compiled kernel of a pass.

    ``run(x, out, cval, start=, stop=)`` computes the rows ``[start, stop)`` (see
    :func:`.codegen_cpu.work_rows`) of ``out``, a ``(batch, *core)`` array.
    """

    def __init__(self, call: Any, out_type: type):
        self._call = call
        self._to = out_type(0)  # a value, not the type: see :mod:`.store`
        self.ready = False

    def run(self, *args: Any, start: int, stop: int) -> None:  # args: x, out, cval
        x, out, cval = args
        # cval as the input's type (it holds it: fill_values checked), not widened: an
        # int64 window must not pass through float64.
        self._call(x, out, x.dtype.type(cval), start, stop, self._to)
        self.ready = True

    def __call__(self, *args: Any, rows: int) -> None:  # args: x, out, cval (a RowKernel)
        x, out, cval = args
        if not self.ready:
            self.run(x, out, cval, start=0, stop=rows)
            return

        def rows_of(lo: int, hi: int) -> None:
            self.run(x, out, cval, start=lo, stop=hi)

        run_rows(rows_of, (), rows, elements=out.size)

    def compile(self, args: list[Any]) -> None:
        """Compile for the types of ``args`` (``x, out, cval, start, stop``) by running
        the loop over no rows."""
        x, out, cval, *_ = args
        self._call(x, out, x.dtype.type(cval), 0, 0, self._to)


class CachedPass:
    """A pass of :func:`.fused.run_passes` whose compiled form is made once per input
    dtypes, output dtype and mode, by the subclass's ``_build``.

    The same :class:`_Rows` on every call with the same arguments matters: a ``_Rows``
    runs on the threads only once it has run (compiled) in this process.
    """

    def compiled(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        """The pass for one input dtype, output dtype and boundary ``mode``."""
        return _compiled_pass(self, tuple(in_dtypes), out_dtype, mode)

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        """Make the pass (once per arguments: :meth:`compiled` caches it)."""
        raise NotImplementedError


@functools.cache
def _compiled_pass(
    step: CachedPass, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str
) -> _Rows:
    return step._build(in_dtypes, out_dtype, mode)


class _LinePass(CachedPass):
    """A window of ``before + 1 + after`` elements along core ``axis`` of arrays of ``ndim``
    core dimensions (the subclasses' attributes)."""

    axis: int
    before: int
    after: int
    ndim: int

    dtype = None  # the input's

    @property
    def halo(self) -> tuple[tuple[int, int], ...]:
        return tuple(
            (self.before, self.after) if d == self.axis else (0, 0) for d in range(self.ndim)
        )

    def _lines(self, x: np.ndarray, out: np.ndarray, start: int, stop: int) -> tuple:
        """``x`` and ``out`` as ``(lines, n, width)`` with the window along ``n``, and the
        flat positions of rows ``[start, stop)`` in them."""
        batch, *core = x.shape
        if self.ndim == 1:  # a row is a whole frame
            shape = (batch, core[0], 1)
            first, last = start * core[0], stop * core[0]
        elif self.axis == 0:  # a row is a position along the axis
            shape = (batch, core[0], math.prod(core[1:]))
            first, last = start, stop
        else:
            before = math.prod(core[1 : self.axis])
            shape = (batch * core[0] * before, core[self.axis], math.prod(core[self.axis + 1 :]))
            per_row = before * core[self.axis]
            first, last = start * per_row, stop * per_row
        return _view(x, shape), _view(out, shape), first, last

    def _rows(
        self, across: Any, along: Any, options: tuple, stores: tuple, out_dtype: np.dtype
    ) -> _Rows:
        """The pass running loop ``across`` on ``(lines, n, width)`` views, or ``along`` on
        whole ``(lines, n)`` lines where the window is along the last axis, each called as
        ``loop(x, out, cval, first, last, *options, to, *stores)``."""

        def call(x, out, cval, start, stop, to):
            xs, outs, first, last = self._lines(x, out, start, stop)
            if xs.shape[2] == 1:  # along the last axis: whole lines
                lines = xs.shape[:2]
                n = lines[1]
                xs, outs = _view(xs, lines), _view(outs, lines)
                along(xs, outs, cval, first // n, last // n, *options, to, *stores)
            else:
                across(xs, outs, cval, first, last, *options, to, *stores)

        return _Rows(call, out_dtype.type)


@dataclass(frozen=True)
class ExtremumPass(_LinePass):
    """Minimum or maximum over ``before + 1 + after`` elements along core ``axis``.

    Attributes
    ----------
    axis : int
        The core axis of the window.
    before, after : int
        The window's reach before and after each element.
    largest : bool
        Maximum (True) or minimum.
    ndim : int
        Core dimensions of the arrays it runs on.
    """

    axis: int
    before: int
    after: int
    largest: bool
    ndim: int

    @property
    def name(self) -> str:
        return f"{'maximum' if self.largest else 'minimum'}_axis{self.axis}"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = window_loops()
        options = (self.before, self.after, MODE_CODES[mode], self.largest)
        return self._rows(loops.extremum, loops.extremum_lines, options, (), out_dtype)


#: Rows of a 2-D box up to which :class:`BoxExtremum` (its time grows with them, about
#: ``rows / 6`` sweeps of a row per output row) beats two :class:`ExtremumPass` passes
#: (flat in the window). 2048x2048, 1 thread, loaded, box / passes ms: uint8 15x15 0.97 /
#: 1.56, 31x31 1.64 / 1.80, 41x41 1.99 / 1.92; uint16 15x15 2.08 / 3.15, 31x31 3.69 /
#: 4.33, 63x63 6.00 / 6.03 (2 threads: the same crossings).
BOX_ROWS_UP_TO = 31


class BoxPass(CachedPass):
    """A pass over a box reaching ``reach`` (the subclasses' attribute) before and after
    each element, per core axis (1 to 3; :func:`box_reach`, :func:`box_frames`)."""

    reach: tuple[tuple[int, int], ...]

    dtype = None  # the input's

    @property
    def halo(self) -> tuple[tuple[int, int], ...]:
        return self.reach


@dataclass(frozen=True)
class BoxExtremum(BoxPass):
    """Minimum or maximum over a 2-D box in one pass over memory
    (:func:`.window_kernels.extremum_box`): per output row, the box's rows compared into a
    row buffer in L1, then along it by doubling. For small and medium boxes, where two
    :class:`ExtremumPass` passes (van Herk/Gil-Werman) write and read an intermediate
    frame.

    Attributes
    ----------
    reach : tuple of (int, int)
        The reach before and after each element, per core axis (2 axes).
    largest : bool
        Maximum (True) or minimum.
    """

    reach: tuple[tuple[int, int], ...]
    largest: bool

    @property
    def name(self) -> str:
        return f"box_{'maximum' if self.largest else 'minimum'}"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = window_loops()
        reach, kn = box_reach(self.reach)
        code = MODE_CODES[mode]

        def call(x, out, cval, start, stop, to):
            loops.extremum_box(x, out, cval, start, stop, reach, kn, code, self.largest, to)

        return _Rows(call, out_dtype.type)


@dataclass(frozen=True)
class BoxMedian3(CachedPass):
    """The median of a 3x3 box over the last two core axes
    (:func:`.window_kernels.median_box3`): Paeth's median of its three columns, each
    sorted by three compare-exchanges, all in registers. 2048x2048, 1 thread, one process:
    uint8 0.95-1.09 ms, uint16 1.56-1.93, float32 3.4-3.5, against 1.05 ms (uint8) for
    the per-point selection network.

    Attributes
    ----------
    ndim : int
        Core dimensions of the arrays it runs on (2, or 3 for a (1, 3, 3) box).
    """

    ndim: int = 2

    dtype = None  # the input's
    name = "median_3x3"

    @property
    def halo(self) -> tuple[tuple[int, int], ...]:
        return ((0, 0),) * (self.ndim - 2) + ((1, 1), (1, 1))

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = window_loops()
        code = MODE_CODES[mode]

        def call(x, out, cval, start, stop, to):
            if self.ndim == 3:  # rows of planes: each plane a frame of rows
                height = x.shape[2]
                frames = (x.shape[0] * x.shape[1], height, x.shape[3])
                x, out = _view(x, frames), _view(out, frames)
                start, stop = start * height, stop * height
            loops.median_box3(x, out, cval, start, stop, code, to)

        return _Rows(call, out_dtype.type)


#: Output dtypes the window loops store as scipy's C code does
#: (:func:`.window_kernels.store_c`, with the arguments of :func:`scipy_store`).
SCIPY_STORES = frozenset(
    np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "int32", "float32", "float64")
)


def scipy_store(out_dtype: np.dtype) -> tuple[int, bool]:
    """``(bits, signed)`` of :func:`.window_kernels.store_c` storing into ``out_dtype``
    (one of :data:`SCIPY_STORES`): 0 bits for a float."""
    return (0 if out_dtype.kind == "f" else 8 * out_dtype.itemsize), out_dtype.kind == "i"


@dataclass(frozen=True)
class MeanPass(_LinePass):
    """scipy's ``uniform_filter1d`` over ``before + 1 + after`` elements along core
    ``axis``: a running sum, stored as scipy stores a double
    (:func:`.window_kernels.running_mean`), for outputs of :data:`SCIPY_STORES`.

    Attributes are :class:`ExtremumPass`'s but ``largest``.
    """

    axis: int
    before: int
    after: int
    ndim: int

    name = "running_mean"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = window_loops()
        size = self.before + self.after + 1
        options = (self.before, self.after, MODE_CODES[mode])
        acc: type[np.number[Any]]
        quot: type[np.floating[Any]]
        if narrow_mean(in_dtypes[0], out_dtype, size):
            stores, acc, quot = (0, False), np.int32, np.float32  # a plain cast stores
        else:
            stores, acc, quot = scipy_store(out_dtype), np.float64, np.float64
        narrow = acc is np.int32
        sums_type = _line_sums(in_dtypes[0], size, narrow=narrow)
        across_sums = sums_type if narrow else acc  # else scipy's running sum in double
        # uint16 sums are those of uint8 windows of up to 257: a reciprocal truncates them.
        reciprocal = truncating_reciprocal(size) if sums_type is np.uint16 else None

        def across(*args: Any) -> None:
            loops.running_mean(*args, acc, quot, across_sums, reciprocal)

        def along_integers(*args: Any) -> None:
            loops.running_mean_integers(*args, acc, quot, sums_type, reciprocal)

        integers = in_dtypes[0].kind in "iu" and in_dtypes[0].itemsize <= 4  # exact in double
        along = along_integers if integers else loops.running_mean_lines
        return self._rows(across, along, options, stores, out_dtype)


def _line_sums(in_dtype: np.dtype, size: int, *, narrow: bool) -> type[np.integer[Any]]:
    """The type of the window sums of :func:`.window_kernels.running_mean_integers`, and
    of the running sums across lines (:func:`.window_kernels.running_mean`) where
    :func:`narrow_mean` holds.

    Sums of uint8 windows of up to 257 fit uint16, whose lanes are twice int32's; other
    sums take int32 where :func:`narrow_mean` proved it exact, else int64. Where narrow,
    they divide in float32, exactly as :func:`narrow_mean` proves (uint16 sums multiply
    by :func:`truncating_reciprocal` instead): faster on AVX2 than the exact integer
    reciprocal this took before (a uint64 product per lane, which AVX2 has no
    instruction for). 2048x2048 uint8, 1 thread, one process, best of 15, integer
    reciprocal / float32 division ms: along rows 3 wide 2.79 / 2.21, 5 2.78 / 2.35,
    9 3.11 / 2.73, 31 4.96 / 4.79; across 3 2.09 / 1.52, 5 1.85 / 1.50, 9 1.90 / 1.70,
    31 2.72 / 2.12.
    """
    if narrow and in_dtype == np.uint8 and 255 * size <= np.iinfo(np.uint16).max:
        return np.uint16
    return np.int32 if narrow else np.int64


def truncating_reciprocal(size: int) -> np.float32:
    """``r`` with ``int(np.float32(s) * r) == s // size`` for every ``0 <= s <= 255 * size``
    (the sums of uint8 windows of ``size`` elements, up to 257): ``1 / size`` in float32,
    rounded up.

    ``r`` exceeds ``1 / size``, so ``s * r`` is never below ``s / size`` (at a multiple of
    ``size``, an integer float32 holds, it rounds to that integer, not below), and
    exceeds it by at most ``s`` float32 ulps of ``1 / size`` plus a rounding, about 3e-5,
    where the next integer is at least ``1 / size`` (1/257) away.
    ``tests/stencils/test_box_mean.py`` checks every sum of every size. A multiplication
    takes half the time of a division: the divisions of a 2048x2048 frame's sums 0.55 ->
    0.29 ms (1 thread).
    """
    return np.nextafter(np.float32(1) / np.float32(size), np.float32(np.inf))


def narrow_mean(in_dtype: np.dtype, out_dtype: np.dtype, size: int) -> bool:
    """Whether means of ``size`` elements of ``in_dtype``, stored in ``out_dtype``, may sum
    in int32 and divide in float32 with scipy's result (its double quotient truncated).

    Sums of 8- and 16-bit integers are exact in int32. For a sum ``t = q * size + r``
    (``0 <= r < size``), ``t / size`` lies ``r / size`` above ``q`` and at least ``1 / size``
    below ``q + 1``; float32's correctly rounded quotient errs by at most ``(q + 1) / 2**24``,
    which is below that while ``(q + 1) * size < 2**24``, so it truncates to ``q`` as the
    double does (and ``t`` itself is exact in float32). Negative sums mirror this. An
    output that holds the input's range (the mean lies in it) then stores the quotient
    by a plain cast, without scipy's wrap-around. Under ``constant`` the outside reads
    ``cval``, a value of the input's dtype (a filter reads a cval its input cannot hold as
    float64), so the same bound holds: one compiled loop serves every mode.
    """
    if in_dtype.kind not in "iu" or in_dtype.itemsize > 2 or out_dtype.kind not in "iu":
        return False
    limits = np.iinfo(in_dtype)
    largest = max(-int(limits.min), int(limits.max))
    return np.can_cast(in_dtype, out_dtype) and (largest + 1) * size < 2**24


def box_reach(reach: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int, int, int, int], int]:
    """The box loops' ``reach`` (``(before0, size0, before1, size1, before_n)`` of
    :func:`box_frames`' frames, see :func:`.window_kernels.rank_network`) and the box's
    size along the last axis, for a box reaching ``reach`` along 1 to 3 core axes."""
    padded = {1: [(0, 0), (0, 0)], 2: [reach[0], (0, 0)], 3: list(reach[:2])}
    (b0, a0), (b1, a1) = padded[len(reach)]
    bn, an = reach[-1]
    return (b0, b0 + 1 + a0, b1, b1 + 1 + a1, bn), bn + 1 + an


def box_frames(array: np.ndarray, ndim: int) -> np.ndarray:
    """A ``(batch, *core)`` array of 1 to 3 core axes viewed as the box loops' frames,
    ``(batch, a0, a1, n)``: rows (:func:`.codegen_cpu.work_rows`) along ``a0``, lines
    along ``n``."""
    batch, *core = array.shape
    if ndim == 3:
        frame = tuple(core)
    elif ndim == 2:
        frame = (core[0], 1, core[1])
    else:  # a row is a whole frame: one line
        frame = (1, 1, core[0])
    return _view(array, (batch, *frame))


#: 8- and 16-bit windows of more elements than this select with a sliding histogram, others
#: with a selection network run as data. Measured (512x512 frames, (32, 128, 128) stacks,
#: 2 threads, loaded machine; network / histogram): uint8 9x9 6.7 / 12 ms, 15x15 24 / 16,
#: 7x7x7 188 / 81; uint16 9x9 12 / 30, 5x5x5 68 / 133, 15x15 58 / 33. Other dtypes take
#: the network or sorted columns (:data:`SORTED_ABOVE`). 8-bit 2-D boxes
#: take column histograms (:func:`.window_kernels.rank_columns`) instead; 2048x2048 uint8,
#: 2 threads, loaded, network / columns: 7x7 55 / 215 ms, 9x9 108 / 201, 11x11 156 / 190.
#: 16-bit 2-D boxes above it take sorted columns (:data:`SORTED_ABOVE`).
HISTOGRAM_ABOVE = 150

#: Elements above which 2-D and 3-D boxes (the pair's first and second) select by sorted
#: columns (:func:`.window_kernels.rank_sorted_columns`), by the dtype's item size: 16-bit
#: 2-D boxes above :data:`HISTOGRAM_ABOVE`; 32-bit ones (floats as int32 keys) run the
#: network vectorised 8 wide below; 64-bit ones (no packed 64-bit min/max in AVX2)
#: scarcely. Measured (1024x1024 and (32, 128, 128), 2 threads, one process; network /
#: sorted, ms): float32 5x5 13 / 39, 7x7 37 / 48, 8x8 51 / 58, 9x9 77 / 64, 5x15 76 / 53,
#: 13x13 235 / 74, 3x3x3 18 / 82, 5x5x5 130 / 179, 5x5x7 190 / 193, 7x7x7 589 / 281;
#: int32 alike; float64 5x5 81 / 41, 3x3x3 70 / 80, 5x5x5 693 / 186; uint16 (network up to
#: 150 elements, then the histogram) 7x7 17 / 40, 11x11 71 / 64, 13x13 147 / 59, 21x21
#: 228 / 86, 41x5 397 / 80, 5x41 95 / 109, 3x3x3 21 / 144, 7x7x7 594 / 660.
SORTED_ABOVE: dict[int, tuple[int | None, int | None]] = {
    2: (HISTOGRAM_ABOVE, None),
    4: (64, 175),
    8: (20, 20),
}


@dataclass(frozen=True)
class RankWindow(BoxPass):
    """The value of ``rank`` (in sorted order) among a window, for 1 to 3 core axes.

    Attributes
    ----------
    reach : tuple of (int, int)
        The reach before and after each element of the box that holds the window, per
        core axis.
    rank : int
        0 for the minimum, ``size // 2`` for the median (upper, for even sizes).
    points : tuple of int, optional
        The window's places in the box (flat, C order, increasing): a footprint. None for
        the whole box.

    The minimum or maximum by one comparison per point
    (:func:`.window_kernels.extremum_points`); other ranks over 2-D and 3-D boxes of
    floats and 32-bit integers by sorted columns above :data:`SORTED_ABOVE`'s sizes (and
    over 2-D boxes of 16-bit integers above :data:`HISTOGRAM_ABOVE`), by a sliding
    histogram for other 8/16-bit windows above :data:`HISTOGRAM_ABOVE` elements (column
    histograms, constant time per point, for 8-bit 2-D boxes), else by a selection network
    for ``rank`` run as data
    (:func:`.window_kernels.rank_network`): each compiles once per dtype, whatever the
    window (:meth:`loop_name` says which).
    """

    reach: tuple[tuple[int, int], ...]
    rank: int
    points: tuple[int, ...] | None = None

    name = "rank_window"

    @property
    def size(self) -> int:
        """Elements of the window."""
        if self.points is not None:
            return len(self.points)
        return math.prod(before + 1 + after for before, after in self.reach)

    def _places(self) -> np.ndarray:
        """The window's places in the box, flat."""
        box = math.prod(before + 1 + after for before, after in self.reach)
        return np.arange(box) if self.points is None else np.array(self.points)

    def _runs(self, kn: int) -> np.ndarray:
        """The window as runs along the last axis: ``(line, first, stop)`` rows, ``line``
        counting the box's lines (all axes but the last) and ``[first, stop)`` along it."""
        places = self._places()
        lines, along = places // kn, places % kn
        breaks = np.flatnonzero((np.diff(lines) != 0) | (np.diff(along) != 1)) + 1
        starts = np.concatenate([[0], breaks])
        stops = np.concatenate([breaks, [len(places)]])
        return np.stack([lines[starts], along[starts], along[stops - 1] + 1], 1).astype(np.intp)

    def loop_name(self, dtype: np.dtype) -> str:
        """The name of the loop of :mod:`.window_kernels` that runs this window on ``dtype``."""
        if self.rank in (0, self.size - 1):
            return "extremum_points"
        box = len(self.reach) == 2 and self.points is None
        if self.points is None and len(self.reach) > 1 and key_dtype(dtype) is not None:
            above = SORTED_ABOVE.get(dtype.itemsize, (None, None))[len(self.reach) - 2]
            if above is not None and self.size > above:
                return "rank_sorted_columns"
        if dtype.itemsize <= 2 and dtype.kind in "iub" and self.size > HISTOGRAM_ABOVE:
            if dtype.itemsize == 1 and box and self.size < 1 << 16:
                return "rank_columns"
            return "rank_histogram"
        return "rank_network"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        from ..library import _selection_network  # the library imports this module

        (dtype,) = in_dtypes
        ndim = len(self.reach)
        reach, kn = box_reach(self.reach)
        code = MODE_CODES[mode]
        name = self.loop_name(dtype)
        loop = getattr(window_loops(), name)
        low = int(np.iinfo(dtype).min) if dtype.kind in "iu" else 0
        extra: tuple
        if name == "extremum_points":
            extra = (self._places().astype(np.intp), self.rank > 0)
        elif name == "rank_sorted_columns":
            key = key_dtype(dtype)
            assert key is not None
            extra = tuple(key.type(bound) for bound in key_bounds(key))
        elif name == "rank_columns":
            extra = (low,)
        elif name == "rank_histogram":
            middling = None if dtype.itemsize == 1 else True
            extra = (self._runs(kn), low, 4 * dtype.itemsize, middling)
        else:
            pairs = np.array(_selection_network(self.size, self.rank), np.intp).reshape(-1, 2)
            # Floats sort as integer keys (their compare-exchanges vectorise), others as read.
            key = (key_dtype(dtype) if dtype.kind == "f" else None) or dtype
            extra = (self._places().astype(np.intp), pairs, key.type(0))

        def call(x, out, cval, start, stop, to):
            xs, outs = box_frames(x, ndim), box_frames(out, ndim)
            loop(xs, outs, cval, start, stop, reach, kn, self.rank, code, to, *extra)

        return _Rows(call, out_dtype.type)


@dataclass(frozen=True)
class BoxMean(BoxPass):
    """The mean over a 2-D box of integers, rounded to nearest (half to even) and
    saturated as the library's mean stores it, in time that does not grow with the box
    (:func:`.window_kernels.box_mean`: running sums down the columns and along the rows).

    The sums are exact in int32 (the caller checks ``count * max|x| < 2**31``); the
    division is in float32 where the sums stay below ``2**23``, else float64. Either
    rounds as the exact mean: a mean that is a tie (``k + 1/2``) is exact in both, and
    any other lies at least ``1 / (2 * count)`` from one, farther than the quotient's
    rounding error (half an ulp of ``sum / count``, below ``2**-24 * 2**23 / count``).

    Attributes
    ----------
    reach : tuple of (int, int)
        The reach before and after each element, per core axis (2 axes).
    bound : int
        The largest ``|sum|`` of the box.
    """

    reach: tuple[tuple[int, int], ...]
    bound: int

    name = "box_mean"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = window_loops()
        reach, kn = box_reach(self.reach)
        count = reach[1] * kn
        scale = np.array([count], np.float32 if self.bound < 1 << 23 else np.float64)
        code = MODE_CODES[mode]

        def call(x, out, cval, start, stop, to):
            batch, n0, n1 = x.shape
            frame = (batch, n0, 1, n1)
            xs, outs = _view(x, frame), _view(out, frame)
            sums = np.empty(n1 + kn - 1, np.int32)
            loops.box_mean(xs, outs, cval, start, stop, reach, kn, code, to, sums, scale)

        return _Rows(call, out_dtype.type)
