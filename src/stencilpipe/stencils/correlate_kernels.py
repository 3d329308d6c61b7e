"""The loops of :mod:`.correlate_passes`: scipy's ``correlate1d`` and ``correlate`` with
the weights given as data, so one compiled loop serves every kernel of a dtype.

Each point sums in double, in scipy's order (``ni_filters.c``). In 1-D, symmetric (or
antisymmetric) odd weights add the centre's term first, then ``(x[-k] +/- x[k]) *
w[-k]`` from the outside in; other weights the last term first, then the others from
the first. In N-D, the terms from 0.0 in the footprint's order. The loops run that sum
for a whole row at a time, one weight after another, so each step is one vectorised
sweep over the row, and each point still adds its terms in scipy's order: the results
are scipy's doubles, stored as scipy's C code stores them
(:func:`.window_kernels.store_all`). A sweep per term loads and stores the row's sums
each time: 1.4-2.7x the time of a kernel written out per weights (which sums each point
in registers), for a compile once per dtype instead of once per weights; the CPU runs
them on small calls (:data:`.stencil.SMALL_CALL`), and across rows that share cache sets
(:func:`.stencil.rows_share_sets`), where a kernel written out is slower (see
:data:`.stencil.ACROSS_ROWS`).

:mod:`.correlate_passes` loads this file as a generated module
(:func:`.modules.load_module`), so Numba's disk cache of it lives, and is locked, with
the kernels' own.
"""

import numba
import numpy as np

from stencilpipe.stencils.windows import window_loops

_SP_CACHE = True
jit = numba.njit(cache=_SP_CACHE, nogil=True)

#: The bytes of the ring of rows :func:`correlate` keeps in cache (half a 512 KiB L2), and
#: the fewest elements of a strip (a sweep long enough to vectorise).
STRIP_BYTES = 1 << 18
STRIP_MIN = 64

_loops = window_loops()
fold = _loops.fold
gather = _loops.gather
read_line = _loops.read_line
store_all = _loops.store_all


@jit
def correlate_line(acc, lines, qs, ss, weights, symmetry):
    """``acc`` = scipy's 1-D correlation with ``weights`` at each point of a row, where the
    values term ``k`` multiplies are line ``qs[k]`` of ``lines`` from ``ss[k]``: for
    (anti)symmetric weights the centre's term, then the pairs from the outside in; else
    the last term, then the others from the first. One sweep of the row per term."""
    n, size = acc.size, weights.size
    last = size // 2 if symmetry != 0 else size - 1
    a, weight = lines[qs[last], ss[last] : ss[last] + n], weights[last]
    for i in range(n):
        acc[i] = np.float64(a[i]) * weight
    for k in range(last):
        a, weight = lines[qs[k], ss[k] : ss[k] + n], weights[k]
        if symmetry == 0:
            for i in range(n):
                acc[i] += np.float64(a[i]) * weight
            continue
        m = size - 1 - k
        b = lines[qs[m], ss[m] : ss[m] + n]
        if symmetry > 0:
            for i in range(n):
                acc[i] += (np.float64(a[i]) + np.float64(b[i])) * weight
        else:
            for i in range(n):
                acc[i] += (np.float64(a[i]) - np.float64(b[i])) * weight


@jit
def correlate(x, out, cval, first, last, before, after, mode, to, bits, signed, weights, symmetry):
    """``out[l, i, :]`` = scipy's correlation of ``weights`` with
    ``x[l, i - before : i + after + 1, :]``, for the flat positions ``l * n + i`` in
    ``[first, last)`` of ``(lines, n, width)`` arrays; every operation runs along the last
    axis (vectorised). ``symmetry``: 1 symmetric, -1 antisymmetric odd weights, else 0.

    The positions run strip by strip of the last axis, each strip's window rows copied
    (folded, or ``cval``) into a ring of ``size`` rows, one new row per position. Read in
    place, the rows of a window a multiple of 4 KiB apart (a 2048-wide float32 or float64
    frame's) fall in the same cache sets and evict each other: 33 float64 rows took 4-6x
    the ring's time."""
    n, width = x.shape[1], x.shape[2]
    size = before + after + 1
    strip = min(width, max(STRIP_MIN, STRIP_BYTES // (size * x.itemsize)))
    # One cache line more per ring row: rows a power of two apart share cache sets.
    ring = np.empty((size, strip + 64 // x.itemsize), x.dtype)
    qs = np.empty(size, np.intp)
    ss = np.zeros(size, np.intp)
    sums = np.empty(strip, np.float64)
    for c0 in range(0, width, strip):
        c1 = min(c0 + strip, width)
        acc = sums[: c1 - c0]
        held, loaded = -1, 0  # the line in the ring, and its next row to load
        for position in range(first, last):
            line, i = position // n, position % n
            top = i - before
            if line != held:
                held, loaded = line, top
            for v in range(loaded, i + after + 1):
                ring_row(x, line, v, c0, c1, mode, cval, ring[v % size])
            loaded = i + after + 1
            for k in range(size):
                qs[k] = (top + k) % size
            correlate_line(acc, ring, qs, ss, weights, symmetry)
            store_all(acc, out[line, i, c0:c1], to, bits, signed)


@jit
def ring_row(x, line, v, c0, c1, mode, cval, row):
    """``row[:c1 - c0]`` = row ``v`` of ``x[line]`` from ``c0`` to ``c1``, folded by
    ``mode``, or ``cval`` outside."""
    j = fold(v, x.shape[1], mode)
    if j < 0:
        for w in range(c1 - c0):
            row[w] = cval
    else:
        for w in range(c1 - c0):
            row[w] = x[line, j, c0 + w]


@jit
def correlate_lines(
    x, out, cval, first, last, before, after, mode, to, bits, signed, weights, symmetry
):
    """As :func:`correlate` along the last axis of ``(lines, n)`` arrays, for the whole
    lines ``[first, last)``: each line read once into a buffer of doubles, folded at its
    ends, term ``k`` of every point the buffer from ``k``."""
    n = x.shape[1]
    size = before + after + 1
    values = np.empty((1, n + size - 1), np.float64)
    qs = np.zeros(size, np.intp)
    ss = np.arange(size)
    acc = np.empty(n, np.float64)
    for line in range(first, last):
        read_line(x, line, before, mode, np.float64(cval), values[0])
        correlate_line(acc, values, qs, ss, weights, symmetry)
        store_all(acc, out[line], to, bits, signed)


@jit
def correlate_window(x, out, cval, first, last, reach, kn, mode, to, bits, signed, points, weights):
    """``out[b, i0, i1, i]`` = scipy's N-D correlation: 0.0 plus ``weights[k]`` times the
    value at ``points[k]`` of the window around it, for each ``k`` in turn.

    ``x`` and ``out`` are ``(batch, a0, a1, n)``; rows, ``reach``, ``kn`` and ``points``
    (the terms' places in the box, flat, C order) as
    :func:`.window_kernels.rank_network`'s. The box's lines around each output line are
    gathered once into doubles, folded at their ends; term ``k`` of every point is then
    line ``points[k] // kn`` from ``points[k] % kn``, one sweep of the row per term."""
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    values = np.empty((reach[1] * reach[3], n + kn - 1), np.float64)
    qs, ss = points // kn, points % kn
    acc = np.empty(n, np.float64)
    for t in range(first, last):
        b, i0 = t // a0, t % a0
        for i1 in range(a1):
            gather(x, b, i0, i1, reach, mode, cval, values)
            acc[:] = 0.0
            for k in range(points.size):
                line, weight = values[qs[k], ss[k] : ss[k] + n], weights[k]
                for i in range(n):
                    acc[i] += line[i] * weight
            store_all(acc, out[b, i0, i1], to, bits, signed)
