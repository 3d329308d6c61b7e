"""Stack I/O speed against the I/O limit, measured side by side in one run.

200 uint8 2048x2048 TIFFs (800 MiB) go through ``imsave(imread(src), dst)`` with no compute
in between, against anchors on the same files: a plain Python loop of tifffile ``imread`` +
``imwrite`` per file, the same loop with an fsync per file (what ``durability: per-file``
adds) or with one ``sync`` at the end (what the default adds), and ``cp -r`` of the
directory. stencilpipe writes each file under a temporary name,
renames it into place and records its checksum; by default (``durability: batch``) it
flushes the file system once at the end instead of an fsync per file. The OME-Zarr output
is set against zarr's own write of the same frames (tifffile reads, one chunk per frame).

Targets (issue 16): ``imsave(imread())`` at most 1.3x the tifffile loop; OME-Zarr at most
1.2x zarr's own write. The rows run interleaved (each round runs every row once), best round
each, and the machine's load is printed with them: ratios, not seconds, are what carries.
The fair anchor of ``imsave`` is the loop with one ``sync`` at its end, as durable as
``imsave``'s default; the plain loop (its outputs left in the page cache) is the anchor of
``durability="none"``, which leaves the writeback to the operating system as the loop does.

Run: ``python benchmarks/io_speed.py`` (a few minutes, 4 GiB of free disk).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import tifffile
import zarr

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402
from side_by_side import interleaved, load  # noqa: E402

from stencilpipe.io import imread, imsave  # noqa: E402

FRAMES = int(os.environ.get("BENCH_FRAMES", 200))
SIZE = 2048
REPEAT = int(os.environ.get("BENCH_REPEAT", 3))


def make_stack(folder: Path) -> list[Path]:
    folder.mkdir()
    base = np.random.default_rng(0).integers(0, 256, (SIZE, SIZE), dtype=np.uint8)
    paths = [folder / f"frame_{i}.tif" for i in range(FRAMES)]
    for i, path in enumerate(paths):
        tifffile.imwrite(path, base + np.uint8(i % 256))
    os.sync()  # the inputs on the disk: no timed flush waits for their writeback
    return paths


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        src = Path(tmp) / "in"
        out = Path(tmp) / "out"
        paths = make_stack(src)

        def stencilpipe(dst: Path) -> None:
            imsave(imread(src), dst)

        def tifffile_loop(dst: Path) -> None:
            dst.mkdir()
            for path in paths:
                tifffile.imwrite(dst / path.name, tifffile.imread(path))

        def tifffile_loop_fsync(dst: Path) -> None:
            dst.mkdir()
            for path in paths:
                with open(dst / path.name, "wb") as fh:
                    tifffile.imwrite(fh, tifffile.imread(path))
                    fh.flush()
                    os.fsync(fh.fileno())

        def cp(dst: Path) -> None:
            subprocess.run(["cp", "-r", str(src), str(dst)], check=True)

        def stencilpipe_no_flush(dst: Path) -> None:
            imsave(imread(src), dst, durability="none")

        def open_only(dst: Path) -> None:
            imread(src)

        def tifffile_loop_sync(dst: Path) -> None:
            tifffile_loop(dst)
            os.sync()  # what stencilpipe's default durability adds: one flush at the end

        def ome_zarr(dst: Path) -> None:
            imsave(imread(src), dst.with_suffix(".ome.zarr"))

        def zarr_write(dst: Path) -> None:
            array = zarr.create_array(
                dst.with_suffix(".zarr"), shape=(FRAMES, SIZE, SIZE), chunks=(1, SIZE, SIZE),
                dtype=np.uint8,
            )  # fmt: skip
            for index, path in enumerate(paths):
                array[index] = tifffile.imread(path)

        def empty() -> None:
            for each in (out, out.with_suffix(".zarr"), out.with_suffix(".ome.zarr")):
                shutil.rmtree(each, ignore_errors=True)
            os.sync()  # no row waits on the writeback of the row before (cp -r leaves 800 MiB)

        candidates = {
            "cp -r": cp,
            "tifffile loop (imread + imwrite)": tifffile_loop,
            "tifffile loop + fsync per file": tifffile_loop_fsync,
            "tifffile loop + one sync at the end": tifffile_loop_sync,
            "stencilpipe imsave(imread(src), dst)": stencilpipe,
            'stencilpipe imsave(..., durability="none")': stencilpipe_no_flush,
            "stencilpipe imread only (header scan)": open_only,
            "zarr's own write (tifffile reads, chunk per frame)": zarr_write,
            "stencilpipe imsave(imread(src), dst.ome.zarr)": ome_zarr,
        }
        load_before = load()
        rows = interleaved(
            {name: lambda run=run: run(out) for name, run in candidates.items()},
            rounds=REPEAT,
            before=empty,
        )
    mib = FRAMES * SIZE * SIZE / 2**20
    print_table(
        f"{FRAMES} uint8 {SIZE}x{SIZE} TIFFs ({mib:.0f} MiB), read + write", rows, rows[0][0]
    )
    print()
    print_table("the same, against the plain tifffile loop", rows, rows[1][0])
    print()
    print_table("the same, against the loop + one sync (as durable as imsave)", rows, rows[3][0])
    print()
    print_table("the same, against zarr's own write", rows, rows[-2][0])
    print(f"\nload before: {load_before}; after: {load()}")


if __name__ == "__main__":
    main()
