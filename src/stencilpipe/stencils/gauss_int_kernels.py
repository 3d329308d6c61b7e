"""The loop of :class:`.gauss_int.GaussianPass`: a separable symmetric filter of 8-bit frames
in float32, with the points near a rounding boundary recomputed in float64 as scipy does.

:mod:`.gauss_int` loads this file as a generated module (:func:`.modules.load_module`),
so Numba's disk cache of it lives, and is locked, with the kernels' own.

Each output row is computed in one sweep: the vertical pass over the ``2 r0 + 1`` input
rows it reads into a float32 row (padded by the horizontal radius, folded by the
boundary mode), then the horizontal pass over that row, rounded and stored. Both
buffers are a few KiB: they stay in L1. A row whose float32 results all lie farther
than ``limit`` from every rounding boundary (``k + 1/2``) is done; otherwise its
flagged points are recomputed in float64 in scipy's order of operations
(:func:`exact_point`), so the stored result is that of the float64 definition.
"""

import numba
import numpy as np

from stencilpipe.stencils.windows import window_loops

_SP_CACHE = True
#: The float32 loop may fuse a product into the sum it joins (one rounding, not two: the
#: bound of :func:`.gauss_int.error_bound` still holds; 2048x2048, 5x5, 1 thread: 3.02 ->
#: 2.84 ms). Numba compiles the functions a call reaches with the caller's fastmath unless
#: they name their own, and inlines IR under the caller's flags: the float64 ones, which
#: must sum in scipy's order, name ``fastmath=False`` and are not inlined.
contracted = numba.njit(cache=_SP_CACHE, nogil=True, fastmath={"contract"})
exact = numba.njit(cache=_SP_CACHE, nogil=True, fastmath=False)
inline = numba.njit(cache=_SP_CACHE, inline="always")

#: Index ``j`` of an axis of ``n`` folded into it by ``mode`` (a code of
#: :data:`.boundary.MODE_CODES`): the window loops' own, inlined.
fold = window_loops().fold


@inline
def pair_sum(a, b):
    """``float64(a) + float64(b)`` of two 8-bit values, as scipy's pass adds a pair: exact
    in int32, so one conversion of the int32 sum gives the same double (2048x2048, sigma
    8, 1 thread: the float64 columns of every row 56.7 -> 48.3 ms against two conversions)."""
    return np.float64(np.int32(np.int32(a) + np.int32(b)))


@inline
def column_exact(x, frame, rows, c, w0):
    """The vertical pass at column ``c`` in float64, as scipy's correlate1d sums a
    symmetric kernel: the centre's term, then ``(x[-k] + x[k]) * w[k]`` from the outside in."""
    r0 = w0.size - 1
    total = np.float64(x[frame, rows[r0], c]) * w0[0]
    for k in range(r0, 0, -1):
        total += pair_sum(x[frame, rows[r0 - k], c], x[frame, rows[r0 + k], c]) * w0[k]
    return total


@exact
def exact_point(x, frame, rows, j, w0, w1, mode):
    """The float64 result at column ``j`` of the output row whose input rows are ``rows``
    (folded): scipy's vertical pass, then its horizontal one, in scipy's order."""
    n1 = x.shape[2]
    r1 = w1.size - 1
    total = column_exact(x, frame, rows, j, w0) * w1[0]
    for k in range(r1, 0, -1):
        before = column_exact(x, frame, rows, fold(j - k, n1, mode), w0)
        after = column_exact(x, frame, rows, fold(j + k, n1, mode), w0)
        total += (before + after) * w1[k]
    return total


@exact
def exact_columns(x, frame, rows, w0, columns, mode):
    """``columns[r1 + c]`` = the float64 vertical pass at every column ``c`` of the output
    row whose input rows are ``rows`` (:func:`column_exact`, one sweep of the row per
    term), the ``r1`` columns past each end folded by ``mode``: for rows with many points
    to recompute, where :func:`exact_point` per point would sum each column many times."""
    n1 = x.shape[2]
    r0, r1 = w0.size - 1, (columns.size - n1) // 2
    inside = columns[r1 : r1 + n1]
    centre = x[frame, rows[r0]]
    for c in range(n1):
        inside[c] = np.float64(centre[c]) * w0[0]
    for k in range(r0, 0, -1):
        above, below, weight = x[frame, rows[r0 - k]], x[frame, rows[r0 + k]], w0[k]
        for c in range(n1):
            inside[c] += pair_sum(above[c], below[c]) * weight
    for k in range(r1):
        columns[k] = columns[r1 + fold(k - r1, n1, mode)]
        columns[r1 + n1 + k] = columns[r1 + fold(n1 + k, n1, mode)]


@exact
def exact_from_columns(columns, j, w1):
    """:func:`exact_point` at column ``j`` from the row's :func:`exact_columns`."""
    r1 = w1.size - 1
    total = columns[r1 + j] * w1[0]
    for k in range(r1, 0, -1):
        total += (columns[r1 + j - k] + columns[r1 + j + k]) * w1[k]
    return total
