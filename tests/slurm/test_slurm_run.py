"""``stencilpipe run`` on a real SLURM queue: jobs submitted through dask-jobqueue start
workers that connect back, compute, and leave nothing behind in the queue."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage

FRAMES = 6


@pytest.fixture
def stack(tmp_path):
    """Six 48x64 uint16 TIFF frames with a seeded random pattern."""
    rng = np.random.default_rng(7)
    frames = rng.integers(0, 4000, size=(FRAMES, 48, 64), dtype=np.uint16)
    (tmp_path / "data").mkdir()
    for index, frame in enumerate(frames):
        tifffile.imwrite(tmp_path / "data" / f"f{index:02d}.tif", frame)
    return frames


def _config(tmp_path: Path, **cluster: str) -> Path:
    extra = "".join(f"  {key}: {value}\n" for key, value in cluster.items())
    path = tmp_path / "run.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            input: {tmp_path}/data/*.tif
            output: {tmp_path}/out/
            stages: [{{maximum: {{size: 3}}}}]
            chunks: 1
            cluster:
              jobqueue: slurm
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
        + extra
    )
    return path


def _run(config: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stencilpipe", "run", str(config), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_two_slurm_jobs_compute_the_stack_and_leave_the_queue_empty(slurm, stack, tmp_path):
    done = _run(_config(tmp_path, jobs="2"), env=slurm.env)
    assert done.returncode == 0, done.stderr
    written = sorted((tmp_path / "out").glob("*.tif"))
    assert [p.name for p in written] == [f"f{i:02d}.tif" for i in range(FRAMES)]
    for index, path in enumerate(written):
        expected = ndimage.maximum_filter(stack[index], size=3, mode="reflect")
        np.testing.assert_array_equal(tifffile.imread(path), expected)
    # the workers really ran as SLURM jobs: dask-jobqueue's job logs name them
    assert list((tmp_path / "jobs").glob("*.err")), os.listdir(tmp_path / "jobs")
    assert slurm.wait_for_no_jobs() == []


def test_ctrl_c_while_jobs_are_queued_exits_130_with_the_resume_hint_and_cancels_them(
    slurm, stack, tmp_path
):
    process = subprocess.Popen(
        [sys.executable, "-m", "stencilpipe", "run", str(_config(tmp_path, jobs="2"))],
        env=slurm.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C sees it
    )
    try:
        deadline = time.monotonic() + 120
        while not slurm.jobs():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no job was submitted"
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, (out, err)
    assert "rerun to resume" in err
    assert slurm.wait_for_no_jobs() == []
