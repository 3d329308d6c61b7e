"""What every write shares: which frame blocks to compute, and the report it returns.

A write is planned on the client: outputs that exist and whose provenance record still holds
(:mod:`stencilpipe.io.provenance`) mark their frames done, and only the blocks (groups of
frames along the first axis) that still have a frame to write enter the graph. Each block
task writes its own frames and returns the bytes it wrote; a last task sums them into a
:class:`WriteReport`. No frame ever travels to the client.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed
from dask.utils import format_bytes

from .atomic import BATCH, NONE, flush, remove_own_temps
from .provenance import record_path, records_dir

__all__ = [
    "PendingWrite",
    "WriteReport",
    "flushed",
    "frame_blocks",
    "lazy_report",
    "select_blocks",
    "to_numpy",
]


@dataclass(frozen=True)
class WriteReport:
    """What :func:`~stencilpipe.io.imsave` did.

    Attributes
    ----------
    target : str
        The target as given.
    frames_written : int
        Frames computed and written by this call.
    frames_skipped : int
        Frames not computed because their output was kept: it exists, its provenance
        matches and its bytes verify (``overwrite=False``).
    bytes_written : int
        Size of the files written; for a Zarr target, the uncompressed size of the frames
        written.
    files : tuple of str
        The files written (for a Zarr target, the store when anything was written).
    frames_stale : int
        Frames written again (among ``frames_written``) because their output was made by
        another computation or from other inputs.
    frames_damaged : int
        Frames written again because their output's bytes did not verify (truncated,
        changed).
    """

    target: str
    frames_written: int
    frames_skipped: int
    bytes_written: int
    files: tuple[str, ...]
    frames_stale: int = 0
    frames_damaged: int = 0

    @property
    def frames_kept(self) -> int:
        """Frames whose output was kept (``frames_skipped``)."""
        return self.frames_skipped

    def __str__(self) -> str:
        kept = f", kept {self.frames_skipped} that existed" if self.frames_skipped else ""
        counts = ((self.frames_stale, "stale"), (self.frames_damaged, "damaged"))
        again = [f"{n} {kind}" for n, kind in counts if n]
        redone = f" (recomputed {' and '.join(again)})" if again else ""
        frames = "frame" if self.frames_written == 1 else "frames"
        return (
            f"{self.target}: wrote {self.frames_written} {frames} "
            f"({format_bytes(self.bytes_written)}){kept}{redone}"
        )


def frame_blocks(chunks: Sequence[int]) -> list[range]:
    """The frame indices of each block, from the chunk sizes along the first axis."""
    stops = list(accumulate(chunks))
    return [range(stop - size, stop) for size, stop in zip(chunks, stops, strict=True)]


def select_blocks(array: da.Array, todo: Sequence[int]) -> da.Array:
    """The blocks ``todo`` (along the first axis) of ``array``; the rest leave the graph."""
    return array if len(todo) == array.numblocks[0] else array.blocks[list(todo)]


def to_numpy(block: object) -> np.ndarray:
    """A computed block as a NumPy array (a CuPy block is copied off the device)."""
    return np.asarray(block.get() if hasattr(block, "get") else block)


def _report(
    status: np.ndarray | None,
    target: str,
    files: tuple[str, ...],
    written: int,
    skipped: int,
    recomputed: tuple[int, int],
) -> WriteReport:
    nbytes = 0 if status is None else int(np.sum(status))
    return WriteReport(target, written, skipped, nbytes, files, *recomputed)


def lazy_report(
    status: da.Array | None,
    target: str,
    files: Sequence[str],
    written: int,
    skipped: int,
    recomputed: tuple[int, int] = (0, 0),
) -> Delayed:
    """A delayed :class:`WriteReport` that depends on every block's ``status`` (bytes);
    ``recomputed`` counts the frames written again as stale and as damaged."""
    return dask.delayed(_report, pure=True)(
        status, target, tuple(files), written, skipped, recomputed
    )


def _remove_own_temps(directory: str, run: str, durability: str) -> int:
    """Remove the temporary files (outputs and records) that ``run`` left in ``directory``,
    then flush both folders' files with one flush of their file system (the last one),
    as ``durability`` asks."""
    records = remove_own_temps(
        records_dir(directory), run, durability=durability, whole_file_system=False
    )
    return records + remove_own_temps(directory, run, durability=durability)


def flushed(report: WriteReport, location: str, durability: str) -> WriteReport:
    """``report``, once what its write put into ``location`` (a store, a folder) is
    flushed to the disk, unless ``durability`` is ``"none"``."""
    if durability != NONE:
        flush(location)
    return report


def _cleaned_up(report: WriteReport, directory: str, run: str, durability: str) -> WriteReport:
    """``report``, once the temporary files of lost workers are gone (every block is done)."""
    _remove_own_temps(directory, run, durability)
    return report


@dataclass(frozen=True)
class PendingWrite:
    """A planned file write: one status task per block of frames, and what each block writes.

    ``imsave(..., compute=False)`` returns :meth:`report`, which fails as a
    whole when any block fails. A runner that wants the other blocks written
    anyway computes :meth:`blocks` one by one and builds the report from the
    blocks that succeeded with :meth:`partial_report`.

    Attributes
    ----------
    target : str
        The target as given.
    status : dask.array.Array or None
        Bytes written per frame, one chunk per block of frames (None: nothing to write).
    files : tuple of str
        Every file this write creates.
    skipped : int
        Frames kept because their output existed.
    block_files : tuple of tuple of str
        The files each status block writes, in block order.
    directory : str
        The directory the files go to.
    run : str
        The id that this write's temporary files carry (see :mod:`stencilpipe.io.atomic`).
    stale, damaged : int
        Frames among ``files`` written again because their output was stale or damaged.
    outdated : tuple of str
        Those stale or damaged outputs (see :meth:`discard_outdated`).
    durability : str
        When the files are made durable (:data:`~stencilpipe.io.atomic.DURABILITY`).
    """

    target: str
    status: da.Array | None
    files: tuple[str, ...]
    skipped: int
    block_files: tuple[tuple[str, ...], ...]
    directory: str = ""
    run: str = ""
    stale: int = 0
    damaged: int = 0
    outdated: tuple[str, ...] = ()
    durability: str = BATCH

    def discard_outdated(self) -> None:
        """Remove the stale or damaged outputs that this write computes again, and their
        records, so that a frame that then fails leaves no outdated output behind. Call it
        on a machine that sees the target, once, before computing."""
        for path in self.outdated:
            Path(path).unlink(missing_ok=True)
            record_path(self.directory, os.path.basename(path)).unlink(missing_ok=True)

    def report(self) -> Delayed:
        """A delayed :class:`WriteReport` of the whole write (and its :meth:`finish`)."""
        report = lazy_report(
            self.status,
            self.target,
            self.files,
            len(self.files),
            self.skipped,
            (self.stale, self.damaged),
        )
        if self.status is None:
            return report
        return dask.delayed(_cleaned_up, pure=False)(
            report, self.directory, self.run, self.durability
        )

    def finish(self, durability: str | None = None) -> Delayed:
        """Delayed: remove the temporary files that workers lost mid-write left behind,
        then flush as ``durability`` (default: the write's own) asks.

        Compute it once every block has finished (or failed); it returns how many it removed.
        """
        return dask.delayed(_remove_own_temps, pure=False)(
            self.directory, self.run, durability or self.durability
        )

    def blocks(self) -> list[Delayed]:
        """One delayed status (bytes per frame) per block, in :attr:`block_files` order."""
        return [] if self.status is None else list(self.status.to_delayed().ravel())

    def partial_report(self, results: Sequence[np.ndarray | None]) -> WriteReport:
        """The report of the blocks whose result is not None (the others failed)."""
        done = [files for files, result in zip(self.block_files, results) if result is not None]
        nbytes = sum(int(np.sum(r)) for r in results if r is not None)
        written = tuple(f for files in done for f in files)
        return WriteReport(
            self.target, len(written), self.skipped, nbytes, written, self.stale, self.damaged
        )
