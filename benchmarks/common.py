"""What the benchmarks share: best-of-N wall time, a ratio table, the stacks of TIFFs they
write and the user's loop they compare a whole run with."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tifffile

HERE = Path(__file__).resolve().parent

#: The anchor of whole runs: the loop a user writes (tifffile read, stencilpipe's compiled
#: smooth, tifffile write), as a script: ``python -c LOOP src dst``.
LOOP = f"""
import os, sys
from pathlib import Path
import tifffile
sys.path.insert(0, {str(HERE)!r})
from kernels import smooth
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
dst.mkdir()
for path in sorted(src.iterdir()):
    tifffile.imwrite(dst / path.name, smooth(tifffile.imread(path)))
"""


def write_frames(
    folder: Path, frames: int, shape: tuple[int, int], name: str = "f{:05d}.tif"
) -> Path:
    """``frames`` uint8 TIFFs of ``shape`` (one random frame plus its index) in ``folder``,
    synced to the disk: no timed flush then waits for their writeback."""
    folder.mkdir(parents=True)
    base = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    for i in range(frames):
        tifffile.imwrite(folder / name.format(i), base + np.uint8(i % 256))
    os.sync()
    return folder


def best_time(fn: Callable[[], object], *, repeat: int = 20, warmup: int = 2) -> float:
    """Best wall time of ``fn()`` over ``repeat`` runs, in seconds (after ``warmup`` runs)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def print_table(title: str, rows: list[tuple[str, float]], anchor: str) -> None:
    """Print ``rows`` of (name, seconds) with each one's ratio to the ``anchor`` row."""
    reference = dict(rows)[anchor]
    print(f"\n## {title}\n")
    print(f"| {'what':<52} | {'ms':>9} | {'x ' + anchor:>22} |")
    print(f"|{'-' * 54}|{'-' * 11}|{'-' * 24}|")
    for name, seconds in rows:
        print(f"| {name:<52} | {seconds * 1e3:9.3f} | {seconds / reference:22.2f} |")
