"""End to end: 200 uint8 2048x2048 TIFFs in, 3x3 mean, 200 out, against its anchors in one run.

* stencilpipe: ``stencilpipe.pipeline.run`` on the embedded cluster (2 worker processes x 1 thread);
* seed 004's plain for-loop: read, smooth (numba.stencil + guvectorize), write, one file at a time;
* the same for-loop with stencilpipe's compiled smooth (to separate loop overhead from kernel speed);
* the I/O-only limit: ``imsave(imread(src), dst)`` on the same cluster, no compute (what
  ``benchmarks/io_speed.py`` measures, with its fsync per file).

Run: ``python benchmarks/end_to_end.py`` (a few minutes, 3 GiB of free disk).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tifffile
from distributed import get_task_stream

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402
from kernels import smooth  # noqa: E402

from stencilpipe.cluster import connect  # noqa: E402
from stencilpipe.io import imread, imsave  # noqa: E402
from stencilpipe.pipeline import parse_config, plan, run  # noqa: E402

FRAMES = int(os.environ.get("BENCH_FRAMES", 200))
SIZE = 2048


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def for_loop(kernel, src: Path, dst: Path) -> None:
    dst.mkdir()
    for path in sorted(src.iterdir()):
        tifffile.imwrite(dst / path.name, kernel(tifffile.imread(path)))


def main() -> None:
    # Imported here, not at the top: worker processes start by importing this script's
    # module, and importing stencil_cpu compiles seed 004's gufunc (15 s) eagerly.
    from stencil_cpu import seed_smooth

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        src = Path(tmp) / "in"
        src.mkdir()
        base = np.random.default_rng(0).integers(0, 256, (SIZE, SIZE), dtype=np.uint8)
        for i in range(FRAMES):
            tifffile.imwrite(src / f"frame_{i:03d}.tif", base + np.uint8(i))
        smooth(base)  # compile outside the timings
        config = parse_config(
            {
                "input": str(src),
                "output": str(Path(tmp) / "pipeline"),
                "stages": [{"stencil": f"{Path(__file__).resolve().parent / 'kernels.py'}:smooth"}],
                "cluster": {"n_workers": 2, "threads_per_worker": 1},
                "resume": False,
            }
        )
        run(config)  # warm-up: compiles on the workers, fills the disk cache
        shutil.rmtree(Path(tmp) / "pipeline")
        # As a user runs it: plan, start the embedded cluster, compute, stop it.
        rows = [("stencilpipe run (incl. cluster start/stop)", timed(lambda: run(config)))]
        with connect(config.cluster) as client:
            # Alternated and repeated, best of 3: the disk's fsync times vary from run to run.
            compute, io_only = [], []
            for _ in range(3):
                for name in ("compute", "io"):
                    shutil.rmtree(Path(tmp) / name, ignore_errors=True)
                work = plan(config.model_copy(update={"output": str(Path(tmp) / "compute")}))
                copy = imsave(imread(str(src)), str(Path(tmp) / "io"), compute=False)
                with get_task_stream(client) as stream:
                    compute.append(timed(lambda w=work: client.compute(w.report()).result()))
                if compute[-1] == min(compute):
                    overhead = scheduling_overhead(
                        stream.data, compute[-1], sum(client.nthreads().values())
                    )
                io_only.append(timed(lambda c=copy: client.compute(c).result()))
            rows.append(("stencilpipe compute on a started cluster", min(compute)))
            rows.append(("I/O only: imsave(imread()), same cluster", min(io_only)))
        rows.append(("for-loop, seed 004 numba.stencil smooth", timed(lambda: for_loop(seed_smooth, src, Path(tmp) / "seed"))))
        rows.append(("for-loop, stencilpipe smooth", timed(lambda: for_loop(smooth, src, Path(tmp) / "loop"))))
    print_table(f"end to end, {FRAMES} x {SIZE}x{SIZE} uint8 TIFFs, 3x3 mean", rows, rows[0][0])
    print(overhead)


def scheduling_overhead(tasks: list[dict], seconds: float, threads: int) -> str:
    """What Dask's task stream says about the run: how many tasks, how much of the worker
    threads' time (wall time x threads) they used, and where the rest went: gaps between
    tasks (the per-task overhead), and waiting for the first task or after the last."""
    spans = sorted(
        (task["worker"], s["start"], s["stop"])
        for task in tasks
        for s in task["startstops"]
        if s["action"] == "compute"
    )
    busy = sum(stop - start for _, start, stop in spans)
    gaps = 0.0
    for worker in {w for w, _, _ in spans}:
        mine = [(start, stop) for w, start, stop in spans if w == worker]
        gaps += sum(max(0.0, b[0] - a[1]) for a, b in zip(mine, mine[1:]))
    total = seconds * threads
    return (
        f"\ntask stream: {len(tasks)} tasks on {threads} threads; of {total:.2f} s thread time: "
        f"busy {busy / total:.1%}, gaps between tasks {gaps / total:.1%} "
        f"({gaps / max(1, len(tasks)) * 1e3:.1f} ms per task), before the first and after "
        f"the last task of each thread {(total - busy - gaps) / total:.1%}"
    )

if __name__ == "__main__":
    main()
