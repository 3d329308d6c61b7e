"""``stencilpipe run`` on a real SLURM queue: jobs submitted through dask-jobqueue start
workers that connect back, compute, and leave nothing behind in the queue."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tifffile
from scipy import ndimage

from .conftest import write_run_config

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


def _config(tmp_path: Path, *, jobs: int = 1, timeout: float = 120) -> Path:
    return write_run_config(tmp_path, "{maximum: {size: 3}}", f"jobs: {jobs}", timeout)


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
    done = _run(_config(tmp_path, jobs=2), env=slurm.env)
    assert done.returncode == 0, done.stderr
    written = sorted((tmp_path / "out").glob("*.tif"))
    assert [p.name for p in written] == [f"f{i:02d}.tif" for i in range(FRAMES)]
    for index, path in enumerate(written):
        expected = ndimage.maximum_filter(stack[index], size=3, mode="reflect")
        np.testing.assert_array_equal(tifffile.imread(path), expected)
    # the workers really ran as SLURM jobs: dask-jobqueue's job logs name them
    assert len(list((tmp_path / "jobs").glob("*.err"))) == 2, os.listdir(tmp_path / "jobs")
    assert slurm.wait_for_no_jobs() == []


def _ctrl_c_once_a_job_is_queued(slurm, config: Path, env: dict) -> tuple[int, str]:
    """Run ``stencilpipe run config``, press Ctrl-C once SLURM lists a job: (status, stderr)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "stencilpipe", "run", str(config)],
        env=env,
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
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, err


def test_ctrl_c_while_jobs_are_queued_exits_130_with_the_resume_hint_and_cancels_them(
    slurm, stack, tmp_path
):
    status, err = _ctrl_c_once_a_job_is_queued(slurm, _config(tmp_path, jobs=2), slurm.env)
    assert status == 130, err
    assert "rerun to resume" in err
    assert slurm.wait_for_no_jobs() == []


def test_ctrl_c_while_a_submission_is_in_flight_leaves_no_job_behind(slurm, stack, tmp_path):
    # A busy controller answers sbatch slowly: this sbatch has handed its job to SLURM and
    # takes three more seconds to return, so the Ctrl-C lands while both submissions are
    # in flight. A terminal's Ctrl-C reaches the whole process group; an sbatch killed
    # there would lose its job's id, and the job would stay in the queue.
    (tmp_path / "bin").mkdir()
    slow_sbatch = tmp_path / "bin" / "sbatch"
    slow_sbatch.write_text(
        f'#!/bin/sh\n{shutil.which("sbatch")} "$@"\nstatus=$?\nsleep 3\nexit $status\n'
    )
    slow_sbatch.chmod(0o755)
    env = {**slurm.env, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{slurm.env['PATH']}"}
    status, err = _ctrl_c_once_a_job_is_queued(slurm, _config(tmp_path, jobs=2), env)
    assert status == 130, err
    assert err.strip() == "interrupted: finished outputs are kept; rerun to resume"
    assert slurm.wait_for_no_jobs() == []


def _with_job_line(config: Path, line: str) -> Path:
    config.write_text(config.read_text().replace("    walltime:", f"    {line}\n    walltime:"))
    return config


def test_a_partition_slurm_does_not_know_is_refused_with_slurms_reason(slurm, stack, tmp_path):
    config = _with_job_line(_config(tmp_path), "queue: nosuchpartition")
    done = _run(config, env=slurm.env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: cluster.job: SLURM refuses the job (")
    assert "Invalid partition name specified" in line  # SLURM's own words
    assert slurm.jobs() == []
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.tif"))


def test_an_account_the_partition_does_not_allow_ends_the_run_with_slurms_reason(
    slurm, stack, tmp_path
):
    # With an accounting database (slurmdbd) `sbatch --test-only` refuses a wrong account at
    # once, as it refuses a wrong partition above. This test cluster has none: SLURM takes
    # the job and keeps it pending (it knows no account at all, so even an allowed one
    # would pend), giving its reason, which the run reports.
    config = _with_job_line(
        _config(tmp_path, timeout=5), "queue: proj42only\n    account: someoneelse"
    )
    done = _run(config, env=slurm.env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: no slurm job started a worker within cluster.timeout (5 s): ")
    assert "pending in partition proj42only (Job's account not known" in line, line
    assert "allows proj42" in line  # SLURM's own words
    assert slurm.wait_for_no_jobs() == []


def test_jobs_left_pending_past_the_timeout_end_the_run_naming_partition_and_reason(
    slurm, stack, tmp_path
):
    config = _with_job_line(_config(tmp_path, jobs=2, timeout=5), "queue: closed")
    done = _run(config, env=slurm.env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: no slurm job started a worker within cluster.timeout (5 s): ")
    assert line.count("pending in partition closed (PartitionDown)") == 2, line
    assert slurm.wait_for_no_jobs() == []
