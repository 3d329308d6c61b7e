"""Write any Dask array as image files or a Zarr store: :func:`imsave`.

Frames are written by the tasks that compute them, each file under a temporary name that
is renamed into place once complete (:mod:`stencilpipe.io.atomic`), so a killed or retried
task never leaves a partial file behind. A rerun keeps the outputs that exist and computes
only the blocks of frames that still miss one.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Sequence
from typing import Any

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed

from .atomic import new_run, remove_stale_temps, write_atomic
from .errors import TargetError
from .formats import FrameWriter, writer_for
from .plan import PendingWrite, WriteReport, frame_blocks, select_blocks, to_numpy
from .stackinfo import StackInfo, inputs_of, source_names
from .targets import Target, check_directory, check_inputs, output_paths, parse_target
from .zarrio import save_zarr

__all__ = ["imsave", "plan_write"]


def imsave(
    array: Any,
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    compression: str | None = None,
    compute: bool = True,
    names: Sequence[str] | None = None,
) -> WriteReport | Delayed:
    """Write the frames of ``array`` (its first axis) in parallel, atomically, resumably.

    Parameters
    ----------
    array : dask.array.Array or numpy.ndarray
        ``(frames, y, x)`` or ``(frames, y, x, c)``; a 2-D array is one frame.
    target : str or path
        A directory (``"out/"``: one ``.tif`` per frame), a pattern (``"out/*.png"``: ``*``
        is the frame's name; ``"out/frame_{:05d}.tif"``: ``{}`` its index, ``{name}`` its
        name), or a Zarr store (``"out.zarr"``, ``"out.ome.zarr"`` for OME-Zarr).
    overwrite : bool
        Rewrite outputs that exist. By default they are kept and their frames are not
        computed, so a rerun finishes an interrupted write.
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

    Returns
    -------
    WriteReport or dask.delayed.Delayed

    Raises
    ------
    TargetError
        When the target is, or lies inside, a directory of input files, would overwrite an
        input, contains ``..``, or its format cannot hold the array.

    Examples
    --------
    >>> import os, tempfile
    >>> import numpy as np
    >>> import tifffile
    >>> out = os.path.join(tempfile.mkdtemp(), "out")
    >>> frames = np.arange(3 * 32 * 40, dtype=np.uint16).reshape(3, 32, 40)
    >>> report = imsave(frames, out, compression="zlib")
    >>> report.frames_written, sorted(os.listdir(out))
    (3, ['00000.tif', '00001.tif', '00002.tif'])
    >>> bool((tifffile.imread(os.path.join(out, "00002.tif")) == frames[2]).all())
    True
    >>> imsave(frames, out).frames_skipped  # a rerun keeps what exists
    3
    """
    planned = plan_write(array, target, overwrite=overwrite, compression=compression, names=names)
    lazy = planned.report() if isinstance(planned, PendingWrite) else planned
    return lazy.compute() if compute else lazy


def plan_write(
    array: Any,
    target: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    compression: str | None = None,
    names: Sequence[str] | None = None,
    only: Collection[str] | None = None,
) -> PendingWrite | Delayed:
    """Plan what :func:`imsave` writes, without writing: checks the target, skips what exists.

    ``only`` (files only) limits the write to these output paths, as :class:`PendingWrite`
    names them; the other frames are left as they are and count as kept.

    Returns
    -------
    PendingWrite or dask.delayed.Delayed
        For files, a :class:`~stencilpipe.io.plan.PendingWrite` whose blocks can
        be computed (and fail) one by one; for a Zarr store, the delayed
        :class:`WriteReport`.
    """
    array = da.asarray(array)
    if array.ndim == 2:
        array = array[np.newaxis]
    if array.ndim not in (3, 4):
        raise TargetError(
            f"cannot write an array of shape {array.shape}: expected (y, x), (frames, y, x) "
            "or (frames, y, x, c)"
        )
    where = parse_target(target)
    check_directory(where)
    inputs = inputs_of(array)
    if where.zarr:
        check_inputs(where, [where.directory], inputs)
        return save_zarr(
            array, where.directory, ome=where.ome, overwrite=overwrite, compression=compression
        )
    return plan_files(array, where, names, overwrite, compression, inputs, only)


def plan_files(
    array: da.Array,
    target: Target,
    names: Sequence[str] | None,
    overwrite: bool,
    compression: str | None,
    inputs: list[StackInfo],
    only: Collection[str] | None = None,
) -> PendingWrite:
    """Plan writing ``array`` one file per frame into ``target`` (see :func:`imsave`)."""
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

    present = (
        set()
        if overwrite or not os.path.isdir(target.directory)
        else set(os.listdir(target.directory))
    )
    done = np.array(
        [os.path.basename(p) in present or (only is not None and p not in only) for p in paths],
        dtype=bool,
    )
    array = array.rechunk({axis: -1 for axis in range(1, array.ndim)})  # whole frames
    blocks = frame_blocks(array.chunks[0])
    todo = [
        b for b, frames_in in enumerate(blocks) if not done[frames_in.start : frames_in.stop].all()
    ]
    written = [p for p, d in zip(paths, done, strict=True) if not d]
    if not todo:
        return PendingWrite(target.given, None, (), frames, ())

    plan = np.array([("" if d else p) for p, d in zip(paths, done, strict=True)], dtype=object)
    sub = select_blocks(array, todo)
    plan = plan[np.concatenate([np.asarray(blocks[b]) for b in todo])]
    run = new_run()
    ready = dask.delayed(_prepare, pure=True)(target.directory, run)
    status = da.blockwise(
        _write_frames,
        "t",
        sub,
        "tyxc"[: array.ndim],
        da.from_array(plan, chunks=sub.chunks[:1]),
        "t",
        ready=ready,
        run=run,
        writer=writer,
        compression=compression,
        concatenate=True,
        dtype=np.int64,
        meta=np.empty(0, np.int64),
    )
    block_files = tuple(
        tuple(p for p in plan[start:stop] if p)
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
    )


def _prepare(directory: str, run: str) -> None:
    """Runs before any frame task: make the directory, clear other runs' temp files."""
    os.makedirs(directory, exist_ok=True)
    remove_stale_temps(directory, run)


def _write_frames(
    block: Any,
    plan: np.ndarray,
    *,
    ready: None,
    run: str,
    writer: FrameWriter,
    compression: str | None,
) -> np.ndarray:
    """Write each frame of ``block`` whose ``plan`` entry is a path; return bytes per frame."""
    block = to_numpy(block)
    written = np.zeros(len(plan), np.int64)
    for i, path in enumerate(plan):
        if path:
            written[i] = write_atomic(
                path, lambda fh, frame=block[i]: writer.write(fh, frame, compression), run=run
            )
    return written
