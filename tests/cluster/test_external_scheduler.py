"""The CLI against a cluster started by hand: a `dask scheduler` and two `dask worker` processes."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi


def _dask(*args):
    return [str(Path(sys.executable).parent / "dask"), *args]


@pytest.fixture
def cluster(tmp_path):
    """Yield the address of a scheduler with two single-threaded workers, all on 127.0.0.1."""
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    processes = [
        subprocess.Popen(
            _dask(
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--dashboard-address",
                "127.0.0.1:0",
                "--scheduler-file",
                str(scheduler_file),
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(2):
            processes.append(
                subprocess.Popen(
                    _dask(
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--no-dashboard",
                    ),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
            )
        from distributed import Client

        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            process.wait(timeout=30)


def test_cli_runs_on_an_existing_scheduler_and_matches_scipy(tmp_path, cluster):
    (tmp_path / "in").mkdir()
    rng = np.random.default_rng(5)
    frames = {f"f{i}": rng.standard_normal((40, 52)).astype(np.float32) for i in range(5)}
    for name, frame in frames.items():
        tifffile.imwrite(tmp_path / "in" / f"{name}.tif", frame)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "stencilpipe",
            "apply",
            "gaussian:sigma=1.5",
            "in/",
            "out/",
            "--address",
            cluster,
            "--boundary",
            "nearest",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 written" in result.stdout
    for name, frame in frames.items():
        want = ndi.gaussian_filter(frame.astype(np.float64), 1.5, mode="nearest")
        np.testing.assert_allclose(
            tifffile.imread(tmp_path / "out" / f"{name}.tif"), want, rtol=1e-6, atol=1e-6
        )
