"""Atomic file writes: a temporary name in the final directory, fsync, then ``os.replace``.

A reader (or a resumed run) never sees a partial file under its final name: the bytes go
to ``.<name>.<run>-<unique>.tmp`` beside it, and only a complete, fsync'd file is renamed
into place. A task that fails removes its temporary file; a process killed mid-write leaves
one behind, which :func:`remove_own_temps` deletes when its run ends (and
:func:`remove_stale_temps` when the next run starts, if its run never ended).

The ``run`` part of the name tells runs apart, so that cleaning up stale files (which a
cluster may repeat when a worker dies) never deletes the files of a run still writing: its
own, and that of the live run holding the output's lock (:mod:`stencilpipe.io.lock`).

A full file system is not a fault of one file: :func:`write_atomic` raises
:class:`~stencilpipe.io.errors.NoSpaceLeft` for it, which a runner stops the whole write on.
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import BinaryIO

from .errors import NoSpaceLeft

__all__ = ["is_full", "new_run", "remove_own_temps", "remove_stale_temps", "write_atomic"]

_TEMP_NAME = re.compile(r"^\..+\.(?P<run>[0-9a-f]{12})-[0-9a-f]{12}\.tmp$")


def new_run() -> str:
    """A fresh run id (12 hex digits) to pass to :func:`write_atomic`."""
    return uuid.uuid4().hex[:12]


def write_atomic(
    path: str | os.PathLike[str], write: Callable[[BinaryIO], object], *, run: str | None = None
) -> int:
    """Call ``write(fh)`` on a temporary file, then move it to ``path``; return its size.

    Raises :class:`~stencilpipe.io.errors.NoSpaceLeft` when the file system is full.

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> write_atomic(os.path.join(folder, "a.txt"), lambda fh: fh.write(b"hello"))
    5
    >>> os.listdir(folder)
    ['a.txt']
    """
    final = Path(path)
    temp = final.with_name(f".{final.name}.{run or new_run()}-{new_run()}.tmp")
    try:
        with open(temp, "xb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
            size = os.fstat(fh.fileno()).st_size
        os.replace(temp, final)
    except BaseException as exc:
        temp.unlink(missing_ok=True)
        if is_full(exc):
            raise NoSpaceLeft(str(final.parent)) from None
        raise
    return size


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` says that the file system (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def remove_stale_temps(directory: str | os.PathLike[str], keep: Collection[str]) -> int:
    """Delete the temporary files in ``directory`` of runs other than those in ``keep``.

    Returns how many were deleted. ``keep`` names the runs still writing (this one, and
    the holder of the output's lock).
    """
    return _remove_temps(directory, lambda owner: owner not in keep)


def remove_own_temps(directory: str | os.PathLike[str], run: str) -> int:
    """Delete the temporary files of ``run`` itself, once none of its writes is running.

    They are left by processes killed mid-write (a lost worker); returns how many.
    """
    return _remove_temps(directory, lambda owner: owner == run)


def _remove_temps(directory: str | os.PathLike[str], remove: Callable[[str], bool]) -> int:
    removed = 0
    if not os.path.isdir(directory):  # nothing was ever written there
        return removed
    with os.scandir(directory) as entries:
        for entry in entries:
            match = _TEMP_NAME.match(entry.name)
            if match and remove(match["run"]) and entry.is_file(follow_symlinks=False):
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
    return removed
