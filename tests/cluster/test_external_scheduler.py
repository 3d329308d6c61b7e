"""The CLI against a cluster started by hand: a `dask scheduler` and `dask worker` processes."""

import json

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

from dask_processes import running_cluster
from test_cli import cli


def test_cli_runs_on_an_existing_scheduler_and_matches_scipy(tmp_path, external_cluster):
    (tmp_path / "in").mkdir()
    rng = np.random.default_rng(5)
    frames = {f"f{i}": rng.standard_normal((40, 52)).astype(np.float32) for i in range(5)}
    for name, frame in frames.items():
        tifffile.imwrite(tmp_path / "in" / f"{name}.tif", frame)
    result = cli(
        "apply",
        "gaussian:sigma=1.5",
        "in/",
        "out/",
        "--address",
        external_cluster,
        "--boundary",
        "nearest",
        cwd=tmp_path,
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
    with running_cluster(tmp_path, 1, dashboard=False) as address:
        yield address


def test_no_dashboard_link_when_the_scheduler_serves_none(tmp_path, scheduler_without_dashboard):
    (tmp_path / "in").mkdir()
    frame = np.random.default_rng(2).standard_normal((20, 24)).astype(np.float32)
    tifffile.imwrite(tmp_path / "in" / "f.tif", frame)
    command = ("apply", "mean:size=3", "in/", "out/", "--address", scheduler_without_dashboard)
    text = cli(*command, cwd=tmp_path)
    assert text.returncode == 0 and "1 written" in text.stdout, text.stdout + text.stderr
    assert "dashboard:" not in text.stdout
    as_json = cli(*command, "--json", "--overwrite", cwd=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(as_json.stdout)
    assert summary["dashboard"] is None and summary["written"] == 1
    want = ndi.uniform_filter(frame.astype(np.float64), 3, mode="reflect")
    np.testing.assert_allclose(tifffile.imread(tmp_path / "out" / "f.tif"), want, rtol=1e-6)
