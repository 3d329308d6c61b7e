"""Start-up and small runs, side by side in one run: what a command costs beyond its work.

* ``stencilpipe --help`` and ``stencilpipe filters`` against ``python -c pass`` (target: 0.3 s);
* ``stencilpipe apply mean:size=3`` on 10 small frames, warm kernel cache (target: 1.5 s wall);
* where a cluster pays: ``stencilpipe run`` on threads of its own process against the embedded
  LocalCluster (2 processes x 1 thread, 1 process x 2 threads), from 10 to ``BENCH_MAX``
  frames (``BENCH_COUNTS``) of each of ``BENCH_SHAPES`` (64, 256, 2048: side of square
  uint8 frames; frames of 2048 stop at ``BENCH_MAX_LARGE``, 1000), each from process start to exit
  (``IN_PROCESS_FRAMES`` in :mod:`stencilpipe.pipeline.run` is the crossover);
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

sys.path.insert(0, os.path.dirname(__file__))
from common import HERE, LOOP, print_table, write_frames  # noqa: E402
from side_by_side import interleaved, load  # noqa: E402

MAX = int(os.environ.get("BENCH_MAX", 5000))
#: Frames of 2048x2048 (4 MiB) at most in the crossover: 1000 is 4 GiB of inputs.
MAX_LARGE = int(os.environ.get("BENCH_MAX_LARGE", 1000))
SHAPES = [int(side) for side in os.environ.get("BENCH_SHAPES", "64,256,2048").split(",")]
COUNTS = [int(n) for n in os.environ.get("BENCH_COUNTS", "10,200,1000,2000,5000").split(",")]
LARGE = int(os.environ.get("BENCH_LARGE", 20000))
SIZE = (256, 256)
COMMAND = [sys.executable, "-m", "stencilpipe"]


def command(args: list[str], cwd: Path) -> Callable[[], object]:
    """Runs the command ``args`` in ``cwd`` (timed from process start to exit)."""
    return lambda: subprocess.run(args, cwd=cwd, check=True, capture_output=True)


def startup(tmp: Path) -> None:
    write_frames(tmp / "ten", 10, SIZE)
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
    for side in SHAPES:
        most = min(MAX, MAX_LARGE) if side >= 2048 else MAX
        sizes = [n for n in COUNTS if n <= most]
        many = write_frames(tmp / f"many{side}", max(sizes), (side, side))
        for frames in sizes:
            source = tmp / f"in{side}-{frames}"
            source.mkdir()
            for i in range(frames):
                (source / f"f{i:05d}.tif").symlink_to(many / f"f{i:05d}.tif")
            config = tmp / f"run{side}-{frames}.yaml"
            config.write_text(f"input: {source.name}\noutput: out/\nstages: [mean: {{size: 3}}]\n")
            runs = {}
            for name, cluster in CLUSTERS.items():
                sets = [arg for item in cluster for arg in ("--set", item)]
                start = THREADS if not cluster else COMMAND
                runs[name] = command([*start, "run", config.name, "--overwrite", *sets], tmp)
            rows = interleaved(runs, rounds=2, before=lambda: shutil.rmtree(tmp / "out", True))
            title = f"stencilpipe run, {frames} x {side}x{side} frames, process start to exit"
            print_table(title, rows, rows[0][0])
            print(f"\n{load()}", flush=True)
        shutil.rmtree(many)


def large(tmp: Path) -> None:
    """20,000 small files: progress shown, bar of frames, first advance, whole run (each from
    process start, as the CLI runs it), peak RSS; then the graph built again (``plan``)."""
    source = write_frames(tmp / "large", LARGE, (64, 64))
    script = f"""
import gc, importlib, resource, sys, time
start = time.perf_counter()
gc.disable()  # as the CLI imports (cli._pause_gc), enabled again when it calls run()
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
gc.enable()
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


def whole_run(tmp: Path) -> None:
    """``stencilpipe run`` against the bare loop, each a fresh process from start to exit."""
    source = write_frames(tmp / "big", FRAMES, (2048, 2048), "frame_{:03d}.tif")
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
