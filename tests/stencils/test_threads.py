"""Threads: one stencil call on NumPy uses the pool; inside a Dask task it uses that task's
thread only, so Dask's worker threads and stencilpipe's never fight over the cores."""

import threading

import dask
import dask.array as da
import numpy as np
import pytest
from kernels import smooth

import stencilpipe as sp
from stencilpipe.ndfilters._kernels import uniform1d_kernel
from stencilpipe.stencils import threads


@pytest.fixture
def pool_calls(monkeypatch):
    """Every submission to stencilpipe's thread pool, recorded (and still run)."""
    calls = []
    pool = threads._pool()

    class Recording:
        def submit(self, *args, **kwargs):
            calls.append(args[0])
            return pool.submit(*args, **kwargs)

    monkeypatch.setattr(threads, "_pool", lambda: Recording())
    monkeypatch.setattr(threads, "_threads", 2)
    return calls


def work():
    return [
        smooth,
        sp.library.mean(3),  # separable: 1-D passes over strips
        sp.chain(sp.library.gaussian(1.0), sp.library.sobel(0)),  # fused
        sp.library.gaussian(1.0),  # uint8: the float32 sweep (stencils.gauss_int)
        sp.library.minimum(15),  # van Herk/Gil-Werman passes (stencils.windows)
        sp.library.median(15),  # a sliding histogram (stencils.windows.RankWindow)
        sp.library.median(5),  # a selection network run as data
        uniform1d_kernel(31, 0, np.dtype(np.uint8), across=True),  # a running sum
    ]


def test_a_numpy_call_spreads_over_the_pool(pool_calls):
    x = np.random.default_rng(0).integers(0, 256, (512, 512)).astype(np.uint8)
    for stencil in work():
        stencil(x)  # a first call compiles, in the calling thread
        pool_calls.clear()
        stencil(x)
        assert pool_calls, f"{stencil!r} ran on one thread"


def test_inside_dask_tasks_stencils_stay_on_the_task_thread(pool_calls):
    x = np.random.default_rng(1).integers(0, 256, (4, 512, 512)).astype(np.uint8)
    lazy = da.from_array(x, chunks=(1, -1, -1))
    for stencil in work():
        with dask.config.set(scheduler="threads", num_workers=2):
            got = stencil(lazy).compute()
        np.testing.assert_array_equal(got, stencil(x))
    pool_calls.clear()
    with dask.config.set(scheduler="threads", num_workers=2):
        for stencil in work():
            stencil(lazy).compute()
    assert pool_calls == []


def test_run_rows_covers_every_row_once_and_raises_in_the_caller():
    before = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        seen = np.zeros(1000, np.int64)

        def mark(lo, hi):
            seen[lo:hi] += 1

        threads.run_rows(mark, (), 1000, start=0, min_rows=1)
        assert (seen == 1).all()

        def fail(lo, hi):
            if lo >= 500:
                raise ValueError(f"rows {lo}-{hi}")

        with pytest.raises(ValueError, match="rows"):
            threads.run_rows(fail, (), 1000, min_rows=1)
    finally:
        threads.set_num_threads(before)


def test_run_rows_does_not_wait_for_a_pool_thread_that_never_starts():
    """The caller takes every piece a busy pool thread has not started: a call finishes
    while the pool is held up (as a descheduled thread is on a loaded machine)."""
    import threading

    before = threads.get_num_threads()
    threads.set_num_threads(2)
    held = threading.Event()
    threads._pool().submit(held.wait)  # the pool's only thread is busy
    seen = np.zeros(64, np.int64)

    def mark(lo, hi):
        seen[lo:hi] += 1

    call = threading.Thread(target=threads.run_rows, args=(mark, (), 64), kwargs={"min_rows": 1})
    call.start()
    call.join(60)
    finished = not call.is_alive()
    held.set()
    call.join()
    threads.set_num_threads(before)
    assert finished, "run_rows waited for a pool thread that had not started"
    assert (seen == 1).all()


def test_calls_smaller_than_parallel_from_run_in_the_calling_thread(monkeypatch, pool_calls):
    """Waking a pool thread costs more than a small call's work (a 64x64 gaussian took
    216 us on 2 threads, 82 us on 1): below ``PARALLEL_FROM`` output elements the call is
    one piece in the caller's thread; from it, pieces spread over the threads. Kernels,
    window passes and fused chains all say how many elements they write."""
    pieces = []

    def mark(lo, hi):
        pieces.append((lo, hi, threading.get_ident()))

    monkeypatch.setattr(threads, "PARALLEL_FROM", 1000)  # the autouse fixture set 0
    threads.run_rows(mark, (), 64, min_rows=1, elements=999)
    assert pieces == [(0, 64, threading.get_ident())] and pool_calls == []
    threads.run_rows(mark, (), 64, min_rows=1, elements=1000)
    assert len(pieces) == 1 + 8 and pool_calls
    x = np.random.default_rng(0).integers(0, 255, (3, 40, 30)).astype(np.uint8)
    stencils = [smooth, sp.library.median(3), sp.library.mean(3), sp.library.gaussian(1.0)]
    for stencil in stencils:
        stencil(x)  # the first call runs alone, in this thread: it compiles
    for parallel_from, pooled in [(x.size + 1, False), (x.size, True)]:
        monkeypatch.setattr(threads, "PARALLEL_FROM", parallel_from)
        for stencil in stencils:
            pool_calls.clear()
            stencil(x)
            assert bool(pool_calls) == pooled, (stencil, parallel_from)


def test_run_rows_waits_for_the_pieces_pool_threads_run():
    """Pieces the pool's thread runs slowly are done when the call returns, whoever
    finishes last; calls from several threads at once share the pool and each covers its
    own rows once."""
    import threading
    import time

    before = threads.get_num_threads()
    threads.set_num_threads(2)
    caller = threading.get_ident()

    def marker(seen):
        def mark(lo, hi):
            # the pool's thread takes a piece, and the caller runs out of pieces first
            time.sleep(0.002 if threading.get_ident() == caller else 0.02)
            seen[lo:hi] += 1

        return mark

    try:
        for _ in range(5):
            seen = np.zeros(256, np.int64)
            threads.run_rows(marker(seen), (), 256, min_rows=1)
            assert (seen == 1).all()
        caller = None  # every thread sleeps in a piece: the calls interleave
        results = [np.zeros(300, np.int64) for _ in range(12)]
        callers = [
            threading.Thread(target=threads.run_rows, args=(marker(seen), (), 300))
            for seen in results
        ]
        for call in callers:
            call.start()
        for call in callers:
            call.join(60)
        assert all(not call.is_alive() for call in callers)
        assert all((seen == 1).all() for seen in results)
    finally:
        threads.set_num_threads(before)
