"""One run at a time on one output: a lock file with the host, pid and run id of its holder.

The lock is ``<output>/.stencilpipe/lock`` (see :func:`state_dir`), created whole and only
if it does not exist (a hard link of a written file; atomic on local and network file
systems), as Snakemake locks its working directory. A second run refuses with one line
naming the holder, or waits for it. A lock whose holder is dead (a process on this host that
no longer exists, or whose pid now belongs to a process started later) is stale and is taken
over; a lock held on another host is trusted, since its process cannot be checked from here.
Taking over runs under an ``flock`` on a guard file, so two runs that find the same stale
lock cannot both take it.

The run id in the lock is the one that the holder's temporary files carry
(:mod:`stencilpipe.io.atomic`), so that clean-up spares the files of a live run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from .atomic import new_run
from .errors import OutputBusy, TargetError

__all__ = ["STATE_DIR", "Holder", "Locks", "live_run", "lock_output", "state_dir"]

#: The hidden directory, inside an output directory or Zarr store, of stencilpipe's state.
STATE_DIR = ".stencilpipe"
_LOCK = "lock"
#: Seconds between two looks at a lock that ``wait=True`` waits for.
POLL = 0.5


def state_dir(directory: str | os.PathLike[str]) -> Path:
    """Where the lock and the provenance records of the output ``directory`` live.

    Inside a directory of files; beside a Zarr store (``.out.zarr.stencilpipe``), which
    readers list as a hierarchy and which ``overwrite`` replaces as a whole.
    """
    path = Path(directory)
    if path.name.endswith(".zarr"):
        return path.with_name(f".{path.name}{STATE_DIR}")
    return path / STATE_DIR


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: host, pid, the process's start time, run id, and since when."""

    host: str
    pid: int
    started: float
    run: str
    since: float

    @classmethod
    def me(cls, run: str) -> Holder:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, psutil.Process(pid).create_time(), run, time.time())

    def alive(self) -> bool:
        """False only when the holder is known to be dead: a process of this host that is gone
        (or whose pid was reused by a younger process)."""
        if self.host != socket.gethostname():
            return True
        try:
            return abs(psutil.Process(self.pid).create_time() - self.started) < 1.0
        except psutil.NoSuchProcess:
            return False
        except psutil.AccessDenied:
            return True

    def describe(self) -> str:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"pid {self.pid} on {self.host}, run {self.run}, since {since}"


def _read(path: Path) -> Holder | None:
    """The holder recorded in ``path``; None when there is no lock (or it cannot be parsed:
    a holder killed between creating and filling it)."""
    try:
        return Holder(**json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError):
        return Holder("", 0, 0.0, "", 0.0)  # unreadable: dead unless proved otherwise


def live_run(directory: str | os.PathLike[str]) -> str | None:
    """The run id of the live run that holds the lock on ``directory``, if any."""
    holder = _read(state_dir(directory) / _LOCK)
    return holder.run if holder is not None and holder.run and holder.alive() else None


def _writable(directory: Path, given: str) -> None:
    """Make ``directory`` (and its state directory) and prove that files can be made in it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        state_dir(directory).mkdir(exist_ok=True)
        # Named as a temporary file of a run: should this process die right here, the
        # next run's clean-up removes it.
        probe = directory / f".stencilpipe-probe.{new_run()}-{new_run()}.tmp"
        probe.touch(exist_ok=False)
        probe.unlink()
    except OSError as exc:
        raise TargetError(
            f"cannot write to {given}: {exc.strerror or exc} ({exc.filename or directory})"
        ) from None


def _try_take(path: Path, me: Holder) -> Holder | None:
    """Take the lock at ``path`` for ``me``; return None, or the live holder that has it."""
    while True:
        try:
            guard = open(path.with_name(_LOCK + ".guard"), "a")  # noqa: SIM115 - closed below
            break
        except FileNotFoundError:  # a run that wrote nothing just removed its folders
            path.parent.mkdir(parents=True, exist_ok=True)
    with guard:
        with contextlib.suppress(OSError):  # a file system without locks: creation still holds
            fcntl.flock(guard, fcntl.LOCK_EX)  # released when the file closes
        holder = _read(path)
        if holder is not None:
            if holder.alive():
                return holder
            path.unlink(missing_ok=True)  # stale: its holder is dead
        if not _create_whole(path, json.dumps(asdict(me)).encode()):
            return _read(path) or me  # a run on another host took it between our look and now
    return None


def _create_whole(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data``, only if it does not exist; False if it does.

    The file is written (and fsync'd) under a temporary name and hard-linked into place,
    which fails when ``path`` exists, atomically on local and network file systems: no
    reader ever sees it empty. Where hard links are not supported, ``O_EXCL`` creates it.
    """
    temp = path.with_name(f".{path.name}.{new_run()}-{new_run()}.tmp")
    try:
        with open(temp, "xb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.link(temp, path)
    except FileExistsError:
        return False
    except OSError:  # no hard links here
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        temp.unlink(missing_ok=True)
    return True


@contextlib.contextmanager
def lock_output(
    directory: str | os.PathLike[str], given: str, *, run: str | None = None, wait: bool = False
) -> Iterator[str]:
    """Hold the lock on the output ``directory`` (named ``given`` in messages); yield the run id.

    Makes the directory and checks, before anything is computed, that files can be
    created in it.

    Raises
    ------
    OutputBusy
        When another live run holds the lock and ``wait`` is False.
    TargetError
        When the directory cannot be made or written.

    Examples
    --------
    >>> import tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "out")
    >>> with lock_output(out, "out/") as run:
    ...     live_run(out) == run
    True
    >>> live_run(out) is None
    True
    """
    directory = Path(directory)
    made = [folder for folder in (directory, state_dir(directory)) if not folder.exists()]
    _writable(directory, given)
    path = state_dir(directory) / _LOCK
    me = Holder.me(run or new_run())
    while (holder := _try_take(path, me)) is not None:
        if not wait:
            raise OutputBusy(
                f"{given} is being written by another stencilpipe run ({holder.describe()}); "
                "wait for it to end (--wait), or write elsewhere"
            )
        time.sleep(POLL)
    try:
        yield me.run
    finally:
        if _read(path) == me:
            with contextlib.suppress(OSError):
                path.unlink()
        _remove_if_empty(made)


def _remove_if_empty(made: list[Path]) -> None:
    """Remove the folders a run made, when it left nothing in them but the lock's guard:
    a run refused before it wrote anything leaves the file system as it found it."""
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            guard = folder / (_LOCK + ".guard")
            if guard.exists() and [p.name for p in folder.iterdir()] == [guard.name]:
                guard.unlink()
            folder.rmdir()  # fails, and keeps it, unless it is empty


class Locks(contextlib.ExitStack):
    """The output locks that planning takes (:meth:`take`), all released on exit.

    Planning the same output again (a runner re-plans to balance chunks, or to retry
    frames) gets the same run id back.
    """

    def __init__(self, *, wait: bool = False) -> None:
        super().__init__()
        self.wait = wait
        self._runs: dict[str, str] = {}

    def take(self, directory: str, given: str) -> str:
        """Lock ``directory`` (once); return the run id its temporary files carry."""
        key = os.path.realpath(directory)
        if key not in self._runs:
            self._runs[key] = self.enter_context(lock_output(directory, given, wait=self.wait))
        return self._runs[key]
