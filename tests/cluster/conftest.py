"""Fixtures for the cluster tests: a cluster started by hand, as users start one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _dask(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dask"), *args]


@pytest.fixture
def external_cluster(tmp_path):
    """A ``dask scheduler`` and two ``dask worker`` processes (each under a Nanny, which
    restarts a worker that dies), all on 127.0.0.1. Yields the scheduler's address."""
    from distributed import Client

    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    logs = open(tmp_path / "cluster.log", "w")  # noqa: SIM115 - closed below
    processes = [
        subprocess.Popen(
            _dask(
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--dashboard-address",
                "127.0.0.1:0",
                "--scheduler-file",
                str(scheduler_file),
            ),
            stdout=logs,
            stderr=subprocess.STDOUT,
            env=env,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists():
            if time.monotonic() > deadline:
                raise TimeoutError("gave up waiting for the scheduler file")
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        for _ in range(2):
            processes.append(
                subprocess.Popen(
                    _dask(
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--no-dashboard",
                    ),
                    stdout=logs,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        with Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        yield address
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        logs.close()
