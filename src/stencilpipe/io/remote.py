"""Outputs on object storage (fsspec URLs): whole-object puts, and their provenance records.

An object store has no rename, and needs none: a put is atomic (readers see the old object
or the whole new one), so each output file is one put of its encoded bytes; Zarr chunks go
through zarr's own fsspec store. The provenance records lie where
:func:`~stencilpipe.io.provenance.record_path` puts them for a local directory, under the
same URL, and hold the same fields, so that resume judges an output on object storage as
it judges one on disk. Object stores have no lock files: two runs must not write to one
output URL at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .errors import TargetError
from .provenance import (
    DAMAGED,
    KEPT,
    NEW,
    STALE,
    Provenance,
    checksum,
    digest,
    judge,
    record_of,
    record_path,
    verifies,
)
from .storage import READ_ONLY, file_system, missing_bucket, unreachable

__all__ = ["RemoteDirectory", "judge_outputs"]


class RemoteDirectory:
    """An output "directory" (a URL prefix) on object storage.

    Parameters
    ----------
    url : str
        Such as ``s3://bucket/out`` (a directory of files, or a Zarr store).
    storage_options : mapping, optional
        The options of its fsspec file system.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url.rstrip("/")
        self.storage_options = dict(storage_options or {})

    def __getstate__(self) -> dict[str, Any]:  # the file system is made again where it runs
        return {"url": self.url, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["url"], state["storage_options"])

    def __dask_tokenize__(self) -> object:
        return "stencilpipe-remote", self.url

    @property
    def fs(self) -> Any:
        return file_system(self.url, self.storage_options)[0]

    def path_of(self, url: str) -> str:
        """The path of ``url`` in the file system (without the scheme)."""
        return file_system(url, self.storage_options)[1]

    def check(self, given: str) -> None:
        """Raise :class:`TargetError` (one line, naming ``given``) unless the URL's file
        system, endpoint and bucket can be reached; nothing is written."""
        scheme = self.url.split("://", 1)[0]
        if scheme in READ_ONLY:
            raise TargetError(
                f"{given}: {scheme}:// URLs are read only; write to a path or to s3://, gs://, az://"
            )
        try:
            fs, path = file_system(self.url, self.storage_options)
        except OSError as exc:
            raise TargetError(str(exc).replace(self.url, given, 1)) from None
        try:
            bucket = missing_bucket(fs, path)
        except Exception as exc:  # noqa: BLE001 - each file system fails its own way
            raise TargetError(unreachable(given, exc)) from None
        if bucket:
            raise TargetError(
                f"{given}: the bucket {bucket!r} does not exist (or these credentials cannot "
                "see it); create it, or check its name, the endpoint and the credentials"
            )

    def record_url(self, name: str) -> str:
        """The URL of the provenance record of output ``name`` (a file name or chunk key)."""
        root = self.path_of(self.url)
        return self.fs.unstrip_protocol(str(record_path(root, name)))

    def put(self, url: str, data: bytes | memoryview) -> int:
        """Put ``data`` as the object ``url`` (one request: atomic); return its size."""
        self.fs.pipe_file(self.path_of(url), bytes(data))
        return len(data)

    def write_record(
        self, name: str, data: bytes | memoryview, provenance: Provenance, inputs: Sequence
    ) -> None:
        """Record that output ``name`` holds ``data``, made by ``provenance`` from ``inputs``."""
        self.put(self.record_url(name), record_of(digest(data), provenance, inputs))

    def judge(
        self, names: Sequence[str], provenance: Provenance, inputs: Sequence[Sequence]
    ) -> list[str]:
        """:func:`~stencilpipe.io.provenance.judge` for outputs under this URL."""
        fs = self.fs
        fs.invalidate_cache()  # listings cached by an earlier write are stale
        return [self._judge_one(fs, n, provenance.key, i) for n, i in zip(names, inputs)]

    def _judge_one(self, fs: Any, name: str, key: str, inputs: Sequence) -> str:
        output = self.path_of(f"{self.url}/{name}")
        try:
            data = fs.cat_file(output)
        except FileNotFoundError:
            return NEW
        try:
            record = json.loads(fs.cat_file(self.path_of(self.record_url(name))))
        except (FileNotFoundError, ValueError):
            return STALE
        if record.get("key") != key or record.get("inputs") != [list(e) for e in inputs]:
            return STALE
        holds = verifies(record.get("output"), len(data), lambda: checksum(data))
        return STALE if holds is None else KEPT if holds else DAMAGED


def judge_outputs(
    directory: str,
    paths: Sequence[str],
    names: Sequence[str],
    provenance: Provenance,
    inputs: Sequence[Sequence[Sequence[Any]]],
    *,
    remote: RemoteDirectory | None = None,
    intact: Callable[[str], bool] = lambda path: True,
) -> list[str]:
    """:func:`~stencilpipe.io.provenance.judge` the outputs ``paths`` of ``directory``, named
    ``names`` there (a file name, or a Zarr chunk key), on disk or, with ``remote``, on
    object storage (where ``intact`` is not asked)."""
    if remote is not None:
        return remote.judge(names, provenance, inputs)
    records = [record_path(directory, name) for name in names]
    return judge(paths, records, provenance, inputs, intact=intact)
