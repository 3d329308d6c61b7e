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
import inspect
import logging
import os
import ssl
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import dask

from ..errors import ClusterError

if TYPE_CHECKING:
    from distributed import Client, Security

    from ..pipeline.config import ClusterConfig, SecurityConfig

__all__ = ["connect", "job_options", "job_script", "scheduler_address", "security"]


def scheduler_address(config: ClusterConfig) -> str | None:
    """The scheduler to use: the config's address, else Dask's setting, else None (start one).

    A ``jobqueue`` cluster starts its own scheduler, so Dask's setting does not apply to it.
    """
    if config.address or config.jobqueue:
        return config.address
    return dask.config.get("scheduler-address", None)


#: The module the embedded cluster's workers preload (see :mod:`.worker_setup`).
WORKER_SETUP = "stencilpipe.cluster.worker_setup"


def _log_level(config: ClusterConfig) -> int:
    """The level below which the embedded cluster's processes drop their log lines."""
    return logging.getLevelName(config.log_level.upper())


# --- TLS -------------------------------------------------------------------------------


def _certificate_files(tls: SecurityConfig) -> dict[str, str]:
    """The configured certificate and key paths, absolute (jobs on other nodes read them).

    Raises
    ------
    ClusterError
        Naming the key and the path of the first file that does not exist.
    """
    files = {}
    for key, value in tls.model_dump(exclude_none=True).items():
        if not key.startswith("tls_"):
            continue
        path = os.path.abspath(os.path.expanduser(value))
        if not os.path.isfile(path):
            raise ClusterError(f"cluster.security.{key}: no such file: {path}")
        files[key] = path
    return files


def security(config: ClusterConfig) -> Security | None:
    """distributed's ``Security`` for ``config.security``; None when TLS is not configured.

    The scheduler and workers that stencilpipe starts use the client's certificate
    (and key) unless the config names their own.

    Raises
    ------
    ClusterError
        When a configured certificate or key file does not exist.
    """
    if config.security is None:
        return None
    from distributed import Security

    files = _certificate_files(config.security)
    for role in ("scheduler", "worker"):
        if f"tls_{role}_cert" not in files:
            files[f"tls_{role}_cert"] = files["tls_client_cert"]
            if "tls_client_key" in files:
                files[f"tls_{role}_key"] = files["tls_client_key"]
    return Security(require_encryption=config.security.require_encryption, **files)


# --- an existing scheduler ------------------------------------------------------------


def _ssl_error(exc: BaseException | None) -> BaseException | None:
    """The TLS error behind ``exc`` (a certificate that does not load or is refused), if any.

    distributed reports a peer's refusal (unknown CA) as a ``FatalCommClosedError``.
    """
    from distributed.comm.core import FatalCommClosedError

    while exc is not None and not isinstance(exc, ssl.SSLError | FatalCommClosedError):
        exc = exc.__cause__ or exc.__context__
    return exc


def _unreachable_hint(address: str, tls: Security | None, exc: BaseException) -> str:
    """What to check when the scheduler at ``address`` did not answer."""
    if _ssl_error(exc) is not None:
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
        detail = " ".join(str(exc).split())
        raise ClusterError(
            f"cannot reach the Dask scheduler at {address} within {config.timeout:g} s "
            f"({type(exc).__name__}: {detail}); {_unreachable_hint(address, tls, exc)}"
        ) from None


# --- clusters started here --------------------------------------------------------------


def _tls_options(tls: Security | None) -> dict[str, Any]:
    """Keyword arguments that make a distributed cluster speak TLS (none without TLS)."""
    return {} if tls is None else {"security": tls, "protocol": "tls://"}


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
        dashboard_address=config.dashboard_address,
        silence_logs=_log_level(config),
        preload=[WORKER_SETUP],
        **_tls_options(tls),
    )


def _local_cluster(config: ClusterConfig, tls: Security | None) -> Any:
    """distributed's LocalCluster on 127.0.0.1 with the configured workers."""
    from distributed import LocalCluster

    return LocalCluster(
        n_workers=config.n_workers,
        threads_per_worker=config.threads_per_worker,
        processes=config.processes,
        host="127.0.0.1",
        dashboard_address=config.dashboard_address,
        silence_logs=_log_level(config),
        # In-process workers share the client's SIGINT, which must stay.
        preload=[WORKER_SETUP] if config.processes else [],
        **_tls_options(tls),
    )


# --- dask-jobqueue -----------------------------------------------------------------------

#: ``cluster.jobqueue`` -> the dask-jobqueue class.
JOBQUEUE_CLASSES = {
    "slurm": "SLURMCluster",
    "pbs": "PBSCluster",
    "sge": "SGECluster",
    "lsf": "LSFCluster",
    "htcondor": "HTCondorCluster",
    "moab": "MoabCluster",
    "oar": "OARCluster",
}

#: Keywords of the cluster class itself (not of its job class) that ``cluster.job`` passes on.
_CLUSTER_KEYWORDS = ("interface", "scheduler_options", "shared_temp_directory")

#: Keywords that ``cluster.job`` must not hold, and what to write instead.
_JOB_KEY_HINTS = {
    "scheduler": "the scheduler is started here",
    "name": "use job_name",
    "config_name": "it follows cluster.jobqueue",
    "security": "use cluster.security",
    "protocol": "cluster.security makes it tls://",
    "dashboard_address": "use cluster.dashboard_address",
    "host": "use scheduler_options: {host: ...}",
    "n_workers": "use cluster.jobs",
    "extra": "renamed worker_extra_args in dask-jobqueue",
    "job_extra": "renamed job_extra_directives in dask-jobqueue",
    "env_extra": "renamed job_script_prologue in dask-jobqueue",
    "header_skip": "renamed job_directives_skip in dask-jobqueue",
}


def _jobqueue_class(config: ClusterConfig) -> Any:
    """The dask-jobqueue cluster class of ``config.jobqueue``."""
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise ClusterError(
            f"cluster.jobqueue: {config.jobqueue} needs dask-jobqueue ({exc}); "
            "install stencilpipe[cluster]"
        ) from None
    return getattr(dask_jobqueue, JOBQUEUE_CLASSES[config.jobqueue])


def job_options(cluster_class: Any) -> list[str]:
    """The keys ``cluster.job`` accepts for a dask-jobqueue cluster class, sorted.

    They are the keyword arguments of its job class and of dask-jobqueue's ``Job``
    (cores, memory, queue, walltime, ...), plus a few of the cluster class's own.
    """
    from dask_jobqueue.core import Job

    names = set(_CLUSTER_KEYWORDS)
    for init in (cluster_class.job_cls.__init__, Job.__init__):
        for parameter in list(inspect.signature(init).parameters.values())[1:]:
            if parameter.kind not in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
                names.add(parameter.name)
    return sorted(names - set(_JOB_KEY_HINTS))


def _check_job(config: ClusterConfig, cluster_class: Any) -> None:
    """Refuse a ``cluster.job`` key that the batch system's class does not accept."""
    valid = job_options(cluster_class)
    for key in config.job:
        if key in valid:
            continue
        why = _JOB_KEY_HINTS.get(key, "not an option of " + cluster_class.__name__)
        raise ClusterError(
            f"cluster.job.{key}: {why} (jobqueue: {config.jobqueue} accepts: {', '.join(valid)})"
        )
    if "scheduler_options" in config.job and not isinstance(config.job["scheduler_options"], dict):
        raise ClusterError("cluster.job.scheduler_options: expected a mapping, e.g. {host: ...}")
    name = cluster_class.job_cls.default_config_name()
    for key in ("cores", "memory"):
        if key not in config.job and dask.config.get(f"jobqueue.{name}.{key}", None) is None:
            raise ClusterError(
                f"cluster.job.{key} is needed: the {key} of each job, e.g. "
                "job: {cores: 8, memory: 32GB}"
            )


def _scheduler_options(config: ClusterConfig, cluster_class: Any) -> dict[str, Any]:
    """Dask's jobqueue scheduler options, the dashboard, then ``job.scheduler_options``."""
    name = cluster_class.job_cls.default_config_name()
    options = dict(dask.config.get(f"jobqueue.{name}.scheduler-options", None) or {})
    options.setdefault("dashboard_address", config.dashboard_address)
    options.update(config.job.get("scheduler_options") or {})
    return options


def _jobqueue_cluster(config: ClusterConfig, tls: Security | None) -> Any:
    """dask-jobqueue's cluster for ``config.jobqueue``, with its scheduler started and no jobs."""
    cluster_class = _jobqueue_class(config)
    _check_job(config, cluster_class)
    options = {**config.job, "scheduler_options": _scheduler_options(config, cluster_class)}
    try:
        return cluster_class(silence_logs=_log_level(config), security=tls, **options)
    except (TypeError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ClusterError(
            f"cluster.job: dask-jobqueue's {cluster_class.__name__} refused the job options "
            f"({type(exc).__name__}: {first_line})"
        ) from None


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
    if config.jobqueue:
        start = _jobqueue_cluster
    else:
        start = _local_cuda_cluster if config.gpu else _local_cluster
    try:
        return start(config, tls)
    except RuntimeError as exc:  # distributed's "Cluster failed to start"
        refused = _ssl_error(exc)
        if refused is None:
            raise
        raise ClusterError(
            f"cannot start the cluster with the certificates in cluster.security "
            f"({type(refused).__name__}: {refused})"
        ) from None


# --- the entry point ---------------------------------------------------------------------


@contextlib.contextmanager
def connect(config: ClusterConfig) -> Iterator[Client]:
    """A ``Client`` for the configured cluster, closed (and a cluster started here stopped) on exit.

    With ``config.jobqueue`` the ``config.jobs`` batch jobs are submitted and the client
    returns at once; their workers join when the batch system starts them.

    Raises
    ------
    ClusterError
        When the scheduler cannot be reached within ``config.timeout`` seconds, a
        certificate file is missing, or a cluster cannot be started as configured.
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
            cluster.scale(jobs=config.jobs)
        with Client(cluster, security=tls) as client:
            yield client
