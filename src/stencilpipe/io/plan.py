"""What every write shares: which frame blocks to compute, and the report it returns.

A write is planned on the client from file names alone: outputs that already exist mark
their frames done, and only the blocks (groups of frames along the first axis) that still
have a missing frame enter the graph. Each block task writes its own frames and returns
the bytes it wrote; a last task sums them into a :class:`WriteReport`. No frame ever
travels to the client.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import dask
import dask.array as da
import numpy as np
from dask.delayed import Delayed
from dask.utils import format_bytes

__all__ = ["WriteReport", "frame_blocks", "lazy_report", "select_blocks", "to_numpy"]


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
        Frames not computed because their output already existed (``overwrite=False``).
    bytes_written : int
        Size of the files written; for a Zarr target, the uncompressed size of the frames
        written.
    files : tuple of str
        The files written (for a Zarr target, the store when anything was written).
    """

    target: str
    frames_written: int
    frames_skipped: int
    bytes_written: int
    files: tuple[str, ...]

    def __str__(self) -> str:
        kept = f", kept {self.frames_skipped} that existed" if self.frames_skipped else ""
        frames = "frame" if self.frames_written == 1 else "frames"
        return (
            f"{self.target}: wrote {self.frames_written} {frames} "
            f"({format_bytes(self.bytes_written)}){kept}"
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
    status: np.ndarray | None, target: str, files: tuple[str, ...], written: int, skipped: int
) -> WriteReport:
    nbytes = 0 if status is None else int(np.sum(status))
    return WriteReport(target, written, skipped, nbytes, files)


def lazy_report(
    status: da.Array | None, target: str, files: Sequence[str], written: int, skipped: int
) -> Delayed:
    """A delayed :class:`WriteReport` that depends on every block's ``status`` (bytes)."""
    return dask.delayed(_report, pure=True)(status, target, tuple(files), written, skipped)
