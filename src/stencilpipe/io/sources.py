"""Turn what a user points at (a glob, a directory, a file, a Zarr store) into a list of paths."""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

from ..errors import ImageStackError
from .formats import TIFF_MAGIC

__all__ = ["Source", "is_zarr", "natural_key", "resolve"]

_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


@dataclass(frozen=True)
class Source:
    """A resolved input: ``kind`` is ``"files"``, ``"tiff"`` or ``"zarr"``.

    ``paths`` are absolute: the tasks that read them may run in worker processes
    started in another directory.
    """

    given: str
    kind: str
    paths: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "paths", tuple(os.path.abspath(p) for p in self.paths))


def natural_key(text: str) -> tuple[tuple[int | str, ...], str]:
    """Sort key that puts ``img_2`` before ``img_10`` (digit runs compare as numbers).

    Examples
    --------
    >>> sorted(["img_10.tif", "img_2.tif", "IMG_1.tif"], key=natural_key)
    ['IMG_1.tif', 'img_2.tif', 'img_10.tif']
    """
    parts = re.split(r"(\d+)", text)
    return tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts)), text


def is_zarr(path: str) -> bool:
    """Whether ``path`` is a Zarr store (a ``.zarr`` directory, or one with Zarr metadata)."""
    return os.path.isdir(path) and (
        path.rstrip("/\\").endswith(".zarr")
        or any(os.path.exists(os.path.join(path, m)) for m in _ZARR_MARKERS)
    )


def _is_tiff(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) in TIFF_MAGIC
    except OSError:
        return False


def resolve(source: str | os.PathLike[str]) -> Source:
    """Find the paths behind ``source``; raise :class:`ImageStackError` when there are none.

    A glob gives the files it matches; a directory gives every visible file in it; a TIFF
    file gives its pages; a Zarr store its array; any other file is a stack of one frame.
    Files come in natural order.
    """
    given = os.fspath(source)
    if glob.has_magic(given):
        files = [p for p in glob.glob(given) if os.path.isfile(p)]
        if not files:
            folder = os.path.dirname(given) or "."
            hint = "" if os.path.isdir(folder) else f" (directory {folder} does not exist)"
            raise ImageStackError(f"no files match {given!r}{hint}")
        return Source(given, "files", tuple(sorted(files, key=natural_key)))
    if is_zarr(given):
        return Source(given, "zarr", (given,))
    if os.path.isdir(given):
        with os.scandir(given) as entries:
            files = [e.path for e in entries if e.is_file() and not e.name.startswith(".")]
        if not files:
            raise ImageStackError(f"directory {given} holds no files")
        return Source(given, "files", tuple(sorted(files, key=natural_key)))
    if not os.path.exists(given):
        raise ImageStackError(f"no such file or directory: {given}")
    return Source(given, "tiff" if _is_tiff(given) else "files", (given,))
