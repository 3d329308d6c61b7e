"""Generate the CPU module of one specialisation: point functions plus a loop nest.

The loop nest walks ``out[b, i0, ..., iN]`` over a range ``[start, stop)`` of
the flattened (batch, first axis) rows, serially and without the GIL;
:mod:`.threads` splits the rows over threads, so both one big frame and many
small frames keep every core busy (and a serial function compiles in less
than half the time of a ``parallel=True`` one). Along the last axis each row is split into
border / interior / border runs: the interior run reads memory directly and
vectorises; only the border runs fold indices.

Interior runs start at the literal halo width, never at a computed bound: Numba
guards negative indices (``x[-1]`` means the last element), and only a
literal start lets LLVM prove ``i - 1 >= 0``, drop the guard and vectorise
(measured: 0.6 ms against 12 ms for a 3x3 mean on a 2048x2048 frame).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .analysis import KernelInfo
from .rewrite import PointSource, assemble_module, index_names

__all__ = ["cpu_module_source", "work_rows"]

_HEADER = """\
import numpy as _sp_np
import numba as _sp_numba
from stencilpipe.stencils import boundary as _sp_boundary
from stencilpipe.stencils.store import round_if_float as _sp_round
_SP_CACHE = {cache}
device = _sp_numba.njit(cache=_SP_CACHE)
# LLVM's inliner gives up on big kernels (a 5x5 gaussian: 60 ms instead of 21 ms).
inlined = _sp_numba.njit(cache=_SP_CACHE, inline="always")
_SP_CONSTANT = _sp_boundary.CONSTANT
"""


def _rows_function(array: str, in_dtype: np.dtype, ndim: int) -> str:
    """``_sp_rows_<array>(frame, first, count, cval, mode)``: the ``count`` planes of
    ``frame`` (``ndim`` axes) from ``first`` along its first axis, folded by ``mode``
    (``cval`` planes under constant).

    A plane is copied element by element: Numba's array-to-array assignment compiles its
    shape-mismatch message (string formatting, 2.4 s), once per process that compiles a
    kernel."""
    cell = ", ".join(f"p{d}" for d in range(1, ndim))
    copy, pad = [], "            "
    for d in range(1, ndim):
        copy.append(f"{pad}for p{d} in range(frame.shape[{d}]):")
        pad += "    "
    copy.append(f"{pad}rows[q, {cell}] = frame[j, {cell}]")
    return "\n".join(
        [
            "@device",
            f"def _sp_rows_{array}(frame, first, count, cval, mode):",
            "    rows = _sp_np.empty((count,) + frame.shape[1:], frame.dtype)",
            "    n = frame.shape[0]",
            "    for q in range(count):",
            "        j = _sp_fold(first + q, n, mode)",
            "        if j < 0:",
            f"            rows[q] = _sp_np.{in_dtype.name}(cval)",
            "        else:",
            *copy,
            "    return rows",
        ]
    )


def _block_function(array: str, info: KernelInfo, in_dtype: np.dtype) -> str:
    """``_sp_block_<array>(frame, c0, ..., block, cval, mode)``: into ``block``, the rows
    of ``frame`` a row centred at ``c0, ...`` (one per axis but the last) reads, folded
    by ``mode`` along the middle axes (``cval`` rows under constant); along the first
    axis they are inside ``frame`` (``_sp_rows`` made them so). Rows are copied element
    by element, as :func:`_rows_function` copies planes."""
    middle = range(1, info.ndim - 1)
    centres = [f"c{d}" for d in range(info.ndim - 1)]
    lines = [
        "@device",
        f"def _sp_block_{array}(frame, {', '.join(centres)}, block, cval, mode):",
    ]
    pad = "    "
    for d, (before, after) in enumerate(info.halo[:-1]):
        lines.append(f"{pad}for q{d} in range({before + after + 1}):")
        pad += "    "
        first = f"c{d} - {before} + q{d}"
        folded = first if d == 0 else f"_sp_fold({first}, frame.shape[{d}], mode)"
        lines.append(f"{pad}j{d} = {folded}")
    cell = ", ".join(f"q{d}" for d in range(info.ndim - 1))
    source = ", ".join(f"j{d}" for d in range(info.ndim - 1))
    lines += [
        f"{pad}if {' or '.join(f'j{d} < 0' for d in middle)}:",
        f"{pad}    block[{cell}] = _sp_np.{in_dtype.name}(cval)",
        f"{pad}else:",
        f"{pad}    for p in range(frame.shape[{info.ndim - 1}]):",
        f"{pad}        block[{cell}, p] = frame[{source}, p]",
        "    return block",
    ]
    return "\n".join(lines)


def _last_axis_runs(pad: str, info: KernelInfo, border: str, interior: str) -> list[str]:
    """The border / interior / border runs of one row along the last axis, inside along
    the other axes (in ``_sp_r_<array>`` around ``_sp_k0, ...``).

    Its border points run the interior function on patches (:func:`_patch_runs`) when
    ``_sp_patch`` (the mode allows it: not a ``cval`` the input's dtype cannot hold).
    """
    last = info.ndim - 1
    i, n = f"_sp_i{last}", f"_sp_n{last}"
    target = f"_sp_o[{', '.join(index_names(info.ndim))}]"
    before, after = info.halo[last]
    ends = [("0", f"min({before}, {n})"), (f"_sp_hi{last}", n)]

    def run(first: str, stop: str, value: str) -> list[str]:
        return [f"    for {i} in range({first}, {stop}):", f"        {target} = _sp_store({value})"]

    middle = run(str(before), f"_sp_hi{last}", interior)
    folded = run(*ends[0], border) + run(*ends[1], border)
    if not _patched(info):
        return [pad + line[4:] for line in folded[:2] + middle + folded[2:]]
    runs = middle + [
        "    if _sp_patch:",
        *["        " + line for line in _patch_runs(info, target)],
        "    else:",
        *["    " + line for line in folded],
    ]
    return [pad + line[4:] for line in runs]


def _patch_runs(info: KernelInfo, target: str) -> list[str]:
    """The border points at both ends of an inside row, on patches.

    Through ``_sp_border`` a border point costs as much as hundreds of interior points
    (a folded, non-inlined load per read: 40 ns per row of a 3-wide uint8 mean pass, a
    third of its time). Instead the values the points at each end read are copied into
    a small array per input, the patch (slot 0: the left end, 1: the right end), through
    last-axis indices folded once per call (``_sp_fl<k>``/``_sp_fr<k>``; -1: the column
    keeps the ``cval`` the patch was filled with), and the interior function runs on the
    patches: the same reads, so the same values. The copies are written out one by one
    (as a loop LLVM vectorised them into gathers, slower for a few elements), under one
    test per column: a test per element sent Numba's SSA pass into a recursion error on
    a 13x13 kernel. Both ends share one call of the interior function: each inlined copy
    of the kernel costs Numba's type inference about as much as the rest of the loop nest.
    """
    last = info.ndim - 1
    before, after = info.halo[last]
    i, n = f"_sp_i{last}", f"_sp_n{last}"
    lines = []
    for slot, side in enumerate("lr"):
        if (before, after)[slot] == 0:
            continue
        for k in range(_patch_width(info, side)):
            column = f"_sp_f{side}{k}"
            lines.append(f"if {column} >= 0:")  # else the patch keeps cval (constant)
            for cell in itertools.product(*(range(sum(h) + 1) for h in info.halo[:last])):
                rows = [f"_sp_k{d} + {q - info.halo[d][0]}" for d, q in enumerate(cell)]
                for a in info.array_params:
                    read = f"_sp_r_{a}[{', '.join([*rows, column])}]"
                    written = ", ".join(map(str, [slot, *cell, k]))
                    lines.append(f"    _sp_p_{a}[{written}] = {read}")
    centres = [str(b) for b, _ in info.halo[:last]]
    patches = [f"_sp_p_{a}[_sp_s]" for a in info.array_params]
    call = ", ".join([*patches, *info.scalar_params, *centres, "_sp_c"])
    # A literal trip count: LLVM unrolls the loop, where a computed one (at most the halo)
    # was vectorised with 64-bit index lanes it never needs.
    return [
        *lines,
        f"for _sp_m in range({before + after}):",
        f"    if _sp_m < {before}:",
        "        _sp_s = 0",
        f"        {i} = _sp_m",
        f"        _sp_c = _sp_m + {before}",
        "    else:",
        "        _sp_s = 1",
        f"        {i} = _sp_hi{last} + _sp_m - {before}",
        "        _sp_c = _sp_m",
        f"    if {i} < {n}:",
        f"        {target} = _sp_store(_sp_interior({call}))",
    ]


#: Most elements a patch may hold: its copies are written out one by one (and compiled).
PATCH_ELEMENTS = 256


def _patched(info: KernelInfo) -> bool:
    """Whether the border points along the last axis run on patches (see :func:`_patch_runs`)."""
    cells = math.prod(sum(h) + 1 for h in info.halo[:-1])
    widest = max(_patch_width(info, "l"), _patch_width(info, "r"))
    return any(info.halo[-1]) and cells * widest <= PATCH_ELEMENTS


def _patch_width(info: KernelInfo, side: str) -> int:
    """Elements along the last axis of the patch of the border points at one end."""
    before, after = info.halo[-1]
    return 2 * before + after if side == "l" else before + 2 * after


def _patch_setup(info: KernelInfo, in_dtypes: tuple[np.dtype, ...]) -> list[str]:
    """Per call: ``_sp_patch``, the folded last-axis indices and the patches of
    :func:`_patch_runs` (allocated once per call, refilled per row)."""
    last = info.ndim - 1
    before, after = info.halo[last]
    n = f"_sp_n{last}"
    arrays = list(info.array_params)
    lines = ["    _sp_patch = _sp_mode != _SP_CONSTANT or _sp_fits"]
    lines += [
        f"    _sp_cp_{a} = _sp_np.{d.name}(_sp_cval_{a} if _sp_fits else 0)"
        for a, d in zip(arrays, in_dtypes)
    ]
    counts = [sum(h) + 1 for h in info.halo[:last]]
    for side, origin in (("l", f"{-before}"), ("r", f"_sp_hi{last} - {before}")):
        if (before, after)[side == "r"] == 0:
            continue
        width = _patch_width(info, side)
        lines += [
            f"    _sp_f{side}{k} = _sp_fold({origin} + {k}, {n}, _sp_mode)" for k in range(width)
        ]
    shape = ", ".join(str(c) for c in [2, *counts, max(_patch_width(info, s) for s in "lr")])
    for a, d in zip(arrays, in_dtypes):
        lines += [
            f"    _sp_p_{a} = _sp_np.empty(({shape}), _sp_np.{d.name})",
            f"    _sp_p_{a}.fill(_sp_cp_{a})",
        ]
    return lines


def _loop_nest(info: KernelInfo, in_dtypes: tuple[np.dtype, ...]) -> str:
    """``apply``: the loops over the rows ``[start, stop)`` and along each row.

    A row whose neighbourhood leaves the array along an axis but the last reads the rows
    it needs, folded (or ``cval``), copied into a small array (along the first axis the
    planes, ``_sp_rows``; along the middle axes the rows, ``_sp_block``): its points then
    take the fast paths of an inside row (a 3-D kernel on a frame of 6 planes, as a Dask
    chunk with its halo is, had a third of its points on the folding path). Under
    constant with a ``cval`` the input's dtype cannot hold (not ``_sp_fits``), such a row
    folds every read instead. ``_sp_mode`` is the mode's code
    (:data:`.boundary.MODE_CODES`).
    """
    arrays = list(info.array_params)
    scalars = list(info.scalar_params)
    cvals = [f"_sp_cval_{a}" for a in arrays]
    ndim = info.ndim
    centre = index_names(ndim)
    frames = [f"_sp_f_{a}" for a in arrays]
    reads = [f"_sp_r_{a}" for a in arrays]
    kept = [*index_names(ndim - 1, "_sp_k"), centre[-1]]  # the centre, in _sp_r_<array>

    def border(sources: list[str], points: list[str]) -> str:
        return f"_sp_border({', '.join([*sources, *scalars, *cvals, '_sp_mode', *points])})"

    interior = f"_sp_interior({', '.join(reads + scalars + kept)})"
    params = [*arrays, "out", *scalars, *cvals, "_sp_mode", "_sp_start", "_sp_stop"]
    lines = [
        "@_sp_numba.njit(nogil=True, cache=_SP_CACHE)",
        f"def apply({', '.join(params)}):",
        "    _sp_batch = out.shape[0]",
        "    _sp_fits = "
        + " and ".join(f"_sp_np.{d.name}({c}) == {c}" for d, c in zip(in_dtypes, cvals)),
        "    _sp_folds = _sp_mode == _SP_CONSTANT and not _sp_fits",
    ]
    for d, (before, after) in enumerate(info.halo):
        lines += [
            f"    _sp_n{d} = out.shape[{d + 1}]",
            f"    _sp_hi{d} = max(_sp_n{d} - {after}, {before})",
        ]
    if _patched(info):
        lines += _patch_setup(info, in_dtypes)
    if ndim == 1:
        lines.append("    for _sp_b in range(_sp_start, _sp_stop):")
        lines += [f"        {r} = {a}[_sp_b]" for r, a in zip(reads, arrays)]
        lines.append("        _sp_o = out[_sp_b]")
        runs = _last_axis_runs(" " * 8, info, border(reads, kept), interior)
        return "\n".join(lines + runs) + "\n"
    counts = [before + after + 1 for before, after in info.halo[:-1]]
    if ndim > 2:
        lines += [
            f"    _sp_blk_{a} = _sp_np.empty(({', '.join(map(str, counts))}, {a}.shape[-1]), "
            f"_sp_np.{d.name})"
            for a, d in zip(arrays, in_dtypes)
        ]
    before0 = info.halo[0][0]
    lines += [
        "    for _sp_t in range(_sp_start, _sp_stop):",
        "        _sp_b = _sp_t // _sp_n0",
        "        _sp_i0 = _sp_t - _sp_b * _sp_n0",
    ]
    pad = " " * 8
    lines += [f"{pad}{f} = {a}[_sp_b]" for f, a in zip(frames, arrays)]
    lines += [f"{pad}_sp_o = out[_sp_b]", f"{pad}_sp_c0 = _sp_i0"]
    lines.append(f"{pad}if not (_sp_i0 >= {before0} and _sp_i0 < _sp_hi0):")
    inner = pad + "        "
    slow = [f"{pad}    if _sp_folds:"]
    for d in range(1, ndim):
        slow.append(f"{inner}for _sp_i{d} in range(_sp_n{d}):")
        inner += "    "
    slow.append(f"{inner}_sp_o[{', '.join(centre)}] = _sp_store({border(frames, centre)})")
    lines += slow + [f"{pad}        continue"]
    lines += [
        f"{pad}    {f} = _sp_rows_{a}({f}, _sp_i0 - {before0}, {counts[0]}, {c}, _sp_mode)"
        for f, a, c in zip(frames, arrays, cvals)
    ]
    lines.append(f"{pad}    _sp_c0 = {before0}")
    inside = []
    for d in range(1, ndim - 1):
        lines.append(f"{pad}for _sp_i{d} in range(_sp_n{d}):")
        pad += "    "
        inside.append(f"_sp_i{d} >= {info.halo[d][0]} and _sp_i{d} < _sp_hi{d}")
    at_rows = ["_sp_c0", *centre[1:-1]]
    lines += [f"{pad}{r} = {f}" for r, f in zip(reads, frames)]
    lines += [f"{pad}{k} = {c}" for k, c in zip(kept, at_rows)]
    if inside:
        blocks = [
            f"{r} = _sp_block_{a}({f}, {', '.join(at_rows)}, _sp_blk_{a}, {c}, _sp_mode)"
            for r, a, f, c in zip(reads, arrays, frames, cvals)
        ]
        in_block = [f"{k} = {before}" for k, (before, _) in zip(kept[:-1], info.halo)]
        lines += [
            f"{pad}if not ({' and '.join(inside)}):",
            f"{pad}    if _sp_folds:",
            f"{pad}        for {centre[-1]} in range(_sp_n{ndim - 1}):",
            f"{pad}            _sp_o[{', '.join(centre)}] = "
            f"_sp_store({border(frames, ['_sp_c0', *centre[1:]])})",
            f"{pad}        continue",
            *[f"{pad}    {line}" for line in blocks + in_block],
        ]
    lines += _last_axis_runs(pad, info, border(reads, kept), interior)
    return "\n".join(lines) + "\n"


def work_rows(out_shape: tuple[int, ...]) -> int:
    """Number of independent rows ``apply`` iterates over for an ``out`` of this (batched) shape."""
    return out_shape[0] * (out_shape[1] if len(out_shape) > 2 else 1)


def cpu_module_source(
    info: KernelInfo,
    env: dict[str, Any],
    in_dtypes: tuple[np.dtype, ...],
    out_dtype: np.dtype,
    prelude: str,
    cache: bool,
) -> PointSource:
    """Source of a module whose ``apply(*arrays, out, *scalars, *cvals, mode, start, stop)``
    runs.

    Arrays and ``out`` carry one leading batch axis before the kernel's core axes;
    ``cvals`` are the constant-mode fill values, one per array, already widened;
    ``mode`` is the boundary mode's code (:data:`.boundary.MODE_CODES`), so one module
    serves every mode; ``start, stop`` bound the rows computed (see :func:`work_rows`).
    """
    driver = _loop_nest(info, in_dtypes)
    if info.ndim > 1:
        rows = [_rows_function(a, d, info.ndim) for a, d in zip(info.array_params, in_dtypes)]
        if info.ndim > 2:
            rows += [_block_function(a, info, d) for a, d in zip(info.array_params, in_dtypes)]
        driver = "\n\n".join([*rows, driver])
    return assemble_module(
        _HEADER.format(cache=cache), driver, info, env, in_dtypes, out_dtype, prelude
    )
