"""Atomic file writes: a temporary name in the final directory, then ``os.replace``.

A reader (or a resumed run) never sees a partial file under its final name: the bytes go
to ``.<name>.<run>-<unique>.tmp`` beside it, and only a complete file is renamed into place.
A task that fails removes its temporary file; a process killed mid-write leaves one behind,
which :func:`remove_own_temps` deletes when its run ends (and :func:`remove_stale_temps`
when the next run starts, if its run never ended).

Durability, as git's ``core.fsyncMethod=batch`` amortises it: by default (:data:`BATCH`) no
file is fsync'd on its own, but the writeback of each file of 1 MiB or more starts as soon as
it is written (``sync_file_range``, where Linux has it: it does not wait), so that the disk
works while the run computes; the run's last step (:func:`remove_own_temps`) flushes the
whole file system once (:func:`flush`), which then waits only for what is still in flight.
A machine that crashes before that flush may leave renamed files whose data never reached
the disk, so a rerun keeps an output only when its bytes match the checksum recorded with
it (:func:`stencilpipe.io.provenance.judge`).
:data:`PER_FILE` fsyncs each file before its rename instead: durable the moment it is
visible, at one disk flush per file. :data:`NONE` never flushes: the operating system writes
the files back in its own time (a scratch output, or a disk slower than the work), so a
write costs what a plain loop of writes costs; a crash can then lose outputs that the run
reported written, which a rerun finds by their checksums and writes again, as under
:data:`BATCH`.

The ``run`` part of the name tells runs apart, so that cleaning up stale files (which a
cluster may repeat when a worker dies) never deletes the files of a run still writing: its
own, and that of the live run holding the output's lock (:mod:`stencilpipe.io.lock`).

A full file system is not a fault of one file: :func:`write_atomic` raises
:class:`~stencilpipe.io.errors.NoSpaceLeft` for it, which a runner stops the whole write on.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import re
import uuid
from collections.abc import Callable, Collection
from pathlib import Path
from typing import BinaryIO

from .errors import NoSpaceLeft

__all__ = [
    "BATCH",
    "DURABILITY",
    "NONE",
    "PER_FILE",
    "flush",
    "is_full",
    "new_run",
    "remove_own_temps",
    "remove_stale_temps",
    "start_writeback",
    "write_atomic",
]

#: One flush of the file system when the run ends (the default), an fsync per file, or no
#: flush at all.
BATCH, PER_FILE, NONE = "batch", "per-file", "none"
DURABILITY = (BATCH, PER_FILE, NONE)

_TEMP_NAME = re.compile(r"^\..+\.(?P<run>[0-9a-f]{12})-[0-9a-f]{12}\.tmp$")


def new_run() -> str:
    """A fresh run id (12 hex digits) to pass to :func:`write_atomic`."""
    return uuid.uuid4().hex[:12]


def write_atomic(
    path: str | os.PathLike[str],
    write: Callable[[BinaryIO], object],
    *,
    run: str | None = None,
    durability: str = BATCH,
) -> int:
    """Call ``write(fh)`` on a temporary file, then move it to ``path``; return its size.

    ``fh`` is open for reading too (a writer may read back what it wrote, to checksum it).

    With ``durability="per-file"`` the file is fsync'd before it is renamed; with
    ``"batch"`` (the default) :func:`flush` makes it durable when the run ends; with
    ``"none"`` nothing does (its writeback is left to the operating system).
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
        with open(temp, "x+b") as fh:
            write(fh)
            fh.flush()
            if durability == PER_FILE:
                os.fsync(fh.fileno())
            size = os.fstat(fh.fileno()).st_size
            if durability == BATCH and size >= WRITEBACK_FROM:
                start_writeback(fh.fileno())
        os.replace(temp, final)
    except BaseException as exc:
        temp.unlink(missing_ok=True)
        if is_full(exc):
            raise NoSpaceLeft(str(final.parent)) from None
        raise
    return size


def start_writeback(fd: int) -> None:
    """Start writing the open file ``fd``'s dirty pages to the disk, without waiting for them
    (Linux's ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, as git's batch fsync does; nothing
    where the C library lacks it): the end-of-run :func:`flush` then finds most of the data
    on the disk already instead of writing it all at once. Durability is unchanged: it
    is still the flush that makes the file durable."""
    sync_file_range = _sync_file_range()
    if sync_file_range is not None:
        sync_file_range(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)  # a hint: its failure is harmless


#: Files from this size on start their writeback when written; smaller ones (records, small
#: frames) are left to the end-of-run flush, which writes them out together.
WRITEBACK_FROM = 1 << 20

#: ``sync_file_range``'s flag: start writeback of the range's dirty pages, do not wait.
_SYNC_FILE_RANGE_WRITE = 2


@functools.cache
def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """The C library's ``sync_file_range(fd, offset, nbytes, flags)``, if it has one."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` says that the file system (or the user's quota) is full: ENOSPC or
    EDQUOT, or the short write that NumPy's ``tofile`` (tifffile's way to write pixels into
    a file) reports without an errno, as ``N requested and M written``: a regular file
    takes fewer bytes than it is given only when there is no room for them."""
    if not isinstance(exc, OSError):
        return False
    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or (
        exc.errno is None and _SHORT_WRITE.fullmatch(str(exc)) is not None
    )


_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def remove_stale_temps(directory: str | os.PathLike[str], keep: Collection[str]) -> int:
    """Delete the temporary files in ``directory`` of runs other than those in ``keep``.

    Returns how many were deleted. ``keep`` names the runs still writing (this one, and
    the holder of the output's lock).
    """
    return _remove_temps(directory, lambda owner: owner not in keep)


def remove_own_temps(
    directory: str | os.PathLike[str],
    run: str,
    *,
    durability: str = BATCH,
    whole_file_system: bool = True,
) -> int:
    """The last step of ``run``'s write into ``directory``, once none of its writes is
    running: delete the temporary files it left, then :func:`flush` what it wrote
    (``whole_file_system`` as there), unless ``durability`` is ``"none"``.

    The temporary files are left by processes killed mid-write (a lost worker); returns
    how many.
    """
    removed = _remove_temps(directory, lambda owner: owner == run)
    if durability != NONE and os.path.isdir(directory):
        flush(directory, whole_file_system=whole_file_system)
    return removed


def flush(directory: str | os.PathLike[str], *, whole_file_system: bool = True) -> None:
    """Make the files written into ``directory``, and their renames, durable at once.

    One ``syncfs`` of the directory's file system where the C library has it (Linux), else
    ``sync``; then an fsync of the directory itself. On a file system shared by several
    hosts, each host flushes what it wrote (run this on every worker). Without
    ``whole_file_system`` only the directory is fsync'd: for a folder whose files a
    later flush of the same file system makes durable (one syncfs per write, not one per
    folder: each waits for everything any process dirtied meanwhile).
    """
    fd = os.open(directory, os.O_RDONLY)
    try:
        if whole_file_system:
            _sync_file_system(fd, directory)
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_file_system(fd: int, directory: str | os.PathLike[str]) -> None:
    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
    elif syncfs(fd) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), os.fspath(directory))


@functools.cache
def _syncfs() -> Callable[[int], int] | None:
    """The C library's ``syncfs(fd)``, if it has one."""
    try:
        return ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None


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
