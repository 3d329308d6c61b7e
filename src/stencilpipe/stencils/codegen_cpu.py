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
"""


def _rows_function(array: str, in_dtype: np.dtype, mode: str) -> str:
    """``_sp_rows_<array>(frame, first, count, cval)``: the ``count`` planes of ``frame`` from
    ``first`` along its first axis, folded by ``mode`` (``cval`` planes under constant)."""
    if mode == "constant":
        outside = [
            "        if j < 0 or j >= n:",
            f"            rows[q] = _sp_np.{in_dtype.name}(cval)",
            "            continue",
        ]
    else:
        outside = ["        j = _sp_fold(j, n)"]
    return "\n".join(
        [
            "@device",
            f"def _sp_rows_{array}(frame, first, count, cval):",
            "    rows = _sp_np.empty((count,) + frame.shape[1:], frame.dtype)",
            "    n = frame.shape[0]",
            "    for q in range(count):",
            "        j = first + q",
            *outside,
            "        rows[q] = frame[j]",
            "    return rows",
        ]
    )


def _last_axis_runs(pad: str, info: KernelInfo, inside: str, border: str, interior: str) -> list:
    """The border / interior / border runs of one row along the last axis."""
    last = info.ndim - 1
    i, n = f"_sp_i{last}", f"_sp_n{last}"
    target = f"_sp_o[{', '.join(index_names(info.ndim))}]"
    before = info.halo[last][0]
    runs = [
        f"{pad}    for {i} in range(0, min({before}, {n})):",
        f"{pad}        {target} = _sp_store({border})",
        f"{pad}    for {i} in range({before}, _sp_hi{last}):",
        f"{pad}        {target} = _sp_store({interior})",
        f"{pad}    for {i} in range(_sp_hi{last}, {n}):",
        f"{pad}        {target} = _sp_store({border})",
    ]
    if inside == "True":
        return [line[4:] for line in runs]
    return [
        f"{pad}if {inside}:",
        *runs,
        f"{pad}else:",
        f"{pad}    for {i} in range({n}):",
        f"{pad}        {target} = _sp_store({border})",
    ]


def _loop_nest(info: KernelInfo, in_dtypes: tuple[np.dtype, ...], mode: str) -> str:
    """``apply``: the loops over the rows ``[start, stop)`` and along each row.

    A row whose neighbourhood leaves the array along the first core axis reads the
    planes it needs, folded (or ``cval``), copied into a small array: its points
    then take the fast paths of an inside row (a 3-D kernel on a frame of 6 planes,
    as a Dask chunk with its halo is, had a third of its points on the folding path).
    Under constant with a ``cval`` the input's dtype cannot hold, such a row folds
    every read instead.
    """
    arrays = list(info.array_params)
    scalars = list(info.scalar_params)
    cvals = [f"_sp_cval_{a}" for a in arrays]
    ndim = info.ndim
    centre = index_names(ndim)
    frames = [f"_sp_f_{a}" for a in arrays]

    def calls(first: str) -> tuple[str, str]:
        points = [first, *centre[1:]]
        return (
            f"_sp_border({', '.join(frames + scalars + cvals + points)})",
            f"_sp_interior({', '.join(frames + scalars + points)})",
        )

    lines = [
        "@_sp_numba.njit(nogil=True, cache=_SP_CACHE)",
        f"def apply({', '.join(arrays + ['out'] + scalars + cvals + ['_sp_start', '_sp_stop'])}):",
        "    _sp_batch = out.shape[0]",
    ]
    for d, (before, after) in enumerate(info.halo):
        lines += [
            f"    _sp_n{d} = out.shape[{d + 1}]",
            f"    _sp_hi{d} = max(_sp_n{d} - {after}, {before})",
        ]
    if ndim == 1:
        lines.append("    for _sp_b in range(_sp_start, _sp_stop):")
        lines += [f"        {f} = {a}[_sp_b]" for f, a in zip(frames, arrays)]
        lines.append("        _sp_o = out[_sp_b]")
        border, interior = calls("_sp_i0")
        return "\n".join(lines + _last_axis_runs(" " * 8, info, "True", border, interior)) + "\n"
    before0, after0 = info.halo[0]
    fits = " and ".join(f"_sp_np.{d.name}({c}) == {c}" for d, c in zip(in_dtypes, cvals))
    if mode == "constant":
        lines.append(f"    _sp_fits = {fits}")
    lines += [
        "    for _sp_t in range(_sp_start, _sp_stop):",
        "        _sp_b = _sp_t // _sp_n0",
        "        _sp_i0 = _sp_t - _sp_b * _sp_n0",
    ]
    pad = " " * 8
    lines += [f"{pad}{f} = {a}[_sp_b]" for f, a in zip(frames, arrays)]
    lines += [f"{pad}_sp_o = out[_sp_b]", f"{pad}_sp_c0 = _sp_i0"]
    lines.append(f"{pad}if not (_sp_i0 >= {before0} and _sp_i0 < _sp_hi0):")
    if mode == "constant":
        slow = [f"{pad}    if not _sp_fits:"]
        inner = pad + "        "
        for d in range(1, ndim):
            slow.append(f"{inner}for _sp_i{d} in range(_sp_n{d}):")
            inner += "    "
        slow.append(f"{inner}_sp_o[{', '.join(centre)}] = _sp_store({calls('_sp_i0')[0]})")
        lines += slow + [f"{pad}        continue"]
    count = before0 + after0 + 1
    lines += [
        f"{pad}    {f} = _sp_rows_{a}({f}, _sp_i0 - {before0}, {count}, {c})"
        for f, a, c in zip(frames, arrays, cvals)
    ]
    lines.append(f"{pad}    _sp_c0 = {before0}")
    inside = "True"
    for d in range(1, ndim - 1):
        lines.append(f"{pad}for _sp_i{d} in range(_sp_n{d}):")
        pad += "    "
        condition = f"_sp_i{d} >= {info.halo[d][0]} and _sp_i{d} < _sp_hi{d}"
        lines.append(f"{pad}_sp_in{d} = {condition if d == 1 else f'{inside} and {condition}'}")
        inside = f"_sp_in{d}"
    border, interior = calls("_sp_c0")
    lines += _last_axis_runs(pad, info, inside, border, interior)
    return "\n".join(lines) + "\n"


def work_rows(out_shape: tuple[int, ...]) -> int:
    """Number of independent rows ``apply`` iterates over for an ``out`` of this (batched) shape."""
    return out_shape[0] * (out_shape[1] if len(out_shape) > 2 else 1)


def cpu_module_source(
    info: KernelInfo,
    env: dict[str, Any],
    in_dtypes: tuple[np.dtype, ...],
    out_dtype: np.dtype,
    mode: str,
    prelude: str,
    cache: bool,
) -> PointSource:
    """Source of a module whose ``apply(*arrays, out, *scalars, *cvals, start, stop)`` runs.

    Arrays and ``out`` carry one leading batch axis before the kernel's core axes;
    ``cvals`` are the constant-mode fill values, one per array, already widened;
    ``start, stop`` bound the rows computed (see :func:`work_rows`).
    """
    driver = _loop_nest(info, in_dtypes, mode)
    if info.ndim > 1:
        rows = [_rows_function(a, d, mode) for a, d in zip(info.array_params, in_dtypes)]
        driver = "\n\n".join([*rows, driver])
    return assemble_module(
        _HEADER.format(cache=cache),
        driver,
        info,
        env,
        in_dtypes,
        out_dtype,
        mode,
        prelude,
    )
