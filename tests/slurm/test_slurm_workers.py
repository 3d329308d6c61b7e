"""Worker jobs that come and go during a run on a real SLURM queue: adaptive scaling
submits jobs while work is queued and cancels them at the end; a job cancelled in the
middle of a run loses no frame. Every output is written once and whole, and the queue
ends empty."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import tifffile

from .conftest import write_run_config

FRAMES = 24

#: Each frame costs ~0.1 s of arithmetic whose result is the frame itself, so the run
#: lasts long enough to lose a worker in its middle on any machine.
KERNELS = """
import stencilpipe as sp


@sp.stencil
def slow_identity(x):
    waste = 0.0
    for k in range(1500):
        waste += x[0, 0] * k
    return x[0, 0] + waste * 0.0
"""


def _slow_run(tmp_path, scaling: str):
    """Frames, a slow kernel and a config whose SLURM jobs are sized by ``scaling``."""
    rng = np.random.default_rng(3)
    frames = rng.random((FRAMES, 256, 256), dtype=np.float32)
    (tmp_path / "data").mkdir()
    for index, frame in enumerate(frames):
        tifffile.imwrite(tmp_path / "data" / f"f{index:03d}.tif", frame)
    (tmp_path / "kernels.py").write_text(KERNELS)
    write_run_config(tmp_path, "{stencil: kernels.py:slow_identity}", scaling)
    return frames


def _start(slurm, tmp_path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "stencilpipe", "run", str(tmp_path / "run.yaml")],
        env=slurm.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _check_outputs(tmp_path, frames) -> list:
    outputs = sorted((tmp_path / "out").glob("*.tif"))
    assert len(outputs) == FRAMES
    for index, path in enumerate(outputs):
        np.testing.assert_array_equal(tifffile.imread(path), frames[index])
    assert not list((tmp_path / "out").glob(".*.tmp"))
    return outputs


def _job_logs(tmp_path) -> str:
    """The jobs' worker logs, to say why no output came."""
    return "\n".join(path.read_text()[-1500:] for path in (tmp_path / "jobs").glob("*.err"))


def test_adaptive_scaling_submits_jobs_while_work_is_queued_and_cancels_them(slurm, tmp_path):
    frames = _slow_run(tmp_path, "adapt: {minimum: 0, maximum: 2}")
    process = _start(slurm, tmp_path)
    seen: set[str] = set()
    try:
        while process.poll() is None:
            seen.update(slurm.jobs())
            time.sleep(0.2)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, (out, err)
    assert 1 <= len(seen) <= 2, seen  # jobs came with the work, never more than maximum
    _check_outputs(tmp_path, frames)
    assert slurm.wait_for_no_jobs() == []


def test_a_worker_job_cancelled_mid_run_loses_no_frame(slurm, tmp_path):
    frames = _slow_run(tmp_path, "jobs: 2")
    process = _start(slurm, tmp_path)
    try:
        deadline = time.monotonic() + 180
        while len(list((tmp_path / "out").glob("*.tif"))) < 2:
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, _job_logs(tmp_path)
            time.sleep(0.05)
        (cancelled, *_) = slurm.jobs()
        slurm.command("scancel", cancelled)
        cancelled_at = time.time()
        written_before = len(list((tmp_path / "out").glob("*.tif")))
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, (out, err)
    assert written_before < FRAMES  # the job was really lost in the middle of the run
    outputs = _check_outputs(tmp_path, frames)
    assert any(path.stat().st_mtime > cancelled_at for path in outputs)
    assert slurm.wait_for_no_jobs() == []
