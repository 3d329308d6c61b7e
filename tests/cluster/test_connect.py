"""Connecting to clusters: the embedded LocalCluster runs stencils in worker processes; bad addresses fail fast."""

import json
import os
import time
from urllib.parse import urlparse

import dask.array as da
import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.cluster import connect, dashboard_link
from stencilpipe.errors import ClusterError
from stencilpipe.pipeline.config import ClusterConfig
from test_cli import cli


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
    with connect(ClusterConfig(n_workers=2, threads_per_worker=2)) as client:
        assert urlparse(client.dashboard_link).hostname == "127.0.0.1"
        workers = client.scheduler_info()["workers"]
        assert len(workers) == 2 and all(addr.startswith("tcp://127.0.0.1") for addr in workers)
        lazy = pipeline(da.from_array(frames, chunks=(1, 20, -1)))
        got = client.compute(lazy).result()
        pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert len(pids) == 2
    np.testing.assert_array_equal(got, pipeline(frames))


def test_processes_false_runs_the_workers_as_threads_of_the_run(tmp_path):
    """``cluster: {processes: false}`` crashed ("Scheduler failed to start"): it runs, on
    127.0.0.1, and writes what scipy computes."""
    (tmp_path / "in").mkdir()
    rng = np.random.default_rng(11)
    frames = {f"f{i}": rng.standard_normal((30, 36)).astype(np.float32) for i in range(4)}
    for name, frame in frames.items():
        tifffile.imwrite(tmp_path / "in" / f"{name}.tif", frame)
    (tmp_path / "run.yaml").write_text(
        "input: in/\noutput: out/\nstages:\n  - gaussian: {sigma: 1.0}\n  - maximum: {size: 3}\n"
        "boundary: nearest\ncluster: {processes: false, n_workers: 2, threads_per_worker: 2}\n"
    )
    result = cli("run", "run.yaml", "--json", cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    summary = json.loads(result.stdout)
    assert summary["written"] == 4 and urlparse(summary["dashboard"]).hostname == "127.0.0.1"
    for name, frame in frames.items():
        want = ndi.maximum_filter(
            ndi.gaussian_filter(frame.astype(np.float64), 1.0, mode="nearest"), 3, mode="nearest"
        )
        got = tifffile.imread(tmp_path / "out" / f"{name}.tif")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_in_process_workers_and_no_dashboard():
    config = ClusterConfig(processes=False, n_workers=2, dashboard_address=None)
    with connect(config) as client:
        pids = set(client.run(lambda: __import__("os").getpid()).values())
        assert pids == {os.getpid()} and dashboard_link(client) is None
        assert client.submit(sum, [1, 2, 3]).result() == 6
    with connect(ClusterConfig(processes=False, n_workers=1)) as client:
        assert urlparse(dashboard_link(client)).hostname == "127.0.0.1"
