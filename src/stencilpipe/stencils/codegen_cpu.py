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


def _loop_nest(info: KernelInfo) -> str:
    arrays = list(info.array_params)
    scalars = list(info.scalar_params)
    cvals = [f"_sp_cval_{a}" for a in arrays]
    ndim = info.ndim
    centre = index_names(ndim)
    sizes = [f"_sp_n{d}" for d in range(ndim)]
    frames = [f"_sp_f_{a}" for a in arrays]
    interior_call = f"_sp_interior({', '.join(frames + scalars + centre)})"
    border_call = f"_sp_border({', '.join(frames + scalars + cvals + centre)})"
    target = f"_sp_o[{', '.join(centre)}]"

    lines = [
        "@_sp_numba.njit(nogil=True, cache=_SP_CACHE)",
        f"def apply({', '.join(arrays + ['out'] + scalars + cvals + ['_sp_start', '_sp_stop'])}):",
        "    _sp_batch = out.shape[0]",
    ]
    for d, ((before, after), n) in enumerate(zip(info.halo, sizes)):
        lines += [
            f"    {n} = out.shape[{d + 1}]",
            f"    _sp_hi{d} = max({n} - {after}, {before})",
        ]
    if ndim == 1:
        lines.append("    for _sp_b in range(_sp_start, _sp_stop):")
    else:
        lines += [
            "    for _sp_t in range(_sp_start, _sp_stop):",
            "        _sp_b = _sp_t // _sp_n0",
            "        _sp_i0 = _sp_t - _sp_b * _sp_n0",
        ]
    pad = " " * 8
    lines += [f"{pad}{f} = {a}[_sp_b]" for f, a in zip(frames, arrays)]
    lines.append(f"{pad}_sp_o = out[_sp_b]")
    inside = "True"  # ndim == 1: the whole row is a candidate for the interior
    for d in range(ndim - 1):
        if d > 0:
            lines.append(f"{pad}for _sp_i{d} in range(_sp_n{d}):")
            pad += "    "
        before = info.halo[d][0]
        condition = f"_sp_i{d} >= {before} and _sp_i{d} < _sp_hi{d}"
        lines.append(f"{pad}_sp_in{d} = {condition if d == 0 else f'{inside} and {condition}'}")
        inside = f"_sp_in{d}"
    last = ndim - 1
    i, n = centre[last], sizes[last]
    before = info.halo[last][0]
    lines += [
        f"{pad}if {inside}:",
        f"{pad}    for {i} in range(0, min({before}, {n})):",
        f"{pad}        {target} = _sp_store({border_call})",
        f"{pad}    for {i} in range({before}, _sp_hi{last}):",
        f"{pad}        {target} = _sp_store({interior_call})",
        f"{pad}    for {i} in range(_sp_hi{last}, {n}):",
        f"{pad}        {target} = _sp_store({border_call})",
        f"{pad}else:",
        f"{pad}    for {i} in range({n}):",
        f"{pad}        {target} = _sp_store({border_call})",
    ]
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
    return assemble_module(
        _HEADER.format(cache=cache),
        _loop_nest(info),
        info,
        env,
        in_dtypes,
        out_dtype,
        mode,
        prelude,
    )
