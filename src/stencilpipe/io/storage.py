"""Where bytes live: local paths, or fsspec URLs (``s3://``, ``gs://``, ``az://``,
``http(s)://``, ``memory://``) opened with the caller's ``storage_options``.

Local paths go through the standard library as before; a URL through the fsspec file
system of its scheme. Credentials come from ``storage_options`` or, as fsspec's
implementations do by default, from the usual environment variables and config files.
Every failure to reach a URL becomes one :class:`~stencilpipe.errors.ImageStackError`
(or :class:`~stencilpipe.io.errors.TargetError` for outputs) naming the URL and what to
check or install.

fsspec is imported only where a URL is met: a run on local files never pays for its import
(asyncio's, among others).
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO, cast

__all__ = [
    "READ_ONLY",
    "file_system",
    "is_url",
    "missing_bucket",
    "open_binary",
    "stamp",
    "unreachable",
]

#: The package that implements each scheme fsspec knows but may not have installed.
_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
             "abfs": "adlfs", "abfss": "adlfs", "http": "aiohttp", "https": "aiohttp"}  # fmt: skip


#: The schemes whose first path component is a bucket (or container).
_BUCKETS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"}
#: Schemes that stencilpipe reads but never writes.
READ_ONLY = {"http", "https"}
#: What the messages of an endpoint that cannot be reached say.
_UNREACHABLE = ("Could not connect", "Connect timeout", "Cannot connect", "Errno 111")


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL of a file system other than the local one.

    Examples
    --------
    >>> is_url("s3://bucket/in/*.tif"), is_url("/data/in"), is_url("file:///data/in")
    (True, False, False)
    """
    if not isinstance(path, str) or "://" not in path:
        return False
    from fsspec.core import split_protocol

    return split_protocol(path)[0] not in (None, "file", "local")


def unreachable(url: str, exc: BaseException) -> str:
    """One line saying why ``url`` cannot be used, and what to check or install."""
    from fsspec.core import split_protocol

    scheme = split_protocol(url)[0] or ""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, ImportError) or "not known" in text.lower() and "protocol" in text:
        package = _PACKAGES.get(scheme)
        install = f"pip install {package}" if package else "install its fsspec implementation"
        return f"{url}: no file system for {scheme}:// is installed ({install})"
    if isinstance(exc, ValueError) and "protocol not known" in text.lower():
        return f"{url}: {scheme}:// is not a file system fsspec knows"
    if isinstance(exc, PermissionError) or any(
        word in text for word in ("AccessDenied", "Forbidden", "InvalidAccessKeyId", "Signature")
    ):
        return f"{url}: access denied ({text}); check the credentials (storage_options, AWS_* "
        "environment variables, ~/.aws) and their permissions"
    if "NoSuchBucket" in text or "bucket does not exist" in text.lower():
        return f"{url}: the bucket does not exist; check its name and the endpoint"
    if any(word in text for word in _UNREACHABLE):
        return (
            f"{url}: cannot reach the endpoint ({text}); check storage_options' endpoint_url "
            "and the network"
        )
    return f"{url}: {text}"


def file_system(url: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """The fsspec file system of ``url`` and the path in it (errors as :func:`unreachable`).

    Raises ``OSError`` with the one-line message: callers turn it into their own error.
    """
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(url, **dict(storage_options or {}))
    except Exception as exc:  # noqa: BLE001 - every implementation fails its own way
        raise OSError(unreachable(url, exc)) from None


def missing_bucket(fs: Any, path: str) -> str | None:
    """The bucket of ``path`` when the object store says it does not exist, else None.

    Listing the bucket is the one request that tells a missing bucket from an endpoint
    that cannot be reached (which raises); file systems without buckets have none.
    """
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if not protocols & _BUCKETS:
        return None
    bucket = path.lstrip("/").split("/", 1)[0]
    try:
        fs.ls(bucket, refresh=True)
    except FileNotFoundError:
        return bucket
    return None


@contextlib.contextmanager
def open_binary(
    path: str, storage_options: Mapping[str, Any] | None = None, mode: str = "rb"
) -> Iterator[BinaryIO]:
    """Open a local path or a URL as a binary file."""
    if not is_url(path):
        with open(path, mode) as fh:
            yield cast(BinaryIO, fh)
        return
    import fsspec

    with fsspec.open(path, mode, **dict(storage_options or {})) as fh:
        yield fh


def stamp(info: Mapping[str, Any]) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a file from fsspec's ``info()`` (0 when it has no time)."""
    when = info.get("mtime") or info.get("LastModified") or info.get("created") or 0
    if isinstance(when, datetime.datetime):
        when = when.timestamp()
    elif isinstance(when, str):
        with contextlib.suppress(ValueError):
            when = datetime.datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
    try:
        return int(info.get("size") or 0), int(float(when) * 1e9)
    except (TypeError, ValueError):
        return int(info.get("size") or 0), 0


def local_stamp(path: str) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a local file."""
    stat = os.stat(path)
    return stat.st_size, stat.st_mtime_ns
