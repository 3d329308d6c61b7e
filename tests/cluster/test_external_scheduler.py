"""The CLI against a cluster started by hand: a `dask scheduler` and two `dask worker` processes."""

import subprocess
import sys

import numpy as np
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
