"""Memory: a stack four times the cluster's memory, streamed through a stencil to disk.

A lazy uint8 stack (by default 2048 frames of 2048x2048, 8 GiB, drawn by dask.array's
random generator, so no input file is needed) goes through seed 004's 3x3 mean
(``benchmarks/kernels.py``) and is written with ``sp.imsave``, one TIFF per frame, on a
LocalCluster of 2 worker processes x 1 thread with ``memory_limit=1GiB`` each (2 GiB in all).
A thread samples, every 50 ms, the resident set size (RSS) of this process (client,
scheduler and the nannies live here) and of every worker process. Two frames are read
back and checked against scipy; the outputs are deleted at the end.

RSS counts shared pages (NumPy, Numba, LLVM) in every process, so the sum over processes
overstates the machine's use a little; the "above start" column is what the run added to
each process after the cluster had started and the kernel had compiled.

Run: ``python benchmarks/memory.py [--frames 2048] [--memory-limit 1GiB] [--dir /tmp]``
(about a minute on the 2-core development machine, 8 GiB of free disk).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

SIZE = 2048


class RssSampler:
    """Samples the RSS of a process and all its descendants in a thread."""

    def __init__(self, root: int, interval: float = 0.05) -> None:
        import psutil

        self.psutil = psutil
        self.root = psutil.Process(root)
        self.interval = interval
        self.peak: dict[int, int] = {}  # pid -> highest RSS seen
        self.start: dict[int, int] = {}  # pid -> first RSS seen
        self.names: dict[int, str] = {}
        self.peak_total = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        total = 0
        try:
            processes = [self.root, *self.root.children(recursive=True)]
        except self.psutil.NoSuchProcess:
            return
        for process in processes:
            try:
                rss = process.memory_info().rss
                if process.pid not in self.names:
                    self.names[process.pid] = " ".join(process.cmdline())
            except (self.psutil.NoSuchProcess, self.psutil.AccessDenied):
                continue
            total += rss
            self.start.setdefault(process.pid, rss)
            self.peak[process.pid] = max(self.peak.get(process.pid, 0), rss)
        self.peak_total = max(self.peak_total, total)
        self.samples += 1


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=2048, help="frames of 2048x2048 uint8")
    parser.add_argument("--memory-limit", default="1GiB", help="per worker")
    parser.add_argument("--chunk-frames", type=int, default=16, help="frames per chunk")
    parser.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    args = parser.parse_args()

    import dask
    import dask.array as da
    import psutil
    import tifffile
    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, LocalCluster
    from scipy import ndimage as ndi

    import stencilpipe as sp

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from kernels import smooth

    nbytes = args.frames * SIZE * SIZE
    limit = parse_bytes(args.memory_limit)
    stack = da.random.default_rng(2026).integers(
        0, 256, (args.frames, SIZE, SIZE), dtype=np.uint8, chunks=(args.chunk_frames, SIZE, SIZE)
    )
    workdir = Path(tempfile.mkdtemp(prefix="stencilpipe-memory-", dir=args.dir))
    out = workdir / "out"
    free = shutil.disk_usage(workdir).free
    if free < nbytes * 1.1:
        raise SystemExit(f"{workdir}: {format_bytes(free)} free, {format_bytes(nbytes)} needed")
    print(
        f"stack {args.frames} x {SIZE}x{SIZE} uint8 = {format_bytes(nbytes)}; "
        f"2 workers x 1 thread, memory_limit {format_bytes(limit)} each; "
        f"chunks of {args.chunk_frames} frames; machine RAM "
        f"{format_bytes(psutil.virtual_memory().total)}; writing to {out}"
    )
    try:
        with (
            dask.config.set({"distributed.worker.memory.spill": False}),
            LocalCluster(
                n_workers=2,
                threads_per_worker=1,
                processes=True,
                memory_limit=limit,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
            ) as cluster,
            Client(cluster) as client,
        ):
            # compile the kernel in each worker first, so the figures are the stream's
            client.run(lambda: smooth(np.zeros((8, 8), np.uint8)) is not None)
            workers_before = set(client.scheduler_info()["workers"])
            with RssSampler(os.getpid()) as rss:
                start = time.perf_counter()
                report = sp.imsave(smooth(stack), out)
                seconds = time.perf_counter() - start
            restarted = workers_before != set(client.scheduler_info()["workers"])
            check = [0, args.frames - 1]
            frames = {i: stack[i].compute() for i in check}
        assert report.frames_written == args.frames, report
        names = sorted(os.listdir(out))
        assert len(names) == args.frames and not any(n.startswith(".") for n in names)
        for i in check:
            total = ndi.correlate(frames[i].astype(np.int64), np.ones((3, 3)), mode="reflect")
            want = (total // 9).astype(np.uint8)
            np.testing.assert_array_equal(tifffile.imread(out / f"{i:05d}.tif"), want)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    main_pid = os.getpid()
    print(
        f"\nwrote {report.frames_written} frames ({format_bytes(report.bytes_written)}) in "
        f"{seconds:.1f} s: {nbytes / 1e9 / seconds:.2f} GB/s in, "
        f"{report.frames_written / seconds:.0f} frames/s; frames 0 and {args.frames - 1} equal "
        f"scipy's; workers restarted: {'yes' if restarted else 'no'}; {rss.samples} samples\n"
    )
    print("| process | RSS at start (MiB) | peak RSS (MiB) | above start (MiB) |")
    print("|---|---:|---:|---:|")
    for pid in sorted(rss.peak, key=lambda p: (p != main_pid, p)):
        if pid == main_pid:
            role = "client + scheduler + nannies (this process)"
        elif "resource_tracker" in rss.names[pid]:
            role = "multiprocessing's resource tracker"
        elif "spawn_main" in rss.names[pid]:
            role = f"worker process {pid}"
        else:
            role = f"{pid}: {rss.names[pid][:60]}"
        print(
            f"| {role} | {mib(rss.start[pid])} | {mib(rss.peak[pid])} | "
            f"{mib(rss.peak[pid] - rss.start[pid])} |"
        )
    print(f"| all together (peak of the sum) | {mib(sum(rss.start.values()))} | "
          f"{mib(rss.peak_total)} | {mib(rss.peak_total - sum(rss.start.values()))} |")
    print(
        f"\nstack / peak of the sum: {nbytes / rss.peak_total:.1f}x; "
        f"worker memory_limit {mib(limit)} MiB"
    )


if __name__ == "__main__":
    main()
