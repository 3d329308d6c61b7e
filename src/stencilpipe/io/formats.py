"""Image file formats behind two small protocols: :class:`FrameReader` and :class:`FrameWriter`.

A reader checks a file from its header alone (:meth:`FrameReader.scan`: frame count, frame
shape and dtype, truncation) and later decodes one frame (:meth:`FrameReader.read`). A writer
checks once, before any task runs, that the format can hold the data
(:meth:`FrameWriter.check`), then encodes one frame into an open binary file
(:meth:`FrameWriter.write`). TIFF goes through tifffile, everything else through Pillow.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

import numpy as np
import tifffile
from dask.utils import format_bytes
from PIL import Image, UnidentifiedImageError

from .errors import BadImageFile, TargetError
from .metadata import Metadata
from .storage import is_url, open_binary, unreachable
from .tiffmeta import TiffTags, page_tags, series_metadata

__all__ = [
    "MAX_FRAME_BYTES",
    "PILLOW",
    "TIFF",
    "TIFF_MAGIC",
    "FrameReader",
    "FrameWriter",
    "Header",
    "scan_file",
    "writer_for",
]

#: fsspec options for URLs (None for local paths).
Options = Mapping[str, Any] | None

#: A header that claims frames larger than this is taken for corrupt (16 GiB).
MAX_FRAME_BYTES = 2**34

#: The first four bytes of a TIFF or BigTIFF file, little- or big-endian.
TIFF_MAGIC = (b"II*\0", b"MM\0*", b"II+\0", b"MM\0+")
#: What a complete file of each Pillow format ends with.
_END_MARKERS = {"PNG": b"\0\0\0\0IEND\xaeB`\x82", "JPEG": b"\xff\xd9"}
#: The first bytes of the Pillow formats a stack usually holds, to tell corrupt from foreign.
_PILLOW_MAGIC = {b"\x89PNG": "PNG", b"\xff\xd8\xff": "JPEG"}
#: Pillow modes read as another mode (palette images become colour, as imageio does).
_READ_AS = {"P": "RGB", "PA": "RGBA"}
_PNG_MODES = {"1", "L", "LA", "I;16", "RGB", "RGBA"}


@dataclass(frozen=True)
class Header:
    """What a file's header says: how many frames, each of which shape and dtype.

    ``lead`` is the shape of the axes before the frame axes (their product is ``frames``)
    and ``metadata`` the axes of the whole series, both in the file's order (None: the
    format says nothing); ``tags`` the TIFF tags that a frame written from it keeps.
    """

    frames: int
    frame_shape: tuple[int, ...]
    dtype: np.dtype
    lead: tuple[int, ...] = ()
    metadata: Metadata | None = None
    tags: TiffTags | None = None


class FrameReader(Protocol):
    """Reads the frames of one image file."""

    def scan(self, path: str, size: int, storage_options: Options = None) -> Header:
        """Check ``path`` (of ``size`` bytes; a local path or a URL) from its header; raise
        :class:`BadImageFile`."""
        ...

    def read(self, path: str, index: int, storage_options: Options = None) -> np.ndarray:
        """Decode frame ``index`` of ``path`` (native byte order)."""
        ...

    def read_many(
        self, path: str, indices: Sequence[int], storage_options: Options = None
    ) -> list[np.ndarray]:
        """Decode frames ``indices`` of ``path``, opening it once."""
        ...


class FrameWriter(Protocol):
    """Writes one frame into one file."""

    extensions: tuple[str, ...]

    def check(self, dtype: np.dtype, frame_shape: tuple[int, ...], compression: str | None) -> None:
        """Raise :class:`TargetError` unless frames like these can be written."""
        ...

    def write(
        self, fh: BinaryIO, frame: np.ndarray, compression: str | None, tags: TiffTags | None = None
    ) -> None:
        """Encode ``frame`` into the open binary file ``fh`` (with ``tags``, for TIFF)."""
        ...


def _native(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("=")


def _check_size(path: str, frame_shape: tuple[int, ...], dtype: np.dtype) -> None:
    frame_bytes = math.prod(frame_shape) * dtype.itemsize
    if 0 in frame_shape:
        raise BadImageFile(path, f"header claims an empty image of shape {frame_shape}")
    if frame_bytes > MAX_FRAME_BYTES:
        raise BadImageFile(
            path,
            f"header claims {format_bytes(frame_bytes)} per frame (shape {frame_shape}), "
            f"more than {format_bytes(MAX_FRAME_BYTES)}: the file is corrupt",
        )


class Tiff:
    """TIFF, BigTIFF and OME-TIFF through tifffile; the frames are the pages of series 0."""

    extensions = (".tif", ".tiff")

    def scan(self, path: str, size: int, storage_options: Options = None) -> Header:
        try:
            with open_binary(path, storage_options) as fh, tifffile.TiffFile(fh) as tif:
                return self._scan(tif, path, size)
        except BadImageFile:
            raise
        except Exception as exc:  # tifffile raises many kinds on a corrupt file
            raise BadImageFile(path, f"corrupt TIFF ({exc})") from None

    def _scan(self, tif: tifffile.TiffFile, path: str, size: int) -> Header:
        if not tif.series:
            raise BadImageFile(path, "corrupt TIFF (no readable image in it)")
        series = tif.series[0]
        axes, shape = series.axes, tuple(series.shape)
        frame_ndim = 3 if axes.endswith("YXS") else 2 if axes.endswith("YX") else 0
        if not frame_ndim:
            raise BadImageFile(path, f"unsupported TIFF layout (axes {axes}, shape {shape})")
        metadata = series_metadata(tif)
        if not metadata.axes.endswith(("yx", "yxs")):
            raise BadImageFile(path, f"unsupported TIFF layout (axes {axes}, shape {shape})")
        frame_shape, dtype = shape[-frame_ndim:], _native(series.dtype)
        _check_size(path, frame_shape, dtype)
        page = series.keyframe
        if page.compression != 1:
            try:
                tifffile.TIFF.DECOMPRESSORS[page.compression]
            except KeyError as exc:
                raise BadImageFile(path, str(exc).strip("\"'")) from None
        if series.dataoffset is not None:  # contiguous, uncompressed
            needs = series.dataoffset + series.nbytes
        else:
            ends = (
                offset + count
                for each in series.pages
                if each is not None
                for offset, count in zip(each.dataoffsets, each.databytecounts, strict=True)
            )
            needs = max(ends, default=0)
        if needs > size:
            raise BadImageFile(path, f"truncated (needs {needs} bytes, has {size})")
        lead = shape[:-frame_ndim]
        return Header(math.prod(lead), frame_shape, dtype, lead, metadata, page_tags(page))

    def read(self, path: str, index: int, storage_options: Options = None) -> np.ndarray:
        return self.read_many(path, [index], storage_options)[0]

    def read_many(
        self, path: str, indices: Sequence[int], storage_options: Options = None
    ) -> list[np.ndarray]:
        # One parse of the file for all the frames of a chunk: a multi-page TIFF opened
        # once per frame is parsed as many times as it has frames.
        with open_binary(path, storage_options) as fh, tifffile.TiffFile(fh) as tif:
            pages = tif.series[0].pages
            frames = [pages[i].asarray() for i in indices]
        return [frame.astype(_native(frame.dtype), copy=False) for frame in frames]

    def check(self, dtype: np.dtype, frame_shape: tuple[int, ...], compression: str | None) -> None:
        try:  # encoding one pixel finds any dtype or codec that tifffile cannot write
            self.write(io.BytesIO(), np.zeros((1, 1) + frame_shape[2:], dtype), compression)
        except Exception as exc:
            raise TargetError(
                f"cannot write {dtype} frames of shape {frame_shape} as TIFF with "
                f"compression={compression!r}: {exc}"
            ) from None

    def write(
        self, fh: BinaryIO, frame: np.ndarray, compression: str | None, tags: TiffTags | None = None
    ) -> None:
        rgb = frame.ndim == 3 and frame.shape[2] in (3, 4)
        tifffile.imwrite(
            fh,
            frame,
            photometric="rgb" if rgb else "minisblack",
            planarconfig="contig" if frame.ndim == 3 else None,
            compression=compression,
            metadata=None,
            **(tags.imwrite_options() if tags else {}),
        )


class Pillow:
    """PNG, JPEG and the other formats Pillow reads; writes PNG (lossless)."""

    extensions = (".png",)

    def scan(self, path: str, size: int, storage_options: Options = None) -> Header:
        with open_binary(path, storage_options) as fh:
            start = fh.read(4)
        known = next((k for m, k in _PILLOW_MAGIC.items() if start.startswith(m)), None)
        try:
            with open_binary(path, storage_options) as fh, Image.open(fh) as image:
                mode, (width, height), kind = image.mode, image.size, image.format
            sample = np.asarray(Image.new(_READ_AS.get(mode, mode), (1, 1)))
        except UnidentifiedImageError:
            reason = f"corrupt {known} (its header cannot be parsed)" if known else "not an image"
            raise BadImageFile(path, reason) from None
        except Exception as exc:
            raise BadImageFile(path, f"corrupt {known or 'image'} ({exc})") from None
        end = _END_MARKERS.get(kind)
        if end:
            with open_binary(path, storage_options) as fh:
                fh.seek(max(0, size - len(end)))
                if fh.read() != end:
                    raise BadImageFile(path, f"truncated (the {kind} end marker is missing)")
        frame_shape, dtype = (height, width) + sample.shape[2:], _native(sample.dtype)
        _check_size(path, frame_shape, dtype)
        return Header(1, frame_shape, dtype)

    def read_many(
        self, path: str, indices: Sequence[int], storage_options: Options = None
    ) -> list[np.ndarray]:
        return [self.read(path, index, storage_options) for index in indices]

    def read(self, path: str, index: int, storage_options: Options = None) -> np.ndarray:
        with open_binary(path, storage_options) as fh, Image.open(fh) as image:
            if image.mode in _READ_AS:
                image = image.convert(_READ_AS[image.mode])
            frame = np.asarray(image)
        return frame.astype(_native(frame.dtype), copy=False)

    def check(self, dtype: np.dtype, frame_shape: tuple[int, ...], compression: str | None) -> None:
        if compression is not None:
            raise TargetError(
                f"compression={compression!r} applies to TIFF and Zarr targets only; "
                "PNG is always deflate-compressed"
            )
        try:
            mode = Image.fromarray(np.zeros((1, 1) + frame_shape[2:], dtype)).mode
        except Exception:
            mode = None
        if mode not in _PNG_MODES:
            raise TargetError(
                f"PNG cannot hold {dtype} frames of shape {frame_shape} (it takes uint8 or "
                "uint16 gray, uint8 gray+alpha, RGB or RGBA, or bool); write .tif instead"
            )

    def write(
        self, fh: BinaryIO, frame: np.ndarray, compression: str | None, tags: TiffTags | None = None
    ) -> None:
        Image.fromarray(frame).save(fh, format="PNG")


TIFF = Tiff()
PILLOW = Pillow()
_WRITERS: tuple[FrameWriter, ...] = (TIFF, PILLOW)


def scan_file(
    path: str, size: int | None = None, storage_options: Options = None
) -> tuple[FrameReader, Header]:
    """The reader for ``path`` (chosen from its first bytes) and its header.

    ``size`` is the file's size when known (a listing of object storage gives it).
    Raises :class:`BadImageFile` for a file that cannot be opened, is empty, is not an
    image, or whose header is corrupt or promises more bytes than the file has.
    """
    try:
        size = os.stat(path).st_size if size is None else size
        with open_binary(path, storage_options) as fh:
            magic = fh.read(4)
    except OSError as exc:
        if is_url(path):
            raise BadImageFile(path, unreachable(path, exc).split(": ", 1)[1]) from None
        raise BadImageFile(path, f"cannot be opened ({exc.strerror})") from None
    if size == 0:
        raise BadImageFile(path, "empty file (0 bytes)")
    reader: FrameReader = TIFF if magic in TIFF_MAGIC else PILLOW
    return reader, reader.scan(path, size, storage_options)


def writer_for(extension: str) -> FrameWriter:
    """The writer for a file name ending in ``extension`` (such as ``".tif"``)."""
    for writer in _WRITERS:
        if extension.lower() in writer.extensions:
            return writer
    known = ", ".join(ext for writer in _WRITERS for ext in writer.extensions)
    raise TargetError(f"cannot write {extension or 'files without an extension'!r}: use {known}")
