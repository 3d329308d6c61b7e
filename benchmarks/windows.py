"""Big windows: minimum, maximum and median as window passes, side by side with OpenCV and scipy.

One 2048x2048 uint8 frame (and uint16, float32 where OpenCV has no such filter),
reflect borders, the same threads for everyone (``--threads``, default 2). Each
row is timed in this one run, best of N; ratios are to OpenCV where it has the
filter, else to scipy. ``--compile`` also times, in fresh processes on an empty
kernel cache, the first call of a 15x15 median: the window pass against the
per-point selection network it replaces (minutes: off by default).

``--large`` times issue 17's large windows instead: ``stencilpipe.ndfilters``'
31x31 uniform (and the library's rounded 31x31 mean), gaussian sigma 8, 15x15
minimum/maximum (ndfilters' and the library's) and 15x15 median against
OpenCV's blur, GaussianBlur, erode/dilate and medianBlur (8-bit only above 5x5:
there the 16-bit and float32 medians are set against OpenCV's uint8 median of the
same frame), each pair interleaved
round by round (:func:`side_by_side.interleaved`), and next to each its 5x5 (or
sigma 2) row, to show how the time grows with the window.

``--box`` times ``ndfilters.minimum_filter`` over 2-D boxes (one pass: per point up to
3x3, else BoxExtremum) against the line pass per axis it ran before, the library's
minimum and cv2.erode, on a 2048x2048 frame and a (16, 512, 512) stack, interleaved.
``--running-mean`` times an integer ``uniform_filter1d`` along the last axis as a
per-point sum against the running sum (``RUNNING_MEAN_ABOVE[False]``), interleaved.

    python benchmarks/windows.py [--threads 2] [--compile] [--large [--match NAME]] [--box]
                                 [--running-mean]
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from common import best_time, print_table
from side_by_side import interleaved, load

PER_POINT_MEDIAN = """
import numpy as np, stencilpipe as sp, time
stencil = sp.library.median({size})
stencil.passes = None  # the per-point kernel: what the library ran before the window passes
x = np.zeros((1, 64, 64), np.uint8)
start = time.perf_counter(); stencil(x); print(time.perf_counter() - start)
"""

WINDOW_MEDIAN = """
import numpy as np, stencilpipe as sp, time
x = np.zeros((1, 64, 64), np.uint8)
start = time.perf_counter(); sp.library.median({size})(x); print(time.perf_counter() - start)
"""


def timed(function, *args, repeat: int = 20, warmup: int = 2, **keywords) -> float:
    """Best time of ``function(*args, **keywords)`` over ``repeat`` runs after ``warmup``."""
    return best_time(lambda: function(*args, **keywords), repeat=repeat, warmup=warmup)


def first_call(code: str) -> float:
    """Seconds of a first call in a fresh process on an empty kernel cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "STENCILPIPE_CACHE_DIR": cache, "NUMBA_CACHE_DIR": cache}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
    return float(done.stdout.split()[-1])


def _large_pairs(name: str, x: np.ndarray) -> dict:
    """``{filter: (ndfilters call, anchor call, anchor name)}`` for frame ``x`` of dtype
    ``name``: each large window and a small one beside it."""
    import cv2

    import stencilpipe as sp
    import stencilpipe.ndfilters as ndf

    reflect = cv2.BORDER_REFLECT  # scipy's reflect: d c b a | a b c d
    pairs = {}
    for size in (5, 31):
        pairs[f"uniform {size}x{size}"] = (
            lambda size=size: ndf.uniform_filter(x, size),
            lambda size=size: cv2.blur(x, (size, size), borderType=reflect),
            "cv2.blur",
        )
    for size in (5, 31):
        mean = sp.library.mean(size)
        pairs[f"library mean {size}x{size}"] = (
            lambda mean=mean: mean(x),
            lambda size=size: cv2.blur(x, (size, size), borderType=reflect),
            "cv2.blur",
        )
    for sigma in (2, 8):
        k = 2 * int(4.0 * sigma + 0.5) + 1  # scipy's truncate=4 radius
        pairs[f"gaussian sigma {sigma}"] = (
            lambda sigma=sigma: ndf.gaussian_filter(x, sigma),
            lambda sigma=sigma, k=k: cv2.GaussianBlur(x, (k, k), sigma, borderType=reflect),
            "cv2.GaussianBlur",
        )
    for size in (5, 15):
        box = np.ones((size, size), np.uint8)
        pairs[f"minimum {size}x{size}"] = (
            lambda size=size: ndf.minimum_filter(x, size),
            lambda box=box: cv2.erode(x, box, borderType=reflect),
            "cv2.erode",
        )
        pairs[f"maximum {size}x{size}"] = (
            lambda size=size: ndf.maximum_filter(x, size),
            lambda box=box: cv2.dilate(x, box, borderType=reflect),
            "cv2.dilate",
        )
        for which, anchor in (("minimum", cv2.erode), ("maximum", cv2.dilate)):
            extremum = getattr(sp.library, which)(size)
            pairs[f"library {which[:3]} {size}x{size}"] = (
                lambda extremum=extremum: extremum(x),
                lambda box=box, anchor=anchor: anchor(x, box, borderType=reflect),
                f"cv2.{anchor.__name__}",
            )
    narrow = x if name == "uint8" else (x * (255.0 / x.max())).astype(np.uint8)
    for size in (5, 15):
        # OpenCV's medianBlur takes 16-bit and float frames up to 5x5 only: above, the row
        # times its uint8 median of the frame scaled to 8 bits (what a user would switch to).
        wide = size == 5
        source, anchor = (x, "cv2.medianBlur") if wide else (narrow, "cv2.medianBlur uint8")
        pairs[f"median {size}x{size}"] = (
            lambda size=size: ndf.median_filter(x, size),
            lambda size=size, source=source: cv2.medianBlur(source, size),
            anchor,
        )
    return pairs


def large_windows(frames: dict[str, np.ndarray], match: str = "") -> None:
    """Issue 17's large windows, ndfilters against OpenCV (scipy where OpenCV has none);
    only the filters whose name contains ``match``."""
    print(f"\n# large windows, 2048x2048, ndfilters vs OpenCV ({load()})")
    for name, x in frames.items():
        print(f"\n## {name}\n")
        print(
            f"| {'filter':<18} | {'ndfilters ms':>12} | {'anchor':<20} | {'anchor ms':>9} | ratio |"
        )
        print(f"|{'-' * 20}|{'-' * 14}|{'-' * 22}|{'-' * 11}|-------|")
        for what, (ours, theirs, anchor) in _large_pairs(name, x).items():
            if match not in what:
                continue
            rounds = 2 if "median" in what else 5
            (_, mine), (_, other) = interleaved({"ours": ours, "theirs": theirs}, rounds=rounds)
            print(
                f"| {what:<18} | {mine * 1e3:12.2f} | {anchor:<20} | {other * 1e3:9.2f} "
                f"| {mine / other:5.2f} |"
            )
    print(f"\n({load()})")


def _line_passes(x: np.ndarray, size: int) -> np.ndarray:
    """``ndfilters.minimum_filter(x, size)`` over the last two axes as a line pass per axis
    (what it ran before the one-pass box)."""
    from stencilpipe.ndfilters._apply import dtypes_of, run_passes
    from stencilpipe.ndfilters._order import _line, _rank_pass

    dtypes = dtypes_of(x, None, "minimum_filter")
    axes = (x.ndim - 2, x.ndim - 1)
    passes = [_rank_pass(_line(size, 0), 0, dtypes.store, "reflect", axis) for axis in axes]
    return run_passes(x, passes, dtypes, 0.0)


def _erode_frames(x: np.ndarray, box: np.ndarray) -> None:
    import cv2

    for frame in x.reshape(-1, *x.shape[-2:]):
        cv2.erode(frame, box, borderType=cv2.BORDER_REFLECT)


def box_extrema(rng: np.random.Generator) -> None:
    """ndfilters' 2-D box minimum in one pass against its line passes, the library, OpenCV."""
    import stencilpipe as sp
    import stencilpipe.ndfilters as ndf

    print(f"\n# 2-D box minimum, ndfilters one pass vs line passes ({load()})\n")
    print("| array | dtype | box | one pass ms | line passes ms | library ms | cv2.erode ms |")
    print("|---|---|---|---|---|---|---|")
    for shape in [(2048, 2048), (16, 512, 512)]:
        for dtype in ("uint8", "uint16", "float32"):
            x = rng.integers(0, 256, shape).astype(dtype)
            for size in (3, 5, 9, 15):
                calls = {
                    "one": functools.partial(ndf.minimum_filter, x, size, axes=(-2, -1)),
                    "lines": functools.partial(_line_passes, x, size),
                    "library": functools.partial(sp.library.minimum(size), x),
                    "cv2": functools.partial(_erode_frames, x, np.ones((size, size), np.uint8)),
                }
                times = dict(interleaved(calls, rounds=7))
                one, lines, lib, cv = (times[k] * 1e3 for k in calls)
                print(
                    f"| {'x'.join(map(str, shape))} | {dtype} | {size}x{size} | {one:.2f} "
                    f"| {lines:.2f} ({one / lines:.2f}) | {lib:.2f} | {cv:.2f} ({one / cv:.2f}) |"
                )
    print(f"\n({load()})")


def running_means(rng: np.random.Generator) -> None:
    """Integer means along the last axis: per-point sums against the running sum."""
    from stencilpipe.ndfilters._kernels import uniform1d_kernel
    from stencilpipe.stencils.windows import MeanPass

    print(f"\n# integer uniform_filter1d along the last axis, 2048x2048 ({load()})\n")
    print("| dtype | size | per-point ms | running ms | running / per-point |")
    print("|---|---|---|---|---|")
    for dtype in ("uint8", "uint16", "int32"):
        x = rng.integers(0, 256, (2048, 2048)).astype(dtype)
        for size in (3, 5, 7, 9, 11, 13, 15):
            per_point = uniform1d_kernel.__wrapped__(size, 0, np.dtype(dtype))
            per_point.passes = None
            running = uniform1d_kernel.__wrapped__(size, 0, np.dtype(dtype))
            running.passes = {"cpu": (MeanPass(0, size // 2, size - 1 - size // 2, 1),)}
            assert np.array_equal(per_point(x), running(x))
            calls = {
                "point": functools.partial(per_point, x),
                "running": functools.partial(running, x),
            }
            times = dict(interleaved(calls, rounds=7))
            point, run = times["point"] * 1e3, times["running"] * 1e3
            print(f"| {dtype} | {size} | {point:.2f} | {run:.2f} | {run / point:.2f} |")
    print(f"\n({load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--compile", action="store_true", help="time first calls (minutes)")
    parser.add_argument("--large", action="store_true", help="issue 17's large windows")
    parser.add_argument("--box", action="store_true", help="2-D box minimum: one pass vs lines")
    parser.add_argument("--running-mean", action="store_true", help="integer means: sum kinds")
    parser.add_argument("--match", default="", help="--large: the filters whose name has it")
    args = parser.parse_args()

    import cv2
    from scipy import ndimage as ndi

    import stencilpipe as sp
    from stencilpipe.stencils.threads import set_num_threads

    set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    rng = np.random.default_rng(0)
    frame8 = rng.integers(0, 256, (2048, 2048), dtype=np.uint8)
    frame16 = rng.integers(0, 65536, (2048, 2048), dtype=np.uint16)
    small32 = rng.random((512, 512), dtype=np.float32)
    reflect = cv2.BORDER_REFLECT
    if args.large:
        float32 = rng.random((2048, 2048), dtype=np.float32)
        large_windows({"uint8": frame8, "uint16": frame16, "float32": float32}, args.match)
        return
    if args.box:
        box_extrema(rng)
        return
    if args.running_mean:
        running_means(rng)
        return

    for size in (5, 15, 31):
        box = np.ones((size, size), np.uint8)
        minimum, maximum = sp.library.minimum(size), sp.library.maximum(size)
        rows = [
            (f"stencilpipe minimum {size}x{size} uint8", timed(minimum, frame8)),
            (f"stencilpipe maximum {size}x{size} uint8", timed(maximum, frame8)),
            (f"stencilpipe minimum {size}x{size} uint16", timed(minimum, frame16)),
            ("cv2.erode uint8", timed(cv2.erode, frame8, box, borderType=reflect)),
            ("cv2.dilate uint8", timed(cv2.dilate, frame8, box, borderType=reflect)),
            ("cv2.erode uint16", timed(cv2.erode, frame16, box, borderType=reflect)),
            (
                "scipy minimum_filter uint8",
                timed(ndi.minimum_filter, frame8, size, repeat=3),
            ),
        ]
        print_table(f"minimum/maximum {size}x{size}, 2048x2048", rows, "cv2.erode uint8")

    for size in (7, 15):
        median = sp.library.median(size)
        rows = [
            (
                f"stencilpipe median {size}x{size} uint8",
                timed(median, frame8, repeat=3),
            ),
            ("cv2.medianBlur uint8", timed(cv2.medianBlur, frame8, size, repeat=3)),
            (
                f"stencilpipe median {size}x{size} uint16",
                timed(median, frame16, repeat=2, warmup=1),
            ),
            (
                "scipy median_filter uint8",
                timed(ndi.median_filter, frame8, size, repeat=1, warmup=0),
            ),
        ]
        print_table(f"median {size}x{size}, 2048x2048", rows, "cv2.medianBlur uint8")
        rows = [
            (
                f"stencilpipe median {size}x{size} float32",
                timed(median, small32, repeat=2, warmup=1),
            ),
            (
                "scipy median_filter float32",
                timed(ndi.median_filter, small32, size, repeat=2, warmup=0),
            ),
        ]
        print_table(
            f"median {size}x{size} float32, 512x512 (no OpenCV filter)",
            rows,
            "scipy median_filter float32",
        )

    if args.compile:
        print("\n## first call of a median on an empty kernel cache (compile included)\n")
        for size in (7, 9, 15):
            started = time.perf_counter()
            window = first_call(WINDOW_MEDIAN.format(size=size))
            per_point = first_call(PER_POINT_MEDIAN.format(size=size))
            print(
                f"median {size}x{size}: window pass {window:.1f} s, per-point kernel "
                f"{per_point:.1f} s ({time.perf_counter() - started:.0f} s wall)"
            )


if __name__ == "__main__":
    main()
