"""A separable symmetric filter of uint8 frames in float32, rounded as its float64 definition.

The library's gaussian on integer frames is defined as scipy's float64 separable
result (axis 0, then axis 1; each pass as correlate1d sums a symmetric kernel)
rounded half to even and saturated. Computing that in float64 costs twice the SIMD
lanes of float32. :class:`GaussianPass` computes it in float32, both passes in one
sweep per output row over a row buffer that stays in L1, and recomputes in float64,
in scipy's order of operations, only the points whose float32 result lies within a
proven bound ``E`` (:func:`error_bound`) of a rounding boundary ``k + 1/2``: every
other point rounds as the float64 result does, so the output is the float64
definition's, bit for bit, whatever the image (an image built to hit boundaries only
runs slower). Passes along rows wide enough to flag points in nearly every row
(:data:`EXACT_COLUMNS_ABOVE`) take the float64 vertical pass for every row instead, and
round it to float32 for the horizontal pass.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np

from .boundary import MODE_CODES
from .modules import load_module
from .windows import CachedPass, _Rows

__all__ = ["GaussianPass", "INPUTS", "error_bound"]

#: Input dtypes the pass serves. uint16 would be exact too (its values and pair sums are
#: exact in float32), but its bound ``E`` (about 0.044 for a 5x5 gaussian) flags about 9%
#: of the points, each recomputed at ~60 ns: slower than the float64 passes.
INPUTS = frozenset({np.dtype(np.uint8)})


#: Passes of more terms than this add a term per sweep of the row (:func:`_rows_source`):
#: written out, a wide pass holds a view per term, more than the registers. 2048x2048
#: uint8, 1 thread, interleaved, ms, sweeps / written out (rows read in place): sigma 2
#: (17 terms) 12.6 / 9.9, 3 (25) 28.3 / 32.1, 4 (33) 39.3 / 53.9, 6 (49) 60.7 / 110.6;
#: sigma 8 (65) 67-70 (37-40 of it recomputing flagged points) against 310.
SWEEPS_ABOVE = 20

#: Passes along rows of more terms than this flag points in nearly every row (the bound
#: ``E`` grows with the terms: sigma 8, 65 terms, flags 5.5 points a row of 2048 on random
#: frames), and a row's flagged points need its float64 vertical pass (:func:`exact_columns`).
#: Their vertical pass is then that float64 one, for every row, rounded to float32 for the
#: horizontal sweeps, in place of a float32 vertical pass as well. 2048x2048 uint8, 1
#: thread, one process, float32 and float64 vertical passes / float64 only, ms: sigma 3
#: (25 terms) 16.6 / 19.6, 4 (33) 25.5 / 25.8, 5 (41) 34.0 / 30.6, 6 (49) 44.2 / 37.4, 8
#: (65) 60.8 / 48.8 (random and smoothed frames took the same times).
EXACT_COLUMNS_ABOVE = 40


def error_bound(half0: np.ndarray, half1: np.ndarray, largest: int) -> float:
    """A bound ``E`` on ``|y32 - y64|``, the float32 and float64 results of one point.

    ``half0``, ``half1`` are the float64 half-kernels (``h[k]`` weighs offsets ``-k`` and
    ``k``) of axes 0 and 1, inputs lie in ``[0, largest]``. With ``u`` a format's unit
    roundoff (2**-24, 2**-53), ``g(n) = n u / (1 - n u)``, ``n_d`` the terms of pass ``d``
    (``radius + 1``: the centre and the pairs) and ``S_d`` its weights' absolute sum:

    - the vertical pass sums ``n_0`` products of a rounded weight and an exact integer
      (a pair sum: below 2**25, exact); each term meets at most ``n_0 + 1`` roundings
      (weight, product, ``n_0 - 1`` additions): ``|V - v| <= g(n_0 + 1) S_0 largest``;
    - the horizontal pass adds one rounding per term (its pair sum of rounded values), and
      carries the vertical error through weights of sum ``S_1``:
      ``|Y - y| <= g(n_1 + 2) S_1 (1 + g(n_0 + 1)) S_0 largest + S_1 g(n_0 + 1) S_0 largest``,

    ``y`` the exact result of the float64 weights. ``E`` is that bound in float32 plus
    the same in float64, times 1.25 (margin). For a 5x5 gaussian on uint8, ``E`` is
    about 1.7e-4 (the largest difference measured on random frames: 3.7e-5). It covers a
    float64 vertical pass rounded to float32 (:data:`EXACT_COLUMNS_ABOVE`) too: one
    rounding of scipy's float64 ``V``, itself within ``g(n_0 + 1) S_0 largest`` of ``v``
    in float64's ``u``; together below the float32 pass's bound.
    """

    def bound(u: float) -> float:
        def g(n: int) -> float:
            return n * u / (1 - n * u)

        s0, s1 = _absolute_sum(half0), _absolute_sum(half1)
        vertical = g(half0.size + 1) * s0 * largest
        return g(half1.size + 2) * s1 * (s0 * largest + vertical) + s1 * vertical

    return 1.25 * (bound(2.0**-24) + bound(2.0**-53))


@dataclass(frozen=True)
class GaussianPass(CachedPass):
    """Both passes of a separable symmetric 2-D filter, as one pass of
    :func:`.fused.run_passes` for the inputs of :data:`INPUTS` and integer outputs, under
    reflect, mirror and nearest. The weights' absolute sums times the largest input stay
    below 2**24 (a gaussian's sum to 1), so a result never leaves float32's exact integers.

    Attributes
    ----------
    half0, half1 : tuple of float
        The float64 half-kernels of axes 0 and 1: ``half[k]`` weighs offsets ``-k`` and ``k``.
    """

    half0: tuple[float, ...]
    half1: tuple[float, ...]

    name = "gaussian_float32"
    dtype = None  # the input's: an integer, so float outputs take the float64 passes

    @property
    def halo(self) -> tuple[tuple[int, int], ...]:
        r0, r1 = len(self.half0) - 1, len(self.half1) - 1
        return ((r0, r0), (r1, r1))

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        """The pass for one input dtype, integer output dtype and boundary ``mode``
        (reflect, mirror or nearest)."""
        (dtype,) = in_dtypes
        if dtype not in INPUTS or out_dtype.kind not in "iu" or mode not in _FOLDED:
            raise ValueError(f"{self.name}: no pass for {dtype} -> {out_dtype} under {mode}")
        half0, half1 = self.half0, self.half1
        w0, w1 = np.array(half0), np.array(half1)
        v0, v1 = w0.astype(np.float32), w1.astype(np.float32)
        largest = int(np.iinfo(dtype).max)
        bound = error_bound(w0, w1, largest)
        # Flag |y - rint(y)| > limit: a point within 1/2 - limit of a boundary; limit is
        # rounded down, so every point within E is flagged.
        limit = np.nextafter(np.float32(0.5 - bound), np.float32(0))
        code = MODE_CODES[mode]
        bounds = _float32_range(out_dtype)
        loops = _loops(len(half0) - 1, len(half1) - 1, _clamps(v0, v1, largest, bound, bounds))

        # ``to`` (a value of the output's type) is not passed on: the store casts.
        def call(x, out, cval, start, stop, to):
            loops.separable_rows(x, out, start, stop, v0, v1, w0, w1, limit, *bounds, code)

        return _Rows(call, out_dtype.type)


#: The modes the loop folds indices by (their codes are :data:`.boundary.MODE_CODES`).
_FOLDED = ("reflect", "mirror", "nearest")


def _float32_range(dtype: np.dtype) -> tuple[np.float32, np.float32]:
    """``dtype``'s range as float32 bounds to clamp rounded results to (within 2**24: a
    result never gets that far, see :class:`GaussianPass`), so the store is float32 lanes
    (:func:`.store.saturate` compares in float64) and a cast of an integral value."""
    info = np.iinfo(dtype)
    return np.float32(max(int(info.min), -(2**24))), np.float32(min(int(info.max), 2**24))


def _clamps(
    v0: np.ndarray,
    v1: np.ndarray,
    largest: int,
    bound: float,
    bounds: tuple[np.float32, np.float32],
) -> bool:
    """Whether rounded results must be clamped to ``bounds``, the output's range: unless
    every weight is non-negative (then so is every result) and the largest result, that of
    an image of ``largest`` everywhere plus the error ``bound``, rounds within it. A
    gaussian into its input's dtype needs no clamp (2048x2048, 5x5, 1 thread: 2.56 ->
    2.42 ms)."""
    low, high = bounds
    if (v0 < 0).any() or (v1 < 0).any() or low > 0:
        return True
    return largest * _absolute_sum(v0) * _absolute_sum(v1) + bound >= float(high) + 0.5


def _absolute_sum(half: np.ndarray) -> float:
    """The absolute sum of the symmetric kernel whose half-kernel is ``half``."""
    return abs(float(half[0])) + 2 * float(np.abs(half[1:]).sum())


@functools.cache
def _loops(r0: int, r1: int, clamp: bool) -> ModuleType:
    """:mod:`.gauss_int_kernels` with ``separable_rows`` for radii ``r0``, ``r1``, its
    results clamped (``clamp``) or not."""
    source = (Path(__file__).parent / "gauss_int_kernels.py").read_text()
    name = f"gaussian_float32_{r0}_{r1}{'_clamped' if clamp else ''}"
    return load_module(name, source + _rows_source(r0, r1, clamp))


def _rows_source(r0: int, r1: int, clamp: bool) -> str:
    """Source of ``separable_rows`` for radii ``r0``, ``r1`` (one loop per pass, vectorised),
    clamping its results to ``[low, high]`` if ``clamp``.

    A pass over up to :data:`SWEEPS_ABOVE` terms is written out, a term per read of a
    view; a wider one adds a term per sweep of the row, in the same order (the same
    float32 values), reading the rows of axis 0 from a ring (:data:`_RING`). Above
    :data:`EXACT_COLUMNS_ABOVE` terms along rows, the vertical pass is the float64 one of
    :func:`exact_columns`, which every row's flagged points then read.
    """
    size, wide0, wide1 = 2 * r0 + 1, 2 * r0 + 1 > SWEEPS_ABOVE, 2 * r1 + 1 > SWEEPS_ABOVE
    exact_vertical = 2 * r1 + 1 > EXACT_COLUMNS_ABOVE
    # The float32 vertical passes cast pair sums back to int32: Numba adds int32s in int64,
    # and LLVM would widen every lane to 64 bits (measured 5.6 ms against 0.8 for the
    # vertical pass of a 2048x2048 frame).
    if exact_vertical:
        setup = ""
        vertical = _EXACT_VERTICAL.format(r1=r1)
    elif wide0:
        setup = _RING.format(size=size)
        vertical = _RING_READS.format(r0=r0, size=size) + _VERTICAL_SWEEPS.format(
            r0=r0, r1=r1, size=size
        )
    else:
        setup = ""
        pairs = [
            f"a{k} * np.float32(np.int32(np.int32(x{r0 - k}[j]) + np.int32(x{r0 + k}[j])))"
            for k in range(1, r0 + 1)
        ]
        reads = "\n".join(f"        x{k} = x[frame, rows[{k}]]" for k in range(size))
        vertical = f"{reads}\n        for j in range(n1):\n            s{r1}[j] = " + " + ".join(
            [f"a0 * np.float32(x{r0}[j])", *pairs]
        )
    # Views of the line at each offset, indexed by ``j`` itself: ``line[j + k]`` would
    # check for a negative index (Python's wraparound) per read, and not vectorise.
    near, count, whole_row = "False", "|=", "False"
    if wide1:
        # Flags counted (an integer sum, which slowed a 5x5 pass by half, so for wide
        # passes only): their flagged points' float64 columns are summed per point
        # (2 r1 + 1 each) or once for the row (n1), where that is cheaper; a term costs
        # ~16x as much per point (sigma 8, 1 thread: 4.7 ns against 0.3 ns a column in
        # the row's sweeps).
        near, count, whole_row = "0", "+=", f"16 * near * {2 * r1 + 1} > n1"
        if exact_vertical:  # the row's float64 columns are at hand
            near, count, whole_row = "False", "|=", "True"
        setup += "\n    acc = np.empty(n1, np.float32)"
        horizontal, point = _HORIZONTAL_SWEEPS.format(r1=r1), "acc[j]"
        shifts = f"    s{r1} = line[{r1} : {r1} + n1]"
    else:
        horizontal = ""
        point = " + ".join(
            [f"b0 * s{r1}[j]"] + [f"b{k} * (s{r1 - k}[j] + s{r1 + k}[j])" for k in range(1, r1 + 1)]
        )
        shifts = "\n".join(f"    s{k} = line[{k} : {k} + n1]" for k in range(2 * r1 + 1))
    weights = "\n".join(
        [f"    a{k} = v0[{k}]" for k in range(0 if exact_vertical else 1 if wide0 else r0 + 1)]
        + [f"    b{k} = v1[{k}]" for k in range(1 if wide1 else r1 + 1)]
    )
    return _ROWS.format(
        r0=r0,
        r1=r1,
        setup=setup,
        shifts=shifts,
        weights=weights,
        vertical=vertical,
        horizontal=horizontal,
        point=point,
        near=near,
        count=count,
        whole_row=whole_row,
        store=_CLAMPED if clamp else "target[j] = rounded",
        columns="" if exact_vertical else _ROW_COLUMNS,  # else they are the row's already
    )


#: The float64 columns of a row whose flagged points are recomputed from them.
_ROW_COLUMNS = """            if whole_row:
                exact_columns(x, frame, rows, w0, columns, mode)
"""

#: A rounded result, clamped to the output's range, stored.
_CLAMPED = """rounded = rounded if rounded > low else low
            target[j] = rounded if rounded < high else high"""


#: The ring of ``separable_rows``' wide vertical pass, one cache line more per row so that
#: its rows do not share cache sets, as rows 2 or 4 KiB apart (2048- or 4096-wide uint8
#: frames) do in place (sigma 4, 33 rows read in place, 1 thread: 52.5 ms on a 2048-wide
#: frame against 23.8 on a 2000-wide one); the frame it holds, and its next row to load.
_RING = """    ring = np.empty(({size}, n1 + 64), x.dtype)
    held, loaded = -1, 0"""

#: The ring's loads, for rows ``[first, last)`` that follow each other: on a new frame (or
#: the first row) the window's rows, else the one it gained.
_RING_READS = """        if frame != held:
            held, loaded = frame, i - {r0}
        for v in range(max(loaded, i - {r0}), i + {r0} + 1):
            copied, into = x[frame, rows[v - i + {r0}]], ring[v % {size}]
            for j in range(n1):
                into[j] = copied[j]
        loaded = i + {r0} + 1
"""

#: The vertical pass in float64 as scipy sums it (:func:`exact_columns`), rounded to
#: float32 for the horizontal sweeps.
_EXACT_VERTICAL = """        exact_columns(x, frame, rows, w0, columns, mode)
        for j in range(n1):
            s{r1}[j] = np.float32(columns[{r1} + j])"""

#: The wide vertical pass: the centre's term, then a pair per sweep from the inside out.
_VERTICAL_SWEEPS = """        centre = ring[i % {size}]
        for j in range(n1):
            s{r1}[j] = a0 * np.float32(centre[j])
        for k in range(1, {r0} + 1):
            below, above, ak = ring[(i - k) % {size}], ring[(i + k) % {size}], v0[k]
            for j in range(n1):
                s{r1}[j] += ak * np.float32(np.int32(np.int32(below[j]) + np.int32(above[j])))"""

#: The wide horizontal pass into ``acc``, in the order of the vertical one.
_HORIZONTAL_SWEEPS = """        for j in range(n1):
            acc[j] = b0 * s{r1}[j]
        for k in range(1, {r1} + 1):
            left, right, bk = line[{r1} - k : {r1} - k + n1], line[{r1} + k : {r1} + k + n1], v1[k]
            for j in range(n1):
                acc[j] += bk * (left[j] + right[j])"""

_ROWS = '''

@contracted
def separable_rows(x, out, first, last, v0, v1, w0, w1, limit, low, high, mode):
    """Rows ``[first, last)`` (``frame * n0 + i``) of ``out``, a ``(batch, n0, n1)`` array:
    the separable filter of ``x`` with float32 half-kernels ``v0`` (axis 0) and ``v1``
    (axis 1), rounded and clamped to ``[low, high]`` (``out``'s range); points within
    ``1/2 - limit`` of a rounding boundary are recomputed with the float64 ``w0``, ``w1``
    (:func:`exact_point`, or :func:`exact_columns` for the row)."""
    n0, n1 = x.shape[1], x.shape[2]
    line = np.empty(n1 + {r1} * 2, np.float32)
{setup}
    rows = np.empty({r0} * 2 + 1, np.intp)
    flags = np.zeros(-(-n1 // 8) * 8, np.bool_)
    columns = np.empty(n1 + {r1} * 2, np.float64)
    words = flags.view(np.uint64)
{shifts}
{weights}
    for row in range(first, last):
        frame = row // n0
        i = row - frame * n0
        for k in range({r0} * 2 + 1):
            rows[k] = fold(i + k - {r0}, n0, mode)
{vertical}
        for k in range({r1}):  # the row's ends, folded
            line[k] = line[{r1} + fold(k - {r1}, n1, mode)]
            line[{r1} + n1 + k] = line[{r1} + fold(n1 + k, n1, mode)]
{horizontal}
        target = out[frame, i]
        near = {near}
        for j in range(n1):
            y = {point}
            rounded = np.rint(y)
            flagged = abs(y - rounded) > limit
            flags[j] = flagged
            near {count} flagged
            {store}
        if near:
            whole_row = {whole_row}
{columns}            for word in range(words.size):  # find the flags 8 at a time
                if words[word]:
                    for j in range(8 * word, min(8 * word + 8, n1)):
                        if flags[j]:
                            if whole_row:
                                y = np.rint(exact_from_columns(columns, j, w1))
                            else:
                                y = np.rint(exact_point(x, frame, rows, j, w0, w1, mode))
                            y = y if y > low else low
                            target[j] = y if y < high else high
'''
