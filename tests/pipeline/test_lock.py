"""One run at a time on one output, with real processes: ``stencilpipe run`` against a
``dask scheduler`` started here with no worker yet, so that the first run holds the output's
lock, deterministically, until the test starts a worker.

The second run refuses in one line (exit 2) or, with ``wait=True``, waits and then finds
everything written; a SIGKILLed run's lock is stale and taken over, its temporary files
removed; the temporary files of a live run are never removed by another write.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

from dask_processes import DaskProcesses, wait_for
from stencilpipe.io import imread, imsave
from stencilpipe.io.errors import OutputBusy
from stencilpipe.io.lock import lock_output

FRAMES = 4
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


@pytest.fixture
def cluster(tmp_path):
    started = DaskProcesses(tmp_path, dashboard=False)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def stack(tmp_path) -> dict[str, np.ndarray]:
    (tmp_path / "in").mkdir()
    (tmp_path / "run.yaml").write_text(
        "input: in/*.tif\noutput: out/\nstages:\n  - mean: {size: 3}\n"
    )
    frames = {}
    for i in range(FRAMES):
        frames[f"f{i}"] = np.random.default_rng(i).integers(0, 256, (32, 40), dtype=np.uint8)
        tifffile.imwrite(tmp_path / "in" / f"f{i}.tif", frames[f"f{i}"])
    return frames


def start_run(tmp_path: Path, address: str, wait: bool = False) -> subprocess.Popen:
    """``stencilpipe run`` (or the Python API's ``run(..., wait=True)``) in a subprocess."""
    if wait:
        code = (
            "from stencilpipe.pipeline import load_config, run; "
            f"run(load_config('run.yaml', ['cluster.address={address}']), wait=True)"
        )
        command = [sys.executable, "-c", code]
    else:
        command = [sys.executable, "-m", "stencilpipe", "run", "run.yaml", "--address", address]
    return subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )


def finish(process: subprocess.Popen) -> tuple[int, str, str]:
    try:
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stdout, stderr


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.communicate(timeout=60)


def lock_of(out: Path) -> dict:
    return json.loads((out / ".stencilpipe" / "lock").read_text())


def check_outputs(out: Path, frames: dict[str, np.ndarray]) -> None:
    for name, frame in frames.items():
        want = np.rint(ndi.uniform_filter(frame.astype(np.float64), 3)).astype(np.uint8)
        np.testing.assert_array_equal(tifffile.imread(out / f"{name}.tif"), want)


def test_a_second_run_refuses_in_one_line_or_waits_for_the_first(tmp_path, stack, cluster):
    out = tmp_path / "out"
    first = start_run(tmp_path, cluster.address)
    try:
        wait_for((out / ".stencilpipe" / "lock").exists, 120, what="the first run's lock")
        holder = lock_of(out)
        assert holder["pid"] == first.pid and holder["host"] == socket.gethostname()

        code, stdout, stderr = finish(start_run(tmp_path, cluster.address))
        assert code == 2, stdout + stderr
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder["since"]))
        assert re.fullmatch(
            f"error: (.*/)?out/ is being written by another stencilpipe run \\(pid {first.pid} "
            f"on {holder['host']}, run {holder['run']}, since {since}\\); wait for it to end "
            "\\(--wait\\), or write elsewhere\n",
            stderr,
        ), stderr
        assert first.poll() is None and lock_of(out) == holder  # the first run goes on

        waiting = start_run(tmp_path, cluster.address, wait=True)
        cluster.add_worker()  # now the first run can compute, and then the waiting one
        code, stdout, stderr = finish(first)
        assert code == 0, stdout + stderr
        assert f"{FRAMES} written, 0 kept by resume" in stdout
        code, stdout, stderr = finish(waiting)
    finally:
        stop(first)
    assert code == 0, stdout + stderr
    assert f"0 written, {FRAMES} kept by resume" in stdout  # it ran after the first ended
    check_outputs(out, stack)
    assert not (out / ".stencilpipe" / "lock").exists()


def test_the_lock_of_a_killed_run_is_taken_over_and_its_temporary_files_removed(
    tmp_path, stack, cluster
):
    out = tmp_path / "out"
    first = start_run(tmp_path, cluster.address)
    try:
        wait_for((out / ".stencilpipe" / "lock").exists, 120, what="the first run's lock")
        run = lock_of(out)["run"]
        first.send_signal(signal.SIGKILL)
    finally:
        stop(first)
    orphan = out / f".f1.tif.{run}-{'0' * 12}.tmp"  # what it left, had it been writing
    orphan.write_bytes(b"II*\0 half a file")

    cluster.add_worker()
    code, stdout, stderr = finish(start_run(tmp_path, cluster.address))
    assert code == 0, stdout + stderr
    assert f"{FRAMES} written, 0 kept by resume" in stdout
    check_outputs(out, stack)
    assert sorted(p.name for p in out.iterdir()) == [".stencilpipe"] + [
        f"f{i}.tif" for i in range(FRAMES)
    ]
    assert not (out / ".stencilpipe" / "lock").exists()


HOLDER = """\
import sys
from stencilpipe.io.lock import lock_output
with lock_output(sys.argv[1], "out/") as run:
    print(run, flush=True)
    sys.stdin.readline()
"""


def test_a_write_never_removes_the_temporary_files_of_a_live_run(tmp_path, stack):
    """A lock held by another live process: its temporary files survive the start-up
    clean-up of an unlocked write (``compute=False``); a dead run's do not."""
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    try:
        run = holder.stdout.readline().strip()
        live = out / f".f0.tif.{run}-{'1' * 12}.tmp"
        dead = out / f".f1.tif.{'2' * 12}-{'3' * 12}.tmp"
        for path in (live, dead):
            path.write_bytes(b"half")
        imsave(imread(tmp_path / "in"), out / "*.tif", compute=False).compute()
        assert live.exists() and not dead.exists()
        with pytest.raises(OutputBusy, match=f"pid {holder.pid} on "):
            imsave(imread(tmp_path / "in"), out)
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    assert not (out / ".stencilpipe" / "lock").exists()


def test_a_lock_whose_pid_was_reused_is_stale_and_one_from_another_host_is_not(tmp_path):
    out = tmp_path / "out"
    (out / ".stencilpipe").mkdir(parents=True)
    lock = out / ".stencilpipe" / "lock"
    me = {"host": socket.gethostname(), "pid": os.getpid(), "run": "a" * 12, "since": 0.0}
    lock.write_text(json.dumps({**me, "started": 0.0}))  # this pid, but not this process
    with lock_output(out, "out/") as run:
        assert lock_of(out)["run"] == run != "a" * 12

    lock.write_text(json.dumps({**me, "host": "elsewhere", "started": 0.0}))
    with pytest.raises(OutputBusy, match=r"another stencilpipe run \(pid \d+ on elsewhere, run a"):
        with lock_output(out, "out/"):
            pass
    assert lock_of(out)["host"] == "elsewhere"  # left to its owner


def test_a_run_with_nothing_to_compute_needs_no_worker(tmp_path, stack, cluster):
    """Every output kept: the run ends without waiting for a worker (a batch system's may
    start hours later)."""
    worker = cluster.add_worker()
    code, stdout, stderr = finish(start_run(tmp_path, cluster.address))
    assert code == 0, stdout + stderr
    worker.terminate()
    worker.wait(timeout=60)

    code, stdout, stderr = finish(start_run(tmp_path, cluster.address))
    assert code == 0, stdout + stderr
    assert f"0 written, {FRAMES} kept by resume" in stdout
    check_outputs(tmp_path / "out", stack)
