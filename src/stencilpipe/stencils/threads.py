"""Run a generated kernel over its rows on several threads (the kernels release the GIL).

The number of threads is ``STENCILPIPE_NUM_THREADS`` or the CPUs this process
may use; :func:`set_num_threads` changes it. Inside a Dask task the kernels
run in the task's own thread only (:func:`single_threaded`): Dask already runs
one task per worker thread, and more threads would fight over the cores.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["get_num_threads", "run_rows", "set_num_threads", "single_threaded", "threads_here"]

#: Rows below which a thread is not worth starting.
_MIN_ROWS_PER_THREAD = 16

#: Pieces per thread that :func:`run_rows` cuts the rows into.
PIECES_PER_THREAD = 4

#: Output elements below which a call runs in the calling thread alone: waking another
#: thread costs more than it saves. 2-core VM, 1 thread against 2, microseconds: gaussian
#: (sigma 1) of a 512x512 uint8 frame 496 / 526, of 1024x1024 1624 / 1303; 3x3 minimum of
#: 1024x1024 166 / 282; a 64x64 frame 32-82 / 90-216.
PARALLEL_FROM = 1 << 20

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
    elements: int | None = None,
) -> None:
    """Call ``kernel(*args, lo, hi)`` over ``[start, stop)``, split across the threads
    (unless the call writes ``elements``, fewer than :data:`PARALLEL_FROM`).

    The rows are cut into about :data:`PIECES_PER_THREAD` pieces per thread (each of at
    least ``min_rows`` rows), which every thread, the caller's included, takes from a
    shared counter until none is left; the caller then waits only for pieces another
    thread has taken. A pool thread the system schedules late (a loaded machine) so
    finds the work done instead of holding the call up: measured at load 10 on 2 cores,
    a 3x3 uint8 mean took 1.45 ms against 3.35 ms with one fixed piece per thread.
    A thread counts the pieces it ran once it runs out, and the last count wakes the
    caller: an event per piece cost more than a piece of a 3x3 median (2048x2048 uint8,
    2 threads: 0.71 against 0.61 ms).
    """
    rows = stop - start
    if rows <= 0:
        return
    threads = threads_here()
    pieces = min(PIECES_PER_THREAD * threads, max(1, rows // min_rows))
    if threads == 1 or pieces == 1 or (elements is not None and elements < PARALLEL_FROM):
        kernel(*args, start, stop)
        return
    bounds = [start + rows * k // pieces for k in range(pieces + 1)]
    claims = itertools.count()
    lock = threading.Lock()
    unfinished = pieces
    finished = threading.Event()
    errors: list[BaseException] = []

    def work() -> None:
        nonlocal unfinished
        ran = 0
        while True:
            with lock:
                piece = next(claims)
            if piece >= pieces:
                break
            try:
                kernel(*args, bounds[piece], bounds[piece + 1])
            except BaseException as exc:  # raised in the caller's thread below
                errors.append(exc)
            ran += 1
        with lock:
            unfinished -= ran
            if unfinished == 0:
                finished.set()

    for _ in range(threads - 1):
        _pool().submit(work)
    work()  # returns once every piece is taken: the rest are running elsewhere
    finished.wait()
    if errors:
        raise errors[0]
