"""Turn a :class:`~stencilpipe.pipeline.config.ClusterConfig` into a connected ``Client``.

Nothing here reimplements a cluster: an address goes to ``Client(address)``
(Dask's own ``scheduler-address`` config and ``DASK_SCHEDULER_ADDRESS`` are
honoured when the config gives none); ``jobqueue: slurm`` (or pbs, sge, ...)
starts dask-jobqueue's cluster of that batch system and submits ``jobs`` jobs;
otherwise distributed's ``LocalCluster`` starts on 127.0.0.1 with the configured
workers (with ``gpu: true``, dask-cuda's ``LocalCUDACluster``). With
``security``, every connection is TLS with the configured certificates
(distributed's ``Security``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import dask

from ..errors import ClusterError
from .jobqueue import check_submission, job_options, jobqueue_cluster, wait_for_first_worker
from .security import security, ssl_error, tls_options

if TYPE_CHECKING:
    from distributed import Client, Security

    from ..pipeline.config import ClusterConfig

__all__ = [
    "connect",
    "dashboard_link",
    "job_options",
    "job_script",
    "left_to_us",
    "scheduler_address",
    "security",
]


def scheduler_address(config: ClusterConfig) -> str | None:
    """The scheduler to use: the config's address, else Dask's setting, else None (start one).

    A ``jobqueue`` cluster starts its own scheduler, so Dask's setting does not apply to it.
    """
    if config.address or config.jobqueue:
        return config.address
    return dask.config.get("scheduler-address", None)


#: The embedded cluster's settings that, when given, ask for that cluster to be started.
_EMBEDDED_SETTINGS = ("n_workers", "threads_per_worker", "processes")


def left_to_us(config: ClusterConfig) -> bool:
    """Whether ``config`` leaves where to run to stencilpipe: no scheduler (neither
    ``cluster.address`` nor Dask's setting), no batch jobs, GPUs or TLS, no worker count,
    threads or processes of its own, and no dashboard address (``null`` is none).

    Such a run may compute on threads of its own process when no cluster would pay for
    its start (see :mod:`stencilpipe.pipeline.run`).
    """
    given = config.model_fields_set
    return not (
        scheduler_address(config)
        or config.jobqueue
        or config.gpu
        or config.security
        or any(name in given for name in _EMBEDDED_SETTINGS)
        or ("dashboard_address" in given and config.dashboard_address is not None)
    )


#: The module the embedded cluster's workers preload (see :mod:`.worker_setup`).
WORKER_SETUP = "stencilpipe.cluster.worker_setup"


def _log_level(config: ClusterConfig) -> int:
    """The level below which the embedded cluster's processes drop their log lines."""
    return logging.getLevelName(config.log_level.upper())


# --- an existing scheduler ------------------------------------------------------------


def _unreachable_hint(address: str, tls: Security | None, exc: BaseException) -> str:
    """What to check when the scheduler at ``address`` did not answer."""
    if ssl_error(exc) is not None:
        return "check the certificates and keys in cluster.security"
    if tls is not None and not address.startswith("tls://"):
        return "with cluster.security set, give the scheduler's tls:// address"
    return "check the address, or leave cluster.address empty to run on an embedded cluster"


def _check_tls_address(address: str, config: ClusterConfig, tls: Security | None) -> None:
    """Refuse a tls:// address without certificates (neither in the config nor in Dask's).

    distributed would fail with a TypeError, and leave a half-made client behind
    whose clean-up stalls the next client's start.
    """
    from distributed import Security

    client = (tls or Security()).get_tls_config_for_role("client")
    if address.startswith("tls://") and not (client.get("ca_file") and client.get("cert")):
        raise ClusterError(
            f"cannot reach the Dask scheduler at {address} within {config.timeout:g} s "
            "(no TLS certificates to connect with); a tls:// scheduler needs certificates: "
            "set cluster.security (tls_ca_file, tls_client_cert, tls_client_key)"
        )


def _remote_client(address: str, config: ClusterConfig, tls: Security | None) -> Client:
    """A ``Client`` of the scheduler at ``address``, or one line that says why not.

    distributed says "no" in several ways: OSError and TimeoutError (nobody answers,
    TLS handshake refused), ValueError (unknown scheme), RuntimeError (encryption
    required, tcp:// address).
    """
    from distributed import Client

    _check_tls_address(address, config, tls)
    try:
        return Client(address, timeout=config.timeout, security=tls)
    except (OSError, TimeoutError, ValueError, RuntimeError) as exc:
        kind, detail = type(exc).__name__, " ".join(str(exc).split())
        hint = _unreachable_hint(address, tls, exc)
        # The client that failed to start is garbage; collect it now, in this thread. Left
        # to a later collection, its __del__ (which closes it, waiting on its event loop)
        # may run in the thread that starts the next client's loop, and stall it.
        del exc
        gc.collect()
        raise ClusterError(
            f"cannot reach the Dask scheduler at {address} within {config.timeout:g} s "
            f"({kind}: {detail}); {hint}"
        ) from None


# --- clusters started here --------------------------------------------------------------


def _dashboard(config: ClusterConfig) -> dict[str, Any]:
    """A local cluster's dashboard options; ``dashboard_address: null`` starts no dashboard.

    The scheduler keeps its HTTP server (health and metrics) then; it gets a free loopback
    port, not distributed's default 8787, which it would warn about when taken.
    """
    if config.dashboard_address is None:
        return {"dashboard_address": "127.0.0.1:0", "scheduler_kwargs": {"dashboard": False}}
    return {"dashboard_address": config.dashboard_address}


def _local_cuda_cluster(config: ClusterConfig, tls: Security | None) -> Any:
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
        **_dashboard(config),
        silence_logs=_log_level(config),
        preload=[WORKER_SETUP],
        **tls_options(tls),
    )


def _local_cluster(config: ClusterConfig, tls: Security | None) -> Any:
    """distributed's LocalCluster on 127.0.0.1 with the configured workers.

    With ``processes: false`` the workers are threads of this process. They still speak
    tcp:// (or tls://): distributed's default for them, inproc://, refuses a host, and its
    addresses name the machine's IP, which the dashboard's link would then point at.
    """
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=config.n_workers,
        threads_per_worker=config.threads_per_worker,
        processes=config.processes,
        host="127.0.0.1",
        **_dashboard(config),
        silence_logs=_log_level(config),
        # In-process workers share the client's SIGINT, which must stay.
        preload=[WORKER_SETUP] if config.processes else [],
        **(tls_options(tls) or {"protocol": "tcp://"}),
    )


def job_script(config: ClusterConfig) -> str:
    """The batch script that each job of ``config.jobqueue`` runs, without submitting any.

    Starts the cluster's scheduler (the script names its address) and stops it again.

    Raises
    ------
    ClusterError
        When ``config.jobqueue`` is not set, dask-jobqueue is missing, or
        ``config.job`` holds an option the batch system does not accept.
    """
    if not config.jobqueue:
        raise ClusterError("cluster.jobqueue is not set: there is no job script to show")
    with _start_cluster(config, security(config)) as cluster:
        return cluster.job_script()


def _start_cluster(config: ClusterConfig, tls: Security | None) -> Any:
    """The jobqueue, dask-cuda or local cluster that ``config`` asks for, started."""
    start: Callable[[ClusterConfig, Security | None], Any]
    if config.jobqueue:
        start = functools.partial(jobqueue_cluster, silence_logs=_log_level(config))
    else:
        start = _local_cuda_cluster if config.gpu else _local_cluster
    try:
        return start(config, tls)
    except RuntimeError as exc:  # distributed's "Cluster failed to start"
        refused = ssl_error(exc)
        if refused is None:
            raise
        raise ClusterError(
            f"cannot start the cluster with the certificates in cluster.security "
            f"({type(refused).__name__}: {refused})"
        ) from None


def dashboard_link(client: Client) -> str | None:
    """The link of the scheduler's dashboard; None when it serves none.

    ``client.dashboard_link`` names the scheduler's HTTP server, which runs (for its
    health and metrics routes) also without a dashboard: ``dask scheduler --no-dashboard``,
    ``dashboard_address: null``, or no Bokeh on the scheduler. The dashboard is a Bokeh
    application added to that server.

    Returns
    -------
    str or None
        ``client.dashboard_link``, or None when the scheduler serves no dashboard.
    """
    link = client.dashboard_link
    if not link:
        return None
    # A lambda travels by value: the scheduler need not have stencilpipe installed.
    serves = client.run_on_scheduler(
        lambda dask_scheduler: bool(getattr(dask_scheduler.http_application, "applications", []))
    )
    return link if serves else None


# --- the entry point ---------------------------------------------------------------------


@contextlib.contextmanager
def connect(config: ClusterConfig) -> Iterator[Client]:
    """A ``Client`` for the configured cluster, closed (and a cluster started here stopped) on exit.

    With ``config.jobqueue`` the ``config.jobs`` batch jobs are submitted (SLURM checks
    them first) and the client is returned once the first of their workers has joined;
    the others join when the batch system starts them. With ``config.adapt`` the jobs
    follow the queued work, between its minimum and maximum (with a minimum of 0 the
    client is returned at once: jobs start when work is submitted).

    Raises
    ------
    ClusterError
        When the scheduler cannot be reached within ``config.timeout`` seconds, a
        certificate file is missing, a cluster cannot be started as configured, the
        batch system refuses the jobs, or none of them starts a worker within
        ``config.timeout`` seconds.
    """
    from distributed import Client

    tls = security(config)
    address = scheduler_address(config)
    if address:
        with _remote_client(address, config, tls) as client:
            yield client
        return
    cluster = _start_cluster(config, tls)
    with cluster:
        if config.jobqueue:
            check_submission(cluster, config)
        # The client connects before any job is asked for: a client started on a cluster
        # waits for its job submissions, and a Ctrl-C there would cancel them half-done,
        # leaving jobs in the queue that closing the cluster does not know of.
        with Client(cluster, security=tls) as client:
            if config.jobqueue:
                if config.adapt:
                    adapt = config.adapt
                    cluster.adapt(minimum_jobs=adapt.minimum, maximum_jobs=adapt.maximum)
                else:
                    cluster.scale(jobs=config.jobs)
                if config.adapt is None or config.adapt.minimum:
                    wait_for_first_worker(client, cluster, config)
            yield client
