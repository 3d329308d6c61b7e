"""Resume that is never stale: ``stencilpipe run`` (a subprocess, on a ``dask scheduler`` and
worker started here) keeps an output only when its provenance record matches and its bytes
verify.

Oracles: scipy's ``uniform_filter`` (rounded to nearest, as the library's mean documents) and
files read back by tifffile and zarr; "untouched" is the file's ``mtime_ns``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tifffile
import zarr
from scipy import ndimage as ndi

from dask_processes import DaskProcesses

FRAMES = 6
SHAPE = (48, 64)
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def oracle(frame: np.ndarray, size: int) -> np.ndarray:
    return np.rint(ndi.uniform_filter(frame.astype(np.float64), size)).astype(np.uint8)


def write_frame(path: Path, seed: int) -> np.ndarray:
    frame = np.random.default_rng(seed).integers(0, 256, SHAPE, dtype=np.uint8)
    tifffile.imwrite(path, frame)
    return frame


@pytest.fixture
def stack(tmp_path) -> dict[str, np.ndarray]:
    """``in/f0.tif`` ... and ``run.yaml`` (mean:size=3 into out/): the frames by name."""
    (tmp_path / "in").mkdir()
    (tmp_path / "run.yaml").write_text(
        "input: in/*.tif\noutput: out/\nstages:\n  - mean: {size: 3}\n"
    )
    return {f"f{i}": write_frame(tmp_path / "in" / f"f{i}.tif", i) for i in range(FRAMES)}


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """One ``dask scheduler`` and worker for the module's runs (each run would otherwise
    start and stop a cluster of its own): its address."""
    processes = DaskProcesses(tmp_path_factory.mktemp("cluster"), dashboard=False)
    try:
        processes.add_worker()
        yield processes.address
    finally:
        processes.stop()


@pytest.fixture
def run(tmp_path, scheduler):
    """``run(*overrides)``: ``stencilpipe run run.yaml --set ...`` on the module's cluster;
    its stdout (the summary)."""
    return functools.partial(run_on, tmp_path, scheduler)


def run_on(tmp_path: Path, address: str, *overrides: str) -> str:
    sets = [arg for item in (f"cluster.address={address}", *overrides) for arg in ("--set", item)]
    result = subprocess.run(
        [sys.executable, "-m", "stencilpipe", "run", "run.yaml", *sets],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def counts(stdout: str) -> tuple[int, int, str]:
    """``(written, kept, recomputed)`` from the summary's frames row."""
    match = re.search(r"frames\s+│ \d+ \((\d+) written, (\d+) kept by resume\)(.*?)\s*│", stdout)
    assert match, stdout
    return int(match[1]), int(match[2]), match[3].strip("; ")


def mtimes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir() if p.is_file()}


def check_outputs(out: Path, frames: dict[str, np.ndarray], size: int) -> None:
    for name, frame in frames.items():
        np.testing.assert_array_equal(tifffile.imread(out / f"{name}.tif"), oracle(frame, size))


def test_identical_rerun_keeps_all_a_rewritten_input_and_damaged_outputs_are_recomputed(
    tmp_path, stack, run
):
    out = tmp_path / "out"
    assert counts(run()) == (FRAMES, 0, "")
    check_outputs(out, stack, 3)

    before = mtimes(out)
    assert counts(run()) == (0, FRAMES, "")
    assert mtimes(out) == before  # not one output rewritten

    # One input gets new content (and a new mtime): only its output is recomputed.
    stack["f2"] = write_frame(tmp_path / "in" / "f2.tif", 100)
    assert counts(run()) == (1, FRAMES - 1, "recomputed 1 as stale")
    check_outputs(out, stack, 3)
    after = mtimes(out)
    assert {k: v for k, v in after.items() if k != "f2.tif"} == {
        k: v for k, v in before.items() if k != "f2.tif"
    }

    # A truncated output (an older crash), and one replaced by a truncated copy whose record
    # is gone too: both are damaged.
    whole = (out / "f4.tif").read_bytes()
    (out / "f1.tif").write_bytes((out / "f1.tif").read_bytes()[:500])
    (out / "f4.tif").write_bytes(whole[:500])
    (out / ".stencilpipe" / "records" / "f4.tif.json").unlink()
    assert counts(run()) == (2, FRAMES - 2, "recomputed 2 as damaged")
    check_outputs(out, stack, 3)
    assert (out / "f4.tif").read_bytes() == whole


def test_a_changed_stage_parameter_recomputes_everything_and_resume_false_too(tmp_path, stack, run):
    out = tmp_path / "out"
    run()
    assert counts(run("stages.0.mean.size=5")) == (
        FRAMES,
        0,
        f"recomputed {FRAMES} as stale",
    )
    check_outputs(out, stack, 5)
    record = json.loads((out / ".stencilpipe" / "records" / "f0.tif.json").read_text())
    assert record["about"]["stages"] == [["mean", {"size": 5, "ndim": 2}]]
    source = (tmp_path / "in" / "f0.tif").stat()
    assert record["inputs"] == [
        [str(tmp_path / "in" / "f0.tif"), source.st_size, source.st_mtime_ns]
    ]

    before = mtimes(out)
    assert counts(run("stages.0.mean.size=5", "resume=false")) == (FRAMES, 0, "")
    check_outputs(out, stack, 5)
    assert all(mtimes(out)[name] > before[name] for name in before)


def test_zarr_output_keeps_its_chunks_until_the_stages_change(tmp_path, stack, run):
    store = tmp_path / "out.zarr"
    expected = np.stack([oracle(stack[f"f{i}"], 3) for i in range(FRAMES)])
    assert counts(run("output=out.zarr", "chunks=2"))[:2] == (FRAMES, 0)
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], expected)

    chunks = mtimes(store / "c" / "0" / "0")
    assert counts(run("output=out.zarr", "chunks=2")) == (0, FRAMES, "")
    assert mtimes(store / "c" / "0" / "0") == chunks

    assert counts(run("output=out.zarr", "chunks=2", "stages.0.mean.size=5")) == (
        FRAMES,
        0,
        f"recomputed {FRAMES} as stale",
    )
    expected = np.stack([oracle(stack[f"f{i}"], 5) for i in range(FRAMES)])
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], expected)
