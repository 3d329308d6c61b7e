"""A real one-node SLURM cluster (munged, slurmctld, slurmd) for the batch-queue tests.

Debian's ``slurmctld slurmd slurm-client munge`` packages run a SLURM cluster inside
the test machine when the tests run as root (as CI does): every file (munge key and
socket, ``slurm.conf``, state, spool, pid and log files) lives in a temporary folder,
the daemons listen on free ports of 127.0.0.1, and they are stopped by the pids they
wrote. The tests skip, saying why, where the packages are missing or not root.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

DAEMONS = ("munged", "slurmctld", "slurmd")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _why_not() -> str | None:
    missing = [d for d in DAEMONS if not shutil.which(d, path="/usr/sbin:/usr/bin:/sbin")]
    if missing:
        return f"SLURM is not installed ({', '.join(missing)} missing; .ci/run installs it)"
    if os.geteuid() != 0:
        return "a test SLURM cluster needs root (munged and slurmd run as root here)"
    return None


class Slurm:
    """A running SLURM cluster: its folder, ``slurm.conf``, and commands run against it."""

    def __init__(self, root: Path):
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}

    def command(self, *args: str, check: bool = True) -> str:
        """Run a SLURM client command (``squeue``, ``sinfo``, ...) and return its stdout."""
        done = subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode:
            raise RuntimeError(f"{' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout

    def jobs(self) -> list[str]:
        """Ids of the jobs SLURM still knows as pending or running (any user)."""
        return self.command("squeue", "--noheader", "--format=%i").split()

    def wait_for_no_jobs(self, timeout: float = 60) -> list[str]:
        """Wait until the queue is empty (cancelled jobs take a moment to leave)."""
        deadline = time.monotonic() + timeout
        while (jobs := self.jobs()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return jobs

    def pids(self) -> dict[str, int]:
        found = {}
        for name in DAEMONS:
            pid_file = self.root / f"{name}.pid"
            if pid_file.exists() and pid_file.read_text().strip():
                found[name] = int(pid_file.read_text().split()[0])
        return found


def _write_conf(root: Path, host: str) -> None:
    ctld_port, d_port = _free_ports(2)
    cpus = os.cpu_count() or 2
    (root / "slurm.conf").write_text(
        f"""\
ClusterName=stencilpipe-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MessageTimeout=10
KillWait=2
InactiveLimit=0
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=8000 State=UNKNOWN
PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP
PartitionName=closed Nodes={host} MaxTime=INFINITE State=DOWN
PartitionName=proj42only Nodes={host} MaxTime=INFINITE State=UP AllowAccounts=proj42
"""
    )


def _stop(slurm: Slurm) -> None:
    pids = slurm.pids()
    for name in reversed(DAEMONS):
        if name in pids:
            try:
                os.kill(pids[name], signal.SIGTERM)
            except ProcessLookupError:
                continue
    deadline = time.monotonic() + 20
    for name in reversed(DAEMONS):
        pid = pids.get(name)
        while pid and time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture(scope="session")
def slurm():
    """A one-node SLURM cluster for this test session; :class:`Slurm`."""
    why = _why_not()
    if why:
        pytest.skip(why)
    root = Path(tempfile.mkdtemp(prefix="stencilpipe-slurm-"))
    root.chmod(0o755)
    for folder in ("munge", "state", "spool", "log"):
        (root / folder).mkdir()
    (root / "munge").chmod(0o700)
    (root / "munge" / "munge.key").write_bytes(os.urandom(1024))
    (root / "munge" / "munge.key").chmod(0o400)
    host = socket.gethostname().split(".")[0]
    _write_conf(root, host)
    cluster = Slurm(root)
    try:
        subprocess.run(
            [
                "munged",
                "--force",
                f"--key-file={root}/munge/munge.key",
                f"--socket={root}/munge/munge.socket",
                f"--pid-file={root}/munged.pid",
                f"--log-file={root}/log/munged.log",
                f"--seed-file={root}/munge/seed",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
        for daemon in ("slurmctld", "slurmd"):
            subprocess.run(
                [daemon, "-f", str(cluster.conf)],
                check=True,
                capture_output=True,
                env=cluster.env,
                timeout=30,
            )
        deadline = time.monotonic() + 60
        while "idle" not in cluster.command("sinfo", "--noheader", "-p", "debug", check=False):
            if time.monotonic() > deadline:
                logs = (root / "log" / "slurmctld.log").read_text()[-2000:]
                raise RuntimeError(f"the test SLURM node never became idle:\n{logs}")
            time.sleep(0.5)
        yield cluster
    finally:
        if cluster.pids().get("slurmctld"):
            cluster.command("scancel", "--full", "--user=root", check=False)
        _stop(cluster)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm_env(slurm, monkeypatch):
    """``SLURM_CONF`` of the test cluster in this process's environment (and its children's)."""
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    return slurm


def write_run_config(folder: Path, stage: str, scaling: str, timeout: float = 120) -> Path:
    """``folder/run.yaml``: ``data/*.tif`` through ``stage`` to ``out/``, one frame per chunk,
    on SLURM jobs of one core sized by ``scaling`` (``jobs: 2``, ``adapt: {...}``), their
    logs in ``folder/jobs``."""
    path = folder / "run.yaml"
    path.write_text(
        f"""\
input: data/*.tif
output: out/
stages: [{stage}]
chunks: 1
cluster:
  jobqueue: slurm
  {scaling}
  timeout: {timeout}
  job:
    cores: 1
    memory: 1GB
    walltime: "00:10:00"
    local_directory: {folder}/jobs
    log_directory: {folder}/jobs
    scheduler_options: {{host: 127.0.0.1}}
"""
    )
    return path
