"""Durable without an fsync per file: whatever kills a run (its client, a worker, the machine
before the end-of-run flush), a rerun gives outputs byte-identical to a clean run.

Every run is ``stencilpipe apply`` in a subprocess, on threads of its own process (a run that
leaves the cluster to stencilpipe), on the embedded LocalCluster (``--workers 2``) or on a
``dask scheduler`` and worker started here, all on 127.0.0.1; the tests stop what they start.
The oracle is a clean run's bytes (and scipy's median filter for those).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
import tifffile
from scipy import ndimage as ndi

from dask_processes import DaskProcesses, wait_for

#: Frames slow enough (a 5x5 median of 2 MiB) that a run is caught with most of them to write.
FRAMES = 48
SHAPE = (1024, 2048)
STAGES = "median:size=5"
TEMP = re.compile(r"^\..+\.tmp$")
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}


def apply(source: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "stencilpipe", "apply", STAGES, str(source), str(out), *extra]


def cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def finals(folder: Path) -> list[str]:
    names = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    return [n for n in names if not TEMP.match(n) and n != ".stencilpipe"]


def temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if TEMP.match(p.name)] if folder.exists() else []


def counts(stdout: str) -> tuple[int, int]:
    match = re.search(r"frames\s+│ \d+ \((\d+) written, (\d+) kept by resume\)", stdout)
    assert match, stdout
    return int(match[1]), int(match[2])


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[Path, dict[str, bytes]]:
    """The inputs, and the bytes of a clean run's outputs (checked against scipy)."""
    root = tmp_path_factory.mktemp("durability")
    (root / "in").mkdir()
    rng = np.random.default_rng(5)
    frames = {}
    for i in range(FRAMES):
        frames[f"f{i:02d}.tif"] = rng.integers(0, 256, SHAPE, dtype=np.uint8)
        tifffile.imwrite(root / "in" / f"f{i:02d}.tif", frames[f"f{i:02d}.tif"])
    cli(*apply(root / "in", root / "clean"))
    for name in ("f00.tif", f"f{FRAMES - 1}.tif"):
        want = ndi.median_filter(frames[name], 5, mode="reflect")
        np.testing.assert_array_equal(tifffile.imread(root / "clean" / name), want)
    return root / "in", {name: (root / "clean" / name).read_bytes() for name in frames}


def check_identical(out: Path, expected: dict[str, bytes]) -> None:
    assert finals(out) == sorted(expected) and temps(out) == []
    for name, data in expected.items():
        assert (out / name).read_bytes() == data, name


def session(pid: int) -> list[psutil.Process]:
    """The processes of the session that ``pid`` led (it started with a session of its own)."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) == pid and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return found


@pytest.mark.parametrize("where", [[], ["--workers", "2"]], ids=["threads", "local-cluster"])
def test_a_client_killed_mid_run_then_a_rerun_gives_the_bytes_of_a_clean_run(
    tmp_path, clean, where
):
    source, expected = clean
    out = tmp_path / "out"
    run = subprocess.Popen(
        apply(source, out, *where),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
        start_new_session=True,
    )
    try:
        wait_for(lambda: len(finals(out)) >= 1 or run.poll() is not None, 120, 0.001)
        run.send_signal(signal.SIGKILL)  # the client alone
        run.wait(timeout=30)
        # Its workers (with --workers) go with it; whatever of its session is left is stopped
        # before the rerun, so that nothing of the killed run writes during it.
        wait_for(lambda: not session(run.pid), 30, 0.1, "the killed run's workers to exit")
    finally:
        if run.poll() is None:
            run.kill()
        for process in session(run.pid):
            process.kill()
    kept = finals(out)
    assert 0 < len(kept) < FRAMES, ("the kill should leave work to resume", len(kept))

    rerun = cli(*apply(source, out, *where))
    written, resumed = counts(rerun.stdout)
    assert written + resumed == FRAMES and written >= FRAMES - len(kept), rerun.stdout
    check_identical(out, expected)


def test_a_worker_killed_mid_run_then_a_rerun_gives_the_bytes_of_a_clean_run(tmp_path, clean):
    from distributed import Client

    source, expected = clean
    out = tmp_path / "out"
    processes = DaskProcesses(tmp_path, dashboard=False)
    try:
        processes.add_worker()
        with Client(processes.address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
            (pid,) = client.run(os.getpid).values()
        run = subprocess.Popen(
            apply(source, out, "--address", processes.address, "--json"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        try:
            wait_for(lambda: len(finals(out)) >= 1 or run.poll() is not None, 120, 0.001)
            os.kill(pid, signal.SIGKILL)  # the worker process; its Nanny starts another
            done_at_kill = len(finals(out))
            stdout, stderr = run.communicate(timeout=240)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(timeout=30)
        assert done_at_kill < FRAMES, "the kill came after the last output"
        assert run.returncode == 0, stdout + stderr
        assert '"workers_lost": 1' in stdout, stdout
        check_identical(out, expected)
        rerun = cli(*apply(source, out, "--address", processes.address))
        assert counts(rerun.stdout) == (0, FRAMES), rerun.stdout
    finally:
        processes.stop()
    check_identical(out, expected)


def test_outputs_a_crash_left_unflushed_are_recomputed(tmp_path, clean):
    """What a machine that crashed before the end-of-run flush may leave: an output renamed
    into place with no data (ext4), one of the right size full of zeros (XFS), a record
    with no data. The rerun verifies every kept output against its recorded checksum."""
    source, expected = clean
    out = tmp_path / "out"
    cli(*apply(source, out))
    (out / "f03.tif").write_bytes(b"")
    (out / "f07.tif").write_bytes(bytes(len(expected["f07.tif"])))
    (out / ".stencilpipe" / "records" / "f11.tif.json").write_bytes(b"")
    (out / ".stencilpipe" / "records" / "f12.tif.json").write_bytes(b"")
    (out / "f12.tif").write_bytes(bytes(len(expected["f12.tif"])))
    rerun = cli(*apply(source, out))
    assert counts(rerun.stdout) == (4, FRAMES - 4), rerun.stdout
    assert "recomputed 1 as stale, 3 as damaged" in rerun.stdout, rerun.stdout
    check_identical(out, expected)
