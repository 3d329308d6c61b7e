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
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, BinaryIO, Protocol

import numpy as np
import tifffile
from dask.utils import format_bytes

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
    "TiffDirectory",
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
        self,
        path: str,
        indices: Sequence[int],
        storage_options: Options = None,
        out: Sequence[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        """Decode frames ``indices`` of ``path``, opening it once. A reader may decode a
        frame straight into its array of ``out`` when it has that shape and dtype, and
        return that very array."""
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


#: Bytes read from the start of a TIFF file to compare its image directory with another
#: file's: its header, its directory and the values that the directory points to, where
#: writers put them (tifffile, ImageJ, libtiff: right after the header).
_HEAD = 1 << 16
#: Bytes per value of each TIFF field type (BYTE, ASCII, SHORT, LONG, RATIONAL, SBYTE,
#: UNDEFINED, SSHORT, SLONG, SRATIONAL, FLOAT, DOUBLE, IFD, LONG8, SLONG8, IFD8).
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8,
               13: 4, 16: 8, 17: 8, 18: 8}  # fmt: skip
_OFFSETS = {3: "H", 4: "I", 16: "Q"}  # the types of strip and tile offsets and byte counts
_STRIPS, _TILES = (273, 279), (324, 325)  # (offsets, byte counts) tags
_X_RESOLUTION, _Y_RESOLUTION, _RESOLUTION_UNIT = 282, 283, 296
#: Tags that may differ between the files of one stack without changing how their pixels
#: are read: where the data lies, the resolution, the date.
_PER_FILE = {*_STRIPS, *_TILES, _X_RESOLUTION, _Y_RESOLUTION, _RESOLUTION_UNIT, 306}


@dataclass(frozen=True)
class TiffDirectory:
    """The one image directory of a single-image TIFF file, read from its first bytes.

    ``layout`` is everything in it but the :data:`_PER_FILE` tags (the byte order, the
    format, each other tag's type, count and value bytes): two files with the same layout
    are read the same way into frames of the same shape and dtype. ``needs`` is the size
    the file must have to hold its image data.
    """

    layout: tuple[Any, ...]
    needs: int
    resolution: tuple[float, float] | None
    unit: int
    #: The file's bytes before its image data when they hold the whole directory (its
    #: header, entries and the values they point to), else empty: a file that starts with
    #: the same bytes has this very directory, unparsed (20,000 files: 23 us a parse).
    prefix: bytes = field(default=b"", repr=False, compare=False)

    @classmethod
    def parse(cls, head: bytes) -> TiffDirectory | None:
        """The directory of the file that starts with ``head``; None when the file holds
        more than one image directory, or anything the directory points to lies beyond
        ``head``, or cannot be parsed here (tifffile then reads the file)."""
        try:
            return cls._parse(head)
        except (struct.error, KeyError, ValueError):
            return None

    @classmethod
    def _parse(cls, head: bytes) -> TiffDirectory | None:
        order = {b"II": "<", b"MM": ">"}[head[:2]]
        version = struct.unpack_from(order + "H", head, 2)[0]
        big = version == 43
        entries_format, offset_format = ("Q", "Q") if big else ("H", "I")
        inline = 8 if big else 4
        start = struct.unpack_from(order + offset_format, head, 8 if big else 4)[0]
        (entries,) = struct.unpack_from(order + entries_format, head, start)
        position = start + struct.calcsize(entries_format)
        entry = struct.Struct(order + "HH" + offset_format + f"{inline}s")
        fields: dict[int, tuple[int, int, bytes]] = {}
        directory_end = position + entries * entry.size + struct.calcsize(offset_format)
        for _ in range(entries):
            code, kind, count, value = entry.unpack_from(head, position)
            position += entry.size
            size = _TYPE_SIZES[kind] * count
            if size > inline:
                (offset,) = struct.unpack_from(order + offset_format, value)
                value = head[offset : offset + size]
                if len(value) < size:
                    return None
                directory_end = max(directory_end, offset + size)
            fields[code] = (kind, count, value[:size])
        if struct.unpack_from(order + offset_format, head, position)[0]:
            return None  # another image directory follows: not a single-image file
        offsets, counts = _TILES if _TILES[0] in fields else _STRIPS
        places = _values(order, fields[offsets])
        ends = zip(places, _values(order, fields[counts]), strict=True)
        data_start = min(places, default=0)
        layout = tuple(item for item in sorted(fields.items()) if item[0] not in _PER_FILE)
        resolution = None
        if _X_RESOLUTION in fields and _Y_RESOLUTION in fields:
            resolution = (_rational(order, fields[_X_RESOLUTION]),
                          _rational(order, fields[_Y_RESOLUTION]))  # fmt: skip
        unit = fields.get(_RESOLUTION_UNIT)
        return cls(
            (order, big, layout),
            max((offset + count for offset, count in ends), default=0),
            resolution,
            _values(order, unit)[0] if unit else 2,
            head[:data_start] if start < data_start and directory_end <= data_start else b"",
        )

    def tags(self, description: str | None) -> TiffTags | None:
        """What :func:`~.tiffmeta.page_tags` gives for this directory, whose ImageDescription
        is ``description``."""
        found = TiffTags(self.resolution, self.unit, description)
        return found if found.resolution or found.description else None


def _values(order: str, field: tuple[int, int, bytes]) -> tuple[int, ...]:
    kind, count, value = field
    return struct.unpack(f"{order}{count}{_OFFSETS[kind]}", value)


def _rational(order: str, field: tuple[int, int, bytes]) -> float:
    kind, count, value = field
    if (kind, count) != (5, 1):
        raise ValueError(f"resolution of type {kind}")
    numerator, denominator = struct.unpack(order + "II", value)
    return numerator / denominator if denominator else 0.0


def _head(path: str, storage_options: Options, size: int | None = None) -> bytes | None:
    """The first :data:`_HEAD` bytes of the file ``path`` of ``size`` bytes, if known
    (None: it cannot be read).

    A local file of known size is read with :func:`os.read`: a Python file object costs
    more than the read itself (20,000 small files: 150-180 ms against 250-450).
    """
    try:
        if size is None or is_url(path):
            with open_binary(path, storage_options) as fh:
                return fh.read(_HEAD)
        want = min(size, _HEAD)
        fd = os.open(path, os.O_RDONLY)
        try:
            head = os.read(fd, want)
            while len(head) < want and (more := os.read(fd, want - len(head))):
                head += more
            return head
        finally:
            os.close(fd)
    except OSError:
        return None


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
        self,
        path: str,
        indices: Sequence[int],
        storage_options: Options = None,
        out: Sequence[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        # One parse of the file for all the frames of a chunk: a multi-page TIFF opened
        # once per frame is parsed as many times as it has frames.
        with open_binary(path, storage_options) as fh, tifffile.TiffFile(fh) as tif:
            pages = tif.series[0].pages
            targets = out or [None] * len(indices)
            frames = [_decode(pages[i], target) for i, target in zip(indices, targets)]
        return [frame.astype(_native(frame.dtype), copy=False) for frame in frames]

    def head(self, path: str, storage_options: Options = None) -> TiffDirectory | None:
        """The image directory of ``path`` as :meth:`TiffDirectory.parse` reads it from the
        file's first bytes (None: this file needs tifffile's parse)."""
        head = _head(path, storage_options)
        return None if head is None else TiffDirectory.parse(head)

    def scan_like(
        self,
        path: str,
        size: int,
        like: tuple[Header, TiffDirectory],
        storage_options: Options = None,
    ) -> Header | None:
        """The header of ``path`` when its image directory has the layout of ``like``'s
        (another file's header, as :meth:`scan` read it, and its directory) and its file
        holds all its data: ``like``'s header with this file's resolution. None when it
        differs in any way (then :meth:`scan` it, to find out how)."""
        header, directory = like
        head = _head(path, storage_options, size)
        if head is None:
            return None
        same = bool(directory.prefix) and head.startswith(directory.prefix)
        mine = directory if same else TiffDirectory.parse(head)
        if mine is None or mine.layout != directory.layout or mine.needs > size:
            return None
        description = header.tags.description if header.tags else None
        return replace(header, tags=mine.tags(description))

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


def _decode(page: Any, out: np.ndarray | None) -> np.ndarray:
    """The pixels of a TIFF page, decoded into ``out`` when it fits (its shape and dtype):
    no frame-sized array of its own to allocate, fill and copy."""
    if out is not None and page.shape == out.shape and page.dtype == out.dtype:
        page.asarray(out=out)
        return out
    return page.asarray()


class Pillow:
    """PNG, JPEG and the other formats Pillow reads; writes PNG (lossless).

    Pillow is imported by the methods that use it: a run of TIFFs never pays for its import.
    """

    extensions = (".png",)

    def scan(self, path: str, size: int, storage_options: Options = None) -> Header:
        from PIL import Image, UnidentifiedImageError

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
        self,
        path: str,
        indices: Sequence[int],
        storage_options: Options = None,
        out: Sequence[np.ndarray] | None = None,
    ) -> list[np.ndarray]:
        return [self.read(path, index, storage_options) for index in indices]

    def read(self, path: str, index: int, storage_options: Options = None) -> np.ndarray:
        from PIL import Image

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
        from PIL import Image

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
        from PIL import Image

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
