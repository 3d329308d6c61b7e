"""The loops of the window filters (:mod:`.windows`): order statistics over box windows.

Their cost grows slowly with the window, where a per-point kernel's grows with its
area: a minimum or maximum over a small or medium 2-D box is one pass over memory
(:func:`extremum_box`: the box's rows compared into a row buffer, then along it by
doubling), over longer windows one pass per axis of van Herk/Gil-Werman (three
comparisons per element whatever the window's length); a rank (the median) over a 2-D
or 3-D box keeps the window's columns sorted and moves a split through them (floats, 16- and
32-bit integers), slides a histogram along each line for other 8/16-bit windows, as
OpenCV's ``medianBlur`` does (2 updates per window row and step), and runs a selection
network, given as data, over blocks of points for the rest. None of them is specialised on the
window's size, so each compiles once per dtype, in about a second.

:mod:`.windows` loads this file as a generated module (:func:`.modules.load_module`),
so Numba's disk cache of it lives, and is locked, with the kernels' own.

Every loop computes a range ``[first, last)`` of the rows the other kernels compute
(:func:`.codegen_cpu.work_rows`) and reads indices outside its view folded by the
boundary mode, or ``cval`` under ``constant``: the contract of a pass of
:func:`.fused.run_passes`.
"""

import numba
import numpy as np

from stencilpipe.stencils import boundary
from stencilpipe.stencils.order import from_order_key, order_key
from stencilpipe.stencils.store import cast, store_as

_SP_CACHE = True
jit = numba.njit(cache=_SP_CACHE, nogil=True)
inline = numba.njit(cache=_SP_CACHE, inline="always")

#: Boundary modes as the loops take them (:data:`.boundary.MODE_CODES`).
CONSTANT = boundary.CONSTANT

#: Compiled once and called, not inlined: it runs only outside the array, and Numba's
#: inlining (``inline="always"``) copies a function's IR into each caller, which was most
#: of the loops' compile time.
fold_outside = jit(boundary.fold)

#: Bytes of :func:`extremum`'s buffers: about a core's L2 cache (see :mod:`.fused`).
BUFFER_BYTES = 1 << 20


@inline
def fold(j, n, mode):
    """Index ``j`` of an axis of ``n`` folded into it by ``mode``; -1 for ``cval``."""
    if 0 <= j < n:
        return j
    return fold_outside(j, n, mode)


@inline
def better(a, b, largest):
    """The larger (``largest``) or smaller of two values; the first of equal ones."""
    if largest:
        return b if b > a else a
    return b if b < a else a


@inline
def read_piece(x, position, last, size, before, mode, cval, buffer):
    """The piece of a line of :func:`extremum` from flat
    ``position``: ``(line, lo, hi, values)``, its positions ``[lo, hi)`` along line
    ``line`` (up to the line's end, ``last``, or the ``buffer.shape[0] - size + 1`` that
    ``buffer`` holds) and the ``hi - lo + size - 1`` rows they read, folded, in a view of
    ``buffer``."""
    n, width = x.shape[1], x.shape[2]
    line = position // n
    lo = position - line * n
    hi = min(n, lo + last - position, lo + buffer.shape[0] - size + 1)
    values = buffer[: hi - lo + size - 1]
    for r in range(values.shape[0]):
        j = fold(lo - before + r, n, mode)
        for w in range(width):
            values[r, w] = cval if j < 0 else x[line, j, w]
    return line, lo, hi, values


#: Windows up to this long, across rows at least :data:`DIRECT_WIDTH` wide, take the
#: extremum of the window's rows directly (:func:`extremum_rows`): about ``size / 3``
#: sweeps of a row from cache per output row, where van Herk/Gil-Werman copies each row
#: into a buffer and sweeps three more. 2048x2048 uint8 across rows, 1 thread, direct /
#: van Herk ms: 3 0.16 / 0.29, 5 0.22 / 0.29, 7 0.23 / 0.30, 9 0.33 / 0.30, 11 0.41 / 0.28.
DIRECT_UP_TO = 7
DIRECT_WIDTH = 64


@inline
def lower(best, row, largest):
    """``best[i]`` = the extremum of itself and ``row[i]`` (vectorised)."""
    for i in range(best.size):
        best[i] = better(best[i], row[i], largest)


@inline
def extremum_rows(x, out, cval, first, last, before, size, mode, largest, to, best, rows):
    """:func:`extremum` by the window's rows themselves, folded, up to four compared per
    sweep into ``best`` (a row of ``width``, in L1; :func:`rows_extremum`) and stored once.
    Under ``constant``, rows outside are left out of the sweeps and ``cval`` taken in after."""
    n = x.shape[1]
    for position in range(first, last):
        line, i = position // n, position % n
        count = 0
        for q in range(size):
            j = fold(i - before + q, n, mode)
            if j >= 0:
                rows[count] = j
                count += 1
        if count == 0:
            best[:] = cval
        else:
            rows_extremum(x, line, rows, count, best, largest)
            if count < size:
                for w in range(best.size):
                    best[w] = better(best[w], cval, largest)
        row = out[line, i]
        for w in range(best.size):
            row[w] = store_as(best[w], to)


@jit
def extremum(x, out, cval, first, last, before, after, mode, largest, to):
    """``out[l, i, :]`` = min (or max) of ``x[l, i - before : i + after + 1, :]``.

    For the flat positions ``l * n + i`` in ``[first, last)`` of ``x`` and ``out``,
    ``(lines, n, width)`` arrays; the window is along the middle axis, every
    operation is along the last one (vectorised when it is wide).
    """
    n, width = x.shape[1], x.shape[2]
    size = before + after + 1
    if size <= DIRECT_UP_TO and width >= DIRECT_WIDTH:
        best = np.empty(width, x.dtype)
        rows = np.empty(size, np.intp)
        extremum_rows(x, out, cval, first, last, before, size, mode, largest, to, best, rows)
        return
    # Positions per piece: its three buffers stay in cache.
    piece = max(size, BUFFER_BYTES // (3 * width * x.itemsize) - size)
    buffer = np.empty((piece + size - 1, width), x.dtype)
    position = first
    while position < last:
        line, lo, hi, values = read_piece(x, position, last, size, before, mode, cval, buffer)
        count = hi - lo
        length = count + size - 1
        # van Herk/Gil-Werman: running extrema forwards and backwards within blocks of
        # ``size``; a window spans at most two blocks, so it is one of each.
        forward = np.empty_like(values)
        backward = np.empty_like(values)
        for start in range(0, length, size):
            stop = min(start + size, length)
            for w in range(width):
                forward[start, w] = values[start, w]
            for r in range(start + 1, stop):
                for w in range(width):
                    forward[r, w] = better(forward[r - 1, w], values[r, w], largest)
            for w in range(width):
                backward[stop - 1, w] = values[stop - 1, w]
            for r in range(stop - 2, start - 1, -1):
                for w in range(width):
                    backward[r, w] = better(backward[r + 1, w], values[r, w], largest)
        for i in range(count):
            for w in range(width):
                value = better(backward[i, w], forward[i + size - 1, w], largest)
                out[line, lo + i, w] = store_as(value, to)
        position = hi + line * n


@inline
def doubled(source, target, run, largest):
    """``target[i]`` = the extremum of ``source[i]`` and ``source[i + run]``.

    Called with a literal ``run``: with a run known only at run time, LLVM cannot
    tell the reads from the writes apart and does not vectorise (25x slower).
    """
    if largest:
        for i in range(source.size - run):
            target[i] = max(source[i], source[i + run])
    else:
        for i in range(source.size - run):
            target[i] = min(source[i], source[i + run])


@inline
def copy(source, target):
    """``target[:] = source`` as a loop over equal views, which LLVM vectorises (a slice
    assignment is Numba's generic, element by element, copy)."""
    for i in range(target.size):
        target[i] = source[i]


@inline
def combine(first, second, out, largest, to):
    """``out[i]`` = the extremum of ``first[i]`` and ``second[i]``, stored as ``to``."""
    for i in range(out.size):
        out[i] = store_as(better(first[i], second[i], largest), to)


@inline
def runs(values, spare, size, largest):
    """Fill ``values`` (or ``spare``) with the extrema of runs of ``p``, the largest power
    of two up to ``size``, from each element; return ``p`` and that buffer.

    One written-out step per doubling, each with its literal run (see :func:`doubled`).
    """
    if size < 2:
        return 1, values
    doubled(values, spare, 1, largest)
    if size < 4:
        return 2, spare
    doubled(spare, values, 2, largest)
    if size < 8:
        return 4, values
    doubled(values, spare, 4, largest)
    if size < 16:
        return 8, spare
    doubled(spare, values, 8, largest)
    if size < 32:
        return 16, values
    doubled(values, spare, 16, largest)
    if size < 64:
        return 32, spare
    doubled(spare, values, 32, largest)
    run, source, target = 64, values, spare
    while 2 * run <= size:  # windows beyond 127: rare, and scalar
        doubled(source, target, run, largest)
        run, source, target = 2 * run, target, source
    return run, source


@inline
def read_line(x, line, before, mode, cval, values):
    """Line ``line`` of ``x``, ``(lines, n)``, from ``before`` positions before it into
    ``values``, folded (the ends by ``mode``, the inside copied)."""
    n, length = x.shape[1], values.size
    for r in range(min(before, length)):
        j = fold(r - before, n, mode)
        values[r] = cval if j < 0 else x[line, j]
    copy(x[line], values[before : before + n])
    for r in range(before + n, length):
        j = fold(r - before, n, mode)
        values[r] = cval if j < 0 else x[line, j]


@jit
def extremum_lines(x, out, cval, first, last, before, after, mode, largest, to):
    """As :func:`extremum` along the last axis of ``(lines, n)`` arrays, for the whole
    lines ``[first, last)``, by doubling: element ``i`` of :func:`runs` holds the
    extremum of the ``p`` elements from ``i``, and a window is two such (overlapping)
    runs. Each step is contiguous and vectorises; a window costs ``log2(size)`` steps."""
    n = x.shape[1]
    size = before + after + 1
    length = n + size - 1
    values = np.empty(length, x.dtype)
    spare = np.empty(length, x.dtype)
    for line in range(first, last):
        read_line(x, line, before, mode, cval, values)
        run, result = runs(values, spare, size, largest)
        combine(result[:n], result[size - run : size - run + n], out[line], largest, to)


@inline
def padded_columns(n, kn, before, mode):
    """The columns ``[-before, n + kn - 1 - before)`` of a row of ``n``, folded by ``mode``
    (-1 for ``cval``): where a box of ``kn`` reaching ``before`` back reads."""
    cols = np.empty(n + kn - 1, np.intp)
    for c in range(cols.size):
        cols[c] = fold(c - before, n, mode)
    return cols


@inline
def rows_extremum(x, b, rows, count, dest, largest):
    """``dest[c]`` = the extremum of ``x[b, j, c]`` over the rows ``j`` in ``rows[:count]``
    (at least one): four rows in the first sweep, three more per sweep after."""
    last = count - 1
    r0, r1 = x[b, rows[0]], x[b, rows[min(1, last)]]
    r2, r3 = x[b, rows[min(2, last)]], x[b, rows[min(3, last)]]
    for c in range(dest.size):
        pair = better(r2[c], r3[c], largest)
        dest[c] = better(better(r0[c], r1[c], largest), pair, largest)
    for q in range(4, count, 3):
        r1, r2, r3 = x[b, rows[q]], x[b, rows[min(q + 1, last)]], x[b, rows[min(q + 2, last)]]
        for c in range(dest.size):
            pair = better(r2[c], r3[c], largest)
            dest[c] = better(better(dest[c], r1[c], largest), pair, largest)


@inline
def padded_ends(values, cols, before, n, cval):
    """The padded columns of the row buffer ``values`` (``[0, before)`` and from
    ``before + n``), copied from its middle ``values[before : before + n]`` (a column's
    extremum over the box's rows) at the columns ``cols`` folds them to (-1: ``cval``).

    A folded column is the same column of the frame over the same rows: copying it spares
    comparing the box's rows again, scattered, at each of the ``kn - 1`` padded columns
    (2048x2048 uint8 15x15, 2 threads: a quarter of the box's time).
    """
    for c in range(values.size - n):
        c += 0 if c < before else n
        j = cols[c]
        values[c] = cval if j < 0 else values[before + j]


@inline
def along_row(values, spare, n, kn, largest, out, b, i, to):
    """``out[b, i, j]`` = the extremum of ``values[j : j + kn]``: :func:`runs` doubles up to
    runs of ``p``, the least power of two with ``4 * p >= kn``, then the window is four
    (overlapping, or repeated) runs, read in one sweep straight into the output."""
    target = 1
    while 4 * target < kn:
        target *= 2
    run, result = runs(values, spare, target, largest)
    o1, o2, o3 = min(run, kn - run), min(2 * run, kn - run), min(3 * run, kn - run)
    s0, s1, s2, s3 = result[:n], result[o1 : o1 + n], result[o2 : o2 + n], result[o3 : o3 + n]
    row = out[b, i]
    for c in range(n):
        pair = better(s2[c], s3[c], largest)
        row[c] = store_as(better(better(s0[c], s1[c], largest), pair, largest), to)


@jit
def extremum_box(x, out, cval, first, last, reach, kn, mode, largest, to):
    """``out[b, i, j]`` = the minimum (or maximum, ``largest``) of the 2-D box around it,
    in one pass over memory, two output rows at a time: the extremum of the ``k0 - 1``
    rows their boxes share (:func:`rows_extremum`, vectorised, up to four rows per
    sweep), then of that with each one's own first or last row, into a row buffer
    (its ends padded from it by the mode, :func:`padded_ends`) that stays in L1; then
    along it by :func:`along_row`. Each sweep indexes whole arrays: a view per row and
    sweep (Numba's reference counts) cost more than the sweeps themselves. Under
    ``constant``, rows outside the frame are left out of the sweeps and ``cval`` is
    taken in after.

    ``x`` and ``out`` are ``(batch, a0, n)``, rows and ``reach`` as :func:`box_mean`'s.
    """
    a0, n = x.shape[1], x.shape[2]
    b0, k0, bn = reach[0], reach[1], reach[4]
    width = n + kn - 1
    cols = padded_columns(n, kn, bn, mode)
    rows = np.empty(k0 + 1, np.intp)
    inside = np.empty(k0, np.intp)
    common = np.empty(n, x.dtype)
    values = np.empty(width, x.dtype)
    spare = np.empty(width, x.dtype)
    t = first
    while t < last:
        b, i = t // a0, t % a0
        pair = 2 if i + 1 < a0 and t + 1 < last else 1
        for q in range(k0 + pair - 1):
            rows[q] = fold(i - b0 + q, a0, mode)
        shared = 0  # the rows of the frame among the shared ones
        for q in range(1, k0):
            if rows[q] >= 0:
                inside[shared] = rows[q]
                shared += 1
        if shared > 0:
            rows_extremum(x, b, inside, shared, common, largest)
        for p in range(pair):
            own = rows[p * k0]
            middle = values[bn : bn + n]
            if own >= 0:
                source = x[b, own]
                if shared > 0:
                    for c in range(n):
                        middle[c] = better(common[c], source[c], largest)
                else:
                    copy(source, middle)
            elif shared > 0:
                copy(common, middle)
            if shared == 0 and own < 0:
                middle[:] = cval
            elif shared < k0 - 1 or own < 0:
                for c in range(n):
                    middle[c] = better(middle[c], cval, largest)
            padded_ends(values, cols, bn, n, cval)
            along_row(values, spare, n, kn, largest, out, b, i + p, to)
        t += pair


@inline
def median3(a, b, c):
    """The median of three values."""
    return max(min(a, b), min(max(a, b), c))


@inline
def sort3(a, b, c):
    """``(lowest, middle, highest)`` of three values: three compare-exchanges."""
    lo, hi = min(a, b), max(a, b)
    rest = max(lo, c)
    return min(lo, c), min(hi, rest), max(hi, rest)


@inline
def median_of_columns(left, centre, right):
    """The median of nine values given as three sorted columns of three (Paeth): the
    median of the highest low, the median middle and the lowest high."""
    lows = max(max(left[0], centre[0]), right[0])
    highs = min(min(left[2], centre[2]), right[2])
    return median3(lows, median3(left[1], centre[1], right[1]), highs)


@inline
def sorted_column(r0, r1, r2, j, cval):
    """Column ``j`` of rows ``r0``, ``r1``, ``r2`` sorted; ``cval`` thrice for ``j`` -1."""
    if j < 0:
        return cval, cval, cval
    return sort3(r0[j], r1[j], r2[j])


@jit
def median_box3(x, out, cval, first, last, mode, to):
    """``out[b, i, j]`` = the median of the 3x3 box around it, by Paeth's median of
    three sorted columns (:func:`median_of_columns`). Each point sorts its three columns
    itself, from three views of each row shifted by a column: 18 compare-exchanges in
    registers. Sorting each column once into three row buffers and reading them back
    cost more in loads and stores than it saved, and the buffers crowded L1 beside 16-bit
    rows: 2048x2048, 1 thread, one process, interleaved, buffers / registers ms: uint8
    1.00-1.26 / 0.95-1.09, uint16 2.17-2.45 / 1.56-1.93, float32 4.35-4.48 / 3.44-3.53.
    Only the first and last columns fold.

    ``x`` and ``out`` are ``(batch, a0, n)``; rows as :func:`box_mean`'s.
    """
    a0, n = x.shape[1], x.shape[2]
    m = max(n - 2, 0)  # the points whose columns are all inside
    outside = np.full(n, cval, x.dtype)  # a row of cval, under constant
    for t in range(first, last):
        b, i = t // a0, t % a0
        above, below = fold(i - 1, a0, mode), fold(i + 1, a0, mode)
        r0 = x[b, above] if above >= 0 else outside
        r1 = x[b, i]
        r2 = x[b, below] if below >= 0 else outside
        row = out[b, i]
        up_l, up_c, up_r = r0[:m], r0[1 : m + 1], r0[2 : m + 2]
        at_l, at_c, at_r = r1[:m], r1[1 : m + 1], r1[2 : m + 2]
        down_l, down_c, down_r = r2[:m], r2[1 : m + 1], r2[2 : m + 2]
        inner = row[1 : m + 1]
        for c in range(m):
            left = sort3(up_l[c], at_l[c], down_l[c])
            centre = sort3(up_c[c], at_c[c], down_c[c])
            right = sort3(up_r[c], at_r[c], down_r[c])
            inner[c] = store_as(median_of_columns(left, centre, right), to)
        for c in range(0, n, max(n - 1, 1)):  # the first and last
            left = sorted_column(r0, r1, r2, fold(c - 1, n, mode), cval)
            centre = sorted_column(r0, r1, r2, c, cval)
            right = sorted_column(r0, r1, r2, fold(c + 1, n, mode), cval)
            row[c] = store_as(median_of_columns(left, centre, right), to)


@inline
def gather(x, b, i0, i1, reach, mode, cval, values):
    """The window's lines around ``x[b, i0, i1, :]``, folded: ``values[q, r]`` is line ``q``
    (``q = q0 * k1 + q1``) at ``r - before`` along the last axis."""
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    b0, k0, b1, k1, bn = reach
    length = values.shape[1]
    for q0 in range(k0):
        j0 = fold(i0 - b0 + q0, a0, mode)
        for q1 in range(k1):
            j1 = fold(i1 - b1 + q1, a1, mode)
            q = q0 * k1 + q1
            if j0 < 0 or j1 < 0:
                for r in range(length):
                    values[q, r] = cval
                continue
            for r in range(min(bn, length)):
                j = fold(r - bn, n, mode)
                values[q, r] = cval if j < 0 else x[b, j0, j1, j]
            inside = min(n, length - bn)
            copy(x[b, j0, j1, :inside], values[q, bn : bn + inside])
            for r in range(bn + inside, length):
                j = fold(r - bn, n, mode)
                values[q, r] = cval if j < 0 else x[b, j0, j1, j]


#: Points of a row that :func:`rank_network` sorts together (its buffer stays in L1).
NETWORK_BLOCK = 128


@jit
def rank_network(x, out, cval, first, last, reach, kn, rank, mode, to, points, pairs, key):
    """``out[b, i0, i1, i]`` = the value of ``rank`` among the window around it, by a
    selection network given as data.

    ``x`` and ``out`` are ``(batch, a0, a1, n)``; rows ``t = b * a0 + i0`` in
    ``[first, last)``; ``reach`` is ``(before0, size0, before1, size1, before_n)`` of the
    box holding the window, ``kn`` the box's size along the last axis, ``points`` the
    window's places in the box (flat, C order). ``pairs`` (the compare-exchanges,
    ``(count, 2)``) run in a loop, each over a block of a row's points at once, which
    vectorises. Compiled once per dtype whatever the network, where a network written
    out per window compiles for 10-25 s (7x7) and runs about as fast. The network sorts
    order keys of type ``key``'s (:mod:`.order`; a float's compare-exchanges in place do
    not vectorise, an integer's do: pass a value of ``x``'s own type for integers)."""
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    lines = reach[1] * reach[3]
    values = np.empty((lines, n + kn - 1), x.dtype)
    work = np.full((points.size, NETWORK_BLOCK), key)
    for t in range(first, last):
        b, i0 = t // a0, t % a0
        for i1 in range(a1):
            gather(x, b, i0, i1, reach, mode, cval, values)
            for start in range(0, n, NETWORK_BLOCK):
                m = min(NETWORK_BLOCK, n - start)
                for k in range(points.size):
                    q, r = points[k] // kn, points[k] % kn
                    line, keys = values[q, start + r : start + r + m], work[k]
                    for i in range(m):
                        keys[i] = order_key(line[i], key)
                for p in range(pairs.shape[0]):
                    low, high = work[pairs[p, 0]], work[pairs[p, 1]]
                    for i in range(m):
                        u, v = low[i], high[i]
                        low[i], high[i] = min(u, v), max(u, v)
                for i in range(m):
                    out[b, i0, i1, start + i] = store_as(from_order_key(work[rank, i], cval), to)


#: log2 of the width of :func:`rank_histogram`'s middle bins.
MIDDLE = 4


@inline
def count(fine, middle, coarse, shift, bin, step):
    fine[bin] += step
    if middle is not None:
        middle[bin >> MIDDLE] += step
    coarse[bin >> shift] += step


@jit
def rank_histogram(
    x, out, cval, first, last, reach, kn, rank, mode, to, runs, low, shift, middling
):
    """As :func:`rank_network`, for 8- and 16-bit values: a histogram of the window slides
    along the line (Huang's algorithm) and the rank's value moves with it, over whole
    coarse bins (``2**shift`` values each) and, unless ``middling`` is None, middle bins
    (``2**MIDDLE`` values) where it can (Perreault and Hebert's levels; the middle one for
    16-bit values, whose rank moves by hundreds of values per step in noisy data: 15x15
    on 256x512 uint16, 1 thread, 35 -> 24 ms; 8-bit values are faster without it). None
    prunes the middle level at compile time. The window is ``runs``, rows ``(line, first,
    stop)``: the places ``[first, stop)`` along the last axis of the box's line ``line``;
    each run adds one value and drops one per step. ``low`` is the dtype's smallest
    value (bin 0)."""
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    lines = reach[1] * reach[3]
    values = np.empty((lines, n + kn - 1), x.dtype)
    bins = 1 << (8 * x.itemsize)
    fine = np.zeros(bins, np.int32)
    middle = None if middling is None else np.zeros(bins >> MIDDLE, np.int32)
    coarse = np.zeros(bins >> shift, np.int32)
    width = 1 << shift
    step = 1 << MIDDLE
    for t in range(first, last):
        b, i0 = t // a0, t % a0
        for i1 in range(a1):
            gather(x, b, i0, i1, reach, mode, cval, values)
            for u in range(runs.shape[0]):
                for r in range(runs[u, 1], runs[u, 2]):
                    bin = np.int32(values[runs[u, 0], r]) - low
                    count(fine, middle, coarse, shift, bin, 1)
            # Invariant: ``below`` values of the window are smaller than ``value``.
            value, below = 0, 0
            for i in range(n):
                if i > 0:
                    for u in range(runs.shape[0]):
                        q = runs[u, 0]
                        gone = np.int32(values[q, i - 1 + runs[u, 1]]) - low
                        count(fine, middle, coarse, shift, gone, -1)
                        below -= gone < value
                        new = np.int32(values[q, i - 1 + runs[u, 2]]) - low
                        count(fine, middle, coarse, shift, new, 1)
                        below += new < value
                while below > rank:
                    if value & (width - 1) == 0 and below - coarse[(value >> shift) - 1] > rank:
                        value -= width
                        below -= coarse[value >> shift]
                    elif (
                        middle is not None
                        and value & (step - 1) == 0
                        and below - middle[(value >> MIDDLE) - 1] > rank
                    ):
                        value -= step
                        below -= middle[value >> MIDDLE]
                    else:
                        value -= 1
                        below -= fine[value]
                while below + fine[value] <= rank:
                    if value & (width - 1) == 0 and below + coarse[value >> shift] <= rank:
                        below += coarse[value >> shift]
                        value += width
                    elif (
                        middle is not None
                        and value & (step - 1) == 0
                        and below + middle[value >> MIDDLE] <= rank
                    ):
                        below += middle[value >> MIDDLE]
                        value += step
                    else:
                        below += fine[value]
                        value += 1
                out[b, i0, i1, i] = store_as(value + low, to)
            for u in range(runs.shape[0]):  # empty the histogram for the next line
                for r in range(n - 1 + runs[u, 1], n - 1 + runs[u, 2]):
                    bin = np.int32(values[runs[u, 0], r]) - low
                    count(fine, middle, coarse, shift, bin, -1)


#: Output columns per stripe of :func:`rank_columns`: its column histograms (about 70 KiB
#: for a 15-wide window) stay in L2.
STRIPE = 128


@inline
def add_row(x, b, j0, cols, lo, span, cval, low, fine, coarse, step):
    """Add (``step`` 1) or remove (-1) row ``j0`` (-1: ``cval``) of frame ``b`` to the column
    histograms ``fine`` and ``coarse`` of the padded columns ``[lo, lo + span)``."""
    for c in range(span):
        j = cols[lo + c]
        v = cval if j0 < 0 or j < 0 else x[b, j0, 0, j]
        bin = np.int32(v) - low
        fine[c, bin] += step
        coarse[c, bin >> 4] += step


@jit
def rank_columns(x, out, cval, first, last, reach, kn, rank, mode, to, low):
    """As :func:`rank_histogram` for 8-bit values and a 2-D box, in constant time per point
    (Perreault and Hebert, as OpenCV's ``medianBlur`` for 8-bit windows above 5x5): each
    padded column keeps a histogram of its window's rows, updated by one value removed and
    one added per row; the window's histogram moves along the row by one column's added
    and one's removed, 16 coarse bins at a time, and each block of 16 fine bins is brought
    up to date only when the rank falls into it. Rows split across threads as the others'.

    A block of 16 counts (uint16) moves as 4 uint64 words: no count of a window or column
    leaves uint16 (the window is under 2**16 elements) and the window plus the column
    entering holds the column leaving, so no lane carries or borrows into the next, and
    the 4 word operations are those of 16 lanes (LLVM does not vectorise a loop of 16
    over arrays it cannot tell apart).

    ``x`` and ``out`` are ``(batch, a0, 1, n)``; ``low`` is the dtype's smallest value.
    """
    a0, n = x.shape[1], x.shape[3]
    b0, k0, bn = reach[0], reach[1], reach[4]
    cols = np.empty(n + kn - 1, np.intp)
    for c in range(cols.size):
        cols[c] = fold(c - bn, n, mode)
    fine = np.zeros((STRIPE + kn - 1, 256), np.uint16)
    coarse = np.zeros((STRIPE + kn - 1, 16), np.uint16)
    fine_words, coarse_words = fine.view(np.uint64), coarse.view(np.uint64)
    window_fine = np.zeros((16, 16), np.uint16)
    window_coarse = np.zeros(16, np.uint16)
    window_words, block_words = window_coarse.view(np.uint64), window_fine.view(np.uint64)
    since = np.empty(16, np.intp)  # the window's first column when block k was updated
    t = first
    while t < last:
        b, top = t // a0, t % a0
        bottom = min(a0, top + last - t)
        for lo in range(0, n, STRIPE):
            m = min(STRIPE, n - lo)
            span = m + kn - 1
            fine_words[:span] = 0
            coarse_words[:span] = 0
            for q in range(k0):
                j0 = fold(top - b0 + q, a0, mode)
                add_row(x, b, j0, cols, lo, span, cval, low, fine, coarse, 1)
            for i in range(top, bottom):
                if i > top:
                    gone = fold(i - b0 - 1, a0, mode)
                    add_row(x, b, gone, cols, lo, span, cval, low, fine, coarse, -1)
                    new = fold(i - b0 + k0 - 1, a0, mode)
                    add_row(x, b, new, cols, lo, span, cval, low, fine, coarse, 1)
                window_words[:] = 0
                since[:] = -kn
                for c in range(kn):
                    for w in range(4):
                        window_words[w] += coarse_words[c, w]
                for j in range(m):
                    if j > 0:
                        for w in range(4):
                            window_words[w] += coarse_words[j + kn - 1, w]
                            window_words[w] -= coarse_words[j - 1, w]
                    k, below = 0, 0
                    while below + window_coarse[k] <= rank:
                        below += window_coarse[k]
                        k += 1
                    if j - since[k] >= kn:
                        for w in range(4):
                            block_words[k, w] = 0
                        for c in range(j, j + kn):
                            for w in range(4):
                                block_words[k, w] += fine_words[c, 4 * k + w]
                    else:
                        for c in range(since[k], j):
                            for w in range(4):
                                block_words[k, w] += fine_words[c + kn, 4 * k + w]
                                block_words[k, w] -= fine_words[c, 4 * k + w]
                    since[k] = j
                    v = 0
                    while below + window_fine[k, v] <= rank:
                        below += window_fine[k, v]
                        v += 1
                    out[b, i, 0, lo + j] = store_as(16 * k + v + low, to)
        t += bottom - top


@inline
def padded_keys(x, b, j0, j1, cols, cval_key, keys):
    """The order keys of line ``(j0, j1)`` of frame ``b`` (-1: ``cval``) at the padded
    columns ``cols`` (folded, -1 for ``cval``), into ``keys``."""
    for c in range(cols.size):
        j = cols[c]
        inside = j0 >= 0 and j1 >= 0 and j >= 0
        keys[c] = order_key(x[b, j0, j1, j], cval_key) if inside else cval_key


@inline
def insert_sorted(column, filled, key):
    """Insert ``key`` into ``column[1 : filled + 1]``, sorted, below the sentinel
    ``column[0]``."""
    i = filled + 1
    while column[i - 1] > key:
        column[i] = column[i - 1]
        i -= 1
    column[i] = key


@inline
def replace_sorted(column, gone, new):
    """Replace one ``gone`` of sorted ``column`` (between sentinels) by ``new``, sorted."""
    i = 1
    while column[i] != gone:
        i += 1
    while column[i + 1] < new:
        column[i] = column[i + 1]
        i += 1
    while column[i - 1] > new:
        column[i] = column[i - 1]
        i -= 1
    column[i] = new


@inline
def replace_line(x, b, gone, new, cols, cval_key, gone_keys, new_keys, columns):
    """Replace line ``gone`` (``(j0, j1)``, folded) of frame ``b`` by line ``new`` in every
    sorted column."""
    padded_keys(x, b, gone[0], gone[1], cols, cval_key, gone_keys)
    padded_keys(x, b, new[0], new[1], cols, cval_key, new_keys)
    for c in range(cols.size):
        replace_sorted(columns[c], gone_keys[c], new_keys[c])


@inline
def select_along(columns, split, lower, upper, kn, rank, bounds, like, to, out_line):
    """``out_line[j]`` = the key of ``rank`` among the sorted columns ``[j, j + kn)``, as a
    value of ``like``'s type stored by :func:`store_as` (see :func:`rank_sorted_columns`);
    ``bounds`` are the sentinels."""
    lowest, highest = bounds
    m = columns.shape[1] - 2
    split[:kn] = 1
    for c in range(kn):
        lower[c], upper[c] = lowest, columns[c, 1]
    below = 0
    result = lowest
    for j in range(out_line.size):
        if j > 0:
            below -= split[j - 1] - 1
            c = j + kn - 1
            smaller = 0
            for r in range(1, m + 1):
                smaller += columns[c, r] < result
            split[c] = 1 + smaller
            lower[c], upper[c] = columns[c, smaller], columns[c, smaller + 1]
            below += smaller
        if below > rank:
            # The largest key below the split, moved above it, is the smallest there.
            while below > rank:
                result, at = lowest, j
                for c in range(j, j + kn):
                    if lower[c] > result:
                        result, at = lower[c], c
                split[at] -= 1
                upper[at], lower[at] = result, columns[at, split[at] - 1]
                below -= 1
        else:
            while below < rank:
                least, at = highest, j
                for c in range(j, j + kn):
                    if upper[c] < least:
                        least, at = upper[c], c
                split[at] += 1
                lower[at], upper[at] = least, columns[at, split[at]]
                below += 1
            result = highest
            for c in range(j, j + kn):
                result = min(result, upper[c])
        out_line[j] = store_as(from_order_key(result, like), to)


@jit
def rank_sorted_columns(x, out, cval, first, last, reach, kn, rank, mode, to, lowest, highest):
    """As :func:`rank_network` for a 2-D or 3-D box of any dtype with order keys
    (:mod:`.order`), in time that grows with the box's width, not its size: each padded
    column of the window (its elements at one place along the last axis) is kept sorted,
    and the window's ``rank`` smallest keys are, per column, a prefix of it (``split``).
    Stepping along the line drops one column's prefix and adds the new column's keys below
    the last result; the rank then moves by at most the column's height, one key at a time
    (the largest below the split up, or the smallest above it down), and the result is the
    smallest key above the split. The window moves between lines by one line of the box
    replaced per column and plane (``a1``), back and forth through each frame's planes and
    rows, and is sorted from scratch only at the start of each range of rows.

    ``x`` and ``out`` are ``(batch, a0, a1, n)``; ``lowest`` and ``highest`` are the
    sentinels below and above every key, of the key type. NaN ranks above ``inf``, as in
    ``np.sort``."""
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    b0, k0, b1, k1, bn = reach
    span = n + kn - 1
    cols = np.empty(span, np.intp)
    for c in range(span):
        cols[c] = fold(c - bn, n, mode)
    columns = np.full((span, k0 * k1 + 2), lowest)
    columns[:, -1] = highest
    split = np.empty(span, np.intp)
    lower, upper = np.full(span, lowest), np.full(span, lowest)  # each column's keys by the split
    gone_keys, new_keys = np.full(span, lowest), np.full(span, lowest)
    cval_key = order_key(cval, lowest)
    bounds = (lowest, highest)
    t = first
    while t < last:
        b, top = t // a0, t % a0
        bottom = min(a0, top + last - t)
        for i0 in range(top, bottom):
            forward = (i0 - top) % 2 == 0
            for s in range(a1):
                i1 = s if forward else a1 - 1 - s
                if i0 == top and s == 0:
                    for q0 in range(k0):
                        j0 = fold(i0 - b0 + q0, a0, mode)
                        for q1 in range(k1):
                            j1 = fold(i1 - b1 + q1, a1, mode)
                            padded_keys(x, b, j0, j1, cols, cval_key, new_keys)
                            for c in range(span):
                                insert_sorted(columns[c], q0 * k1 + q1, new_keys[c])
                elif s == 0:  # one plane down: each row of the box's first plane leaves
                    gone0, new0 = fold(i0 - 1 - b0, a0, mode), fold(i0 - 1 - b0 + k0, a0, mode)
                    for q1 in range(k1):
                        j1 = fold(i1 - b1 + q1, a1, mode)
                        line_gone, line_new = (gone0, j1), (new0, j1)
                        replace_line(
                            x, b, line_gone, line_new, cols, cval_key, gone_keys, new_keys, columns
                        )
                else:  # one row on, forward or back: a row of each plane leaves
                    step = 1 if forward else -1
                    edge = i1 - step - b1 + (0 if forward else k1 - 1)
                    gone1, new1 = fold(edge, a1, mode), fold(edge + step * k1, a1, mode)
                    for q0 in range(k0):
                        j0 = fold(i0 - b0 + q0, a0, mode)
                        line_gone, line_new = (j0, gone1), (j0, new1)
                        replace_line(
                            x, b, line_gone, line_new, cols, cval_key, gone_keys, new_keys, columns
                        )
                select_along(
                    columns, split, lower, upper, kn, rank, bounds, cval, to, out[b, i0, i1]
                )
        t += bottom - top


@inline
def padded_row(x, b, j0, cols, before, cval, row):
    """Row ``j0`` of frame ``b`` (-1: ``cval``) at the padded columns ``cols`` (folded,
    -1 for ``cval``; the frame's own from ``before``), into ``row``."""
    n = x.shape[3]
    if j0 < 0:
        row[:] = cval
        return
    for c in range(before):
        row[c] = cval if cols[c] < 0 else x[b, j0, 0, cols[c]]
    copy(x[b, j0, 0], row[before : before + n])
    for c in range(before + n, cols.size):
        row[c] = cval if cols[c] < 0 else x[b, j0, 0, cols[c]]


@jit
def box_mean(x, out, cval, first, last, reach, kn, mode, to, sums, scale):
    """``out[b, i, 0, j]`` = the sum of the 2-D box around it, divided by ``scale[0]`` in
    ``scale``'s float type and stored by :func:`store_as` (rounded to nearest, half to
    even), for integer ``x``: column sums of the box's rows, moved down by one row added
    and one removed, and along the row by one column added and one removed, in the
    integer type of ``sums`` (a buffer of ``n + kn - 1``), so its time does not grow with
    the box. The caller picks types in which both are exact (see :class:`.windows.BoxMean`).

    ``x`` and ``out`` are ``(batch, a0, 1, n)``, rows and ``reach`` as :func:`rank_network`'s.
    """
    a0, n = x.shape[1], x.shape[3]
    b0, k0, bn = reach[0], reach[1], reach[4]
    width = n + kn - 1
    cols = padded_columns(n, kn, bn, mode)
    entering = np.empty(width, sums.dtype)
    leaving = np.empty(width, sums.dtype)
    along = np.empty(n, scale.dtype)
    divisor = scale[0]
    t = first
    while t < last:
        b, top = t // a0, t % a0
        bottom = min(a0, top + last - t)
        sums[:] = 0
        for q in range(k0):
            padded_row(x, b, fold(top - b0 + q, a0, mode), cols, bn, cval, entering)
            for c in range(width):
                sums[c] += entering[c]
        for i in range(top, bottom):
            if i > top:
                padded_row(x, b, fold(i - b0 - 1, a0, mode), cols, bn, cval, leaving)
                padded_row(x, b, fold(i - b0 + k0 - 1, a0, mode), cols, bn, cval, entering)
                for c in range(width):
                    sums[c] += entering[c] - leaving[c]
            total = 0
            for c in range(kn):
                total += sums[c]
            along[0] = total
            for j in range(1, n):  # one dependent addition per step; the divisions apart
                total += sums[j + kn - 1] - sums[j - 1]
                along[j] = total
            row = out[b, i, 0]
            for j in range(n):
                row[j] = store_as(along[j] / divisor, to)
        t += bottom - top


@inline
def store_c(value, to, bits, signed):
    """A double stored in ``to`` as scipy's C code stores it: cast for floats (``bits``
    0); for integers of ``bits`` bits, truncated through int32's range (outside it,
    int32's minimum) and wrapped (see :func:`stencilpipe.ndfilters._casting.store_lines`)."""
    if bits == 0:
        return cast(value, to)
    if -2147483649.0 < value < 2147483648.0:
        v = np.int64(np.int32(value))  # AVX2 converts doubles to int32 packed, to int64 not
    else:
        v = np.int64(-2147483648)
    if bits == 32:
        return cast(v, to)
    mask = (1 << bits) - 1
    if signed:
        half = 1 << (bits - 1)
        return cast(((v + half) & mask) - half, to)
    return cast(v & mask, to)


@inline
def store_all(values, target, to, bits, signed):
    """``target[i]`` = :func:`store_c` of ``values[i]``, in a loop per kind of store (with
    ``bits`` and ``signed`` tested inside one loop, LLVM vectorised none of it)."""
    if bits == 0:
        for i in range(target.size):
            target[i] = cast(values[i], to)
    elif signed:
        for i in range(target.size):
            target[i] = store_c(values[i], to, bits, True)
    else:
        for i in range(target.size):
            target[i] = store_c(values[i], to, bits, False)


@inline
def sum_row(total, x, line, j, cval, acc):
    """``total[w] += x[line, j, w]`` in ``acc``; ``cval`` for ``j`` below 0 (outside)."""
    if j >= 0:
        a = x[line, j]
        for w in range(total.size):
            total[w] += acc(a[w])
    else:
        for w in range(total.size):
            total[w] += cval


@inline
def slide_rows(total, x, line, enter, leave, cval, acc):
    """``total[w] += row enter - row leave`` of ``x[line]``, each in ``acc``; a row index
    below 0 (outside, under ``constant``) is a row of ``cval``."""
    if enter >= 0 and leave >= 0:
        a, b = x[line, enter], x[line, leave]
        for w in range(total.size):
            total[w] += acc(a[w]) - acc(b[w])
    elif enter >= 0:
        a = x[line, enter]
        for w in range(total.size):
            total[w] += acc(a[w]) - cval
    elif leave >= 0:
        b = x[line, leave]
        for w in range(total.size):
            total[w] += cval - acc(b[w])
    else:
        for w in range(total.size):
            total[w] += cval - cval


@inline
def quotient(total, quot, divisor, scale, acc):
    """``total`` divided by the window's size ``divisor`` in ``quot``, in ``acc``:
    multiplied by ``scale`` where it is not None (a reciprocal that truncates as the
    division does, :func:`~.windows.truncating_reciprocal`; half a division's time).
    None prunes the branch at compile time: a branch on a value in the loop kept LLVM
    from vectorising it (the division went scalar)."""
    if scale is not None:
        return acc(quot(total) * scale)
    return acc(quot(total) / divisor)


@inline
def divide_store(sums, target, quot, divisor, scale, acc, to, bits, signed, means):
    """``target[i]`` = :func:`store_all` of :func:`quotient` of ``sums[i]``: in one loop
    for a plain cast (``bits`` 0), else through ``means`` (a buffer in ``acc``)."""
    if bits == 0:
        for i in range(target.size):
            target[i] = cast(quotient(sums[i], quot, divisor, scale, acc), to)
    else:
        for i in range(means.size):
            means[i] = quotient(sums[i], quot, divisor, scale, acc)
        store_all(means, target, to, bits, signed)


@inline
def slide_store(total, a, b, target, sums_type, quot, divisor, scale, acc, to):
    """:func:`slide_rows` of rows ``a`` (entering) and ``b`` (leaving), both inside, then
    :func:`divide_store` with a plain cast into ``target``, in one loop: 2048x2048, 1
    thread, interleaved, float32 5.0-5.5 -> 2.9-3.0 ms, uint16 2.2-2.6 -> 1.4-1.5 (three
    loops wrote and read two buffers)."""
    for w in range(total.size):
        t = sums_type(total[w] + (sums_type(a[w]) - sums_type(b[w])))  # not int64: AVX2
        total[w] = t  # converts no int64 to float
        target[w] = cast(quotient(t, quot, divisor, scale, acc), to)


@jit
def running_mean(
    x, out, cval, first, last, before, after, mode, to, bits, signed, acc, quot, sums_type, scale
):
    """``out[l, i, :]`` = the mean of ``x[l, i - before : i + after + 1, :]``, as scipy's
    ``uniform_filter1d`` computes it: a running sum in double (the first window summed
    in order, then the difference of the element entering and the one leaving added),
    divided at each output. Bit for bit scipy's where the range starts a line (each
    integer input: the sums are exact), in time independent of the window; a range from
    mid-line (a thread's share) starts a sum of its own, within rounding of scipy's.
    The window's rows are read in place, folded: 2048x2048 uint8, 31 rows, 2 threads,
    1.9 ms against 3.8 ms through a buffer of doubles.

    Positions and shapes as :func:`extremum`'s; the output stored by :func:`store_all`.
    ``acc`` and ``quot`` are the types of the sums and of the quotients: float64 (scipy's),
    or int32 and float32 where :func:`~.windows.narrow_mean` proved them exact (the
    quotients then truncated to int32, as the store would). ``sums_type`` is that of the
    running sums: ``acc``, or uint16 for uint8 windows of up to 257 (16 lanes of AVX2 where
    int32 has 8).
    """
    n, width = x.shape[1], x.shape[2]
    size = before + after + 1
    divisor = quot(size)
    fill = sums_type(cval)
    total = np.empty(width, sums_type)
    means = np.empty(width, acc)  # int32 quotients store faster than float32 ones
    position = first
    while position < last:
        line = position // n
        lo = position - line * n
        hi = min(n, lo + last - position)
        total[:] = 0
        for r in range(size):
            sum_row(total, x, line, fold(lo - before + r, n, mode), fill, sums_type)
        for i in range(lo, hi):
            if i > lo:
                enter, leave = fold(i + after, n, mode), fold(i - 1 - before, n, mode)
                if enter >= 0 and leave >= 0 and bits == 0:
                    a, b = x[line, enter], x[line, leave]
                    slide_store(total, a, b, out[line, i], sums_type, quot, divisor, scale, acc, to)
                    continue
                slide_rows(total, x, line, enter, leave, fill, sums_type)
            divide_store(total, out[line, i], quot, divisor, scale, acc, to, bits, signed, means)
        position = hi + line * n


#: Lines :func:`running_mean_lines` sums side by side: along one line each step of the
#: running sum is an addition that waits for the one before, so four lines' chains overlap
#: (its loop of the sums names the four, in registers: change both together).
LANES = 4


@inline
def line_changes(line, sums, before, after, mode, cval):
    """``sums[i]`` = the element entering the window of position ``i`` of ``line`` less the
    one leaving it (folded by ``mode``, ``cval`` outside), in double, for ``i >= 1``. The
    positions that fold nothing subtract views of the line, which LLVM vectorises (an
    index it cannot prove positive is wrapped, and the wrap is not vectorised)."""
    n = line.size
    lo = min(before + 1, n)
    hi = max(lo, n - after)
    entering, leaving, inside = line[lo + after : hi + after], line[: hi - lo], sums[lo:hi]
    for i in range(inside.size):
        inside[i] = np.float64(entering[i]) - np.float64(leaving[i])
    for i in range(1, lo):
        sums[i] = folded_change(line, i, before, after, mode, cval)
    for i in range(hi, n):
        sums[i] = folded_change(line, i, before, after, mode, cval)


@inline
def folded_change(line, i, before, after, mode, cval):
    """:func:`line_changes` at one position, its elements folded."""
    n = line.size
    j, h = fold(i + after, n, mode), fold(i - 1 - before, n, mode)
    enter = cval if j < 0 else np.float64(line[j])
    return enter - (cval if h < 0 else np.float64(line[h]))


@jit
def running_mean_lines(x, out, cval, first, last, before, after, mode, to, bits, signed):
    """As :func:`running_mean` along the last axis of ``(lines, n)`` arrays, for the whole
    lines ``[first, last)``, :data:`LANES` lines at a time: each line's changes (the
    element entering less the one leaving, vectorised), then the running sums of the
    lines side by side, then the quotients (vectorised) stored line by line. 2048x2048
    float32, 1 thread, one process, interleaved: 5 wide 22.5 -> 6.4 ms, 31 wide 24.1 ->
    6.0 against 16 lines gathered transposed through indices Numba wraps. Every line is
    summed from its start: bit for bit scipy's."""
    n = x.shape[1]
    if n == 0:
        return
    size = before + after + 1
    sums = np.empty((LANES, n), np.float64)
    for group in range(first, last, LANES):
        for k in range(LANES):
            line = x[min(group + k, last - 1)]  # a short group sums its last line again
            total = 0.0
            for r in range(size):
                j = fold(r - before, n, mode)
                total += cval if j < 0 else line[j]
            sums[k, 0] = total
            line_changes(line, sums[k], before, after, mode, cval)
        s0, s1, s2, s3 = sums[0], sums[1], sums[2], sums[3]
        t0, t1, t2, t3 = s0[0], s1[0], s2[0], s3[0]
        for i in range(1, n):  # the sums stay in registers: no store waited for
            t0 += s0[i]
            s0[i] = t0
            t1 += s1[i]
            s1[i] = t1
            t2 += s2[i]
            s2[i] = t2
            t3 += s3[i]
            s3[i] = t3
        for k in range(min(LANES, last - group)):
            means = sums[k]  # divided in place where the store needs a buffer
            target = out[group + k]
            divide_store(means, target, np.float64, size, None, np.float64, to, bits, signed, means)


@inline
def pair_sums(source, target, run):
    """``target[i]`` = ``source[i] + source[i + run]``, with a literal ``run`` (see
    :func:`doubled`)."""
    for i in range(source.size - run):
        target[i] = source[i] + source[i + run]


@inline
def add_runs(sums, runs, size, run, offset):
    """Where ``size`` has the binary digit ``run``, add to ``sums`` the sums of ``run``
    elements that start ``offset`` further on (``runs``); return the next offset."""
    if size & run:
        for i in range(sums.size):
            sums[i] += runs[i + offset]
        return offset + run
    return offset


@inline
def doubled_sums(runs, target, sums, size, run, offset):
    """When a window of ``size`` holds ``2 * run`` elements: the sums of ``2 * run``
    elements into ``target`` from the sums of ``run`` in ``runs`` (a literal ``run``:
    see :func:`doubled`), then :func:`add_runs` of them; return the next offset."""
    if size < 2 * run:
        return offset
    pair_sums(runs, target, run)
    return add_runs(sums, target, size, 2 * run, offset)


@inline
def window_sums(values, spare, sums, size):
    """``sums[i]`` = the sum of ``values[i : i + size]``, exact in integers, by doubling:
    sums of runs of 1, 2, 4, ... elements, each step one contiguous loop that vectorises,
    and a window the runs of its size's binary digits, one after the other (a running
    sum is a chain of dependent additions, one per element; this costs log2 of the
    window). ``values`` and ``spare``, of ``sums.size + size - 1`` elements, are
    overwritten."""
    for i in range(sums.size):
        sums[i] = 0
    offset = add_runs(sums, values, size, 1, 0)
    offset = doubled_sums(values, spare, sums, size, 1, offset)
    offset = doubled_sums(spare, values, sums, size, 2, offset)
    offset = doubled_sums(values, spare, sums, size, 4, offset)
    offset = doubled_sums(spare, values, sums, size, 8, offset)
    offset = doubled_sums(values, spare, sums, size, 16, offset)
    run, runs, target = 32, spare, values
    while 2 * run <= size:  # windows of 64 and more: rare, and scalar
        offset = doubled_sums(runs, target, sums, size, run, offset)
        run, runs, target = 2 * run, target, runs


@inline
def running_sums(values, sums, size):
    """``sums[i]`` = the sum of ``values[i : i + size]`` as a running sum: one dependent
    addition per element, which wide sums (int64: 8 lanes of AVX-512) do faster than the
    steps of :func:`window_sums` (2048x2048 int32 along lines, 15 wide, 1 thread, two runs
    of ``benchmarks/windows.py --running-mean``: 6.3 ms against 11.0)."""
    total = 0
    for r in range(size):
        total += values[r]
    sums[0] = total
    for i in range(1, sums.size):
        total += values[i + size - 1] - values[i - 1]
        sums[i] = total


@jit
def running_mean_integers(
    x, out, cval, first, last, before, after, mode, to, bits, signed, acc, quot, sums_type, scale
):
    """As :func:`running_mean_lines` for integer ``x``, one line at a time: its window
    sums in ``sums_type`` (exact, as scipy's sums in double of integers are, so bit for
    bit scipy's): by :func:`window_sums` in uint16 (uint8 windows of up to 257) or int32
    (where :func:`~.windows.narrow_mean` allows), by :func:`running_sums` in int64; then
    the divisions (``acc`` and ``quot`` as for :func:`running_mean`) and the stores.
    2048x2048 uint8, 31 wide, 1 thread, quiet machine: 3.75-3.9 ms with a running sum in
    int64, 2.4-2.6 ms with uint16 sums by doubling.
    """
    n = x.shape[1]
    size = before + after + 1
    divisor = quot(size)
    values = np.empty(n + size - 1, sums_type)
    spare = np.empty(n + size - 1, sums_type)
    sums = np.empty(n, sums_type)
    means = np.empty(n, acc)
    for line in range(first, last):
        read_line(x, line, before, mode, cval, values)
        if values.itemsize < 8:
            window_sums(values, spare, sums, size)
        else:
            running_sums(values, sums, size)
        divide_store(sums, out[line], quot, divisor, scale, acc, to, bits, signed, means)


@jit
def extremum_points(x, out, cval, first, last, reach, kn, rank, mode, to, points, largest):
    """As :func:`rank_network` for the minimum or maximum (``largest``; ``rank`` is 0 or the
    last) of the window: one comparison per place and point, a block of a row's points at
    a time (vectorised)."""
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    lines = reach[1] * reach[3]
    values = np.empty((lines, n + kn - 1), x.dtype)
    best = np.empty(NETWORK_BLOCK, x.dtype)
    for t in range(first, last):
        b, i0 = t // a0, t % a0
        for i1 in range(a1):
            gather(x, b, i0, i1, reach, mode, cval, values)
            for start in range(0, n, NETWORK_BLOCK):
                m = min(NETWORK_BLOCK, n - start)
                q, r = points[0] // kn, points[0] % kn
                copy(values[q, start + r : start + r + m], best[:m])
                for k in range(1, points.size):
                    q, r = points[k] // kn, points[k] % kn
                    row = values[q, start + r : start + r + m]
                    for i in range(m):
                        best[i] = better(best[i], row[i], largest)
                for i in range(m):
                    out[b, i0, i1, start + i] = store_as(best[i], to)
