"""A ``dask scheduler`` and ``dask worker`` processes started by hand on 127.0.0.1, as users
start them, for tests that need real processes (and to kill some of them)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ENV = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}


def wait_for(predicate, timeout: float, interval: float = 0.005, what: str = "") -> None:
    """Poll ``predicate`` until it is true; TimeoutError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what}")
        time.sleep(interval)


def _scheduler_address(file: Path) -> str | None:
    """The address in a scheduler file, or None while the file is absent or half written
    (the scheduler creates the file, then writes it: an empty file was once read)."""
    try:
        return json.loads(file.read_text())["address"]
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def _dask(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dask"), *args]


class DaskProcesses:
    """A scheduler (with a dashboard, or ``--no-dashboard``), and workers started on request,
    each under a Nanny (which restarts a worker that dies). :meth:`stop` stops them all."""

    def __init__(self, folder: Path, *, dashboard: bool = True) -> None:
        self.processes: list[subprocess.Popen] = []
        self.log = open(folder / "cluster.log", "w")  # noqa: SIM115 - closed in stop()
        file = folder / "scheduler.json"
        web = ["--dashboard-address", "127.0.0.1:0"] if dashboard else ["--no-dashboard"]
        try:
            self._start("scheduler", "--host", "127.0.0.1", "--port", "0", *web,
                        "--scheduler-file", str(file))  # fmt: skip
            wait_for(lambda: _scheduler_address(file), 60, 0.1, "the scheduler file")
        except BaseException:
            self.stop()
            raise
        self.address = _scheduler_address(file)

    def _start(self, *args: str) -> subprocess.Popen:
        process = subprocess.Popen(_dask(*args), stdout=self.log, stderr=subprocess.STDOUT, env=ENV)
        self.processes.append(process)
        return process

    def add_worker(self, nthreads: int = 2, memory_limit: str | None = None) -> subprocess.Popen:
        """Start one ``dask worker`` (a Nanny and its worker process) with ``nthreads``
        threads, as users run them (the stencils compile and run from several threads),
        and ``memory_limit`` (``dask worker --memory-limit``) where given."""
        limit = ("--memory-limit", memory_limit) if memory_limit else ()
        return self._start("worker", self.address, "--nthreads", str(nthreads), *limit,
                           "--host", "127.0.0.1", "--no-dashboard")  # fmt: skip

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
        self.log.close()


@contextlib.contextmanager
def running_cluster(folder: Path, workers: int, *, dashboard: bool = True) -> Iterator[str]:
    """A scheduler and ``workers`` workers, all joined; yields the scheduler's address and
    stops every process on exit."""
    from distributed import Client

    processes = DaskProcesses(folder, dashboard=dashboard)
    try:
        for _ in range(workers):
            processes.add_worker()
        with Client(processes.address, timeout=30) as client:
            client.wait_for_workers(workers, timeout=60)
        yield processes.address
    finally:
        processes.stop()
