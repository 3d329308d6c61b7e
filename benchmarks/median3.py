"""Prototype: a 3x3 median by sorted columns, against the library's selection network and OpenCV.

The median of 9 values is ``med3(max of the column minima, med3 of the column medians,
min of the column maxima)`` (Paeth, Graphics Gems, 1990). Sorting each column of 3 once
per row into three row buffers and combining neighbouring columns per pixel takes
3 + 6 compare-exchanges per pixel instead of the selection network's 24 (or OpenCV's 19),
and both loops vectorise. This script checks it against scipy bit for bit (every mode,
uint8/uint16/float32, odd sizes) and times it side by side (2048x2048 frame and a stack)
with ``sp.library.median(3)`` and ``cv2.medianBlur`` (nearest, OpenCV's only border).

Run: ``python benchmarks/median3.py [--threads N] [--rounds N] [--stack N]``.
"""

from __future__ import annotations

import argparse

import cv2
import numba
import numpy as np
from scipy import ndimage as ndi
from side_by_side import interleaved, load

import stencilpipe as sp
from stencilpipe.stencils.boundary import fold_mirror, fold_nearest, fold_reflect, fold_wrap
from stencilpipe.stencils.threads import run_rows, set_num_threads

FOLDS = [numba.njit(f) for f in (fold_reflect, fold_mirror, fold_nearest, fold_wrap)]
MODES = ("reflect", "mirror", "nearest", "wrap")


def _make(fold):
    @numba.njit(nogil=True)
    def rows(x, out, start, stop):
        n0, n1 = x.shape[1], x.shape[2]
        lo = np.empty(n1 + 2, x.dtype)
        mi = np.empty(n1 + 2, x.dtype)
        hi = np.empty(n1 + 2, x.dtype)
        left, right = fold(-1, n1), fold(n1, n1)
        for t in range(start, stop):
            b = t // n0
            i = t - b * n0
            up, row, down = x[b, fold(i - 1, n0)], x[b, i], x[b, fold(i + 1, n0)]
            # Each column sorted (3 compare-exchanges), at position column + 1.
            for j in range(n1):
                p, q, r = up[j], row[j], down[j]
                s, g = min(p, q), max(p, q)
                m = min(g, r)
                hi[j + 1] = max(g, r)
                lo[j + 1] = min(s, m)
                mi[j + 1] = max(s, m)
            lo[0], mi[0], hi[0] = lo[left + 1], mi[left + 1], hi[left + 1]
            lo[n1 + 1], mi[n1 + 1], hi[n1 + 1] = lo[right + 1], mi[right + 1], hi[right + 1]
            o = out[b, i]
            for j in range(n1):
                low = max(max(lo[j], lo[j + 1]), lo[j + 2])
                high = min(min(hi[j], hi[j + 1]), hi[j + 2])
                a, c, d = mi[j], mi[j + 1], mi[j + 2]
                mid = max(min(a, c), min(max(a, c), d))
                o[j] = max(min(low, mid), min(max(low, mid), high))

    return rows


ROWS = {mode: _make(fold) for mode, fold in zip(MODES, FOLDS)}


def median3(x: np.ndarray, mode: str = "reflect", out: np.ndarray | None = None) -> np.ndarray:
    """3x3 median of a frame or stack (last two axes) under ``mode``, on the threads."""
    out = np.empty_like(x) if out is None else out
    flat, target = x.reshape(-1, *x.shape[-2:]), out.reshape(-1, *x.shape[-2:])
    run_rows(ROWS[mode], (flat, target), flat.shape[0] * flat.shape[1])
    return out


def check() -> None:
    rng = np.random.default_rng(1)
    for dtype in (np.uint8, np.uint16, np.float32):
        for shape in ((1, 1), (1, 5), (2, 2), (3, 7), (17, 33), (64, 65)):
            x = rng.integers(0, 50, shape).astype(dtype)
            for mode in MODES:
                expected = ndi.median_filter(x, 3, mode=mode)
                got = median3(x, mode)
                assert np.array_equal(got, expected), (dtype, shape, mode)
    print("median3 equals scipy.ndimage.median_filter (uint8/uint16/float32, every folding mode)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--stack", type=int, default=64)
    args = parser.parse_args()
    set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    check()
    library = sp.library.median(3, boundary="nearest")
    rng = np.random.default_rng(0)
    print(f"threads {args.threads}; {load()}")
    print("| data | dtype | sorted columns ms | library ms | cv2 ms | columns/cv2 | library/cv2 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for frames in (1, args.stack):
        shape = (2048, 2048) if frames == 1 else (frames, 2048, 2048)
        for dtype in (np.uint8, np.uint16):
            x = rng.integers(0, np.iinfo(dtype).max + 1, shape).astype(dtype)
            out = np.empty_like(x)
            assert np.array_equal(median3(x, "nearest"), library(x))

            def opencv(x=x):
                for frame in x.reshape(-1, 2048, 2048):
                    cv2.medianBlur(frame, 3)

            t = dict(
                interleaved(
                    {
                        "columns": lambda x=x, o=out: median3(x, "nearest", o),
                        "library": lambda x=x, o=out: library(x, out=o),
                        "cv2": opencv,
                    },
                    rounds=args.rounds if frames == 1 else max(3, args.rounds // 5),
                )
            )
            print(
                f"| {frames} x 2048² | {np.dtype(dtype).name} | {t['columns'] * 1e3:.2f} |"
                f" {t['library'] * 1e3:.2f} | {t['cv2'] * 1e3:.2f} |"
                f" {t['columns'] / t['cv2']:.2f} | {t['library'] / t['cv2']:.2f} |"
            )


if __name__ == "__main__":
    main()
