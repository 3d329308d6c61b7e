"""Several kernels in one pass over memory: row strips, intermediates in cache-sized scratch.

A chain ``c(b(a(x)))`` run stage by stage writes each intermediate frame to
memory and reads it back. Here the output is cut into strips of rows along the
first core axis; for each strip, every pass computes just the rows the next
one needs (the strip, widened by the halos of the passes after it) into a
scratch buffer small enough to stay in the CPU's cache, and the last pass
writes the strip of the output. This is Halide's ``compute_at`` at row
granularity: producers are computed per consumer strip, never inlined point by
point (a 5x5 gaussian inlined into a 3x3 mean would evaluate it 9 times per
output element).

The passes are the stages' own compiled kernels, called on views: a pass reads
a view of the rows it needs and writes the rows asked of it (``start, stop``).
A view ends either at a true edge of the frame, where the pass applies its own
boundary mode exactly as on the whole frame, or at least a halo away from every
row the pass computes, so no boundary is ever applied where there is none. The
result is therefore bit for bit the stages run one after another. ``wrap`` reads
the far end of the frame and cannot be cut into strips: such chains run unfused.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .codegen_cpu import work_rows
from .modules import load_module
from .threads import run_rows, threads_here

if TYPE_CHECKING:
    from .kernel import RowKernel

__all__ = ["Pass", "run_passes", "strip_rows"]

#: Bytes of the largest scratch buffer a strip may fill: about a core's L2 cache on current
#: x86 CPUs. Measured on a 3-stage chain (2048x2048, AVX2, 1 MiB L2): 128 KiB strips
#: took 2x as long (the rows recomputed around each strip), 2 MiB no better.
STRIP_BYTES = 1024 * 1024

#: Fewest rows per strip: below this the per-strip call overhead dominates.
MIN_STRIP_ROWS = 8


@dataclass(frozen=True)
class Pass:
    """One kernel of a fused pipeline: one array in, one out, no scalars.

    Attributes
    ----------
    kernel : RowKernel
        The compiled CPU kernel, run as ``kernel.run(x, out, cval, start=, stop=)``.
    halo : tuple of (int, int)
        Rows it reads before and after each output row (first core axis).
    out_dtype : numpy.dtype
        Its output's dtype.
    cval : scalar
        Its constant-mode fill value, widened for its input's dtype.
    """

    kernel: RowKernel
    halo: tuple[int, int]
    out_dtype: np.dtype
    cval: Any


def strip_rows(passes: Sequence[Pass], row_elements: int, rows: int, frames: int = 1) -> int:
    """Rows per strip: the largest scratch buffer stays within :data:`STRIP_BYTES`, and
    ``frames`` frames give every thread at least two strips."""
    widest = max(p.out_dtype.itemsize for p in passes[:-1])
    halo = sum(2 * max(p.halo) for p in passes)
    fit = STRIP_BYTES // max(1, widest * row_elements) - halo
    per_frame = -(-2 * threads_here() // frames)
    shared = -(-rows // per_frame)
    return max(1, min(rows, max(MIN_STRIP_ROWS, min(fit, shared))))


def run_passes(
    passes: Sequence[Pass], x: np.ndarray, out: np.ndarray, *, whole_frames: bool = False
) -> None:
    """Compute ``passes`` one after another from ``x`` into ``out``, strip by strip.

    Parameters
    ----------
    passes : sequence of Pass
        Each reads the previous one's output.
    x, out : numpy.ndarray
        ``(batch, n0, ...)``: a batch of frames, C-contiguous, of the same shape.
    whole_frames : bool
        Whether each strip is a whole frame: passes under ``wrap`` read the far end of
        the frame, which a strip of rows does not hold.
    """
    if out.size == 0:
        return
    if len(passes) == 1:  # nothing to fuse: the kernel's own loop over all rows
        (step,) = passes
        step.kernel(x, out, step.cval, rows=work_rows(out.shape))
        return
    rows = x.shape[1]
    height = rows if whole_frames else strip_rows(passes, math.prod(x.shape[2:]), rows, x.shape[0])
    strips = -(-rows // height)
    # Rows each pass must deliver beyond the strip, on both sides: the reach of the passes
    # after it (see _reach).
    margins = [sum(_reach(p) for p in passes[k + 1 :]) for k in range(len(passes))]
    plan = _StripPlan(passes, height, strips, margins)
    first = 0
    if not all(step.kernel.ready for step in passes):
        # The first strip runs alone, in this thread: it compiles (with readable errors).
        plan.run(x, out, 0, 1)
        first = 1
    compiled = _compiled_strips(passes, x.ndim)
    if compiled is None:
        run_rows(
            plan.run, (x, out), x.shape[0] * strips, start=first, min_rows=1, elements=out.size
        )
        return
    function, modes = compiled
    args = (x, out, *(p.cval for p in passes), *modes, height, strips, *margins)
    run_rows(function, args, x.shape[0] * strips, start=first, min_rows=1, elements=out.size)


def _reach(step: Pass) -> int:
    """Rows a pass needs on each side of the rows it computes.

    The larger of its two halos, on both sides: at a true edge the boundary mode folds
    reads from one side onto the other (mirror reads row 1 for row -1), so a kernel that
    reads only upwards still needs the rows below it there.
    """
    return max(step.halo)


@dataclass(frozen=True)
class _StripPlan:
    passes: Sequence[Pass]
    height: int
    strips: int
    margins: list[int]

    def run(self, x: np.ndarray, out: np.ndarray, first: int, stop: int) -> None:
        """Compute strips ``[first, stop)`` (numbered frame by frame) in this thread."""
        rows = x.shape[1]
        extra = self.margins[0] + _reach(self.passes[0])
        scratch = [
            np.empty((1, min(rows, self.height + 2 * extra), *x.shape[2:]), p.out_dtype)
            for p in self.passes[:-1]
        ]
        last = len(self.passes) - 1
        for item in range(first, stop):
            frame, strip = divmod(item, self.strips)
            top = strip * self.height
            bottom = min(rows, top + self.height)
            low, high = max(0, top - extra), min(rows, bottom + extra)
            source = x[frame : frame + 1, low:high]
            for k, step in enumerate(self.passes):
                start = max(0, top - self.margins[k])
                end = min(rows, bottom + self.margins[k])
                if k == last:
                    target = out[frame : frame + 1, low:high]
                else:
                    target = scratch[k][:, : high - low]
                step.kernel.run(source, target, step.cval, start=start - low, stop=end - low)
                source = target[:, start - low : end - low]
                low, high = start, end


def _compiled_strips(
    passes: Sequence[Pass], ndim: int
) -> tuple[Callable[..., None], list[int]] | None:
    """The loop of :meth:`_StripPlan.run` compiled, when every pass is a generated kernel
    that a module can import (:func:`_strip_source`), and the passes' boundary mode codes;
    None for the others. Looked up once per passes (a call of a 3x3 mean on a 16x16
    frame spent ~30 us finding it again)."""
    return _strips_of(tuple(passes), ndim)


@functools.lru_cache(maxsize=256)
def _strips_of(passes: tuple[Pass, ...], ndim: int) -> tuple[Callable[..., None], list[int]] | None:
    modules, modes = [], []
    for step in passes:
        apply = getattr(step.kernel, "apply", None)
        mode = getattr(step.kernel, "mode", None)
        name = getattr(apply, "__module__", None) or ""
        if mode is None or getattr(sys.modules.get(name), "apply", None) is not apply:
            return None
        modules.append(name)
        modes.append(mode)
    dtypes = tuple(p.out_dtype.name for p in passes[:-1])
    reaches = tuple(_reach(p) for p in passes)
    return _strip_function(tuple(modules), dtypes, reaches, ndim), modes


@functools.cache
def _strip_function(
    modules: tuple[str, ...], dtypes: tuple[str, ...], reaches: tuple[int, ...], ndim: int
) -> Callable[..., None]:
    source = _strip_source(modules, dtypes, reaches, ndim)
    return load_module("strips", source).strips


def _strip_source(
    modules: tuple[str, ...], dtypes: tuple[str, ...], reaches: tuple[int, ...], ndim: int
) -> str:
    """Source of ``strips(x, out, *cvals, *modes, height, strips, *margins, first, stop)``:
    strips ``[first, stop)`` computed as :meth:`_StripPlan.run` does, in compiled code.

    In Python each pass call of each strip cost ~5 us and held the GIL; compiled, the
    passes are calls between compiled functions, and a thread's piece of strips is one
    call without the GIL (3x3 uint8 mean of a 2048x2048 frame, 2 threads: 0.61 -> 0.41
    ms in a prototype). The passes' own modules are imported by name: a generated
    kernel's module name holds the hash of its source, so the cached ``strips`` is
    never linked to stale code.
    """
    count = len(modules)
    cvals = ", ".join(f"c{k}" for k in range(count))
    modes = ", ".join(f"b{k}" for k in range(count))
    margins = ", ".join(f"m{k}" for k in range(count))
    rest = "".join(f", x.shape[{d}]" for d in range(2, ndim))

    def view(array: str, first: str, stop: str) -> str:
        """Rows ``[first, stop)`` of a frame as a (1, rows, ...) C-contiguous array."""
        return f"{array}[{first}:{stop}].reshape((1, ({stop}) - ({first}){rest}))"

    lines = [
        "import numpy as np",
        "import numba",
        *[f"from {m} import apply as pass{k}" for k, m in enumerate(modules)],
        "",
        "",
        "@numba.njit(nogil=True, cache=True)",
        f"def strips(x, out, {cvals}, {modes}, height, strips, {margins}, first, stop):",
        "    rows = x.shape[1]",
        f"    extra = m0 + {reaches[0]}",
        "    span = min(rows, height + 2 * extra)",
        *[f"    scratch{k} = np.empty((span{rest}), np.{d})" for k, d in enumerate(dtypes)],
        "    for item in range(first, stop):",
        "        frame = item // strips",
        "        top = (item - frame * strips) * height",
        "        bottom = min(rows, top + height)",
        "        low, high = max(0, top - extra), min(rows, bottom + extra)",
        "        rows0 = x[frame]",
        "        source0 = " + view("rows0", "low", "high"),
    ]
    for k in range(count):
        last = k == count - 1
        lines += [
            f"        start, end = max(0, top - m{k}), min(rows, bottom + m{k})",
            f"        rows{k + 1} = out[frame]" if last else f"        rows{k + 1} = scratch{k}",
            f"        target{k} = "
            + view(f"rows{k + 1}", *(("low", "high") if last else ("0", "high - low"))),
            f"        pass{k}(source{k}, target{k}, c{k}, b{k}, start - low, end - low)",
        ]
        if not last:
            lines += [
                f"        source{k + 1} = " + view(f"rows{k + 1}", "start - low", "end - low"),
                "        low, high = start, end",
            ]
    return "\n".join(lines) + "\n"
