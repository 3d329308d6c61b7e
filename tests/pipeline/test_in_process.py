"""Where a run computes: a run that leaves the cluster to stencilpipe and is small runs on
threads of its own process (no cluster to start and stop); any cluster setting of the user's
is honoured.

Oracles: scipy's ``uniform_filter`` (rounded to nearest, as the library's mean documents) and
the files read back by tifffile.
"""

from __future__ import annotations

import gc
import importlib
import os

import numpy as np
import pytest
import tifffile
from rich.console import Console
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.pipeline import parse_config, run

run_module = importlib.import_module("stencilpipe.pipeline.run")  # the name is run()'s too

FRAMES = 5


@pytest.fixture
def frames(tmp_path) -> dict[str, np.ndarray]:
    (tmp_path / "in").mkdir()
    rng = np.random.default_rng(7)
    stack = {f"f{i}": rng.integers(0, 256, (40, 52), dtype=np.uint8) for i in range(FRAMES)}
    for name, frame in stack.items():
        tifffile.imwrite(tmp_path / "in" / f"{name}.tif", frame)
    return stack


def config_for(tmp_path, **keys):
    data = {"input": "in", "output": "out", "stages": [{"mean": {"size": 3}}], **keys}
    return parse_config(data, base_dir=tmp_path)


def check_outputs(tmp_path, frames) -> None:
    for name, frame in frames.items():
        want = np.rint(ndi.uniform_filter(frame.astype(np.float64), 3)).astype(np.uint8)
        np.testing.assert_array_equal(tifffile.imread(tmp_path / "out" / f"{name}.tif"), want)


@pytest.fixture
def connects(monkeypatch):
    """The cluster configs that runs connected to (the real ``connect`` does the work)."""
    seen = []
    real = run_module.connect

    def connect(cluster):
        seen.append(cluster)
        return real(cluster)

    monkeypatch.setattr(run_module, "connect", connect)
    return seen


def test_a_small_run_left_to_stencilpipe_starts_no_cluster(tmp_path, frames, connects):
    console = Console(record=True, width=200)
    summary = run(config_for(tmp_path), console=console, progress=False)
    assert connects == []
    assert summary.written == FRAMES and summary.failures == [] and summary.dashboard is None
    text = console.export_text()
    assert "threads: 2 in this process" in text and "dashboard" not in text
    check_outputs(tmp_path, frames)


@pytest.mark.parametrize(
    "cluster",
    [
        {"n_workers": 1, "processes": False},
        {"threads_per_worker": 1, "processes": False, "dashboard_address": "127.0.0.1:0"},
    ],
)
def test_a_cluster_setting_of_the_users_starts_that_cluster(tmp_path, frames, connects, cluster):
    console = Console(record=True, width=200)
    summary = run(config_for(tmp_path, cluster=cluster), console=console, progress=False)
    assert [c.n_workers for c in connects] == [cluster.get("n_workers", 2)]
    assert summary.dashboard and summary.dashboard.startswith("http://127.0.0.1:")
    assert f"dashboard: {summary.dashboard}" in console.export_text()
    check_outputs(tmp_path, frames)


def test_a_performance_report_needs_the_cluster(tmp_path, frames, connects):
    report = tmp_path / "report.html"
    run(config_for(tmp_path), console=Console(quiet=True), report=str(report), progress=False)
    assert len(connects) == 1 and report.stat().st_size > 0
    check_outputs(tmp_path, frames)


def test_many_frames_of_few_bytes_stay_on_the_threads(tmp_path, frames, connects, monkeypatch):
    """Past the frames limit, a stack of few bytes (20,000 frames of 64x64) still runs on
    threads: it ran faster there than on the embedded cluster."""
    monkeypatch.setattr(run_module, "IN_PROCESS_FRAMES", FRAMES - 1)
    summary = run(config_for(tmp_path), console=Console(quiet=True), progress=False)
    assert connects == [] and summary.written == FRAMES and summary.dashboard is None
    check_outputs(tmp_path, frames)


def test_a_large_run_left_to_stencilpipe_starts_the_cluster(
    tmp_path, frames, connects, monkeypatch
):
    """...and plans once: the embedded cluster's workers are those its chunks were made for
    (a second plan read every header and judged every output again: 4 s for 20,000 files)."""
    monkeypatch.setattr(run_module, "IN_PROCESS_FRAMES", FRAMES - 1)
    monkeypatch.setattr(run_module, "IN_PROCESS_BYTES", 0)
    plans = []
    real = run_module.plan

    def plan(*args, **kwargs):
        plans.append(kwargs.get("workers"))
        return real(*args, **kwargs)

    monkeypatch.setattr(run_module, "plan", plan)
    summary = run(config_for(tmp_path), console=Console(quiet=True), progress=False)
    assert len(connects) == 1 and summary.written == FRAMES and plans == [None]
    check_outputs(tmp_path, frames)


def test_chunks_auto_reads_each_header_once(tmp_path, frames, monkeypatch):
    """``chunks: auto`` re-chunks the stack it opened (here into 1-frame chunks for 2
    threads): the input files' headers are scanned once, not again for the new chunks."""
    read = importlib.import_module("stencilpipe.io.read")
    scans = []
    real = read._scan

    def scan(src):
        scans.append(src.given)
        return real(src)

    monkeypatch.setattr(read, "_scan", scan)
    work = run_module.plan(config_for(tmp_path, chunks="auto"))
    assert work.stack.chunks[0] == (1,) * FRAMES
    assert scans == [str(tmp_path / "in")]


def test_chunks_auto_on_a_zarr_store_whose_frame_axes_merge(tmp_path):
    """A Zarr store of two frame axes (dimension names i, i, y, x) in one chunk: the reader
    merges them into one frame axis at the store's chunks, and ``chunks: auto`` then cuts
    it finer. Both arrays were registered as the input; ``plan`` took them for two inputs
    ("too many values to unpack") before."""
    import zarr

    stack = np.random.default_rng(3).integers(0, 256, (2, 3, 24, 20), dtype=np.uint8)
    store = zarr.create_array(
        tmp_path / "in.zarr",
        shape=stack.shape,
        chunks=stack.shape,
        dtype=stack.dtype,
        dimension_names=["i", "i", "y", "x"],
    )
    store[:] = stack
    config = parse_config(
        {"input": "in.zarr", "output": "out", "chunks": "auto", "stages": [{"mean": {"size": 3}}]},
        base_dir=tmp_path,
    )
    summary = run(config, console=Console(file=None, quiet=True), progress=False)
    assert summary.written == 6 and summary.failures == []
    for index, frame in enumerate(stack.reshape(6, 24, 20)):
        want = np.rint(ndi.uniform_filter(frame.astype(np.float64), 3)).astype(np.uint8)
        np.testing.assert_array_equal(tifffile.imread(tmp_path / "out" / f"{index:05d}.tif"), want)


def test_a_rerun_that_keeps_every_output_says_so_in_its_summary(tmp_path, frames):
    def summary_of_run() -> str:
        console = Console(record=True, width=200)
        run(config_for(tmp_path), console=console, progress=False)
        return console.export_text()

    first = summary_of_run()
    assert f"{FRAMES} written, 0 kept" in first and "frames/s" in first
    again = summary_of_run()
    assert f"0 written, {FRAMES} kept" in again and "frames/s" not in again
    assert f"nothing to compute: all {FRAMES} outputs kept by resume" in again
    check_outputs(tmp_path, frames)


def test_the_progress_display_names_each_phase_from_the_start_then_counts_frames(
    tmp_path, frames, monkeypatch
):
    """A run of many files spends seconds reading headers and loading kernels: the display
    says so from the run's start, and hides that line when its bar of frames starts."""
    from rich.progress import Progress

    shown: list[tuple[str, object]] = []

    class Recorded(Progress):
        def add_task(self, description, **kwargs):
            shown.append(("add", description))
            return super().add_task(description, **kwargs)

        def update(self, task, **kwargs):
            if "description" in kwargs or kwargs.get("visible") is False:
                shown.append(("update", kwargs.get("description", "hidden")))
            return super().update(task, **kwargs)

    monkeypatch.setattr(run_module, "progress_bar", lambda console: Recorded(console=console))
    with open(os.devnull, "w") as sink:
        run(config_for(tmp_path), console=Console(force_terminal=True, file=sink), progress=True)
    assert shown[0] == ("add", "start")
    phases = [what for kind, what in shown if kind == "update"]
    headers = f"read headers of {tmp_path / 'in'}"
    assert phases.index(headers) < phases.index("compile stages") < phases.index("hidden")
    assert shown.index(("update", "hidden")) < shown.index(("add", "frames"))
    check_outputs(tmp_path, frames)


@pytest.mark.parametrize("ending", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_run_removes_its_temporary_files_without_a_file_system_flush(
    tmp_path, frames, monkeypatch, ending
):
    """Ctrl-C ends a run at once: its clean-up removes the temporary files a write left
    but does not wait for ``syncfs`` (all that any process dirtied on the file system, as
    long as the disk needs for it). A run that ends on an error still flushes what it
    finished. Counted here: the ``syncfs`` calls after the run's frames are all written."""
    atomic = importlib.import_module("stencilpipe.io.atomic")
    syncs = []
    real_sync = atomic._sync_file_system
    monkeypatch.setattr(
        atomic, "_sync_file_system", lambda fd, d: (syncs.append(d), real_sync(fd, d))
    )
    real_computed = run_module._computed

    def computed_then_ended(compute, work, locks, console):
        real_computed(compute, work, locks, console)
        leftover = tmp_path / "out" / f".f0.tif.{work.write.run}-{'0' * 12}.tmp"
        leftover.write_bytes(b"what a lost worker left")  # as its temporary file
        syncs.clear()
        raise ending

    monkeypatch.setattr(run_module, "_computed", computed_then_ended)
    with pytest.raises(ending):
        run(config_for(tmp_path), console=Console(quiet=True), progress=False)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        [f"{name}.tif" for name in frames] + [".stencilpipe"]
    )
    assert syncs == ([] if ending is KeyboardInterrupt else [str(tmp_path / "out")])
    check_outputs(tmp_path, frames)


@pytest.mark.parametrize("fails", [False, True])
def test_planning_runs_without_the_cyclic_collector_which_comes_back_after(
    tmp_path, frames, monkeypatch, request, fails
):
    """The collector walks every object each time it runs, and planning makes many that
    stay (headers, kernels): it is paused while the run plans, and enabled again after,
    also when planning fails."""
    real_plan = run_module.plan
    seen = []

    def plan(*args, **kwargs):
        seen.append(gc.isenabled())
        if fails:
            raise sp.ImageStackError("a bad header")
        return real_plan(*args, **kwargs)

    monkeypatch.setattr(run_module, "plan", plan)
    if not gc.isenabled():  # as a Python session has it, whatever ran before in this one
        gc.enable()
        request.addfinalizer(gc.disable)
    if fails:
        with pytest.raises(sp.ImageStackError):
            run(config_for(tmp_path), console=Console(quiet=True), progress=False)
    else:
        run(config_for(tmp_path), console=Console(quiet=True), progress=False)
        check_outputs(tmp_path, frames)
    assert seen == [False] and gc.isenabled()
