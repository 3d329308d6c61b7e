"""Open image stacks lazily: :func:`imread` and :func:`inspect`.

Every file is checked from its header before any task exists (shape, dtype, truncation),
so a bad input fails at once with one message naming each bad file, not deep inside a
worker. The Dask array is then built from those headers: its shape and dtype are exact
and no pixel is read until a chunk is computed.
"""

from __future__ import annotations

import functools
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.base import tokenize
from dask.utils import parse_bytes

from ..errors import ImageStackError
from ..stencils.channels import mark_channels
from .errors import BadImageFile
from .formats import TIFF, FrameReader, Header, TiffDirectory, scan_file
from .image import Image
from .metadata import Arrangement, Metadata, arrange
from .sources import Source, resolve
from .stackinfo import StackInfo, register
from .storage import file_system, is_url, local_stamp, stamp

__all__ = ["default_chunks", "imread", "inspect", "read_image", "reopen"]

#: How many bad files a message lists by name before it only counts the rest.
_LISTED = 20


def imread(
    source: str | os.PathLike[str],
    *,
    chunks: Any = None,
    skip_bad: bool = False,
    storage_options: Mapping[str, Any] | None = None,
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
        Dask chunks. The default keeps frames whole and groups just under 32 MiB of them
        per chunk (:func:`default_chunks`); pass e.g.
        ``(1, 512, 512)`` for one tile of one frame per chunk.
    skip_bad : bool
        Leave out unreadable or mismatched files (listed in :func:`inspect`'s
        ``bad_files``) instead of raising.
    storage_options : dict, optional
        For a URL source (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``memory://``),
        the options of its fsspec file system (``endpoint_url``, ``anon``, ``profile``...),
        as dask's readers take them; credentials otherwise come from the environment.

    Returns
    -------
    dask.array.Array
        Nothing is read until it is computed. Its axes are those :func:`inspect` names
        (``StackInfo.axes``): ``(frames, y, x[, c])`` for files and plain stacks, or the
        stack's own axes in filter order, such as ``(t, c, z, y, x)`` for an OME-TIFF.

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
    return _opened(source, chunks, skip_bad, storage_options)[0]


def read_image(
    source: str | os.PathLike[str],
    *,
    chunks: Any = None,
    skip_bad: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> Image:
    """The stack :func:`imread` opens, with its axes, scale, units and channel names.

    Takes the same arguments as :func:`imread` and raises the same errors.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import tifffile
    >>> path = os.path.join(tempfile.mkdtemp(), "cells.ome.tif")
    >>> tifffile.imwrite(path, np.zeros((2, 3, 8, 9), np.uint16), ome=True,
    ...                  metadata={"axes": "CZYX", "PhysicalSizeZ": 2.0,
    ...                            "Channel": {"Name": ["DAPI", "GFP"]}})
    >>> image = read_image(path)
    >>> image.axes, image.data.shape, image.scale[1], image.channel_names
    ('czyx', (2, 3, 8, 9), 2.0, ('DAPI', 'GFP'))
    """
    return Image(*_opened(source, chunks, skip_bad, storage_options))


def _opened(
    source: str | os.PathLike[str],
    chunks: Any,
    skip_bad: bool,
    storage_options: Mapping[str, Any] | None,
) -> tuple[da.Array, StackInfo]:
    """The array and its description, registered (and its RGB samples marked)."""
    return _registered(_open(source, skip_bad, storage_options), chunks)


def inspect(
    source: str | os.PathLike[str],
    *,
    chunks: Any = None,
    skip_bad: bool = False,
    storage_options: Mapping[str, Any] | None = None,
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
    return _at(_open(source, skip_bad, storage_options), chunks)[1]


#: The most bytes a default chunk holds, below Dask's ``array.chunk-size`` (128 MiB): glibc
#: serves a block from memory that earlier chunks freed only while blocks stay under its
#: largest mmap threshold (32 MiB, with its header); larger ones, 32 MiB exactly included,
#: come as fresh pages from the kernel, faulted in one by one as frames are decoded into
#: them. ``imsave(imread())`` of 200 x 4 MiB TIFFs, 2 threads: 3.2 s with 29-frame chunks,
#: 1.8 s with 8-frame (32 MiB) ones (loaded); best of 5, quieter: 1.30 s with 8 frames,
#: 0.91 s with 7; decoding alone, 1 thread: 282-334 ms in fresh 32 MiB blocks, 172 ms in
#: reused 4 MiB ones, 173-231 ms for tifffile's own loop.
CHUNK_BYTES = 32 * 2**20 - 2**16


def default_chunks(shape: Sequence[int], dtype: np.dtype, lead: int = 1) -> tuple[int, ...]:
    """Whole frames, as many per chunk as fit in :data:`CHUNK_BYTES` (or Dask's
    ``array.chunk-size``, if smaller), evenly spread.

    ``lead`` counts the axes before the frame axes: the frames of a chunk lie along the
    last of them, the others are cut into single steps (one time point, one channel).

    Examples
    --------
    >>> default_chunks((200, 2048, 2048), np.dtype("uint8"))  # 4 MiB frames, 28 MiB chunks
    (7, 2048, 2048)
    >>> default_chunks((2, 3, 40, 512, 512), np.dtype("uint16"), lead=3)
    (1, 1, 40, 512, 512)
    """
    limit = min(CHUNK_BYTES, parse_bytes(dask.config.get("array.chunk-size")))
    frame_bytes = max(1, math.prod(shape[lead:]) * np.dtype(dtype).itemsize)
    along = shape[lead - 1]
    per_chunk = max(1, min(along, limit // frame_bytes))
    blocks = -(-along // per_chunk)
    return (*(1,) * (lead - 1), max(1, -(-along // blocks)), *shape[lead:])


class _Frames:
    """An array-like whose items are frames of files, decoded when indexed.

    This is what :func:`dask.array.from_array` wraps: ``frames`` holds one
    ``(reader, path, index)`` per frame, shaped like the axes before the frame axes; each
    chunk task indexes it with a tuple of slices and decodes only the frames in its chunk.
    """

    def __init__(
        self,
        frames: np.ndarray,
        stamps: tuple[tuple[int, int], ...],
        frame_shape: tuple[int, ...],
        dtype: np.dtype,
        storage_options: Mapping[str, Any],
    ) -> None:
        self.frames, self.stamps, self.storage_options = frames, stamps, storage_options
        self.shape, self.dtype = (*frames.shape, *frame_shape), dtype
        self.ndim, self._lead = len(self.shape), frames.ndim

    def __dask_tokenize__(self) -> object:
        return self._token

    @functools.cached_property
    def _token(self) -> str:
        """The frames' token, computed once (a stack may have 100,000 frames)."""
        files = [(type(reader).__name__, path, index) for reader, path, index in self.frames.flat]
        # As one string each: Dask normalises a list item by item (20,000 files: 0.15 s).
        return tokenize(
            "stencilpipe-frames", repr(files), repr(self.stamps), self.shape, self.dtype.str
        )

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        key = key if isinstance(key, tuple) else (key,)
        selected = self.frames[key[: self._lead]]
        frame_shape = self.shape[self._lead :]
        block = np.empty((*selected.shape, *frame_shape), self.dtype)
        files: dict[str, tuple[FrameReader, list[tuple[int, ...]], list[int]]] = {}
        for where in np.ndindex(selected.shape):  # each file opened once per chunk
            reader, path, index = selected[where]
            _, places, indices = files.setdefault(path, (reader, [], []))
            places.append(where)
            indices.append(index)
        for path, (reader, places, indices) in files.items():
            targets = [block[where] for where in places]
            frames = self._read(reader, path, indices, targets)
            for where, target, frame in zip(places, targets, frames, strict=True):
                if frame is not target:  # not decoded in place
                    block[where] = frame
        return block[(slice(None),) * self._lead + key[self._lead :]]

    def _read(
        self, reader: FrameReader, path: str, indices: list[int], targets: list[np.ndarray]
    ) -> list[np.ndarray]:
        try:
            frames = reader.read_many(path, indices, self.storage_options, targets)
        except Exception as exc:
            raise BadImageFile(path, f"cannot be decoded ({exc})") from None
        for frame in frames:
            if frame.shape != self.shape[self._lead :] or frame.dtype != self.dtype:
                raise BadImageFile(
                    path,
                    f"changed since it was opened: now {frame.shape} {frame.dtype}, "
                    f"was {self.shape[self._lead :]} {self.dtype}",
                )
        return frames


def _chunks(chunks: Any, shape: tuple[int, ...], dtype: np.dtype, lead: int) -> Any:
    """``chunks`` as given, the axes a dict leaves out filled in from :func:`default_chunks`."""
    default = default_chunks(shape, dtype, lead)
    if chunks is None:
        return default
    if isinstance(chunks, dict):
        return tuple(chunks.get(axis, chunks.get(axis - len(shape), size))
                     for axis, size in enumerate(default))  # fmt: skip
    return chunks


@dataclass(frozen=True)
class _FileStack:
    """The frames of image files, as their headers describe them (``info``, no chunks)."""

    info: StackInfo
    frames: _Frames

    def array(self, chunks: Any) -> da.Array:
        return da.from_array(
            self.frames,
            chunks=chunks,
            name="imread-" + tokenize(self.frames, chunks),
            meta=np.empty((0,) * len(self.info.shape), self.info.dtype),
            fancy=False,
        )


@dataclass(frozen=True)
class _ZarrStack:
    """A Zarr array (an OME-Zarr image's first level) and how it is arranged."""

    info: StackInfo
    node: Any
    plan: Arrangement

    def array(self, chunks: Any) -> da.Array:
        from .zarrio import read_arranged

        return read_arranged(self.node, self.plan, chunks)


_Stack = _FileStack | _ZarrStack

#: The stack each array that :func:`imread` returned was built from, by the array's name.
_STACKS: dict[str, _Stack] = {}


def _at(stack: _Stack, chunks: Any) -> tuple[da.Array, StackInfo]:
    """The array of ``stack`` in ``chunks`` (see :func:`imread`), and its description."""
    info = stack.info
    lead = info.axes.index("y")
    array = stack.array(_chunks(chunks, info.shape, info.dtype, lead))
    return array, replace(info, chunks=array.chunks)


def reopen(stack: da.Array, chunks: Any) -> da.Array:
    """The stack :func:`imread` returned as ``stack``, in other ``chunks``, from the
    headers read when it was opened (no file is read again).

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import tifffile
    >>> folder = tempfile.mkdtemp()
    >>> for i in range(4):
    ...     tifffile.imwrite(os.path.join(folder, f"f{i}.tif"), np.full((8, 9), i, np.uint8))
    >>> reopen(imread(folder), {0: 1}).chunks[0]
    (1, 1, 1, 1)
    """
    try:
        opened = _STACKS[stack.name]
    except KeyError:
        raise ValueError("reopen takes an array that imread returned, as it returned it") from None
    return _registered(opened, chunks)[0]


def _registered(stack: _Stack, chunks: Any) -> tuple[da.Array, StackInfo]:
    """The array of ``stack`` in ``chunks`` and its description, both registered (and its
    RGB samples marked)."""
    array, info = _at(stack, chunks)
    register(array, info)
    _STACKS[array.name] = stack
    if info.axes.endswith("s"):
        mark_channels(array)  # the samples of RGB(A) pixels are never filtered across
    return array, info


def _open(
    source: str | os.PathLike[str], skip_bad: bool, storage_options: Mapping[str, Any] | None
) -> _Stack:
    """Read the headers of ``source`` once: the stack they describe."""
    src = resolve(source, storage_options)
    if src.kind == "zarr":
        from .zarrio import zarr_node  # zarr is imported only for Zarr stores

        node, metadata = zarr_node(src.paths[0], src.storage_options)
        plan = arrange(metadata, node.shape)
        info = StackInfo(
            src.given,
            "zarr",
            src.paths,
            None,
            plan.shape,
            node.dtype,
            (),
            stamps=(_store_stamp(src.paths[0], src.storage_options),),
            metadata=plan.metadata,
        )
        return _ZarrStack(info, node, plan)
    good, bad = _scan(src)
    if bad and (not skip_bad or not good):
        raise ImageStackError(_bad_message(src, bad, skip_bad))
    header = good[0][2]
    frames = np.empty(sum(h.frames for _, _, h, _ in good), dtype=object)
    frames[:] = [(reader, path, i) for path, reader, h, _ in good for i in range(h.frames)]
    frame_axes = "yxs"[: len(header.frame_shape)]
    if src.kind == "files":
        metadata = _frame_metadata(header, frame_axes)
        stored_shape = (len(frames), *header.frame_shape)
    else:
        metadata = header.metadata or Metadata("i" + frame_axes)
        lead = header.lead if header.metadata else (len(frames),)
        stored_shape = (*lead, *header.frame_shape)
    plan = arrange(metadata, stored_shape)
    frames = plan.apply_lead(frames.reshape(stored_shape[: len(stored_shape) - len(frame_axes)]))
    stamps = tuple(stamp for *_, stamp in good)
    lazy = _Frames(frames, stamps, header.frame_shape, header.dtype, src.storage_options)
    files = tuple(path for path, *_ in good)
    names = tuple(_stem(path) for path in files) if src.kind == "files" else None
    info = StackInfo(
        src.given,
        src.kind,
        files,
        names,
        lazy.shape,
        header.dtype,
        (),
        bad,
        lazy.stamps,
        plan.metadata,
        tuple(h.tags for _, _, h, _ in good),
    )
    return _FileStack(info, lazy)


def _stem(path: str) -> str:
    """``Path(path).stem``, without making a Path (a stack may have 100,000 files)."""
    name = os.path.basename(path)
    dot = name.rfind(".")
    return name[:dot] if 0 < dot < len(name) - 1 else name


def _frame_metadata(header: Header, frame_axes: str) -> Metadata:
    """A stack of files: frames of unknown kind, with the first file's ``y, x`` steps."""
    first = header.metadata
    if first is None:
        return Metadata("i" + frame_axes)
    steps = first.transposed([first.axes.index(a) for a in frame_axes])
    return Metadata("i" + frame_axes, (1.0, *steps.scale), (None, *steps.units))


def _store_stamp(store: str, storage_options: Mapping[str, Any]) -> tuple[int, int]:
    """The total size and latest ``mtime_ns`` of the files of a Zarr store: its identity."""
    if is_url(store):
        fs, path = file_system(store, storage_options)
        stamps = [stamp(info) for info in fs.find(path, detail=True).values()]
    else:
        stamps = [
            local_stamp(os.path.join(folder, name))
            for folder, _, names in os.walk(store)
            for name in names
        ]
    return sum(s for s, _ in stamps), max((t for _, t in stamps), default=0)


_Scanned = tuple[str, FrameReader, Header, tuple[int, int]]


def _scan(src: Source) -> tuple[list[_Scanned], tuple[tuple[str, str], ...]]:
    """Scan every file's header; split them into readable ones and ``(path, reason)``.

    In a stack of TIFF files, a file whose image directory has the layout of one read
    before (tifffile's full parse, ~0.5 ms a file) only has its directory compared with
    that one's (:meth:`~.formats.Tiff.scan_like`, ~30 us): same shape, dtype, codec and
    tags, all its data in the file. Any other file gets the full parse.
    """
    good: list[_Scanned] = []
    bad: dict[str, str] = {}
    sizes = _stamps(src)
    like: tuple[Header, TiffDirectory] | None = None
    for path in src.paths:
        size = sizes[path][0]
        found = like and size >= 0 and TIFF.scan_like(path, size, like, src.storage_options)
        if found:
            good.append((path, TIFF, found, sizes[path]))
            continue
        try:
            reader, header = scan_file(path, None if size < 0 else size, src.storage_options)
        except BadImageFile as exc:
            bad[path] = exc.reason
            continue
        if src.kind == "files" and header.frames != 1:
            bad[path] = (
                f"holds {header.frames} frames, and a stack of files takes one frame per "
                "file (open this file on its own to read its frames)"
            )
            continue
        good.append((path, reader, header, sizes[path]))
        if like is None and src.kind == "files" and reader is TIFF and len(src.paths) > 1:
            directory = TIFF.head(path, src.storage_options)
            like = (header, directory) if directory else None
    if good:
        kinds = Counter((h.frame_shape, h.dtype) for _, _, h, _ in good)
        (shape, dtype), count = kinds.most_common(1)[0]
        for path, _, h, _ in good:
            if (h.frame_shape, h.dtype) != (shape, dtype):
                bad[path] = _mismatch(h, shape, dtype, count)
        good = [g for g in good if g[0] not in bad]
    return good, tuple((path, bad[path]) for path in src.paths if path in bad)


def _stamps(src: Source) -> dict[str, tuple[int, int]]:
    """``(size, mtime_ns)`` of each file (``(-1, 0)``: it cannot be opened)."""
    if not src.paths or not is_url(src.paths[0]):
        found = {}
        for path in src.paths:
            try:
                found[path] = local_stamp(path)
            except OSError:
                found[path] = (-1, 0)  # scan_file says why
        return found
    fs, _ = file_system(src.paths[0], src.storage_options)
    found = {}
    for path in src.paths:
        try:
            found[path] = stamp(fs.info(path))
        except OSError:
            found[path] = (-1, 0)
    return found


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
