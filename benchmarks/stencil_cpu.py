"""CPU stencil speed against its anchors, measured side by side in one run.

Anchors: the memory limit (``np.copyto`` of the same bytes), a careful
hand-written ``numba.njit(parallel=True)`` loop, the naive ``numba.stencil`` +
``guvectorize`` version of seed 004, OpenCV and scipy.ndimage.

Run: ``make bench`` (or ``python benchmarks/stencil_cpu.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

import cv2
import numba
import numpy as np
from scipy import ndimage as ndi

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, print_table  # noqa: E402
from kernels import smooth  # noqa: E402

SIZE = 2048
FRAMES = 64


@numba.stencil
def _seed_smooth(x):
    return (x[-1, -1] + x[-1, 0] + x[-1, 1] +
            x[ 0, -1] + x[ 0, 0] + x[ 0, 1] +
            x[ 1, -1] + x[ 1, 0] + x[ 1, 1]) // 9


@numba.guvectorize([(numba.uint8[:, :], numba.uint8[:, :])], "(n, m) -> (n, m)")
def seed_smooth(x, out):
    """Seed 004's version, as published (uint8 instead of int8)."""
    out[:] = _seed_smooth(x)


@numba.njit(parallel=True)
def hand_written(x, out):
    """What a careful programmer writes by hand: interior only, int32 accumulator."""
    n, m = x.shape
    for i in numba.prange(1, n - 1):
        for j in range(1, m - 1):
            acc = np.int32(0)
            for a in range(-1, 2):
                for b in range(-1, 2):
                    acc += np.int32(x[i + a, j + b])
            out[i, j] = acc // 9


def compile_times() -> tuple[float, float]:
    """First-call compile time, and a first call in a fresh process with the disk cache warm."""
    script = (
        "import time, numpy as np, stencilpipe as sp\n"
        "f = sp.library.mean(3, boundary='nearest')\n"
        "x = np.ones((256, 256), np.uint8)\n"
        "t = time.perf_counter(); f(x); print(time.perf_counter() - t)\n"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "STENCILPIPE_CACHE_DIR": cache}
        cold, warm = (
            float(subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                 capture_output=True, text=True).stdout)
            for _ in range(2)
        )
    return cold, warm


def main() -> None:
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (SIZE, SIZE), dtype=np.uint8)
    out = np.empty_like(frame)
    stack = rng.integers(0, 256, (FRAMES, SIZE, SIZE), dtype=np.uint8)
    stack_out = np.empty_like(stack)
    smooth(frame, out=out)

    print(f"numba threads: {numba.get_num_threads()}, cv2 threads: {cv2.getNumThreads()}")
    rows = [
        ("np.copyto (memory limit: read + write)", best_time(lambda: np.copyto(out, frame))),
        ("stencilpipe smooth, out=", best_time(lambda: smooth(frame, out=out))),
        ("stencilpipe smooth, allocating", best_time(lambda: smooth(frame))),
        ("hand-written njit(parallel) int32 loop", best_time(lambda: hand_written(frame, out))),
        ("cv2.blur 3x3", best_time(lambda: cv2.blur(frame, (3, 3), dst=out))),
        ("seed 004 numba.stencil + guvectorize", best_time(lambda: seed_smooth(frame), repeat=3)),
        ("scipy.ndimage.uniform_filter", best_time(lambda: ndi.uniform_filter(frame, 3, output=out), repeat=5)),
    ]
    print_table(f"3x3 mean, one {SIZE}x{SIZE} uint8 frame", rows, "np.copyto (memory limit: read + write)")

    rows = [
        ("np.copyto of the stack", best_time(lambda: np.copyto(stack_out, stack), repeat=5)),
        ("stencilpipe smooth on the stack, out=", best_time(lambda: smooth(stack, out=stack_out), repeat=5)),
        ("cv2.blur, frame by frame", best_time(lambda: [cv2.blur(f, (3, 3), dst=o) for f, o in zip(stack, stack_out)], repeat=3)),
    ]
    print_table(f"3x3 mean, {FRAMES} x {SIZE}x{SIZE} uint8 stack", rows, "np.copyto of the stack")

    cold, warm = compile_times()
    print(f"\nfirst call of a new kernel (compile): {cold:.2f} s; "
          f"first call in a fresh process (disk cache): {warm:.3f} s")


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n(benchmark took {time.perf_counter() - start:.0f} s)")
