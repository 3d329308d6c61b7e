"""The four filters and a 3-stage chain against their anchors, uint8 and float32, in one run.

For each filter on one 2048x2048 frame: stencilpipe (and, for the separable mean and
gaussian, its full 2-D kernel), the naive ``numba.stencil`` + ``guvectorize`` of seed 004,
scipy.ndimage, OpenCV, and the memory-copy limit (``np.copyto`` of the frame). Then the
chain gaussian 5x5 -> mean 3x3 -> sobel: fused, unfused (``fuse=False``), scipy.ndimage and
OpenCV, on one frame and on a 16-frame stack (where intermediates no longer fit in cache).

Run: ``python benchmarks/filters.py`` (part of ``make bench``).
"""

from __future__ import annotations

import os
import sys
import time

import cv2
import numba
import numpy as np
from scipy import ndimage as ndi

sys.path.insert(0, os.path.dirname(__file__))
from common import best_time, print_table  # noqa: E402

import stencilpipe as sp  # noqa: E402
from stencilpipe.stencils.threads import get_num_threads  # noqa: E402

SIZE = 2048
STACK = 16
REFLECT = cv2.BORDER_REFLECT  # scipy's and stencilpipe's "reflect"


# -- seed 004's way: numba.stencil inside a guvectorize, one per filter ---------------------
@numba.stencil
def _naive_mean(x):
    return (
        x[-1, -1]
        + x[-1, 0]
        + x[-1, 1]
        + x[0, -1]
        + x[0, 0]
        + x[0, 1]
        + x[1, -1]
        + x[1, 0]
        + x[1, 1]
    ) / 9


@numba.stencil
def _naive_sobel(x):
    return (x[1, -1] + 2 * x[1, 0] + x[1, 1]) - (x[-1, -1] + 2 * x[-1, 0] + x[-1, 1])


_G = np.array([0.05448868, 0.24420134, 0.40261995, 0.24420134, 0.05448868])  # sigma 1, r 2


@numba.stencil(neighborhood=((-2, 2), (-2, 2)))
def _naive_gaussian(x):
    total = 0.0
    for i in range(-2, 3):
        for j in range(-2, 3):
            total += _G[i + 2] * _G[j + 2] * x[i, j]
    return total


_SIGNATURES = [(numba.uint8[:, :], numba.uint8[:, :]), (numba.float32[:, :], numba.float32[:, :])]


def _seed(kernel):
    @numba.guvectorize(_SIGNATURES, "(n, m) -> (n, m)")
    def run(x, out):
        out[:] = kernel(x)

    return run


SEED = {
    "mean": _seed(_naive_mean),
    "sobel": _seed(_naive_sobel),
    "gaussian": _seed(_naive_gaussian),
}


def whole(stencil: sp.Stencil) -> sp.Stencil:
    """The stencil without its separable passes: one 2-D kernel."""
    copy = stencil.with_options()
    copy.passes = None
    return copy


def filter_rows(frame: np.ndarray) -> list[tuple[str, float]]:
    out = np.empty_like(frame)
    ours = {
        "3x3 mean": sp.library.mean(3),
        "5x5 gaussian": sp.library.gaussian(1.0, truncate=2.0),
        "3x3 sobel": sp.library.sobel(0),
        "3x3 median": sp.library.median(3),
    }
    for stencil in ours.values():
        stencil(frame, out=out)
    depth = cv2.CV_8U if frame.dtype == np.uint8 else cv2.CV_32F
    rows = [("np.copyto (memory limit)", best_time(lambda: np.copyto(out, frame)))]
    anchors = {
        "3x3 mean": [
            ("cv2.blur", lambda: cv2.blur(frame, (3, 3), dst=out, borderType=REFLECT)),
            ("scipy uniform_filter", lambda: ndi.uniform_filter(frame, 3, output=out)),
            ("seed 004 numba.stencil", lambda: SEED["mean"](frame, out)),
        ],
        "5x5 gaussian": [
            (
                "cv2.GaussianBlur",
                lambda: cv2.GaussianBlur(frame, (5, 5), 1.0, dst=out, borderType=REFLECT),
            ),
            (
                "scipy gaussian_filter",
                lambda: ndi.gaussian_filter(frame, 1.0, truncate=2.0, output=out),
            ),
            ("seed 004 numba.stencil", lambda: SEED["gaussian"](frame, out)),
        ],
        "3x3 sobel": [
            ("cv2.Sobel", lambda: cv2.Sobel(frame, depth, 0, 1, dst=out, borderType=REFLECT)),
            ("scipy sobel", lambda: ndi.sobel(frame, 0, output=out)),
            ("seed 004 numba.stencil", lambda: SEED["sobel"](frame, out)),
        ],
        "3x3 median": [
            ("cv2.medianBlur", lambda: cv2.medianBlur(frame, 3, dst=out)),
            ("scipy median_filter", lambda: ndi.median_filter(frame, 3, output=out)),
        ],
    }
    for name, stencil in ours.items():
        rows.append((f"{name}: stencilpipe", best_time(lambda s=stencil: s(frame, out=out))))
        if stencil.passes:
            full = whole(stencil)
            full(frame, out=out)
            rows.append(
                (
                    f"{name}: stencilpipe, one 2-D kernel",
                    best_time(lambda f=full: f(frame, out=out)),
                )
            )
        for anchor, call in anchors[name]:
            slow = anchor.startswith(("scipy", "seed"))
            rows.append((f"{name}: {anchor}", best_time(call, repeat=3 if slow else 20)))
    return rows


def chain_rows(data: np.ndarray) -> list[tuple[str, float]]:
    stages = [sp.library.gaussian(1.0, truncate=2.0), sp.library.mean(3), sp.library.sobel(0)]
    fused, unfused = sp.chain(*stages), sp.chain(*stages, fuse=False)
    fused(data[..., :64, :64])
    unfused(data[..., :64, :64])
    depth = cv2.CV_8U if data.dtype == np.uint8 else cv2.CV_32F
    frames = data.reshape(-1, SIZE, SIZE)

    def opencv() -> None:
        for frame in frames:
            y = cv2.GaussianBlur(frame, (5, 5), 1.0, borderType=REFLECT)
            y = cv2.blur(y, (3, 3), borderType=REFLECT)
            cv2.Sobel(y, depth, 0, 1, borderType=REFLECT)

    def scipy() -> None:
        for frame in frames:
            y = ndi.gaussian_filter(frame, 1.0, truncate=2.0)
            ndi.sobel(ndi.uniform_filter(y, 3), 0)

    repeat = 3 if data.ndim > 2 else 10
    return [
        (
            "np.copyto (memory limit)",
            best_time(lambda: np.copyto(np.empty_like(data), data), repeat=repeat),
        ),
        ("stencilpipe chain, fused", best_time(lambda: fused(data), repeat=repeat)),
        ("stencilpipe chain, fuse=False", best_time(lambda: unfused(data), repeat=repeat)),
        ("OpenCV, three calls per frame", best_time(opencv, repeat=repeat)),
        ("scipy.ndimage, three calls per frame", best_time(scipy, repeat=1, warmup=0)),
    ]


def main() -> None:
    rng = np.random.default_rng(0)
    print(f"threads: stencilpipe {get_num_threads()}, cv2 {cv2.getNumThreads()}, scipy 1")
    for dtype in (np.uint8, np.float32):
        frame = rng.integers(0, 256, (SIZE, SIZE)).astype(dtype)
        name = np.dtype(dtype).name
        print_table(
            f"filters, one {SIZE}x{SIZE} {name} frame",
            filter_rows(frame),
            "np.copyto (memory limit)",
        )
        print_table(
            f"gaussian 5x5 -> mean 3x3 -> sobel, one {name} frame",
            chain_rows(frame),
            "np.copyto (memory limit)",
        )
        stack = rng.integers(0, 256, (STACK, SIZE, SIZE)).astype(dtype)
        print_table(
            f"the same chain, {STACK}-frame {name} stack",
            chain_rows(stack),
            "np.copyto (memory limit)",
        )


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n(benchmark took {time.perf_counter() - start:.0f} s)")
