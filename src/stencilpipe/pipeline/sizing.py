"""Chunks a worker can hold, and what a run will cost before it runs (``--dry-run``).

A task reads its chunk, computes the stages over it and writes its output. The
stages allocate their output and, fused, about 1 MiB of cache-sized strips per
thread, not whole intermediate frames (tracemalloc on gaussian -> mean -> sobel:
1.1x the chunk for 8 frames); reading and writing add the decoded and encoded
buffers. :data:`TASK_MEMORY_FACTOR` counts each chunk twice. Dask's
default chunks (~128 MiB) ignore the workers: with two ``--memory-limit 400MB``
workers a 2048x2048 uint16 stack was cut into 126 MB chunks, and the workers were
killed until the run failed. ``chunks: auto`` therefore takes the frames per chunk
from the workers' memory (:func:`frames_per_chunk`), less what a worker holds before
any task (:data:`WORKER_BASELINE`); a limit that leaves no room for one frame's task is
refused before the run, where Dask would restart its workers until ``KilledWorker``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dask.utils import format_bytes

from ..errors import ClusterError

__all__ = ["Estimate", "estimate", "frames_per_chunk"]

#: Bytes a task holds at its peak per byte of its input and output chunks.
TASK_MEMORY_FACTOR = 2.0

#: Share of a worker's memory limit its running tasks may fill together: Dask starts
#: spilling at 60% and pausing at 80% (``distributed.worker.memory.*``), and the
#: process itself (Python, NumPy, Numba, compiled kernels) needs its own share.
TASKS_SHARE = 0.4


#: Resident memory of a worker process before any task's data, once it has run
#: stencilpipe's kernels: Python, NumPy, Dask, distributed, Numba with its LLVM
#: (llvmlite alone adds 100 MiB) and the compiled kernels. Measured 250 MiB in a
#: ``dask worker`` after gaussian -> mean -> sobel (numba 0.68, llvmlite 0.50).
WORKER_BASELINE = 256 * 2**20

#: Share of its memory limit a worker may reach: its nanny restarts it at 95%
#: (``distributed.worker.memory.terminate``).
WORKER_CEILING = 0.9


def frames_per_chunk(
    frame_bytes_in: int, frame_bytes_out: int, memory_limit: int | None, threads: int
) -> int | None:
    """Most whole frames per chunk that ``threads`` tasks at once keep within the
    :data:`TASKS_SHARE` of a worker's ``memory_limit`` and, with the worker's own
    :data:`WORKER_BASELINE`, under its :data:`WORKER_CEILING`; None when there is no limit.

    Parameters
    ----------
    frame_bytes_in, frame_bytes_out : int
        Bytes of one input and one output frame.
    memory_limit : int or None
        The smallest worker's memory limit in bytes (None or 0: unlimited).
    threads : int
        Threads (tasks at once) of that worker.

    Raises
    ------
    ClusterError
        When ``threads`` tasks of one frame each, with the worker's baseline, would pass
        the ceiling: its nanny would restart it for every task.
    """
    if not memory_limit:
        return None
    threads = max(1, threads)
    room = WORKER_CEILING * memory_limit - WORKER_BASELINE
    least = threads * (frame_bytes_in + frame_bytes_out)
    if room < least:
        needed = (WORKER_BASELINE + TASK_MEMORY_FACTOR * least) / WORKER_CEILING
        raise ClusterError(
            f"the workers' memory limit of {format_bytes(memory_limit)} cannot hold a task: "
            f"a worker holds about {format_bytes(WORKER_BASELINE)} before any data (Python, "
            f"Numba's LLVM, the kernels) and {threads} task(s) of one frame need "
            f"{format_bytes(least)} more; give each worker at least {format_bytes(int(needed))}"
            f"{' or fewer threads' if threads > 1 else ''}"
        )
    per_frame = TASK_MEMORY_FACTOR * (frame_bytes_in + frame_bytes_out)
    budget = min(TASKS_SHARE * memory_limit, room) / threads
    return max(1, int(budget // per_frame))


@dataclass(frozen=True)
class Estimate:
    """What a planned run will do, from its graph alone.

    Attributes
    ----------
    chunk_shape : tuple of int
        The largest input chunk.
    chunks : int
        Chunks of the input (one task per chunk for each step of the graph).
    tasks : int
        Tasks in the whole graph.
    halo_overhead : float
        Elements read beyond the chunks (halos of cut axes), in percent of the input.
    peak_per_worker : int or None
        Bytes one worker's tasks hold at once at most (its threads' chunks, see
        :data:`TASK_MEMORY_FACTOR`); None when the threads per worker are not known.
    memory_limit : int or None
        The smallest worker's memory limit, when known.
    """

    chunk_shape: tuple[int, ...]
    chunks: int
    tasks: int
    halo_overhead: float
    peak_per_worker: int | None
    memory_limit: int | None

    def lines(self) -> list[str]:
        """The estimate in a few lines, as ``--dry-run`` prints them."""
        peak = "unknown" if self.peak_per_worker is None else format_bytes(self.peak_per_worker)
        limit = "" if not self.memory_limit else f" (limit {format_bytes(self.memory_limit)})"
        return [
            f"chunks:  {self.chunks} of {' x '.join(map(str, self.chunk_shape))}",
            f"tasks:   {self.tasks}",
            f"halo:    {self.halo_overhead:.1f}% read twice",
            f"memory:  {peak} per worker at most{limit}",
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "chunk_shape": list(self.chunk_shape),
            "chunks": self.chunks,
            "tasks": self.tasks,
            "halo_overhead_percent": round(self.halo_overhead, 3),
            "peak_bytes_per_worker": self.peak_per_worker,
            "memory_limit": self.memory_limit,
        }


def _halo_overhead(chunks: Sequence[Sequence[int]], halo: Sequence[tuple[int, int]]) -> float:
    """Percent of the input read again as halos: each cut core axis adds its halo to
    every chunk along it, except at the array's two ends."""
    first_core = len(chunks) - len(halo)
    factor = 1.0
    for axis, (before, after) in enumerate(halo, start=first_core):
        cuts = len(chunks[axis]) - 1
        if cuts and (before or after):
            factor *= 1 + cuts * (before + after) / sum(chunks[axis])
    return 100 * (factor - 1)


def estimate(
    stack: Any,
    result: Any,
    graph_tasks: int,
    halo: Sequence[tuple[int, int]],
    *,
    threads_per_worker: int | None,
    memory_limit: int | None,
) -> Estimate:
    """The :class:`Estimate` of a planned run.

    Parameters
    ----------
    stack, result : dask.array.Array
        The input stack and the stages' result.
    graph_tasks : int
        Tasks of the whole run's graph (reads, stages, writes).
    halo : sequence of (int, int)
        The stages' halo per core axis.
    threads_per_worker : int or None
        Tasks a worker runs at once.
    memory_limit : int or None
        The smallest worker's memory limit.
    """
    chunk_shape = tuple(max(c) for c in stack.chunks)
    elements = math.prod(chunk_shape)
    per_task = TASK_MEMORY_FACTOR * elements * (stack.dtype.itemsize + result.dtype.itemsize)
    peak = None if threads_per_worker is None else int(per_task * threads_per_worker)
    return Estimate(
        chunk_shape=chunk_shape,
        chunks=math.prod(stack.numblocks),
        tasks=graph_tasks,
        halo_overhead=_halo_overhead(stack.chunks, halo),
        peak_per_worker=peak,
        memory_limit=memory_limit or None,
    )
