"""Turn a :class:`~stencilpipe.pipeline.config.ClusterConfig` into a connected ``Client``.

Nothing here reimplements a cluster: an address goes to ``Client(address)``
(Dask's own ``scheduler-address`` config and ``DASK_SCHEDULER_ADDRESS`` are
honoured when the config gives none), otherwise distributed's ``LocalCluster``
starts on 127.0.0.1 with the configured workers (with ``gpu: true``, dask-cuda's
``LocalCUDACluster``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import dask

from ..errors import ClusterError

if TYPE_CHECKING:
    from distributed import Client

    from ..pipeline.config import ClusterConfig

__all__ = ["connect", "scheduler_address"]


def scheduler_address(config: ClusterConfig) -> str | None:
    """The scheduler to use: the config's address, else Dask's own setting, else None (embedded)."""
    return config.address or dask.config.get("scheduler-address", None)


#: The module the embedded cluster's workers preload (see :mod:`.worker_setup`).
WORKER_SETUP = "stencilpipe.cluster.worker_setup"


def _log_level(config: ClusterConfig) -> int:
    """The level below which the embedded cluster's processes drop their log lines."""
    return logging.getLevelName(config.log_level.upper())


def _local_cuda_cluster(config: ClusterConfig) -> Any:
    """dask-cuda's LocalCUDACluster: one worker per visible GPU (``n_workers`` is not used)."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError as exc:
        raise ClusterError(
            f"cluster.gpu needs dask-cuda ({exc}); install stencilpipe[gpu], or set "
            "cluster.gpu: false to run on CPU workers"
        ) from None
    return LocalCUDACluster(
        threads_per_worker=config.threads_per_worker,
        host="127.0.0.1",
        dashboard_address=config.dashboard_address,
        silence_logs=_log_level(config),
        preload=[WORKER_SETUP],
    )


@contextlib.contextmanager
def connect(config: ClusterConfig) -> Iterator[Client]:
    """A ``Client`` for the configured cluster, closed (and the embedded cluster stopped) on exit.

    Raises
    ------
    ClusterError
        When the scheduler cannot be reached within ``config.timeout`` seconds.
    """
    from distributed import Client, LocalCluster

    address = scheduler_address(config)
    if address:
        try:
            client = Client(address, timeout=config.timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(
                f"cannot reach the Dask scheduler at {address} within {config.timeout:g} s "
                f"({type(exc).__name__}: {exc}); check the address, or leave cluster.address "
                "empty to run on an embedded cluster"
            ) from None
        with client:
            yield client
        return
    if config.gpu:
        cluster = _local_cuda_cluster(config)
    else:
        cluster = LocalCluster(
            n_workers=config.n_workers,
            threads_per_worker=config.threads_per_worker,
            processes=config.processes,
            host="127.0.0.1",
            dashboard_address=config.dashboard_address,
            silence_logs=_log_level(config),
            # In-process workers share the client's SIGINT, which must stay.
            preload=[WORKER_SETUP] if config.processes else [],
        )
    with cluster, Client(cluster) as client:
        yield client
