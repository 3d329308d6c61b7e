"""The CLI against a cluster started by hand: a `dask scheduler` and `dask worker` processes."""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi


def test_cli_runs_on_an_existing_scheduler_and_matches_scipy(tmp_path, external_cluster):
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
            external_cluster,
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


@pytest.fixture
def scheduler_without_dashboard(tmp_path):
    """A ``dask scheduler --no-dashboard`` and one ``dask worker``, on 127.0.0.1."""
    from distributed import Client

    dask = str(Path(sys.executable).parent / "dask")
    scheduler_file = tmp_path / "scheduler.json"
    logs = open(tmp_path / "cluster.log", "w")  # noqa: SIM115 - closed below
    started = [
        subprocess.Popen(
            [
                dask,
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
    ]
    try:
        while not scheduler_file.exists():
            assert started[0].poll() is None, (tmp_path / "cluster.log").read_text()
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        started.append(
            subprocess.Popen(
                [
                    dask,
                    "worker",
                    address,
                    "--nthreads",
                    "2",
                    "--host",
                    "127.0.0.1",
                    "--no-dashboard",
                ],
                stdout=logs,
                stderr=subprocess.STDOUT,
            )
        )
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        yield address
    finally:
        for process in reversed(started):
            process.terminate()
            process.wait(timeout=30)
        logs.close()


def test_no_dashboard_link_when_the_scheduler_serves_none(tmp_path, scheduler_without_dashboard):
    (tmp_path / "in").mkdir()
    frame = np.random.default_rng(2).standard_normal((20, 24)).astype(np.float32)
    tifffile.imwrite(tmp_path / "in" / "f.tif", frame)
    command = [
        sys.executable,
        "-m",
        "stencilpipe",
        "apply",
        "mean:size=3",
        "in/",
        "out/",
        "--address",
        scheduler_without_dashboard,
    ]
    text = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert text.returncode == 0 and "1 written" in text.stdout, text.stdout + text.stderr
    assert "dashboard:" not in text.stdout
    as_json = subprocess.run(
        [*command, "--json", "--overwrite"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(as_json.stdout)
    assert summary["dashboard"] is None and summary["written"] == 1
    want = ndi.uniform_filter(frame.astype(np.float64), 3, mode="reflect")
    np.testing.assert_allclose(tifffile.imread(tmp_path / "out" / "f.tif"), want, rtol=1e-6)
