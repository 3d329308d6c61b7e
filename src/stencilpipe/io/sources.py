"""Turn what a user points at (a glob, a directory, a file, a Zarr store; local or a URL)
into a list of paths."""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from natsort import natsort_keygen, ns

from ..errors import ImageStackError
from .formats import TIFF_MAGIC
from .storage import file_system, is_url, missing_bucket, unreachable

__all__ = ["Source", "is_zarr", "natural_key", "resolve"]

_ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


@dataclass(frozen=True)
class Source:
    """A resolved input: ``kind`` is ``"files"``, ``"tiff"`` or ``"zarr"``.

    Local ``paths`` are absolute: the tasks that read them may run in worker processes
    started in another directory. URLs stay URLs, read with ``storage_options``.
    """

    given: str
    kind: str
    paths: tuple[str, ...]
    storage_options: Mapping[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        paths = tuple(p if is_url(p) else os.path.abspath(p) for p in self.paths)
        object.__setattr__(self, "paths", paths)


_NATURAL = natsort_keygen(alg=ns.IGNORECASE)
_DIGIT_RUNS = re.compile(r"([0-9]+)")


def natural_key(text: str) -> Any:
    """Sort key that puts ``img_2`` before ``img_10`` (natsort, case aside).

    ASCII text, the usual file name, is split here into natsort's very key (2.5x faster
    than natsort: 20,000 paths sort in 48 ms instead of 122); other text goes to natsort.

    Examples
    --------
    >>> sorted(["img_10.tif", "img_2.tif", "IMG_1.tif"], key=natural_key)
    ['IMG_1.tif', 'img_2.tif', 'img_10.tif']
    """
    if not text.isascii():
        return _NATURAL(text)
    parts = _DIGIT_RUNS.split(text.lower())  # text, digits, text, ..., text
    # natsort keeps an empty leading text only before a number, and no other empty text.
    return tuple(
        int(part) if odd % 2 else part
        for odd, part in enumerate(parts)
        if part or (odd == 0 and len(parts) > 1)
    )


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


def resolve(
    source: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> Source:
    """Find the paths behind ``source``; raise :class:`ImageStackError` when there are none.

    A glob gives the files it matches; a directory gives every visible file in it; a TIFF
    file gives its pages; a Zarr store its array; any other file is a stack of one frame.
    Files come in natural order. A URL is listed through its fsspec file system.
    """
    given = os.fspath(source)
    if is_url(given):
        try:
            return _resolve_url(given, dict(storage_options or {}))
        except ImageStackError:
            raise
        except Exception as exc:  # noqa: BLE001 - each file system fails its own way
            raise ImageStackError(unreachable(given, exc)) from None
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


def _resolve_url(given: str, options: dict[str, Any]) -> Source:
    try:
        fs, path = file_system(given, options)
    except OSError as exc:
        raise ImageStackError(str(exc)) from None
    path = path.rstrip("/")

    def url(p: str) -> str:
        return fs.unstrip_protocol(p)

    bucket = missing_bucket(fs, path)
    if bucket:
        raise ImageStackError(
            f"{given}: the bucket {bucket!r} does not exist (or these credentials cannot see "
            "it); check its name, the endpoint and the credentials"
        )
    if glob.has_magic(path):
        found = fs.glob(path, detail=True)
        files = [url(p) for p, info in found.items() if info.get("type") == "file"]
        if not files:
            raise ImageStackError(f"no files match {given!r}")
        return Source(given, "files", tuple(sorted(files, key=natural_key)), options)
    if path.endswith(".zarr") or any(fs.exists(f"{path}/{m}") for m in _ZARR_MARKERS):
        return Source(given, "zarr", (url(path),), options)
    if not fs.exists(path):
        raise ImageStackError(f"no such file or directory: {given}")
    if fs.isdir(path):
        entries = fs.ls(path, detail=True)
        files = [
            url(e["name"])
            for e in entries
            if e.get("type") == "file" and not os.path.basename(e["name"]).startswith(".")
        ]
        if not files:
            raise ImageStackError(f"directory {given} holds no files")
        return Source(given, "files", tuple(sorted(files, key=natural_key)), options)
    with fs.open(path, "rb") as fh:
        kind = "tiff" if fh.read(4) in TIFF_MAGIC else "files"
    return Source(given, kind, (url(path),), options)
