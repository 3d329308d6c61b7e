"""Open image stacks lazily: :func:`imread` and :func:`inspect`.

Every file is checked from its header before any task exists (shape, dtype, truncation),
so a bad input fails at once with one message naming each bad file, not deep inside a
worker. The Dask array is then built from those headers: its shape and dtype are exact
and no pixel is read until a chunk is computed.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.utils import parse_bytes

from ..errors import ImageStackError
from ..stencils.channels import mark_channels
from .errors import BadImageFile
from .formats import FrameReader, Header, scan_file
from .sources import Source, resolve
from .stackinfo import StackInfo, register
from .zarrio import open_zarr

__all__ = ["default_chunks", "imread", "inspect"]

#: How many bad files a message lists by name before it only counts the rest.
_LISTED = 20


def imread(
    source: str | os.PathLike[str], *, chunks: Any = None, skip_bad: bool = False
) -> da.Array:
    """Open a stack of 2-D images as one lazy Dask array of shape ``(frames, y, x[, c])``.

    Parameters
    ----------
    source : str or path
        A glob (``"in/*.png"``), a directory (every visible file in it), a TIFF file
        (multi-page, BigTIFF or OME-TIFF: its pages are the frames), or a Zarr store
        (``.zarr``; for an OME-Zarr image, its full-resolution level). Files are taken in
        natural order: ``img_2`` before ``img_10``.
    chunks : optional
        Dask chunks. The default keeps frames whole and groups about
        ``dask.config.get("array.chunk-size")`` of them per chunk; pass e.g.
        ``(1, 512, 512)`` for one tile of one frame per chunk.
    skip_bad : bool
        Leave out unreadable or mismatched files (listed in :func:`inspect`'s
        ``bad_files``) instead of raising.

    Returns
    -------
    dask.array.Array
        Nothing is read until it is computed.

    Raises
    ------
    ImageStackError
        When the source is missing or empty, or some files are unreadable, truncated,
        not images, or differ in shape or dtype from the rest (one message lists them all).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from PIL import Image
    >>> folder = tempfile.mkdtemp()
    >>> for i in (1, 2, 10):
    ...     frame = np.full((32, 40), i, np.uint8)
    ...     Image.fromarray(frame).save(os.path.join(folder, f"img_{i}.png"))
    >>> stack = imread(os.path.join(folder, "*.png"))
    >>> stack.shape, stack.dtype.name
    ((3, 32, 40), 'uint8')
    >>> stack[:, 0, 0].compute().tolist()
    [1, 2, 10]
    """
    array, info = _open(source, chunks, skip_bad)
    register(array, info)
    if info.kind != "zarr" and len(info.shape) == 4:
        mark_channels(array)  # the trailing axis of RGB(A) files is never filtered across
    return array


def inspect(
    source: str | os.PathLike[str], *, chunks: Any = None, skip_bad: bool = False
) -> StackInfo:
    """Describe the stack :func:`imread` would open, from headers only.

    Takes the same arguments as :func:`imread` and raises the same errors.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> from PIL import Image
    >>> folder = tempfile.mkdtemp()
    >>> Image.fromarray(np.zeros((32, 40), np.uint8)).save(os.path.join(folder, "a.png"))
    >>> with open(os.path.join(folder, "notes.txt"), "w") as fh:
    ...     _ = fh.write("not a picture")
    >>> info = inspect(folder, skip_bad=True)
    >>> info.shape, info.nbytes, info.frame_names
    ((1, 32, 40), 1280, ('a',))
    >>> [(os.path.basename(path), why) for path, why in info.bad_files]
    [('notes.txt', 'not an image')]
    """
    return _open(source, chunks, skip_bad)[1]


def default_chunks(shape: Sequence[int], dtype: np.dtype) -> tuple[int, ...]:
    """Whole frames, as many per chunk as fit in Dask's ``array.chunk-size``, evenly spread.

    Examples
    --------
    >>> default_chunks((200, 2048, 2048), np.dtype("uint8"))  # 4 MiB frames, 128 MiB chunks
    (29, 2048, 2048)
    """
    limit = parse_bytes(dask.config.get("array.chunk-size"))
    frame_bytes = max(1, math.prod(shape[1:]) * np.dtype(dtype).itemsize)
    per_chunk = max(1, min(shape[0], limit // frame_bytes))
    blocks = -(-shape[0] // per_chunk)
    return (max(1, -(-shape[0] // blocks)), *shape[1:])


class _Frames:
    """An array-like whose items are frames of files, decoded when indexed.

    This is what :func:`dask.array.from_array` wraps: each chunk task indexes it with a
    tuple of slices and decodes only the frames in that chunk.
    """

    def __init__(
        self,
        frames: tuple[tuple[FrameReader, str, int], ...],
        stamps: tuple[tuple[int, int], ...],
        shape: tuple[int, ...],
        dtype: np.dtype,
    ) -> None:
        self.frames, self.stamps = frames, stamps
        self.shape, self.dtype, self.ndim = shape, dtype, len(shape)

    def __dask_tokenize__(self) -> object:
        files = [(type(reader).__name__, path, index) for reader, path, index in self.frames]
        return "stencilpipe-frames", files, self.stamps, self.shape, self.dtype.str

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        selected = self.frames[key[0]]
        block = np.empty((len(selected), *self.shape[1:]), self.dtype)
        for out, (reader, path, index) in zip(block, selected, strict=True):
            out[...] = self._read(reader, path, index)
        return block[(slice(None), *key[1:])]

    def _read(self, reader: FrameReader, path: str, index: int) -> np.ndarray:
        try:
            frame = reader.read(path, index)
        except Exception as exc:
            raise BadImageFile(path, f"cannot be decoded ({exc})") from None
        if frame.shape != self.shape[1:] or frame.dtype != self.dtype:
            raise BadImageFile(
                path,
                f"changed since it was opened: now {frame.shape} {frame.dtype}, "
                f"was {self.shape[1:]} {self.dtype}",
            )
        return frame


def _open(
    source: str | os.PathLike[str], chunks: Any, skip_bad: bool
) -> tuple[da.Array, StackInfo]:
    src = resolve(source)
    if src.kind == "zarr":
        array = open_zarr(src.paths[0])
        array = array.rechunk(chunks or default_chunks(array.shape, array.dtype))
        info = StackInfo(
            src.given,
            "zarr",
            src.paths,
            None,
            array.shape,
            array.dtype,
            array.chunks,
            stamps=(_store_stamp(src.paths[0]),),
        )
        return array, info
    good, bad = _scan(src)
    if bad and (not skip_bad or not good):
        raise ImageStackError(_bad_message(src, bad, skip_bad))
    header = good[0][2]
    frames = tuple(
        (reader, path, index) for path, reader, h, _ in good for index in range(h.frames)
    )
    shape = (len(frames), *header.frame_shape)
    lazy = _Frames(frames, tuple(stamp for *_, stamp in good), shape, header.dtype)
    chunks = chunks or default_chunks(shape, header.dtype)
    array = da.from_array(
        lazy,
        chunks=chunks,
        name="imread-" + tokenize(lazy, chunks),
        meta=np.empty((0,) * len(shape), header.dtype),
        fancy=False,
    )
    files = tuple(path for path, *_ in good)
    names = tuple(Path(path).stem for path in files) if src.kind == "files" else None
    info = StackInfo(
        src.given, src.kind, files, names, shape, header.dtype, array.chunks, bad, lazy.stamps
    )
    return array, info


def _store_stamp(store: str) -> tuple[int, int]:
    """The total size and latest ``mtime_ns`` of the files of a Zarr store: its identity."""
    size = latest = 0
    for folder, _, names in os.walk(store):
        for name in names:
            stat = os.stat(os.path.join(folder, name))
            size, latest = size + stat.st_size, max(latest, stat.st_mtime_ns)
    return size, latest


_Scanned = tuple[str, FrameReader, Header, tuple[int, int]]


def _scan(src: Source) -> tuple[list[_Scanned], tuple[tuple[str, str], ...]]:
    """Scan every file's header; split them into readable ones and ``(path, reason)``."""
    good: list[_Scanned] = []
    bad: dict[str, str] = {}
    for path in src.paths:
        try:
            reader, header = scan_file(path)
        except BadImageFile as exc:
            bad[path] = exc.reason
            continue
        if src.kind == "files" and header.frames != 1:
            bad[path] = (
                f"holds {header.frames} frames, and a stack of files takes one frame per "
                "file (open this file on its own to read its frames)"
            )
            continue
        stat = os.stat(path)
        good.append((path, reader, header, (stat.st_size, stat.st_mtime_ns)))
    if good:
        kinds = Counter((h.frame_shape, h.dtype) for _, _, h, _ in good)
        (shape, dtype), count = kinds.most_common(1)[0]
        for path, _, h, _ in good:
            if (h.frame_shape, h.dtype) != (shape, dtype):
                bad[path] = _mismatch(h, shape, dtype, count)
        good = [g for g in good if g[0] not in bad]
    return good, tuple((path, bad[path]) for path in src.paths if path in bad)


def _mismatch(header: Header, shape: tuple[int, ...], dtype: np.dtype, count: int) -> str:
    others = f"the other {count} file" + ("s" if count > 1 else "")
    if len(header.frame_shape) != len(shape):
        mine, theirs = ("colour", "gray") if len(header.frame_shape) == 3 else ("gray", "colour")
        return f"{mine} {header.frame_shape} among {theirs} {shape} ({others})"
    if header.frame_shape != shape:
        return f"shape {header.frame_shape} differs from {shape} of {others}"
    return f"dtype {header.dtype} differs from {dtype} of {others}"


def _bad_message(src: Source, bad: tuple[tuple[str, str], ...], skip_bad: bool) -> str:
    if len(src.paths) == 1:
        return f"{src.paths[0]}: {bad[0][1]}"
    base = os.path.commonpath([os.path.dirname(os.path.abspath(p)) for p in src.paths])
    listed = [f"{os.path.relpath(os.path.abspath(p), base)}: {why}" for p, why in bad[:_LISTED]]
    if len(bad) > _LISTED:
        listed.append(f"and {len(bad) - _LISTED} more")
    where = f"in {src.given}" if os.path.isdir(src.given) else f"matching {src.given}"
    if skip_bad:  # every file is bad
        return f"none of the {len(src.paths)} files {where} can be read: {'; '.join(listed)}"
    return (
        f"{len(bad)} of {len(src.paths)} files {where} cannot be read: {'; '.join(listed)}; "
        "pass skip_bad=True (--skip-bad on the command line) to leave them out"
    )
