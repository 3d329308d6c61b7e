"""Issue 18: a stack larger than the workers' memory (and, with ``--ram``, larger than all
the memory the run may use) through gaussian -> mean -> sobel to Zarr, on a scheduler with
``dask worker --memory-limit`` workers; then the same stack through dask-image's filters and
``map_overlap`` on a fresh cluster of the same workers.

For each run it prints the wall time, throughput, worker restarts (the nannies' logs),
bytes the workers spilled to disk (their ``SpillBuffer``), and the peak RSS of the client,
the scheduler and each worker (sampled with psutil every 0.1 s from outside). With
``--ram 1GiB`` every process of a run (client, scheduler, nannies, workers) runs in a
cgroup-v1 memory cgroup of that size (root only), and the kernel's OOM kills are counted.

    .venv/bin/python benchmarks/cluster_memory.py                      # issue 18's case
    .venv/bin/python benchmarks/cluster_memory.py --frames 360 --worker-memory 300MB \
        --ram 1GiB                                                       # 3 GB through 1 GiB
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from dask.utils import format_bytes, parse_bytes
from distributed import Client

BIN = Path(sys.executable).parent
STAGES = "[{gaussian: {sigma: 1.0}}, {mean: {size: 3}}, {sobel: {axis: 0}}]"

#: The same chain with dask-image's filters (per frame: nothing along the frame axis) and,
#: for sobel, scipy's two 1-D passes of a 2-D sobel through ``map_overlap``.
DASK_IMAGE = """
import sys, dask.array as da, scipy.ndimage as ndi
from dask_image import ndfilters
from distributed import Client

def sobel_y(block):
    return ndi.correlate1d(ndi.correlate1d(block, [-1, 0, 1], axis=1), [1, 2, 1], axis=2)

with Client(sys.argv[1]):
    stack = da.from_zarr("in.zarr")
    smooth = ndfilters.uniform_filter(ndfilters.gaussian_filter(stack, (0, 1, 1)), (1, 3, 3))
    edges = smooth.map_overlap(sobel_y, depth=(0, 1, 1), boundary="reflect")
    edges.to_zarr("out_dask_image.zarr", overwrite=True)
"""


class Cgroup:
    """A cgroup-v1 memory cgroup of ``limit`` bytes under this process's own, or nothing."""

    def __init__(self, limit: int | None) -> None:
        self.path = None
        if limit:
            own = next(line.split(":", 2)[2].strip() for line in open("/proc/self/cgroup")
                       if line.split(":")[1] == "memory")  # fmt: skip
            self.path = Path(f"/sys/fs/cgroup/memory{own}/stencilpipe-bench-{os.getpid()}")
            self.path.mkdir()
            (self.path / "memory.limit_in_bytes").write_text(str(limit))

    def enter(self) -> None:
        """Move the calling process in (a ``preexec_fn``)."""
        if self.path:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def oom_kills(self) -> int | str:
        """Processes the kernel killed for the cgroup's limit."""
        if not self.path:
            return "n/a"
        stats = dict(line.split() for line in (self.path / "memory.oom_control").read_text().splitlines())
        return int(stats.get("oom_kill", 0))

    def remove(self) -> None:
        """Kill what is left in the cgroup (processes of stopped workers may still be
        exiting), then remove it."""
        if not self.path:
            return
        for _ in range(300):
            left = (self.path / "cgroup.procs").read_text().split()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.1)
        self.path.rmdir()


class PeakRss:
    """Peak RSS of process trees, by role, sampled from outside every 0.1 s."""

    def __init__(self) -> None:
        self.roles: dict[str, tuple[psutil.Process, bool]] = {}
        self.peaks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def watch(self, role: str, pid: int, *, children_only: bool = False) -> None:
        """Sample process ``pid`` and its children, or only its children (a nanny's
        worker process, which is what the nanny holds to the memory limit)."""
        self.roles[role] = (psutil.Process(pid), children_only)
        self.peaks.setdefault(role, 0)

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            for role, (process, children_only) in list(self.roles.items()):
                with contextlib.suppress(psutil.Error):
                    tree = [*([] if children_only else [process]), *process.children(recursive=True)]
                    rss = sum(p.memory_info().rss for p in tree)
                    self.peaks[role] = max(self.peaks[role], rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def cluster(
    logs: Path, workers: int, memory: str, cgroup: Cgroup, rss: PeakRss
) -> Iterator[str]:
    """A ``dask scheduler`` and ``workers`` one-thread ``dask worker --memory-limit`` (with
    their nannies), in ``cgroup``, logging into ``logs``; yields the scheduler's address."""
    logs.mkdir(parents=True, exist_ok=True)
    file = logs / "scheduler.json"
    file.unlink(missing_ok=True)
    processes = []
    try:
        scheduler = subprocess.Popen(
            [BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", file], stdout=open(logs / "scheduler.log", "w"),
            stderr=subprocess.STDOUT, preexec_fn=cgroup.enter)  # fmt: skip
        processes.append(scheduler)
        rss.watch("scheduler", scheduler.pid)
        while not file.exists():
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        for i in range(workers):
            worker = subprocess.Popen(
                [BIN / "dask", "worker", address, "--nthreads", "1", "--memory-limit", memory,
                 "--no-dashboard", "--host", "127.0.0.1"], stdout=open(logs / f"worker{i}.log", "w"),
                stderr=subprocess.STDOUT, preexec_fn=cgroup.enter)  # fmt: skip
            processes.append(worker)
            rss.watch(f"worker {i}", worker.pid, children_only=True)
        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=120)
        yield address
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            process.wait(timeout=60)


def spilled(address: str) -> int:
    """Bytes the workers have spilled to disk so far."""
    with Client(address, timeout=60) as client:
        totals = client.run(lambda dask_worker: dask_worker.data.spilled_total.disk)
    return sum(totals.values())


def restarts(logs: Path, workers: int) -> int:
    """Worker processes the nannies restarted (for exceeding their memory budget)."""
    return sum((logs / f"worker{i}.log").read_text().count("Restarting") for i in range(workers))


def measure(
    name: str, command: list, args: argparse.Namespace, work: Path, data_bytes: int,
    plan: list | None = None,
) -> None:
    """Run ``command`` (the scheduler's address appended) on a fresh cluster and print its
    figures; ``plan``, run first the same way, prints what the run will do."""
    cgroup = Cgroup(parse_bytes(args.ram) if args.ram else None)
    logs = work / "logs" / name.split()[0]
    try:
        with PeakRss() as rss, cluster(logs, args.workers, args.worker_memory, cgroup, rss) as address:
            if plan:
                print(subprocess.run([*plan, address], cwd=work, capture_output=True, text=True,
                                     preexec_fn=cgroup.enter).stdout, flush=True)  # fmt: skip
            start = time.perf_counter()
            client = subprocess.Popen([*command, address], cwd=work, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, preexec_fn=cgroup.enter)  # fmt: skip
            rss.watch("client", client.pid)
            output, _ = client.communicate()
            wall = time.perf_counter() - start
            disk = spilled(address)
        failed = "" if client.returncode == 0 else f" FAILED (exit {client.returncode}): {output[-400:]}"
        peaks = ", ".join(f"{role} {format_bytes(peak)}" for role, peak in rss.peaks.items())
        print(f"{name}: {wall:.1f} s, {data_bytes / wall / 1e6:.0f} MB/s, "
              f"worker restarts {restarts(logs, args.workers)}, spilled {format_bytes(disk)}, "
              f"OOM kills {cgroup.oom_kills()}{failed}\n    peak RSS: {peaks}", flush=True)  # fmt: skip
    finally:
        cgroup.remove()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=150)
    parser.add_argument("--size", type=int, default=2048, help="frame height and width")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="400MB")
    parser.add_argument("--ram", help="run every process in a memory cgroup of this size (root)")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    shape = (args.frames, args.size, args.size)
    data_bytes = 2 * args.frames * args.size * args.size
    subprocess.run([sys.executable, "-c", f"""
import contextlib, dask.array as da, numpy as np, zarr
with contextlib.suppress(FileNotFoundError):
    if zarr.open_array('in.zarr', mode='r').shape == {shape}:
        raise SystemExit  # made by an earlier run
da.random.default_rng(0).integers(0, 4000, {shape}, dtype=np.uint16,
    chunks=(1, 1024, 1024)).to_zarr('in.zarr', overwrite=True)"""], cwd=work, check=True)  # fmt: skip
    total = parse_bytes(args.worker_memory) * args.workers
    print(f"stack {format_bytes(data_bytes)} ({shape} uint16) in {work}; workers' limits "
          f"{format_bytes(total)} in all (the stack is {data_bytes / total:.1f}x that)"
          + (f"; every process in a {args.ram} cgroup" if args.ram else ""), flush=True)
    (work / "run.yaml").write_text(
        f"input: in.zarr\noutput: out.zarr\nstages: {STAGES}\nresume: false\n"
    )
    run = [BIN / "stencilpipe", "run", "-q", "run.yaml", "--address"]
    measure("stencilpipe run", run, args, work, data_bytes,
            plan=[BIN / "stencilpipe", "run", "--dry-run", "run.yaml", "--address"])
    measure("dask-image + map_overlap", [sys.executable, "-c", DASK_IMAGE], args, work, data_bytes)


if __name__ == "__main__":
    main()
