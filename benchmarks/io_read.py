"""Reading a stack: stencilpipe's own lazy reader against dask_image.imread, side by side.

The issue asks to keep the own reader only where it measurably beats dask-image's. Both
open the same stacks (a directory of 300 small TIFFs, the same as PNGs, and one 300-page
TIFF) and read every pixel with Dask's threaded scheduler (each result checked against the
anchor); the anchor is a plain loop of tifffile/Pillow reads of the same files. stencilpipe checks every header when it opens a
stack (shape, dtype, truncation: one bad file fails at once, naming it), which dask-image
does not (it trusts the first file); the open column shows what that costs.

Run: ``python benchmarks/io_read.py`` (about half a minute).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import dask
import numpy as np
import tifffile
from dask_image.imread import imread as dask_image_imread
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402

from stencilpipe.io import imread  # noqa: E402

FRAMES = 300
SHAPE = (256, 256)
REPEAT = 3


def best(fn: Callable[[], object]) -> float:
    fn()  # warm caches (the page cache, imports)
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def make(root: Path) -> dict[str, str]:
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 60000, (FRAMES, *SHAPE), dtype=np.uint16)
    (root / "tif").mkdir()
    (root / "png").mkdir()
    (root / "pages").mkdir()
    for i, data in enumerate(frames):
        tifffile.imwrite(root / "tif" / f"f{i:04d}.tif", data)
        Image.fromarray(data).save(root / "png" / f"f{i:04d}.png")
    tifffile.imwrite(root / "pages" / "pages.tif", frames)
    return {
        "directory of TIFFs": str(root / "tif" / "*.tif"),
        "directory of PNGs": str(root / "png" / "*.png"),
        "one multi-page TIFF": str(root / "pages" / "pages.tif"),
    }


def loop(pattern: str) -> np.ndarray:
    """The anchor: read each file (or page) in a plain loop."""
    if pattern.endswith("pages.tif"):
        return tifffile.imread(pattern)
    files = sorted(Path(pattern).parent.glob(Path(pattern).name))
    read = tifffile.imread if pattern.endswith(".tif") else (lambda p: np.asarray(Image.open(p)))
    return np.stack([read(p) for p in files])


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, dask.config.set(scheduler="threads"):
        for what, pattern in make(Path(folder)).items():
            expected = loop(pattern)
            # dask-image at its default of one frame per chunk: with nframes > 1 on a glob
            # of one-frame files, it returns one frame per chunk (10 of 300), wrongly.
            readers = {
                "stencilpipe imread (default chunks)": lambda p=pattern: imread(p),
                "stencilpipe imread (one frame per chunk)": lambda p=pattern: imread(
                    p, chunks=(1, *SHAPE)
                ),
                "dask_image.imread (one frame per chunk)": lambda p=pattern: dask_image_imread(p),
            }
            rows = [("plain loop (tifffile / Pillow)", best(lambda p=pattern: loop(p)))]
            for name, open_ in readers.items():
                np.testing.assert_array_equal(open_().compute(), expected)
                rows.append((f"{name}: open", best(open_)))
                rows.append((f"{name}: open + read", best(lambda o=open_: o().compute())))
            print_table(f"{what}: {FRAMES} frames of {SHAPE} uint16", rows, rows[0][0])


if __name__ == "__main__":
    main()
