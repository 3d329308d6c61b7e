"""One multi-page OME-TIFF file (``out.ome.tif``) written by many tasks at once, atomically.

tifffile first lays out the whole file under a temporary name: the OME-XML header (axes,
physical sizes, units, channel names) and one contiguous, uncompressed image of the full
shape. Each block task then writes its own planes at their offsets in that file
(``os.pwrite``: tasks never touch the same bytes), and a last task, once every block is
written, records the file's provenance and renames it into place. A reader never sees a
partial file; a rerun keeps the file when its record still holds, and otherwise writes
all of it again (one file has one record). The temporary file must be visible to every
worker (a local or shared file system).
"""

from __future__ import annotations

import io
import mmap
import os
from dataclasses import dataclass
from typing import Any

import dask
import dask.array as da
import numpy as np
import tifffile
from dask.base import tokenize
from dask.delayed import Delayed

from .atomic import BATCH, NONE, is_full, remove_stale_temps
from .errors import NoSpaceLeft, TargetError
from .lock import live_run
from .metadata import Metadata, ome_unit
from .plan import WriteReport, lazy_report, to_numpy
from .provenance import (
    DAMAGED,
    KEPT,
    STALE,
    Provenance,
    digest,
    judge,
    record_path,
    write_record,
)
from .remote import RemoteDirectory

__all__ = ["ome_xml_options", "save_ome_tiff"]

#: Axis letters in OME-TIFF (tifffile): frames of unknown kind are ``Q``.
_LETTERS = {"t": "T", "c": "C", "z": "Z", "y": "Y", "x": "X", "s": "S", "i": "Q"}


def ome_xml_options(metadata: Metadata) -> dict[str, Any]:
    """The ``metadata=`` that :func:`tifffile.imwrite` turns into this stack's OME-XML.

    Examples
    --------
    >>> about = Metadata.of("czyx", {"z": 2.0, "x": 0.5}, {"z": "micrometer"}, ["a", "b"])
    >>> options = ome_xml_options(about)
    >>> options["axes"], options["PhysicalSizeZ"], options["PhysicalSizeZUnit"]
    ('CZYX', 2.0, 'µm')
    >>> options["Channel"]
    {'Name': ['a', 'b']}
    """
    options: dict[str, Any] = {"axes": "".join(_LETTERS[a] for a in metadata.axes)}
    for axis, step, unit in zip(metadata.axes, metadata.scale, metadata.units, strict=True):
        if axis in "zyx" and (step != 1.0 or unit):
            options[f"PhysicalSize{axis.upper()}"] = step
            if unit:
                options[f"PhysicalSize{axis.upper()}Unit"] = ome_unit(unit)
        elif axis == "t" and (step != 1.0 or unit):
            options["TimeIncrement"] = step
            if unit:
                options["TimeIncrementUnit"] = ome_unit(unit)
    if metadata.channel_names:
        options["Channel"] = {"Name": list(metadata.channel_names)}
    return options


@dataclass(frozen=True)
class _File:
    """The file a write makes: where, its temporary name, and its layout."""

    path: str
    temp: str
    shape: tuple[int, ...]
    dtype: np.dtype
    metadata: Metadata

    @property
    def frame_ndim(self) -> int:
        return len(self.shape) - self.metadata.axes.index("y")


def save_ome_tiff(
    array: da.Array,
    path: str,
    *,
    metadata: Metadata,
    overwrite: bool,
    compression: str | None,
    provenance: Provenance,
    inputs: list[list],
    run: str,
    remote: RemoteDirectory | None = None,
    durability: str = BATCH,
) -> Delayed:
    """Plan writing ``array`` (axes ``metadata.axes``) as the OME-TIFF file ``path``,
    fsync'd before its rename unless ``durability`` is ``"none"``.

    ``inputs`` is the identity of every input (one record covers the whole file). Returns
    the delayed :class:`~stencilpipe.io.WriteReport`. On object storage (``remote``),
    which has no shared file to write into, one task gathers the stack, encodes the file
    in memory and puts it whole: for stacks that fit in a worker's memory (OME-Zarr has
    no such limit).
    """
    if compression is not None:
        raise TargetError(
            f"compression={compression!r}: an OME-TIFF is written uncompressed, by many tasks "
            "at once; write OME-Zarr (.ome.zarr) for compressed output"
        )
    frames = int(np.prod(array.shape[: metadata.axes.index("y")]))
    provenance = provenance.with_format(".ome.tif", None)
    if remote:
        name = os.path.basename(path)
        verdict = KEPT if overwrite else remote.judge([name], provenance, [inputs])[0]
        if verdict == KEPT and not overwrite:
            return lazy_report(None, path, (), 0, frames)
        stale = frames if verdict in (STALE, DAMAGED) else 0
        return dask.delayed(_put_whole, pure=False)(
            array, path, metadata, remote, provenance, inputs, frames, stale
        )
    record = record_path(os.path.dirname(path), os.path.basename(path))
    if not overwrite and judge([path], [record], provenance, [inputs]) == [KEPT]:
        return lazy_report(None, path, (), 0, frames)
    stale = os.path.exists(path)
    unique = tokenize(path, run)[:12]
    temp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{run}-{unique}.tmp")
    target = _File(path, temp, array.shape, np.dtype(array.dtype), metadata)
    ready = dask.delayed(_create, pure=True)(target, run)
    whole = array.rechunk({axis: -1 for axis in range(array.ndim - target.frame_ndim, array.ndim)})
    status = whole.map_blocks(
        _write_planes,
        target=target,
        ready=ready,
        dtype=np.int64,
        chunks=(1,) * array.ndim,
        meta=np.empty((0,) * array.ndim, np.int64),
    )
    blocks = status.to_delayed(optimize_graph=False).ravel().tolist()
    return dask.delayed(_finish, pure=False)(
        blocks, target, provenance, inputs, run, frames, (frames if stale else 0), durability
    )


def _put_whole(
    data: np.ndarray,
    path: str,
    metadata: Metadata,
    remote: RemoteDirectory,
    provenance: Provenance,
    inputs: list[list],
    frames: int,
    stale: int,
) -> WriteReport:
    """Encode the whole stack as one OME-TIFF in memory and put it (object storage)."""
    encoded = io.BytesIO()
    rgb = metadata.axes.endswith("s") and data.shape[-1] in (3, 4)
    tifffile.imwrite(
        encoded,
        to_numpy(data),
        ome=True,
        photometric="rgb" if rgb else "minisblack",
        metadata=ome_xml_options(metadata),
    )
    written = encoded.getbuffer()
    size = remote.put(path, written)
    remote.write_record(os.path.basename(path), written, provenance, inputs)
    return WriteReport(path, frames, 0, size, (path,), stale, 0)


def _create(target: _File, run: str) -> int:
    """Lay out the whole file under its temporary name; return where the pixels start.

    Runs once before any block task; it clears the temporary files of dead runs first.
    """
    directory = os.path.dirname(target.path)
    os.makedirs(directory, exist_ok=True)
    remove_stale_temps(directory, {run, live_run(directory) or run})
    rgb = target.metadata.axes.endswith("s") and target.shape[-1] in (3, 4)
    try:
        tifffile.imwrite(
            target.temp,
            shape=target.shape,
            dtype=target.dtype,
            ome=True,
            photometric="rgb" if rgb else "minisblack",
            metadata=ome_xml_options(target.metadata),
        )
    except OSError as exc:
        if is_full(exc):
            raise NoSpaceLeft(directory) from None
        raise
    with tifffile.TiffFile(target.temp) as tif:
        offset = tif.series[0].dataoffset
    if offset is None:  # tifffile laid the image out in pieces: no offsets to write to
        raise TargetError(f"{target.path}: tifffile did not lay the image out contiguously")
    return int(offset)


def _write_planes(block: Any, *, target: _File, ready: int, block_info: Any = None) -> np.ndarray:
    """Write the planes of one block at their offsets in the temporary file."""
    data = np.ascontiguousarray(to_numpy(block), dtype=target.dtype.newbyteorder("<"))
    starts = [start for start, _ in block_info[0]["array-location"]]
    lead = len(target.shape) - target.frame_ndim
    plane_bytes = int(np.prod(target.shape[lead:])) * target.dtype.itemsize
    fd = os.open(target.temp, os.O_WRONLY)
    try:
        for where in np.ndindex(data.shape[:lead]):
            index = np.ravel_multi_index(
                tuple(s + w for s, w in zip(starts, where)), target.shape[:lead]
            )
            os.pwrite(fd, data[where].tobytes(), ready + int(index) * plane_bytes)
    except OSError as exc:
        if is_full(exc):
            raise NoSpaceLeft(os.path.dirname(target.path)) from None
        raise
    finally:
        os.close(fd)
    return np.full((1,) * len(target.shape), data.nbytes, np.int64)


def _finish(
    blocks: list[np.ndarray],
    target: _File,
    provenance: Provenance,
    inputs: list[list],
    run: str,
    frames: int,
    stale: int,
    durability: str,
) -> WriteReport:
    """Once every block is written: record the file's provenance, rename it into place."""
    with open(target.temp, "rb") as fh:
        fd = fh.fileno()
        if durability != NONE:
            os.fsync(fd)  # one file: one flush before the rename makes it durable
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data, memoryview(data) as view:
            directory, name = os.path.split(target.path)
            write_record(
                directory, name, digest(view), provenance=provenance, inputs=inputs, run=run
            )
    os.replace(target.temp, target.path)
    size = os.path.getsize(target.path)
    return WriteReport(target.path, frames, 0, size, (target.path,), stale, 0)
