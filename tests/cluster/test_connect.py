"""Connecting to clusters: the embedded LocalCluster runs stencils in worker processes; bad addresses fail fast."""

import time
from urllib.parse import urlparse

import dask.array as da
import numpy as np
import pytest

import stencilpipe as sp
from stencilpipe.cluster import connect
from stencilpipe.errors import ClusterError
from stencilpipe.pipeline.config import ClusterConfig


def test_an_unreachable_scheduler_fails_within_the_timeout_with_one_clear_message():
    start = time.perf_counter()
    with pytest.raises(ClusterError) as info:
        with connect(ClusterConfig(address="tcp://127.0.0.1:9", timeout=2)):
            pass
    assert time.perf_counter() - start < 15
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in str(info.value)


def test_dask_config_scheduler_address_is_honoured(monkeypatch):
    import dask

    with dask.config.set({"scheduler-address": "tcp://127.0.0.1:9"}):
        with pytest.raises(ClusterError, match="127.0.0.1:9"):
            with connect(ClusterConfig(timeout=1)):
                pass


def test_embedded_cluster_runs_stencils_in_two_worker_processes_on_loopback():
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (6, 40, 50), dtype=np.uint8)

    @sp.stencil
    def local_kernel(x):  # defined in a test function: travels to workers by value
        return x[-1, 0] + x[1, 0] - x[0, 0] // 2

    pipeline = sp.chain(sp.library.gaussian(1.0), local_kernel)
    with connect(ClusterConfig(n_workers=2, threads_per_worker=1)) as client:
        assert urlparse(client.dashboard_link).hostname == "127.0.0.1"
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(addr.startswith("tcp://127.0.0.1") for addr in workers)
        lazy = pipeline(da.from_array(frames, chunks=(1, 20, -1)))
        got = client.compute(lazy).result()
        pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert len(pids) == 2
    np.testing.assert_array_equal(got, pipeline(frames))
