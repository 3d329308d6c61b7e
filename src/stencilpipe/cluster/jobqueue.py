"""HPC batch systems: ``cluster.jobqueue`` as a dask-jobqueue cluster (SLURM, PBS, ...)."""

from __future__ import annotations

import contextlib
import inspect
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import dask

from ..errors import ClusterError

if TYPE_CHECKING:
    from distributed import Security

    from ..pipeline.config import ClusterConfig

__all__ = [
    "JOBQUEUE_CLASSES",
    "check_submission",
    "job_options",
    "jobqueue_cluster",
    "wait_for_first_worker",
]

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


@contextlib.contextmanager
def _sigint_kept() -> Iterator[None]:
    """Keep this process's Ctrl-C handler across the block.

    Importing dask-jobqueue (its ``runner`` module) replaces the SIGINT handler with
    ``sys.exit()``, which would turn a Ctrl-C into a clean exit 0 without a summary.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread handles signals (and may set handlers)
        return
    handler = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


def _jobqueue_class(config: ClusterConfig) -> Any:
    """The dask-jobqueue cluster class of ``config.jobqueue``."""
    try:
        with _sigint_kept():
            import dask_jobqueue
    except ImportError as exc:
        raise ClusterError(
            f"cluster.jobqueue: {config.jobqueue} needs dask-jobqueue ({exc}); "
            "install stencilpipe[cluster]"
        ) from None
    return getattr(dask_jobqueue, JOBQUEUE_CLASSES[str(config.jobqueue)])


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
    # Without a dashboard the scheduler's HTTP server (health, metrics) takes a free port.
    options.setdefault("dashboard_address", config.dashboard_address or "127.0.0.1:0")
    options.setdefault("dashboard", config.dashboard_address is not None)
    options.update(config.job.get("scheduler_options") or {})
    return options


def _out_of_terminal_reach(job_class: Any) -> Any:
    """``job_class`` with its batch commands (sbatch, scancel, ...) run in their own session.

    Ctrl-C in a terminal signals the whole foreground process group. A submission command
    killed after the batch system took its job never reports the job's id, so nothing
    cancels that job and it stays in the queue. stencilpipe handles Ctrl-C itself (closing
    the cluster cancels every job it submitted), so its batch commands always finish.
    """

    async def call(cmd: list[str], *, shell: bool = False, **kwargs: Any) -> str:
        return await job_class._call(cmd, shell=shell, start_new_session=True, **kwargs)

    return type(job_class.__name__, (job_class,), {"_call": staticmethod(call)})


def jobqueue_cluster(config: ClusterConfig, tls: Security | None, silence_logs: int) -> Any:
    """dask-jobqueue's cluster for ``config.jobqueue``, with its scheduler started and no jobs.

    ``silence_logs`` is the level below which its scheduler drops log lines.
    """
    cluster_class = _jobqueue_class(config)
    _check_job(config, cluster_class)
    options = {
        **config.job,
        "scheduler_options": _scheduler_options(config, cluster_class),
        "job_cls": _out_of_terminal_reach(cluster_class.job_cls),
    }
    try:
        return cluster_class(silence_logs=silence_logs, security=tls, **options)
    except (TypeError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ClusterError(
            f"cluster.job: dask-jobqueue's {cluster_class.__name__} refused the job options "
            f"({type(exc).__name__}: {first_line})"
        ) from None


def _slurm(*args: str, script: str | None = None) -> subprocess.CompletedProcess:
    """Run a SLURM command; a missing command is a :class:`ClusterError`."""
    if shutil.which(args[0]) is None:
        raise ClusterError(
            f"cluster.jobqueue: slurm needs the SLURM command {args[0]!r}, which is not on "
            "PATH: run on a machine that submits SLURM jobs (a login node)"
        )
    return subprocess.run(
        list(args), input=script, capture_output=True, text=True, timeout=60, check=False
    )


def check_submission(cluster: Any, config: ClusterConfig) -> None:
    """Ask the batch system whether it would take ``cluster``'s jobs, submitting none.

    SLURM answers ``sbatch --test-only`` with its own reason for a job it refuses (a
    wrong partition, account or size), which becomes a :class:`ClusterError`; without
    this check dask-jobqueue's failed submission is only logged and the run waits forever.
    Other batch systems have no such dry run: their refusals surface as no worker
    arriving (see :func:`wait_for_first_worker`).
    """
    if config.jobqueue != "slurm":
        return
    done = _slurm("sbatch", "--test-only", script=cluster.job_script())
    if done.returncode:
        reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "no reason"
        raise ClusterError(
            f"cluster.job: SLURM refuses the job ({reason.removeprefix('sbatch: ')})"
        )


def _pending_reasons(cluster: Any, config: ClusterConfig) -> str:
    """Why the submitted jobs have not started, as the batch system says."""
    ids = [job.job_id for job in cluster.workers.values() if getattr(job, "job_id", None)]
    if not ids:
        return "no job was submitted"
    if config.jobqueue != "slurm":
        return f"jobs {', '.join(ids)} are still queued"
    done = _slurm("squeue", "--noheader", "--format=%i %P %T %r", f"--jobs={','.join(ids)}")
    lines = [line.split(None, 3) for line in done.stdout.strip().splitlines()]
    if not lines:
        return f"jobs {', '.join(ids)} ended without a worker connecting (see their logs)"
    return "; ".join(
        f"job {job} {state.lower()} in partition {partition} ({reason})"
        for job, partition, state, reason in (line + ["?"] * (4 - len(line)) for line in lines)
    )


def wait_for_first_worker(client: Any, cluster: Any, config: ClusterConfig) -> None:
    """Wait ``config.timeout`` seconds for a worker of the submitted jobs to connect.

    Raises
    ------
    ClusterError
        Naming the partition and the batch system's pending reason of each job.
    """
    try:
        client.wait_for_workers(1, timeout=config.timeout)
    except TimeoutError:
        raise ClusterError(
            f"no {config.jobqueue} job started a worker within cluster.timeout "
            f"({config.timeout:g} s): {_pending_reasons(cluster, config)}; "
            "raise cluster.timeout to wait longer"
        ) from None
