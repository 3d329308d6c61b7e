"""The locks that make compiling safe from many threads and many processes at once.

In one process: CPython 3.11 cannot parse or convert ``ast`` trees in two threads at
once (python/cpython gh-106905: ``SystemError: AST constructor recursion depth
mismatch`` when the garbage collector hands the GIL over mid-parse), and Numba
compiles (and loads cached code) under its own process-wide re-entrant lock. Kernel
analysis, code generation, ``exec`` of generated modules and Numba's compilation all
take that same lock, :data:`compile_lock`: a per-kernel lock would let nothing more run
in parallel (every one of these steps needs the process-wide lock anyway, even
Numba's cache loads), only add lock orderings to get wrong.

Across processes (workers on one host, or on a shared file system, filling one cache
directory): Numba writes each cache file atomically (a temporary file, then
``os.replace``), but it updates a function's index (``.nbi``: signature -> data file)
by read-modify-write and writes the index before the data file (``.nbc``), so two
processes saving two signatures of one function at once can lose an entry or point
one signature at the other's machine code. :func:`lock_cache_files` makes every read
and write of a generated module's Numba cache hold an exclusive lock on a file beside
it. That lock is a leaf: nothing waits for another lock while holding it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from numba.core.compiler_lock import global_compiler_lock

__all__ = ["compile_lock", "lock_cache_files"]

#: Held (re-entrantly) by every step of a compilation in this process; Numba's own lock.
compile_lock = global_compiler_lock


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path``, between processes and between threads."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


class _LockedIndex:
    """A Numba cache's index and data files, each load and each save under a file lock."""

    def __init__(self, files: Any, lock_path: Path):
        self._files = files
        self._lock_path = lock_path

    def load(self, key: Any) -> Any:
        with _file_lock(self._lock_path):
            return self._files.load(key)

    def save(self, key: Any, data: Any) -> None:
        with _file_lock(self._lock_path):
            self._files.save(key, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._files, name)


def lock_cache_files(module: ModuleType) -> None:
    """Make the disk cache of each Numba function (CPU or CUDA) of a generated ``module``
    read and written under ``<module file>.lock`` (if it caches: its ``_SP_CACHE`` is true)."""
    if not getattr(module, "_SP_CACHE", False):
        return
    lock_path = Path(str(module.__file__)).with_suffix(".lock")
    for value in vars(module).values():
        cache = getattr(value, "_cache", None)
        files = getattr(cache, "_cache_file", None)
        if cache is not None and files is not None and not isinstance(files, _LockedIndex):
            cache._cache_file = _LockedIndex(files, lock_path)
