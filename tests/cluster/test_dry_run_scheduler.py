"""``stencilpipe run --dry-run`` on an existing scheduler asks its workers for their memory
limit (issue 18 (e)): real ``dask scheduler`` / ``dask worker --memory-limit`` processes."""

import json
import socket

import numpy as np
import zarr
from dask.utils import parse_bytes

from dask_processes import DaskProcesses
from stencilpipe.pipeline.sizing import TASK_MEMORY_FACTOR, frames_per_chunk
from test_cli import cli

FRAME = (2048, 2048)


def _config(tmp_path, address, timeout=20):
    # A dry run reads no pixels: the store holds none (zarr writes no empty chunks).
    zarr.create_array(str(tmp_path / "in.zarr"), shape=(40, *FRAME), dtype=np.uint16,
                      chunks=(16, *FRAME))  # fmt: skip
    (tmp_path / "run.yaml").write_text(
        "input: in.zarr\noutput: out.zarr\nstages: [{mean: {size: 3}}]\n"
        f"cluster: {{address: '{address}', timeout: {timeout}}}\n"
    )


def test_dry_run_reads_the_workers_memory_limit_from_the_scheduler(tmp_path):
    processes = DaskProcesses(tmp_path, dashboard=False)
    try:
        for _ in range(2):
            processes.add_worker(nthreads=1, memory_limit="400MB")
        from distributed import Client

        with Client(processes.address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        _config(tmp_path, processes.address)
        result = cli("run", "--dry-run", "--json", "run.yaml", cwd=tmp_path)
    finally:
        processes.stop()
    assert result.returncode == 0, result.stdout + result.stderr
    estimate = json.loads(result.stdout)["estimate"]
    limit = parse_bytes("400MB")
    assert estimate["memory_limit"] == limit
    frame = FRAME[0] * FRAME[1] * 2
    frames = frames_per_chunk(frame, frame, limit, 1)  # mean of uint16 is uint16
    assert estimate["chunk_shape"] == [frames, *FRAME]
    assert estimate["peak_bytes_per_worker"] == TASK_MEMORY_FACTOR * 2 * frames * frame
    assert not (tmp_path / "out.zarr").exists()


def test_dry_run_balances_over_the_schedulers_threads_and_refuses_a_worker_too_small(tmp_path):
    processes = DaskProcesses(tmp_path, dashboard=False)
    try:
        for _ in range(3):
            processes.add_worker(nthreads=1, memory_limit="0")  # no limit
        from distributed import Client

        with Client(processes.address, timeout=30) as client:
            client.wait_for_workers(3, timeout=60)
            _config(tmp_path, processes.address)
            balanced = cli("run", "--dry-run", "--json", "run.yaml", cwd=tmp_path)
            processes.add_worker(nthreads=1, memory_limit="200MB")
            client.wait_for_workers(4, timeout=60)
            refused = cli("run", "--dry-run", "run.yaml", cwd=tmp_path)
    finally:
        processes.stop()
    assert balanced.returncode == 0, balanced.stdout + balanced.stderr
    # 40 frames over 3 threads, 8 chunks each: 2 frames per chunk (the config's default
    # cluster of 2 threads would give 3).
    assert json.loads(balanced.stdout)["estimate"]["chunk_shape"] == [2, *FRAME]
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "memory limit of 190.73 MiB cannot hold a task" in lines[0]
    assert "give each worker at least" in lines[0]
    assert not (tmp_path / "out.zarr").exists()


def test_dry_run_on_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path):
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    _config(tmp_path, f"tcp://127.0.0.1:{port}", timeout=2)
    result = cli("run", "--dry-run", "run.yaml", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], result.stderr
    assert "127.0.0.1" in lines[0] and "2 s" in lines[0]
