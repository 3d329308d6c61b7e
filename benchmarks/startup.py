"""Start-up and small runs, side by side in one run: what a command costs beyond its work.

* ``stencilpipe --help`` and ``stencilpipe filters`` against ``python -c pass`` (target: 0.3 s);
* ``stencilpipe apply mean:size=3`` on 10 small frames, warm kernel cache (target: 1.5 s wall);
* where a cluster pays: ``stencilpipe run`` on threads of its own process against the embedded
  LocalCluster (2 processes x 1 thread, 1 process x 2 threads), from 10 to ``BENCH_MAX``
  frames, each from process start to exit (``IN_PROCESS_FRAMES`` in
  :mod:`stencilpipe.pipeline.run` is the crossover);
* a large run: ``BENCH_LARGE`` (20,000) small files: time to build the graph (``plan``), time
  to the first progress update, the run's wall time, and peak RSS of the processes;
* a whole run against the bare loop (target: 1.2x): ``stencilpipe run`` of ``BENCH_FRAMES``
  (200) 2048x2048 uint8 TIFFs with the benchmarks' 3x3 mean, and the loop a user would write
  (tifffile read, the same compiled kernel, tifffile write), both as fresh processes from
  start to exit: the loop imports Numba and loads its kernel from the cache too.

Run: ``python benchmarks/startup.py`` (a few minutes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tifffile

sys.path.insert(0, os.path.dirname(__file__))
from common import print_table  # noqa: E402
from side_by_side import interleaved, load  # noqa: E402

MAX = int(os.environ.get("BENCH_MAX", 2000))
LARGE = int(os.environ.get("BENCH_LARGE", 20000))
SIZE = (256, 256)
COMMAND = [sys.executable, "-m", "stencilpipe"]


def command(args: list[str], cwd: Path) -> Callable[[], object]:
    """Runs the command ``args`` in ``cwd`` (timed from process start to exit)."""
    return lambda: subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def make_frames(folder: Path, frames: int, shape=SIZE) -> Path:
    folder.mkdir(parents=True)
    base = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    for i in range(frames):
        tifffile.imwrite(folder / f"f{i:05d}.tif", base + np.uint8(i % 256))
    return folder


def startup(tmp: Path) -> None:
    make_frames(tmp / "ten", 10)
    apply = [*COMMAND, "apply", "mean:size=3", "ten", "out", "--overwrite"]
    rows = interleaved(  # the untimed first round warms the kernel cache
        {
            "python -c pass": command([sys.executable, "-c", "pass"], tmp),
            "stencilpipe --help": command([*COMMAND, "--help"], tmp),
            "stencilpipe filters": command([*COMMAND, "filters"], tmp),
            "stencilpipe apply mean:size=3, 10 x 256x256 frames": command(apply, tmp),
        },
        rounds=5,
    )
    print_table("start-up, from process start to exit (targets: 0.3 s, 1.5 s)", rows, rows[0][0])
    print(f"\n{load()}")


#: The command on threads of its own process at any size (``IN_PROCESS_FRAMES`` lifted).
THREADS = [
    sys.executable,
    "-c",
    "import sys; import stencilpipe.pipeline.run; "
    "sys.modules['stencilpipe.pipeline.run'].IN_PROCESS_FRAMES = 10**9; "
    "from stencilpipe.cli import main; main()",
]
#: The cluster settings compared; none leaves it to stencilpipe (threads of the process).
CLUSTERS = {
    "threads of the process": [],
    "LocalCluster 2 processes x 1 thread": ["cluster.n_workers=2", "cluster.threads_per_worker=1"],
    "LocalCluster 1 process x 2 threads": ["cluster.n_workers=1", "cluster.threads_per_worker=2"],
}


def crossover(tmp: Path) -> None:
    sizes = [n for n in (10, 200, 1000, 2000, 5000) if n <= MAX]
    make_frames(tmp / "many", max(sizes))
    for frames in sizes:
        source = tmp / f"in{frames}"
        source.mkdir()
        for i in range(frames):
            (source / f"f{i:05d}.tif").symlink_to(tmp / "many" / f"f{i:05d}.tif")
        config = tmp / f"run{frames}.yaml"
        config.write_text(f"input: {source.name}\noutput: out/\nstages: [mean: {{size: 3}}]\n")
        runs = {}
        for name, cluster in CLUSTERS.items():
            sets = [arg for item in cluster for arg in ("--set", item)]
            start = THREADS if not cluster else COMMAND
            runs[name] = command([*start, "run", config.name, "--overwrite", *sets], tmp)
        rows = interleaved(runs, rounds=2)
        print_table(f"stencilpipe run, {frames} x 256x256 frames, process start to exit",
                    rows, rows[0][0])  # fmt: skip
        print(f"\n{load()}")


def large(tmp: Path) -> None:
    """20,000 small files: progress shown, bar of frames, first advance, whole run (each from
    process start, as the CLI runs it), peak RSS; then the graph built again (``plan``)."""
    source = make_frames(tmp / "large", LARGE, shape=(64, 64))
    os.sync()  # the inputs on the disk: the run's flush does not wait for their writeback
    script = f"""
import importlib, resource, sys, time
start = time.perf_counter()
from rich.console import Console
from stencilpipe.pipeline import parse_config, plan
execute = importlib.import_module("stencilpipe.pipeline.execute")
run = importlib.import_module("stencilpipe.pipeline.run")
seen = {{}}
def at(what):
    seen.setdefault(what, time.perf_counter() - start)
class Timed(execute.Progress):
    def add_task(self, description, **kwargs):
        at("frames" if description == "frames" else "shown")
        return super().add_task(description, **kwargs)
    def advance(self, *args, **kwargs):
        at("advanced")
        return super().advance(*args, **kwargs)
def timed_bar(console):
    bar = execute.progress_bar(console)
    bar.__class__ = Timed
    return bar
run.progress_bar = timed_bar
config = parse_config({{"input": "{source}", "output": "{tmp / "large-out"}",
                       "stages": [{{"mean": {{"size": 3}}}}], "resume": False}})
run.run(config, console=Console(force_terminal=True, file=open("/dev/null", "w")))
total = time.perf_counter() - start
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter(); plan(config); graph = time.perf_counter() - t0
print(graph, seen["shown"], seen["frames"], seen["advanced"], total, me, children)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(done.stderr)
    graph, shown, frames, advanced, total, rss, children = map(float, done.stdout.split())
    print(f"\n## {LARGE} x 64x64 uint8 TIFFs, mean:size=3 (targets: graph < 5 s, progress < 2 s)\n")
    print(f"- progress display shown (names the phase), from process start: {shown:.2f} s")
    print(f"- bar of frames shown, from process start: {frames:.2f} s")
    print(f"- its first advance (a block done), from process start: {advanced:.2f} s")
    print(f"- whole run, from process start: {total:.2f} s")
    print(f"- peak RSS: client {rss:.0f} MiB, largest child {children:.0f} MiB")
    print(f"- graph built again after the run (plan: headers read, kernels loaded): {graph:.2f} s")
    print(f"- {load()}")


FRAMES = int(os.environ.get("BENCH_FRAMES", 200))
HERE = Path(__file__).resolve().parent
#: The anchor: the loop a user writes, as a script (its process imports and loads as ours does).
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


def whole_run(tmp: Path) -> None:
    """``stencilpipe run`` against the bare loop, each a fresh process from start to exit."""
    base = np.random.default_rng(0).integers(0, 256, (2048, 2048), dtype=np.uint8)
    source = tmp / "big"
    source.mkdir()
    for i in range(FRAMES):
        tifffile.imwrite(source / f"frame_{i:03d}.tif", base + np.uint8(i))
    os.sync()  # the inputs on the disk: no timed flush waits for their writeback
    config = tmp / "big.yaml"
    config.write_text(
        f"input: big\noutput: big-out/\nstages:\n  - stencil: {HERE / 'kernels.py'}:smooth\n"
    )
    out = tmp / "big-out"
    rows = interleaved(  # the untimed first round fills both kernel caches
        {
            "for-loop script (tifffile + compiled smooth)": command(
                [sys.executable, "-c", LOOP, str(source), str(out)], tmp
            ),
            "for-loop script + one sync at its end (what durability adds)": command(
                [sys.executable, "-c", LOOP + "os.sync()\n", str(source), str(out)], tmp
            ),
            "stencilpipe run (default: threads of its process)": command(
                [*COMMAND, "run", config.name, "--overwrite"], tmp
            ),
        },
        rounds=5,
        before=lambda: shutil.rmtree(out, ignore_errors=True),
    )
    title = f"{FRAMES} x 2048x2048 uint8 TIFFs, 3x3 mean, process start to exit (target: 1.2x)"
    print_table(title, rows, rows[0][0])
    print(f"\n{load()}")


def main() -> None:
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        parts = {"startup": startup, "crossover": crossover, "large": large, "run": whole_run}
        for part in os.environ.get("BENCH_PARTS", ",".join(parts)).split(","):
            parts[part](Path(tmp))


if __name__ == "__main__":
    main()
