"""Run a generated kernel over its rows on several threads (the kernels release the GIL).

The number of threads is ``STENCILPIPE_NUM_THREADS`` or the CPUs this process
may use; :func:`set_num_threads` changes it. Inside a Dask task the kernels
run in the task's own thread only (:func:`single_threaded`): Dask already runs
one task per worker thread, and more threads would fight over the cores.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["get_num_threads", "run_rows", "set_num_threads", "single_threaded", "threads_here"]

#: Rows below which a thread is not worth starting.
_MIN_ROWS_PER_THREAD = 16

_threads: int = int(os.environ.get("STENCILPIPE_NUM_THREADS", 0)) or len(os.sched_getaffinity(0))
_executor: ThreadPoolExecutor | None = None
_local = threading.local()


@contextlib.contextmanager
def single_threaded() -> Iterator[None]:
    """Run stencil calls made in this thread, inside the block, in this thread only."""
    previous = getattr(_local, "single", False)
    _local.single = True
    try:
        yield
    finally:
        _local.single = previous


def threads_here() -> int:
    """Threads a stencil call made in this thread may use now (1 inside :func:`single_threaded`)."""
    return 1 if getattr(_local, "single", False) else _threads


def get_num_threads() -> int:
    """How many threads one stencil call uses."""
    return _threads


def set_num_threads(n: int) -> None:
    """Use ``n`` threads per stencil call (1: run in the calling thread only)."""
    global _threads, _executor
    if n < 1:
        raise ValueError(f"the number of threads must be at least 1, got {n}")
    _threads = n
    if _executor is not None:
        _executor.shutdown(wait=False)
        _executor = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(_threads - 1, thread_name_prefix="stencilpipe")
    return _executor


def run_rows(
    kernel: Callable[..., None],
    args: tuple[Any, ...],
    stop: int,
    *,
    start: int = 0,
    min_rows: int = _MIN_ROWS_PER_THREAD,
) -> None:
    """Call ``kernel(*args, lo, hi)`` over ``[start, stop)``, split across the threads.

    A thread gets at least ``min_rows`` rows (rows of a frame, or strips of rows).
    """
    rows = stop - start
    if rows <= 0:
        return
    pieces = min(threads_here(), max(1, rows // min_rows))
    if pieces == 1:
        kernel(*args, start, stop)
        return
    bounds = [start + rows * k // pieces for k in range(pieces + 1)]
    futures = [_pool().submit(kernel, *args, lo, hi) for lo, hi in zip(bounds[1:-1], bounds[2:])]
    kernel(*args, bounds[0], bounds[1])
    for future in futures:
        future.result()
