"""Faults during a real ``stencilpipe run``: a worker process SIGKILLed in the middle of a
write, the client interrupted (SIGINT), and a frame whose kernel raises.

Every run is the command in a subprocess, on real processes (a ``dask scheduler`` and two
``dask worker`` processes started here, or the embedded LocalCluster), on 127.0.0.1 only;
the tests stop whatever they start. Oracles are scipy's (exact integer arithmetic).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import tifffile
from scipy import ndimage as ndi

from dask_processes import wait_for

KERNELS = """\
    import stencilpipe as sp


    @sp.stencil
    def smooth(x):
        return (x[-1, -1] + x[-1, 0] + x[-1, 1] +
                x[0, -1] + x[0, 0] + x[0, 1] +
                x[1, -1] + x[1, 0] + x[1, 1]) // 9


    @sp.stencil
    def inverse(x):
        return 255 // x[0, 0]  # integer division: ZeroDivisionError where a pixel is 0
    """

#: 4 MiB frames: writing one (tifffile, then fsync) takes long enough to be caught at it.
SHAPE = (2048, 2048)
FRAMES = 40
TEMP = re.compile(r"^\..+\.tmp$")


def smooth_oracle(frame: np.ndarray) -> np.ndarray:
    total = ndi.correlate(frame.astype(np.int64), np.ones((3, 3), np.int64), mode="reflect")
    return (total // 9).astype(np.uint8)


def make_inputs(root: Path, frames: int = FRAMES, shape=SHAPE, seed: int = 0) -> list[Path]:
    """``in/f000.tif`` ...: random uint8 frames with values 1..255 (no zero)."""
    (root / "in").mkdir()
    rng = np.random.default_rng(seed)
    paths = []
    for index in range(frames):
        path = root / "in" / f"f{index:03d}.tif"
        tifffile.imwrite(path, rng.integers(1, 256, shape, dtype=np.uint8))
        paths.append(path)
    return paths


def write_config(root: Path, stage: str = "kernels.py:smooth", **extra) -> Path:
    (root / "kernels.py").write_text(textwrap.dedent(KERNELS))
    text = f"input: in/*.tif\noutput: out/\nstages:\n  - stencil: {stage}\n"
    text += "".join(f"{key}: {value}\n" for key, value in extra.items())
    (root / "run.yaml").write_text(text)
    return root / "run.yaml"


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "stencilpipe", *args]


def cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        command(*args), cwd=cwd, capture_output=True, text=True, timeout=timeout, env=ENV
    )


ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "PYTHONFAULTHANDLER": "1"}


def _names(folder: Path) -> list[str]:
    """What ``folder`` holds; nothing when it is gone (a run that ends having finished no
    output removes the output folder it made)."""
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def finals(folder: Path) -> list[str]:
    """The outputs in ``folder``: neither temporary files nor the state (lock, records)."""
    return [name for name in _names(folder) if not TEMP.match(name) and name != ".stencilpipe"]


def temps(folder: Path) -> list[str]:
    return [name for name in _names(folder) if TEMP.match(name)]


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


# -- a cluster started by hand ------------------------------------------------------------------


def _writing(pid: int, folder: Path) -> Path | None:
    """The temporary file in ``folder`` that process ``pid`` has open, if any."""
    try:
        for handle in psutil.Process(pid).open_files():
            path = Path(handle.path)
            if path.parent == folder and TEMP.match(path.name):
                return path
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        pass
    return None


def test_a_worker_killed_while_writing_is_replaced_and_the_run_completes(
    tmp_path, external_cluster
):
    """SIGKILL the worker process that has an output's temporary file open, mid-run.

    The run must finish (exit 0) with every output equal to scipy's, nothing partial under
    a final name, the lost worker in the summary, and no temporary file left behind.
    """
    from distributed import Client

    inputs = make_inputs(tmp_path)
    config = write_config(tmp_path, chunks=1)
    out = tmp_path / "out"
    with Client(external_cluster, timeout=30) as client:
        pids = set(client.run(os.getpid).values())
    assert len(pids) == 2

    run = subprocess.Popen(
        command("run", str(config), "--address", external_cluster),
        cwd=tmp_path,
        stdout=open(tmp_path / "stdout.txt", "w"),  # noqa: SIM115 - the child owns it
        stderr=open(tmp_path / "stderr.txt", "w"),  # noqa: SIM115
        env=ENV,
    )
    killed = None
    try:
        deadline = time.monotonic() + 120
        while killed is None and run.poll() is None and time.monotonic() < deadline:
            if out.is_dir() and temps(out):
                for pid in pids:
                    temp = _writing(pid, out)
                    if temp is not None:
                        os.kill(pid, signal.SIGKILL)
                        killed = (pid, temp, temp.exists(), len(finals(out)))
                        break
            time.sleep(0.001)
        assert killed is not None, "no worker was caught writing an output"
        pid, temp, orphaned, done_at_kill = killed
        assert done_at_kill < FRAMES, "the kill came after the last output"
        wait_for(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie", 10)
        run.wait(timeout=240)
    finally:
        stop(run)
    stdout = (tmp_path / "stdout.txt").read_text()
    stderr = (tmp_path / "stderr.txt").read_text()
    shown = f"exit {run.returncode}\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"

    assert run.returncode == 0, shown
    assert "Traceback" not in stderr, shown
    assert f"{FRAMES} (" in stdout and "failures       │ none" in stdout, shown
    assert finals(out) == [p.name for p in inputs], shown
    for path in inputs:  # complete and right: nothing partial under a final name
        np.testing.assert_array_equal(
            tifffile.imread(out / path.name), smooth_oracle(tifffile.imread(path))
        )
    assert re.search(r"workers lost\s+│ 1 \(their tasks were recomputed\)", stdout), shown

    # The killed worker's temporary file (``orphaned``: it was there at the kill) is
    # removed when the run ends, not left for the next run to clean up.
    assert temps(out) == [], (temps(out), temp, orphaned)


# -- the client interrupted ---------------------------------------------------------------------


def _communicate_or_dump(run: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """``run.communicate``; if the client hangs instead, fail showing where each of its
    threads is (faulthandler prints them on SIGABRT: ``PYTHONFAULTHANDLER`` is set)."""
    try:
        return run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(run.pid, signal.SIGABRT)
        stdout, stderr = run.communicate(timeout=30)
        pytest.fail(f"the client hung for {timeout} s\nstdout:\n{stdout}\nstderr:\n{stderr}")


INTERRUPTED = "interrupted: finished outputs are kept; rerun to resume"


@pytest.mark.parametrize("to", ["client", "process group"])
def test_sigint_exits_130_with_one_line_and_a_rerun_resumes_to_identical_bytes(tmp_path, to):
    """SIGINT mid-run, to the client process alone or (as Ctrl-C in a terminal does) to its
    whole process group, the embedded cluster's processes included."""
    inputs = make_inputs(tmp_path)
    config = write_config(tmp_path, chunks=1)
    reference = cli("run", str(config), "--set", "output=reference/", cwd=tmp_path)
    assert reference.returncode == 0, reference.stderr
    expected = {p.name: (tmp_path / "reference" / p.name).read_bytes() for p in inputs}

    out = tmp_path / "out"
    run = subprocess.Popen(
        command("run", str(config)),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        start_new_session=True,
    )
    try:
        wait_for(lambda: out.is_dir() and len(finals(out)) >= 3, 120, what="3 outputs")
        if to == "client":
            os.kill(run.pid, signal.SIGINT)
        else:
            os.killpg(run.pid, signal.SIGINT)
        stdout, stderr = _communicate_or_dump(run, timeout=120)
    finally:
        stop(run)
        try:
            os.killpg(run.pid, signal.SIGKILL)  # anything of that session still alive
        except ProcessLookupError:
            pass
    shown = f"exit {run.returncode}\nstdout:\n{stdout[-3000:]}\nstderr:\n{stderr[-3000:]}"
    assert run.returncode == 130, shown
    assert "Traceback" not in stdout, shown
    assert INTERRUPTED in stderr.splitlines(), shown
    kept = finals(out)
    assert 0 < len(kept) < FRAMES, ("the interrupt should leave work to resume", kept)
    for name in kept:  # no partial file under a final name
        assert (out / name).read_bytes() == expected[name], name

    rerun = cli("run", str(config), cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"{FRAMES - len(kept)} written, {len(kept)} kept by resume" in rerun.stdout
    assert finals(out) == sorted(expected) and temps(out) == []
    for name, data in expected.items():
        assert (out / name).read_bytes() == data, name

    # The message is all there is on stderr: the workers ignore SIGINT (the client stops
    # them) and the embedded cluster's own log lines are silenced.
    assert stderr.strip().splitlines() == [INTERRUPTED], shown


# -- a frame that fails -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "chunks",
    [1, "auto"],
)
def test_a_frame_whose_kernel_raises_fails_only_its_own_output(tmp_path, chunks):
    """``255 // x[0, 0]`` raises ZeroDivisionError in the one frame that holds a 0."""
    inputs = make_inputs(tmp_path, frames=12, shape=(64, 80), seed=3)
    bad = inputs[5]
    frame = tifffile.imread(bad)
    frame[10, 20] = 0
    tifffile.imwrite(bad, frame)
    config = write_config(tmp_path, stage="kernels.py:inverse", chunks=chunks)

    result = cli("run", str(config), cwd=tmp_path)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 1, shown
    assert "Traceback" not in result.stdout, shown
    failed = [line for line in result.stdout.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 1, shown
    assert bad.name in failed[0] and "ZeroDivisionError" in failed[0], shown
    assert not any(p.name in failed[0] for p in inputs if p != bad), shown
    assert "failures       │ 1 (listed below)" in result.stdout, shown

    out = tmp_path / "out"
    assert finals(out) == sorted(p.name for p in inputs if p != bad), shown
    assert temps(out) == []
    for path in inputs:
        if path != bad:
            frame = tifffile.imread(path)
            want = (255 // frame.astype(np.int64)).astype(np.uint8)
            np.testing.assert_array_equal(tifffile.imread(out / path.name), want)

    assert result.stderr.strip() == "", shown  # the failure is listed once, on stdout


# -- faults that end the whole run --------------------------------------------------------------


def mount_tmpfs(folder: Path, options: str) -> None:
    """Mount a tmpfs on ``folder`` (root only); skip the test where mounting is not allowed."""
    folder.mkdir(exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode})")


@pytest.fixture
def mounts():
    """Mount tmpfs file systems with ``mounts(folder, options)``; all unmounted after."""
    made: list[Path] = []

    def mount(folder: Path, options: str) -> Path:
        mount_tmpfs(folder, options)
        made.append(folder)
        return folder

    yield mount
    for folder in reversed(made):
        subprocess.run(["umount", str(folder)], check=True)


def start(*args: str, cwd: Path) -> subprocess.Popen:
    """The command, started in a subprocess whose output the test reads at its end."""
    return subprocess.Popen(
        command(*args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )


def check_outputs(out: Path, inputs: list[Path]) -> None:
    for path in inputs:
        np.testing.assert_array_equal(
            tifffile.imread(out / path.name), smooth_oracle(tifffile.imread(path))
        )


def test_a_full_file_system_ends_the_run_in_one_line_and_a_rerun_resumes(tmp_path, mounts):
    """40 outputs of 64 KiB onto a 2 MiB tmpfs: the disk fills up part-way."""
    small = mounts(tmp_path / "small", "size=2m")
    inputs = make_inputs(tmp_path, shape=(256, 256))
    config = write_config(tmp_path, chunks=1)
    out = small / "out"

    result = cli("run", str(config), "--set", "output=small/out/", cwd=tmp_path)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, shown
    match = re.fullmatch(
        r"error: no space left on device writing to (.*/)?small/out/ \((\d+) of 40 outputs "
        r"written; free space and rerun to resume\)\n",
        result.stderr,
    )
    assert match, shown
    assert 0 < int(match[2]) < FRAMES and int(match[2]) <= len(finals(out)), shown
    assert "failed:" not in result.stdout and "Traceback" not in result.stdout, shown
    assert temps(out) == [] and temps(out / ".stencilpipe" / "records") == []
    check_outputs(out, [p for p in inputs if p.name in finals(out)])  # nothing partial

    subprocess.run(["mount", "-o", "remount,size=8m", str(small)], check=True)
    rerun = cli("run", str(config), "--set", "output=small/out/", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    written, kept = map(int, re.search(r"(\d+) written, (\d+) kept", rerun.stdout).groups())
    assert written + kept == FRAMES and kept >= int(match[2]), rerun.stdout
    assert finals(out) == sorted(p.name for p in inputs)
    check_outputs(out, inputs)


def test_an_unwritable_output_is_refused_before_anything_is_computed(tmp_path, mounts):
    mounts(tmp_path / "ro", "ro,size=1m")
    make_inputs(tmp_path, frames=3, shape=(32, 40))
    config = write_config(tmp_path)
    result = cli("run", str(config), "--set", "output=ro/", cwd=tmp_path)
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 2, shown
    assert re.fullmatch(
        r"error: cannot write to (.*/)?ro/: Read-only file system \(.*ro/\.stencilpipe\)\n",
        result.stderr,
    ), shown
    assert result.stdout == "", shown  # no cluster started, nothing computed


def test_an_input_that_turns_unreadable_mid_run_fails_only_its_own_frame(tmp_path, lone_scheduler):
    """``chunks: auto`` (2 frames a chunk): the input of one frame is overwritten with garbage
    after the run has read the headers and submitted its tasks, before any worker exists."""
    from distributed import Client

    inputs = make_inputs(tmp_path, frames=32, shape=(64, 80))
    config = write_config(tmp_path)
    run = start("run", str(config), "--address", lone_scheduler.address, cwd=tmp_path)
    try:
        with Client(lone_scheduler.address, timeout=30) as client:
            tasks = lambda dask_scheduler: len(dask_scheduler.tasks)  # noqa: E731
            wait_for(lambda: client.run_on_scheduler(tasks) > 0, 120, 0.1, "submitted tasks")
        bad = inputs[5]
        bad.write_bytes(b"not a TIFF any more " * 100)
        lone_scheduler.add_worker()
        stdout, stderr = run.communicate(timeout=240)
    finally:
        stop(run)
    shown = f"exit {run.returncode}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    assert run.returncode == 1, shown
    failed = [line for line in stdout.splitlines() if line.startswith("failed: ")]
    assert len(failed) == 1 and failed[0].startswith(f"failed: {bad.name}: BadImageFile"), shown
    assert str(bad) in failed[0], shown
    out = tmp_path / "out"
    assert finals(out) == sorted(p.name for p in inputs if p != bad), shown
    assert temps(out) == []
    check_outputs(out, [p for p in inputs if p != bad])


def test_when_every_worker_is_lost_the_run_ends_in_one_line_and_removes_its_temporary_files(
    tmp_path, external_cluster
):
    """Every worker and its nanny SIGKILLed while outputs are being written; the scheduler
    stays. With ``cluster.timeout: 3`` the run must end, not wait for workers forever."""
    from distributed import Client

    inputs = make_inputs(tmp_path)
    config = write_config(tmp_path, chunks=1)
    out = tmp_path / "out"
    with Client(external_cluster, timeout=30) as client:
        workers = [psutil.Process(pid) for pid in client.run(os.getpid).values()]
    nannies = [worker.parent() for worker in workers]

    run = start(
        "run",
        str(config),
        "--address",
        external_cluster,
        "--set",
        "cluster.timeout=3",
        cwd=tmp_path,
    )
    try:
        wait_for(lambda: out.is_dir() and temps(out), 120, what="an output being written")
        for process in nannies + workers:  # the nannies first: they would restart the workers
            process.kill()
        done_at_kill = len(finals(out))
        stdout, stderr = _communicate_or_dump(run, timeout=120)
    finally:
        stop(run)
    shown = f"exit {run.returncode}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    assert done_at_kill < FRAMES, "the kill came after the last output"
    assert run.returncode == 2, shown
    assert stderr == (
        f"error: no workers left on {external_cluster}; finished outputs are kept, "
        "rerun to resume\n"
    ), shown
    assert temps(out) == [], shown
    assert len(finals(out)) < FRAMES
    check_outputs(out, [p for p in inputs if p.name in finals(out)])
    assert not (out / ".stencilpipe" / "lock").exists()
