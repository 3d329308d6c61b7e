"""Issue 18 (d): many small frames on 8 single-thread `dask worker` processes. Prints, for
`chunks: auto` and `chunks: 1` (a task per frame), the tasks, wall time, and the CPU seconds
of the scheduler process against all workers' (psutil, from outside the processes).

    .venv/bin/python benchmarks/cluster_scale.py [frames] [workdir] [chunks,...]
        (default 20000 frames, chunks auto,1; 100000 frames with auto only: about 2 minutes)
"""

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import zarr
from distributed import Client

BIN = Path(sys.executable).parent


def _cpu(process: psutil.Process) -> float:
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        times = p.cpu_times()
        total += times.user + times.system
    return total


def main() -> None:
    frames = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    work = Path(sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp())
    data = np.random.default_rng(0).integers(0, 4000, (frames, 32, 32), dtype=np.uint16)
    zarr.create_array(str(work / "in.zarr"), data=data, chunks=(1000, 32, 32), overwrite=True)
    file = work / "scheduler.json"
    file.unlink(missing_ok=True)
    log = open(work / "cluster.log", "w")
    scheduler = subprocess.Popen([BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", file], stdout=log, stderr=log)
    workers = []
    try:
        while not file.exists():
            time.sleep(0.1)
        address = json.loads(file.read_text())["address"]
        workers = [subprocess.Popen([BIN / "dask", "worker", address, "--nthreads", "1",
                                     "--no-dashboard", "--host", "127.0.0.1"], stdout=log, stderr=log)
                   for _ in range(8)]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(8, timeout=120)
        for chunks in (sys.argv[3] if len(sys.argv) > 3 else "auto,1").split(","):
            (work / "run.yaml").write_text(
                f"input: in.zarr\noutput: out.zarr\nstages: [{{mean: {{size: 3}}}}]\n"
                f"resume: false\nchunks: {chunks}\ncluster: {{address: '{address}'}}\n")
            plan = subprocess.run([BIN / "stencilpipe", "run", "--dry-run", "--json", "run.yaml"],
                                  cwd=work, capture_output=True, text=True, check=True)
            estimate = json.loads(plan.stdout)["estimate"]
            s0 = _cpu(psutil.Process(scheduler.pid))
            w0 = sum(_cpu(psutil.Process(w.pid)) for w in workers)
            start = time.perf_counter()
            done = subprocess.run([BIN / "stencilpipe", "run", "--json", "run.yaml"], cwd=work,
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            s1 = _cpu(psutil.Process(scheduler.pid))
            w1 = sum(_cpu(psutil.Process(w.pid)) for w in workers)
            written = json.loads(done.stdout)["written"] if done.returncode == 0 else done.stderr[-300:]
            busy = (w1 - w0) / (8 * wall)
            print(f"chunks {chunks}: {estimate['chunks']} chunks, {estimate['tasks']} tasks, "
                  f"written {written}, wall {wall:.1f} s, scheduler CPU {s1 - s0:.1f} s, "
                  f"workers CPU {w1 - w0:.1f} s (busy {100 * busy:.0f}% of 8 worker-seconds "
                  f"per second, idle {100 * (1 - busy):.0f}%)", flush=True)
    finally:
        for p in [*workers, scheduler]:
            p.terminate()
        for p in [*workers, scheduler]:
            p.wait(timeout=60)
        log.close()


if __name__ == "__main__":
    main()
