"""Fixtures for the cluster tests: a cluster started by hand, as users start one."""

from __future__ import annotations

import pytest

from dask_processes import DaskProcesses, running_cluster


@pytest.fixture
def external_cluster(tmp_path):
    """A ``dask scheduler`` and two ``dask worker`` processes (each under a Nanny, which
    restarts a worker that dies), all on 127.0.0.1. Yields the scheduler's address."""
    with running_cluster(tmp_path, 2) as address:
        yield address


@pytest.fixture
def lone_scheduler(tmp_path):
    """A ``dask scheduler`` on 127.0.0.1 without workers (the test starts them when it wants
    its run to go on). Yields the :class:`DaskProcesses`."""
    processes = DaskProcesses(tmp_path)
    try:
        yield processes
    finally:
        processes.stop()
