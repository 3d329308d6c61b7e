"""A ``dask worker --nthreads 4`` with an empty kernel cache builds and compiles many stages
at once, in its task threads: every result matches scipy.ndimage or a plain loop.

Before compilation was serialised (stencils/compile_lock.py) this crashed with CPython's
``SystemError: AST constructor recursion depth mismatch`` (python/cpython gh-106905).
"""

from __future__ import annotations

import operator
import os
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage as ndi

import dask_processes
import stencilpipe as sp
from dask_processes import DaskProcesses
from oracle import kernel_by_loop

HERE = Path(__file__).resolve().parent


def box(x):
    return (x[-1, -1] + x[-1, 0] + x[-1, 1] + x[0, -1] + x[0, 0] + x[0, 1] + x[1, -1]) // 7


def lopsided(x):
    return 3 * x[1, 0] - x[0, -2] + x[0, 1] // 2 - x[0, 0]


@pytest.fixture
def threaded_worker(tmp_path, monkeypatch):
    """A ``dask scheduler`` and one ``dask worker --nthreads 4`` on 127.0.0.1, the worker
    with an empty ``STENCILPIPE_CACHE_DIR``. Yields the scheduler's address."""
    from distributed import Client

    path = os.pathsep.join([str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setitem(dask_processes.ENV, "PYTHONPATH", path)  # this module, for its kernels
    monkeypatch.setitem(dask_processes.ENV, "STENCILPIPE_CACHE_DIR", str(tmp_path / "cache"))
    processes = DaskProcesses(tmp_path, dashboard=False)
    try:
        processes._start("worker", processes.address, "--nthreads", "4", "--host", "127.0.0.1",
                         "--no-dashboard")  # fmt: skip
        with Client(processes.address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        yield processes.address
    finally:
        processes.stop()


def _per_frame(filter_2d):
    return lambda x: np.stack([filter_2d(frame) for frame in x])


def _loop(kernel):
    return lambda x: kernel_by_loop(kernel, [x], halo=sp.stencil(kernel).halo)


# (how the worker builds the stage, the input dtype, the oracle, whether exact)
STAGES = [
    ((sp.library.median, 3), np.uint8, _per_frame(lambda f: ndi.median_filter(f, 3)), True),
    ((sp.library.maximum, 3), np.uint8, _per_frame(lambda f: ndi.maximum_filter(f, 3)), True),
    ((sp.library.sobel, 1), np.float64, _per_frame(lambda f: ndi.sobel(f, 1)), False),
    ((sp.library.laplace,), np.float64, _per_frame(ndi.laplace), False),
    ((sp.stencil, box), np.uint8, _loop(box), True),
    ((sp.stencil, lopsided), np.int16, _loop(lopsided), True),
]
# Fused chains of the same specialisations, built by other tasks at the same time.
CHAINS = [
    (
        ((sp.library.median, 3), (sp.library.maximum, 3)),
        np.uint8,
        _per_frame(lambda f: ndi.maximum_filter(ndi.median_filter(f, 3), 3)),
    ),
    (
        ((sp.library.laplace,), (sp.library.sobel, 1)),
        np.float64,
        _per_frame(lambda f: ndi.sobel(ndi.laplace(f), 1)),
    ),
]


def _check(got, want, exact):
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_a_four_thread_worker_builds_and_compiles_many_stages_at_once(threaded_worker):
    from distributed import Client

    rng = np.random.default_rng(0)
    frames = rng.integers(0, 200, (2, 24, 20))
    with Client(threaded_worker, timeout=30) as client:
        # Each stage is built and first called in a worker thread, all at once.
        built = [client.submit(*build, pure=False) for build, *_ in STAGES]
        results = [
            client.submit(operator.call, stage, frames.astype(dtype), pure=False)
            for stage, (_, dtype, _, _) in zip(built, STAGES)
        ]
        for stages, dtype, _ in CHAINS:
            parts = [client.submit(*stage, pure=False) for stage in stages]
            chained = client.submit(sp.chain, *parts, pure=False)
            results.append(client.submit(operator.call, chained, frames.astype(dtype), pure=False))
        got = client.gather(results)
    wanted = [(oracle(frames.astype(dtype)), exact) for _, dtype, oracle, exact in STAGES]
    wanted += [(oracle(frames.astype(dtype)), False) for _, dtype, oracle in CHAINS]
    for result, (want, exact) in zip(got, wanted):
        _check(result, want, exact)
