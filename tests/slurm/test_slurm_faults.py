"""A SLURM worker job cancelled in the middle of a run: its frames are computed by the
other job's worker, every output is written once and whole, and the queue ends empty."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import tifffile

FRAMES = 24

#: Each frame costs ~0.1 s of arithmetic whose result is the frame itself, so the run
#: lasts long enough to lose a worker in its middle on any machine.
KERNELS = '''
import stencilpipe as sp


@sp.stencil
def slow_identity(x):
    waste = 0.0
    for k in range(1500):
        waste += x[0, 0] * k
    return x[0, 0] + waste * 0.0
'''


@pytest.fixture
def slow_run(tmp_path):
    rng = np.random.default_rng(3)
    frames = rng.random((FRAMES, 256, 256), dtype=np.float32)
    (tmp_path / "data").mkdir()
    for index, frame in enumerate(frames):
        tifffile.imwrite(tmp_path / "data" / f"f{index:03d}.tif", frame)
    (tmp_path / "kernels.py").write_text(KERNELS)
    (tmp_path / "run.yaml").write_text(
        textwrap.dedent(
            f"""\
            input: data/*.tif
            output: out/
            stages: [{{stencil: kernels.py:slow_identity}}]
            chunks: 1
            cluster:
              jobqueue: slurm
              jobs: 2
              timeout: 120
              job:
                cores: 1
                memory: 1GB
                walltime: "00:10:00"
                local_directory: {tmp_path}/jobs
                log_directory: {tmp_path}/jobs
                scheduler_options: {{host: 127.0.0.1}}
            """
        )
    )
    return frames


def _job_logs(tmp_path) -> str:
    """The jobs' worker logs, to say why no output came."""
    return "\n".join(path.read_text()[-1500:] for path in (tmp_path / "jobs").glob("*.err"))


def test_a_worker_job_cancelled_mid_run_loses_no_frame(slurm, slow_run, tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-m", "stencilpipe", "run", str(tmp_path / "run.yaml")],
        env=slurm.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
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
    outputs = sorted((tmp_path / "out").glob("*.tif"))
    assert len(outputs) == FRAMES
    assert any(path.stat().st_mtime > cancelled_at for path in outputs)
    for index, path in enumerate(outputs):
        np.testing.assert_array_equal(tifffile.imread(path), slow_run[index])
    assert not list((tmp_path / "out").glob(".*.tmp"))
    assert slurm.wait_for_no_jobs() == []
