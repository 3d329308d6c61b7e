"""Write any Dask array as image files or a Zarr store: :func:`imsave`.

Frames are written by the tasks that compute them, each file under a temporary name that
is renamed into place once complete (:mod:`stencilpipe.io.atomic`), so a killed or retried
task never leaves a partial file behind; each output then gets its provenance record
(:mod:`stencilpipe.io.provenance`). A rerun keeps the outputs whose record matches and
whose bytes verify, and computes only the blocks of frames that miss one.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any, BinaryIO

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed

from .atomic import BATCH, DURABILITY, new_run, remove_stale_temps, write_atomic
from .errors import BadImageFile, TargetError
from .formats import FrameWriter, scan_file, writer_for
from .image import Image
from .lock import Locks, live_run
from .metadata import Metadata
from .ometiff import save_ome_tiff
from .plan import PendingWrite, WriteReport, frame_blocks, select_blocks, to_numpy
from .provenance import (
    DAMAGED,
    KEPT,
    NEW,
    STALE,
    Provenance,
    file_digest,
    records_dir,
    write_record,
)
from .remote import RemoteDirectory, judge_outputs
from .stackinfo import StackInfo, all_inputs, frame_inputs, inputs_of, source_names
from .targets import Target, check_directory, check_inputs, output_paths, parse_target
from .tiffmeta import TiffTags

__all__ = ["imsave", "plan_write"]

#: Called with a validated target's directory and name; takes its lock and returns the
#: run id (see :class:`~stencilpipe.io.lock.Locks`).
LockOutput = Callable[[str, str], str]


def imsave(
    array: Any,
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    compression: str | None = None,
    compute: bool = True,
    names: Sequence[str] | None = None,
    provenance: Provenance | None = None,
    wait: bool = False,
    metadata: Metadata | None = None,
    levels: int = 1,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: int = 3,
    shards: bool = False,
    durability: str = BATCH,
) -> WriteReport | Delayed:
    """Write the frames of ``array`` (its first axis) in parallel, atomically, resumably.

    Parameters
    ----------
    array : dask.array.Array, numpy.ndarray or Image
        ``(frames, y, x)`` or ``(frames, y, x, c)``; a 2-D array is one frame; an array
        of more axes with ``metadata``; an :class:`~stencilpipe.io.Image` with its own.
    target : str or path
        A directory (``"out/"``: one ``.tif`` per frame), a pattern (``"out/*.png"``: ``*``
        is the frame's name; ``"out/frame_{:05d}.tif"``: ``{}`` its index, ``{name}`` its
        name), or a Zarr store (``"out.zarr"``, ``"out.ome.zarr"`` for OME-Zarr).
    overwrite : bool
        Rewrite outputs that exist. By default an output is kept (its frames are not
        computed) when its provenance record says that the same computation made it from
        the same inputs and its bytes still verify; the others are recomputed, so a rerun
        finishes an interrupted write and never keeps a stale or damaged output.
    compression : str, optional
        For TIFF, any codec tifffile writes (``"zlib"``, ``"lzw"``, ``"zstd"``...); for
        Zarr, ``"zstd"``, ``"zlib"`` or ``"blosc"``. PNG takes none.
    compute : bool
        Write now and return the report; with ``False``, return a ``dask.delayed`` object
        that writes when computed (for example with ``client.compute``) and yields it.
    names : sequence of str, optional
        One name per frame for ``*`` patterns and directories. By default the names of
        the files the array was read from (when :func:`~stencilpipe.io.imread` opened
        them), else the zero-padded frame index.
    provenance : Provenance, optional
        What computes ``array``, for the outputs' records. By default the Dask graph's
        token, ``array.name``: the same code run on the same inputs, read with the same
        chunks, gives the same token; any other input or chunking recomputes every output.
    wait : bool
        When another run holds the target's lock, wait for it to end instead of raising
        :class:`~stencilpipe.io.errors.OutputBusy`. ``compute=False`` takes no lock.
    metadata : Metadata, optional
        The axes of ``array`` with their physical sizes, units and channel names. By
        default those of the stack :func:`~stencilpipe.io.imread` opened that ``array``
        is computed from with the same shape, else ``(frames, y, x[, c])``. OME-Zarr
        and OME-TIFF targets write them; file targets get one file per 2-D frame (the
        axes before ``y`` flattened in order).
    levels : int
        For OME-Zarr, how many resolution levels to write (each halves y and x).
    zarr_format : int
        For Zarr targets: 3 (OME-NGFF 0.5) or 2 (OME-NGFF 0.4, for older readers).
    shards : bool
        For Zarr 3 targets: store each block as one shard of one chunk per 2-D frame
        (few objects for stacks of many small frames; readers still read frame by frame).
    storage_options : dict, optional
        For a URL target (``s3://``, ``gs://``, ``az://``, ``memory://``): the options of
        its fsspec file system. Files are whole-object puts there; Zarr chunks go through
        zarr's fsspec store; provenance records and resume work as on disk, but object
        storage has no lock: one run at a time per output URL.
    durability : {'batch', 'per-file', 'none'}
        ``batch`` (default) renames each written file into place without an fsync and
        makes them all durable with one flush when the write ends (a crash before it can
        leave renamed files without data, which resume finds by their checksums and
        writes again); ``per-file`` fsyncs each file before its rename (Zarr chunks are
        flushed at the end, as with ``batch``); ``none`` leaves the writeback to the
        operating system: the write costs what its writes cost, and a crash can lose
        outputs it reported written (resume finds and rewrites them, as with ``batch``).

    Returns
    -------
    WriteReport or dask.delayed.Delayed

    Raises
    ------
    TargetError
        When the target is, or lies inside, a directory of input files, would overwrite an
        input, contains ``..``, cannot be written, or its format cannot hold the array.
    OutputBusy
        When another run is writing to the target (and ``wait`` is False).
    NoSpaceLeft
        When the target's file system is full.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import tifffile
    >>> out = os.path.join(tempfile.mkdtemp(), "out")
    >>> frames = np.arange(3 * 32 * 40, dtype=np.uint16).reshape(3, 32, 40)
    >>> report = imsave(frames, out, compression="zlib")
    >>> report.frames_written, sorted(os.listdir(out))
    (3, ['.stencilpipe', '00000.tif', '00001.tif', '00002.tif'])
    >>> bool((tifffile.imread(os.path.join(out, "00002.tif")) == frames[2]).all())
    True
    >>> imsave(frames, out, compression="zlib").frames_skipped  # a rerun keeps what is right
    3
    >>> imsave(frames + 1, out, compression="zlib").frames_stale  # another computation
    3
    """
    if isinstance(array, Image):
        array, metadata = array.data, metadata or array.metadata
    options: dict[str, Any] = dict(
        overwrite=overwrite,
        compression=compression,
        names=names,
        provenance=provenance,
        metadata=metadata,
        levels=levels,
        storage_options=storage_options,
        zarr_format=zarr_format,
        shards=shards,
        durability=durability,
    )
    if not compute:
        planned = plan_write(array, target, **options)
        return planned.report() if isinstance(planned, PendingWrite) else planned
    with Locks(wait=wait) as locks:
        planned = plan_write(array, target, lock=locks.take, **options)
        if not isinstance(planned, PendingWrite):
            return planned.compute()
        planned.discard_outdated()
        return planned.report().compute()


def plan_write(
    array: Any,
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    compression: str | None = None,
    names: Sequence[str] | None = None,
    only: Collection[str] | None = None,
    provenance: Provenance | None = None,
    lock: LockOutput | None = None,
    metadata: Metadata | None = None,
    levels: int = 1,
    storage_options: Mapping[str, Any] | None = None,
    zarr_format: int = 3,
    shards: bool = False,
    durability: str = BATCH,
) -> PendingWrite | Delayed:
    """Plan what :func:`imsave` writes: checks the target, keeps what is still right.

    ``only`` (files only) limits the write to these output paths, as :class:`PendingWrite`
    names them; the other frames are left as they are and count as kept. ``lock``, when
    given, is called once the target is validated and before the outputs are judged; it
    locks the target and returns the run id of the write. Without it nothing is locked
    or written until the write is computed.

    Returns
    -------
    PendingWrite or dask.delayed.Delayed
        For files, a :class:`~stencilpipe.io.plan.PendingWrite` whose blocks can
        be computed (and fail) one by one; for a Zarr store, the delayed
        :class:`WriteReport`.
    """
    if durability not in DURABILITY:
        raise ValueError(f"durability must be one of {', '.join(DURABILITY)}, got {durability!r}")
    array = da.asarray(array)
    if array.ndim == 2:
        array = array[np.newaxis]
    inputs = inputs_of(array)
    metadata = _metadata(array, metadata, inputs)
    where = parse_target(target)
    check_directory(where)
    provenance = provenance or Provenance.of({"array": array.name}, array.name)
    remote = RemoteDirectory(where.directory, storage_options) if where.remote else None
    if remote:
        remote.check(where.given)
        lock = None  # object storage has no lock files
    if levels != 1 and not (where.zarr and where.ome):
        raise TargetError(f"levels={levels} applies to OME-Zarr targets (.ome.zarr) only")
    if where.zarr:
        from .zarrio import save_zarr  # zarr is imported only for Zarr targets

        check_inputs(where, [where.directory], inputs)
        run = lock(where.directory, where.given) if lock else new_run()
        return save_zarr(
            array,
            where.directory,
            ome=where.ome,
            overwrite=overwrite,
            compression=compression,
            provenance=provenance.with_format(".zarr", compression),
            inputs=frame_inputs(inputs, array.shape[0]),
            run=run,
            metadata=metadata,
            levels=levels,
            remote=remote,
            zarr_format=zarr_format,
            shards=shards,
            durability=durability,
        )
    if where.ome_tiff:
        path = os.path.join(where.directory, where.pattern)
        check_inputs(where, [path], inputs)
        run = lock(where.directory, where.given) if lock else new_run()
        return save_ome_tiff(
            array,
            path,
            metadata=metadata,
            overwrite=overwrite,
            compression=compression,
            provenance=provenance,
            inputs=all_inputs(inputs),
            run=run,
            remote=remote,
            durability=durability,
        )
    frames = array.reshape((-1, *array.shape[metadata.axes.index("y") :]))
    tags = _frame_tags(inputs, frames)
    return plan_files(
        frames,
        where,
        names,
        overwrite,
        compression,
        inputs,
        only,
        provenance,
        lock,
        tags,
        remote,
        durability,
    )


#: The axes of an array without metadata, by its number of dimensions.
_PLAIN_AXES = {3: "iyx", 4: "iyxs"}


def _metadata(array: da.Array, given: Metadata | None, inputs: list[StackInfo]) -> Metadata:
    """The axes of ``array``: ``given``, else those of the input stack it has the shape
    of, else frames (and RGB samples)."""
    if given is None:
        same = [info.metadata for info in inputs if info.metadata and info.shape == array.shape]
        given = same[0] if same else None
    if given is None and array.ndim in _PLAIN_AXES:
        given = Metadata(_PLAIN_AXES[array.ndim])
    if given is None:
        raise TargetError(
            f"cannot write an array of shape {array.shape}: expected (y, x), (frames, y, x) "
            "or (frames, y, x, c), or metadata= (stencilpipe.io.Metadata) naming its axes"
        )
    if len(given.axes) != array.ndim or not given.axes.endswith(("yx", "yxs")):
        raise TargetError(
            f"metadata axes {given.axes!r} do not fit an array of shape {array.shape} "
            "(one letter per axis, ending in y, x)"
        )
    return given


def _frame_tags(inputs: list[StackInfo], frames: da.Array) -> list[TiffTags | None] | None:
    """Each frame's input TIFF tags, when the frames are those of one stack of files."""
    if len(inputs) != 1 or inputs[0].kind != "files" or inputs[0].frames != frames.shape[0]:
        return None
    info = inputs[0]
    if not any(info.file_tags):
        return None
    if info.dtype != frames.dtype:  # an ImageDescription no longer holds for another dtype
        return [tags and replace(tags, description=None) for tags in info.file_tags]
    return list(info.file_tags)


def _decodes(path: str) -> bool:
    """Whether the output file ``path`` is a whole image (its header, and its size)."""
    try:
        scan_file(path)
    except BadImageFile:
        return False
    return True


def plan_files(
    array: da.Array,
    target: Target,
    names: Sequence[str] | None,
    overwrite: bool,
    compression: str | None,
    inputs: list[StackInfo],
    only: Collection[str] | None,
    provenance: Provenance,
    lock: LockOutput | None,
    tags: Sequence[TiffTags | None] | None = None,
    remote: RemoteDirectory | None = None,
    durability: str = BATCH,
) -> PendingWrite:
    """Plan writing ``array`` one file per frame into ``target`` (see :func:`imsave`);
    a TIFF frame keeps ``tags[i]``, its input's resolution tags and ImageDescription."""
    writer = writer_for(target.extension)
    writer.check(array.dtype, array.shape[1:], compression)
    frames = array.shape[0]
    if names is not None and len(names) != frames:
        raise TargetError(f"names= has {len(names)} names for {frames} frames")
    width = max(5, len(str(frames - 1)))
    if names is None:
        names = source_names(array) or [f"{i:0{width}d}" for i in range(frames)]
    paths = output_paths(target, list(names))
    check_inputs(target, paths, inputs)
    run = lock(target.directory, target.given) if lock else new_run()

    provenance = provenance.with_format(target.extension, compression)
    identities = frame_inputs(inputs, frames)
    wanted = [only is None or p in only for p in paths]
    if overwrite:
        verdicts = [NEW if w else KEPT for w in wanted]
    else:
        asked = [i for i, w in enumerate(wanted) if w]
        found = judge_outputs(
            target.directory,
            [paths[i] for i in asked],
            [os.path.basename(paths[i]) for i in asked],
            provenance,
            [identities[i] for i in asked],
            remote=remote,
            intact=_decodes,
        )
        verdicts = [KEPT] * frames
        for i, verdict in zip(asked, found, strict=True):
            verdicts[i] = verdict
    done = np.array([v == KEPT for v in verdicts], dtype=bool)
    recomputed = {kind: verdicts.count(kind) for kind in (STALE, DAMAGED)}
    array = array.rechunk({axis: -1 for axis in range(1, array.ndim)})  # whole frames
    blocks = frame_blocks(array.chunks[0])
    todo = [
        b for b, frames_in in enumerate(blocks) if not done[frames_in.start : frames_in.stop].all()
    ]
    written = [p for p, d in zip(paths, done, strict=True) if not d]
    if not todo:
        return PendingWrite(target.given, None, (), frames, (), directory=target.directory)

    plan = np.empty(frames, dtype=object)  # per frame: "" (kept), or (path, inputs, tags)
    for i, (path, identity) in enumerate(zip(paths, identities, strict=True)):
        plan[i] = "" if done[i] else (path, identity, tags[i] if tags else None)
    sub = select_blocks(array, todo)
    plan = plan[np.concatenate([np.asarray(blocks[b]) for b in todo])]
    ready = dask.delayed(_prepare, pure=True)(target.directory, run, remote is not None)
    status = da.blockwise(
        _write_frames,
        "t",
        sub,
        "tyxc"[: array.ndim],
        # Named at random: tokenizing 100,000 (path, inputs, tags) entries would cost
        # seconds, and no other array shares this one's blocks.
        da.from_array(plan, chunks=sub.chunks[:1], name=False),
        "t",
        ready=ready,
        run=run,
        writer=writer,
        compression=compression,
        provenance=provenance,
        remote=remote,
        durability=durability,
        concatenate=False,  # one block of whole frames: given as is, not copied into one
        dtype=np.int64,
        meta=np.empty(0, np.int64),
    )
    block_files = tuple(
        tuple(p[0] for p in plan[start:stop] if p)
        for start, stop in zip(np.cumsum((0, *sub.chunks[0][:-1])), np.cumsum(sub.chunks[0]))
    )
    return PendingWrite(
        target.given,
        status,
        tuple(written),
        frames - len(written),
        block_files,
        directory=target.directory,
        run=run,
        stale=recomputed[STALE],
        damaged=recomputed[DAMAGED],
        outdated=tuple(p for p, v in zip(paths, verdicts, strict=True) if v in (STALE, DAMAGED)),
        durability=durability,
    )


def _prepare(directory: str, run: str, remote: bool) -> None:
    """Runs before any frame task: make the directory, clear dead runs' temp files (object
    storage has neither)."""
    if remote:
        return
    os.makedirs(directory, exist_ok=True)
    writing = {run, live_run(directory)}
    remove_stale_temps(directory, writing)
    remove_stale_temps(records_dir(directory), writing)


def _write_frames(
    block: Any,
    plan: np.ndarray,
    *,
    ready: None,
    run: str,
    writer: FrameWriter,
    compression: str | None,
    provenance: Provenance,
    remote: RemoteDirectory | None,
    durability: str,
) -> np.ndarray:
    """Write each frame of ``block`` whose ``plan`` entry is ``(path, inputs, tags)``, then
    its provenance record (each fsync'd first with ``durability="per-file"``); return bytes
    per frame. ``block`` may come as ``[[block]]``: the lists of its one block along each
    frame axis."""
    while isinstance(block, list):
        (block,) = block
    block = to_numpy(block)
    written = np.zeros(len(plan), np.int64)
    for i, entry in enumerate(plan):
        if entry:
            path, inputs, tags = entry
            directory, name = os.path.split(path)
            if remote:  # one put of the encoded bytes
                encoded = io.BytesIO()
                writer.write(encoded, block[i], compression, tags)
                data = encoded.getbuffer()
                written[i] = remote.put(path, data)
                remote.write_record(name, data, provenance, inputs)
                continue
            output: dict[str, Any] = {}
            written[i] = write_atomic(
                path,
                functools.partial(_encode, writer, block[i], compression, tags, output),
                run=run,
                durability=durability,
            )
            write_record(
                directory,
                name,
                output,
                provenance=provenance,
                inputs=inputs,
                run=run,
                durability=durability,
            )
    return written


def _encode(
    writer: FrameWriter,
    frame: np.ndarray,
    compression: str | None,
    tags: TiffTags | None,
    output: dict[str, Any],
    fh: BinaryIO,
) -> None:
    """Encode ``frame`` straight into ``fh`` (no copy in memory first), then read it back
    for its checksum: ``output`` gets its :func:`~.provenance.file_digest`."""
    writer.write(fh, frame, compression, tags)
    fh.flush()
    output.update(file_digest(fh))
