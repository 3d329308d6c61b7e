"""End to end: 200 uint8 2048x2048 TIFFs in, 3x3 mean, 200 out, against its anchors in one run.

The anchor is the bare Python loop a user would write: tifffile read, stencilpipe's compiled
smooth, tifffile write, one file at a time, timed in a warm process and, for the whole-run
target, as a script from process start (``benchmarks/startup.py`` part ``run`` adds the loop
with one sync at its end, the anchor for durable outputs). Beside it:

* ``stencilpipe run`` as a user runs it, from process start to exit: on threads of its own
  process (what a run that leaves the cluster to stencilpipe does up to
  ``IN_PROCESS_FRAMES`` frames) and on the embedded LocalCluster (2 processes x 1 thread);
* the same loop as a script, from process start (imports and kernel loading included);
* seed 004's loop (numba.stencil + guvectorize smooth);
* dask-image: ``dask_image.imread`` + ``map_blocks(scipy.ndimage.uniform_filter)`` + a
  tifffile write per block, on Dask's threaded scheduler;
* the I/O limits: ``imsave(imread(src), dst)`` (no compute), and ``cp -r``.

Target (issue 16): ``stencilpipe run`` including start-up at most 1.2x the loop.

Run: ``python benchmarks/end_to_end.py`` (a few minutes, 3 GiB of free disk).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tifffile

sys.path.insert(0, os.path.dirname(__file__))
from common import HERE, LOOP, print_table, write_frames  # noqa: E402
from kernels import smooth  # noqa: E402

from stencilpipe.io import imread, imsave  # noqa: E402

FRAMES = int(os.environ.get("BENCH_FRAMES", 200))
SIZE = 2048


def best(action, out: Path, repeat: int = 2) -> float:
    """Best wall time of ``action()`` over ``repeat`` runs, each into an empty ``out``."""
    times = []
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    shutil.rmtree(out, ignore_errors=True)
    return min(times)


def for_loop(kernel, src: Path, dst: Path) -> None:
    dst.mkdir()
    for path in sorted(src.iterdir()):
        tifffile.imwrite(dst / path.name, kernel(tifffile.imread(path)))


def dask_image_run(src: Path, dst: Path) -> None:
    """dask-image's way: imread, map_blocks of scipy's filter, one tifffile write per frame."""
    import dask
    from dask_image.imread import imread as dask_imread
    from scipy import ndimage as ndi

    dst.mkdir()
    names = sorted(p.name for p in src.iterdir())
    stack = dask_imread(str(src / "*.tif"))
    smoothed = stack.map_blocks(ndi.uniform_filter, size=(1, 3, 3))

    def write(block, index):
        tifffile.imwrite(dst / names[index], block[0])

    dask.compute(*[dask.delayed(write)(b, i) for i, b in enumerate(smoothed.to_delayed().ravel())])


def main() -> None:
    # Imported here, not at the top: importing stencil_cpu compiles seed 004's gufunc (15 s).
    from stencil_cpu import seed_smooth

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        tmp = Path(tmp)
        src = write_frames(tmp / "in", FRAMES, (SIZE, SIZE), "frame_{:03d}.tif")
        out = tmp / "out"
        smooth(tifffile.imread(src / "frame_000.tif"))  # compile outside the timings
        config = tmp / "run.yaml"
        config.write_text(
            f"input: in\noutput: out/\nstages:\n  - stencil: {HERE / 'kernels.py'}:smooth\n"
        )
        command = [sys.executable, "-m", "stencilpipe", "run", str(config), "--overwrite"]
        cluster = ["--set", "cluster.n_workers=2", "--set", "cluster.threads_per_worker=1"]
        subprocess.run(command, check=True, capture_output=True)  # warm the kernel caches

        def cli(*extra: str):
            return lambda: subprocess.run([*command, *extra], check=True, capture_output=True)

        loop = [sys.executable, "-c", LOOP, str(src), str(out)]
        rows = [
            ("for-loop, stencilpipe smooth (warm process)", best(lambda: for_loop(smooth, src, out), out)),
            ("stencilpipe run, process start to exit (threads)", best(cli(), out)),
            ("stencilpipe run, process start to exit (LocalCluster 2x1)", best(cli(*cluster), out)),
            ("for-loop script, process start to exit", best(lambda: subprocess.run(loop, check=True), out)),
            ("for-loop, seed 004 numba.stencil smooth", best(lambda: for_loop(seed_smooth, src, out), out, 1)),
            ("dask-image imread + map_blocks(scipy) + tifffile", best(lambda: dask_image_run(src, out), out)),
            ("I/O only: imsave(imread(src), dst)", best(lambda: imsave(imread(src), out), out)),
            ("cp -r", best(lambda: subprocess.run(["cp", "-r", str(src), str(out)], check=True), out)),
        ]  # fmt: skip
    title = f"end to end, {FRAMES} x {SIZE}x{SIZE} uint8 TIFFs, 3x3 mean (target: run <= 1.2x)"
    print_table(title, rows, rows[0][0])
    # The issue compares whole runs: the loop as a script, from process start, is the anchor.
    print_table(f"{title}, against the loop script", rows, rows[3][0])


if __name__ == "__main__":
    main()
