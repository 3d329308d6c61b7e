"""GPU stencil speed against its anchors, and where the GPU overtakes the CPU, by frame size.

Anchors, side by side in one run: a device-to-device copy of the same bytes
(the memory limit), ``cupyx.scipy.ndimage`` and stencilpipe's own CPU path.
Then the 3x3 mean on square uint8 frames from 64^2 to 8192^2: the CPU path
against the GPU with the frame already on the device, and with the host
transfers (pageable and pinned memory) counted; printed as a table with the
crossover sizes, and drawn to a PNG when matplotlib is installed.

Run: ``bash benchmarks/gpu.sh`` (sets up CuPy and numba-cuda, runs the GPU
tests, then this), or ``python benchmarks/gpu.py [--plot PATH]``.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, print_table  # noqa: E402

import stencilpipe as sp  # noqa: E402
from stencilpipe.stencils import threads  # noqa: E402

BIG = 8192
SIZES = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
VARIANTS = ["CPU path", "GPU, on device", "GPU + transfers (pageable)", "GPU + transfers (pinned)"]


def require_gpu() -> Any:
    """The ``cupy`` module, after checking that a CUDA device, CuPy and Numba's CUDA target work."""
    from numba import cuda

    if not cuda.is_available():
        reason = " ".join(str(cuda.cuda_error() or "Numba finds none").split())
        raise SystemExit(f"no CUDA device: {reason}")
    try:
        import cupy
    except ImportError:
        raise SystemExit("CuPy is not installed: pip install cupy-cuda12x (or -cuda13x)") from None
    from numba.core.errors import NumbaPerformanceWarning

    warnings.simplefilter("ignore", NumbaPerformanceWarning)  # small frames do under-use the GPU
    return cupy


def gpu_times(cupy: Any, fn: Callable[[], object], repeat: int = 20) -> tuple[float, float]:
    """Best GPU time (CUDA events on the current stream) and best wall time to completion, in s."""
    from cupyx.profiler import benchmark

    def to_completion():
        fn()
        cupy.cuda.get_current_stream().synchronize()

    gpu = float(benchmark(fn, n_repeat=repeat, n_warmup=3).gpu_times.min())
    return gpu, best_time(to_completion, repeat=repeat)


def anchors(cupy: Any, dtype: Any) -> None:
    """Tables: 3x3 mean and 5x5 gaussian on one BIG x BIG frame on the device, and the anchors."""
    from cupyx.scipy import ndimage as cndi

    rng = np.random.default_rng(0)
    host = rng.integers(0, 256, (BIG, BIG)).astype(dtype)
    host_out = np.empty_like(host)
    frame = cupy.asarray(host)
    out = cupy.empty_like(frame)
    mean, gaussian = sp.library.mean(3), sp.library.gaussian(1.0, truncate=2.0)
    median, sobel = sp.library.median(3), sp.library.sobel(0)
    chain = sp.chain(gaussian, mean, sobel)
    anchor = "device-to-device copy (memory limit)"
    timed = {
        anchor: lambda: out.data.copy_from_device_async(frame.data, frame.nbytes),
        "stencilpipe mean 3x3, out=": lambda: mean(frame, out=out),
        "stencilpipe mean 3x3, allocating": lambda: mean(frame),
        "cupyx.scipy.ndimage.uniform_filter 3": lambda: cndi.uniform_filter(frame, 3, output=out),
        "stencilpipe gaussian 5x5, out=": lambda: gaussian(frame, out=out),
        "cupyx.scipy.ndimage.gaussian_filter truncate=2": lambda: cndi.gaussian_filter(
            frame, 1.0, truncate=2.0, output=out
        ),
        "stencilpipe median 3x3, out=": lambda: median(frame, out=out),
        "cupyx.scipy.ndimage.median_filter 3": lambda: cndi.median_filter(frame, 3, output=out),
        "stencilpipe chain gaussian > mean > sobel, out=": lambda: chain(frame, out=out),
        "cupyx.scipy.ndimage: the same three calls": lambda: cndi.sobel(
            cndi.uniform_filter(cndi.gaussian_filter(frame, 1.0, truncate=2.0), 3), 0, output=out
        ),
    }
    rows, walls = [], []
    for name, fn in timed.items():
        gpu, wall = gpu_times(cupy, fn)
        rows.append((name, gpu))
        walls.append((name, wall))
    for name, stencil in [("mean 3x3", mean), ("gaussian 5x5", gaussian), ("median 3x3", median),
                          ("chain", chain)]:  # fmt: skip
        seconds = best_time(functools.partial(stencil, host, out=host_out), repeat=5)
        rows.append((f"stencilpipe CPU path {name} (host frame)", seconds))
    title = f"one {BIG}x{BIG} {np.dtype(dtype).name} frame on the device"
    print_table(f"{title}: GPU time (CUDA events)", rows, anchor)
    print_table(f"{title}: wall time per call, to completion (launch included)", walls, anchor)


def by_size(cupy: Any) -> dict[str, list[float]]:
    """Seconds per 3x3 mean on a uint8 size x size frame, per variant and size."""
    times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for size in SIZES:
        for variant, seconds in zip(VARIANTS, one_size(cupy, size)):
            times[variant].append(seconds)
    return times


def one_size(cupy: Any, size: int) -> list[float]:
    """Seconds per 3x3 mean on one uint8 size x size frame, for each of :data:`VARIANTS`."""
    mean = sp.library.mean(3)
    stream = cupy.cuda.get_current_stream()
    host = np.random.default_rng(size).integers(0, 256, (size, size), dtype=np.uint8)
    host_out = np.empty_like(host)
    pinned_in, pinned_out = pinned_copy(host), pinned_copy(host)
    device_in, device_out = cupy.asarray(host), cupy.empty_like(host)

    def on_device():
        mean(device_in, out=device_out)
        stream.synchronize()

    def pageable():
        mean(cupy.asarray(host), out=device_out).get(out=host_out)
        stream.synchronize()

    def pinned():
        device_in.set(pinned_in, stream=stream)
        mean(device_in, out=device_out).get(out=pinned_out, stream=stream)
        stream.synchronize()

    def cpu():
        mean(host, out=host_out)

    repeat = 50 if size <= 1024 else 10
    return [best_time(fn, repeat=repeat) for fn in (cpu, on_device, pageable, pinned)]


def pinned_copy(like: np.ndarray) -> np.ndarray:
    """A page-locked host array holding the values of ``like``."""
    import cupyx

    pinned = cupyx.empty_pinned(like.shape, like.dtype)
    pinned[...] = like
    return pinned


def crossover(cpu: list[float], gpu: list[float]) -> int | None:
    """The smallest size from which the GPU is faster at every larger size, or None."""
    for k in range(len(SIZES)):
        if all(g < c for g, c in zip(gpu[k:], cpu[k:])):
            return SIZES[k]
    return None


def report(times: dict[str, list[float]], plot: str) -> None:
    """Print the size table and the crossovers; draw the PNG if matplotlib is there."""
    print("\n## 3x3 mean, uint8 frames: ms per frame by size\n")
    print("| size        | " + " | ".join(f"{v:>26}" for v in VARIANTS) + " |")
    print("|-------------|" + "|".join("-" * 28 for _ in VARIANTS) + "|")
    for k, size in enumerate(SIZES):
        cells = " | ".join(f"{times[v][k] * 1e3:26.3f}" for v in VARIANTS)
        print(f"| {size:>5}x{size:<5} | {cells} |")
    print()
    for variant in VARIANTS[1:]:
        size = crossover(times["CPU path"], times[variant])
        where = f"from {size}x{size} up" if size else f"at no size up to {SIZES[-1]}x{SIZES[-1]}"
        print(f"crossover: {variant} beats the CPU path {where}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt
    except ImportError:
        print("\n(matplotlib is not installed: no plot; pip install matplotlib for one)")
        return
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for variant in VARIANTS:
        milliseconds = [t * 1e3 for t in times[variant]]
        axes.loglog([s * s for s in SIZES], milliseconds, marker="o", label=variant)
    axes.set(xlabel="pixels per frame", ylabel="ms per frame")
    axes.set_title("stencilpipe 3x3 mean, uint8: CPU vs GPU")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(plot, dpi=120)
    print(f"\nplot: {plot}")


def pipeline_runs(frames: int = 32, size: int = 2048) -> None:
    """A whole run (TIFF folder in and out, gaussian > median > sobel): CPU workers vs the GPU.

    The same files through ``backend: numpy`` and ``backend: cupy`` (chunks moved to the device
    once after reading, back once before writing), each on stencilpipe's default cluster,
    after one warm-up run each (kernels compiled); the outputs are compared.
    """
    import tempfile
    from pathlib import Path

    import tifffile
    from rich.console import Console

    from stencilpipe.pipeline import parse_config, run

    stages = [{"gaussian": {"sigma": 1.5}}, {"median": {"size": 3}}, {"sobel": {"axis": 0}}]
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "in").mkdir()
        rng = np.random.default_rng(1)
        for i in range(frames):
            frame = rng.integers(0, 65536, (size, size), dtype=np.uint16)
            tifffile.imwrite(base / "in" / f"f{i:04d}.tif", frame)
        rows = []
        for backend in ("numpy", "cupy"):
            config = {"input": "in", "output": f"out-{backend}", "stages": stages,
                      "backend": backend, "resume": False}  # fmt: skip
            timings = []
            for _ in range(2):  # the first run compiles (or loads) the kernels
                start = time.perf_counter()
                run(parse_config(config, base_dir=base), console=Console(quiet=True),
                    progress=False)  # fmt: skip
                timings.append(time.perf_counter() - start)
            rows.append((f"run, backend: {backend}", timings[1]))
            print(f"first run, backend: {backend}: {timings[0]:.1f} s (kernels compiled or loaded)")
        cpu, gpu = (
            tifffile.imread(sorted((base / f"out-{b}").glob("*.tif"))) for b in ("numpy", "cupy")
        )
        differ = np.count_nonzero(cpu != gpu)
        megabytes = frames * size * size * 2 / 1e6
        print_table(f"{frames} x {size}x{size} uint16 TIFFs, {megabytes:.0f} MB, gaussian > median > sobel",
                    rows, rows[0][0])  # fmt: skip
        print(f"pixels that differ between the CPU and GPU outputs: {differ} of {cpu.size}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", default="gpu_crossover.png", help="where to write the PNG")
    args = parser.parse_args()
    cupy = require_gpu()
    import numba

    device = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    print(
        f"device: {device['name'].decode()}; CuPy {cupy.__version__}; Numba {numba.__version__}; "
        f"CPU path threads: {threads.get_num_threads()}"
    )
    for dtype in (np.uint8, np.float32):
        anchors(cupy, dtype)
    pipeline_runs()
    report(by_size(cupy), args.plot)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n(benchmark took {time.perf_counter() - start:.0f} s)")
