"""Library filters on uint8 and uint16 (and float32 of the same shape) against OpenCV, side by side.

For each filter (mean, gaussian, sobel, laplace, minimum, maximum, median, and the drop-in
namespace's prewitt, correlate and rank_filter) on one
2048x2048 frame and on a 64-frame stack: stencilpipe, OpenCV's equivalent under the same
border mode, scipy.ndimage (frame only: minutes on the stack) and ``np.copyto`` of the same
bytes, each row's candidates interleaved (the copy too: ``sp/copy`` is the issue's
"within 2x of a copy" figure). Then the chain gaussian 5x5 -> mean 3x3 -> sobel, fused, against OpenCV's three
calls; the cold compile of a 5-stage chain and its warm load from the cache (fresh
processes); and, with ``--large``, the large windows as they are today.

Each figure is a candidate's best round; every round runs each candidate of a row once,
in turn (:func:`side_by_side.interleaved`), so a load change on a shared machine hits them
all alike (with medians, used before, the identical 3x3 minimum and maximum kernels took
1.1 and 5.4 ms in one run at load 7 on 2 cores). Each table prints the machine's load.
Both libraries use 2 threads (``--threads``).

Run: ``python benchmarks/integer.py [--rounds N] [--stack N] [--large] [--match NAME]
[--threads N]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
from scipy import ndimage as ndi
from side_by_side import interleaved, load

import stencilpipe as sp
import stencilpipe.ndfilters as ndf
from stencilpipe.stencils.threads import set_num_threads

SIZE = 2048
THREADS = 2
REFLECT = cv2.BORDER_REFLECT  # scipy's and stencilpipe's "reflect"
MIRROR = cv2.BORDER_REFLECT_101  # "mirror": OpenCV's default border
NEAREST = cv2.BORDER_REPLICATE  # "nearest": the only border medianBlur has


def best(candidates: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best seconds of each candidate over ``rounds`` interleaved rounds, after one untimed
    round (compile, allocate, warm the caches)."""
    return dict(interleaved(candidates, rounds=rounds))


def _per_frame(call: Callable[[np.ndarray], object]) -> Callable[[np.ndarray], None]:
    def run(data: np.ndarray) -> None:
        for frame in data.reshape(-1, *data.shape[-2:]):
            call(frame)

    return run


def _drop_in(call: Callable[..., object]) -> Callable[..., None]:
    """A ``stencilpipe.ndfilters`` function run as the tables run a filter, ``f(x, out=o)``,
    frame by frame: on a stack scipy's prewitt would filter across its frames too (it has
    no ``axes``)."""

    def run(x: np.ndarray, out: np.ndarray) -> None:
        frames = zip(x.reshape(-1, *x.shape[-2:]), out.reshape(-1, *out.shape[-2:]))
        for frame, target in frames:
            call(frame, output=target)

    return run


def _over_frames(call: Callable[..., object]) -> Callable[..., None]:
    """A ``stencilpipe.ndfilters`` function that takes ``axes``, run as the tables run a
    filter: one call on the frame or the whole stack, ``axes=(-2, -1)`` filtering each
    frame alone, as a scipy user filters a stack frame by frame."""

    def run(x: np.ndarray, out: np.ndarray) -> None:
        call(x, output=out, axes=(-2, -1))

    return run


#: Weights of the correlate rows: a 3x3 sharpening kernel (OpenCV's filter2D correlates).
SHARPEN = np.array([[0, -1, 0], [-1, 5, -1], [0, -1, 0]], np.float64)
#: scipy's prewitt along axis 0 as one 3x3 correlation, for OpenCV's filter2D.
PREWITT_0 = np.outer([-1.0, 0.0, 1.0], [1.0, 1.0, 1.0])


def filters(
    dtype: np.dtype,
) -> dict[str, tuple[Callable[..., object], Callable[[np.ndarray], object], Any]]:
    """name -> (stencilpipe filter, OpenCV on one frame, scipy on one frame). The rows
    named ``ndfilters`` are the drop-in namespace's (its integer outputs wrap as scipy's;
    OpenCV's saturate)."""
    same = -1  # OpenCV's ddepth: the input's
    box = np.ones((3, 3), np.uint8)
    return {
        "mean 3x3": (
            sp.library.mean(3),
            lambda f: cv2.blur(f, (3, 3), borderType=REFLECT),
            lambda f: ndi.uniform_filter(f, 3),
        ),
        "gaussian 5x5 (sigma 1)": (
            sp.library.gaussian(1.0, truncate=2.0),
            lambda f: cv2.GaussianBlur(f, (5, 5), 1.0, borderType=REFLECT),
            lambda f: ndi.gaussian_filter(f, 1.0, truncate=2.0),
        ),
        "gaussian 5x5 (sigma 1, mirror)": (
            sp.library.gaussian(1.0, truncate=2.0, boundary="mirror"),
            lambda f: cv2.GaussianBlur(f, (5, 5), 1.0, borderType=MIRROR),
            lambda f: ndi.gaussian_filter(f, 1.0, truncate=2.0, mode="mirror"),
        ),
        "sobel axis 0": (
            sp.library.sobel(0),
            lambda f: cv2.Sobel(f, same, 0, 1, borderType=REFLECT),
            lambda f: ndi.sobel(f, 0),
        ),
        "laplace": (
            sp.library.laplace(),
            lambda f: cv2.Laplacian(f, same, ksize=1, borderType=REFLECT),
            lambda f: ndi.laplace(f),
        ),
        "minimum 3x3": (
            sp.library.minimum(3),
            lambda f: cv2.erode(f, box, borderType=REFLECT),
            lambda f: ndi.minimum_filter(f, 3),
        ),
        "maximum 3x3": (
            sp.library.maximum(3),
            lambda f: cv2.dilate(f, box, borderType=REFLECT),
            lambda f: ndi.maximum_filter(f, 3),
        ),
        "median 3x3 (nearest)": (
            sp.library.median(3, boundary="nearest"),
            lambda f: cv2.medianBlur(f, 3),
            lambda f: ndi.median_filter(f, 3, mode="nearest"),
        ),
        "ndfilters prewitt axis 0": (
            _drop_in(lambda f, output: ndf.prewitt(f, 0, output=output)),
            lambda f: cv2.filter2D(f, same, PREWITT_0, borderType=REFLECT),
            lambda f: ndi.prewitt(f, 0),
        ),
        "ndfilters correlate 3x3": (
            _over_frames(lambda x, **kw: ndf.correlate(x, SHARPEN, **kw)),
            lambda f: cv2.filter2D(f, same, SHARPEN, borderType=REFLECT),
            lambda f: ndi.correlate(f, SHARPEN),
        ),
        "ndfilters rank 4 of 3x3 (nearest)": (
            _over_frames(lambda x, **kw: ndf.rank_filter(x, 4, 3, mode="nearest", **kw)),
            lambda f: cv2.medianBlur(f, 3),
            lambda f: ndi.rank_filter(f, 4, 3, mode="nearest"),
        ),
    }


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def filter_table(frames: int, rounds: int, rng: np.random.Generator, match: str = "") -> None:
    """One table per integer dtype: each filter's times and ratios, float32 beside it; only
    the filters whose name contains ``match``."""
    shape = (SIZE, SIZE) if frames == 1 else (frames, SIZE, SIZE)
    where = "one frame" if frames == 1 else f"{frames}-frame stack"
    floats = rng.integers(0, 256, shape).astype(np.float32)
    for dtype in (np.uint8, np.uint16):
        top = np.iinfo(dtype).max
        data = rng.integers(0, top + 1, shape).astype(dtype)
        print(
            f"\n## {np.dtype(dtype).name}, {where} of {SIZE}x{SIZE}, best of {rounds}; {load()}\n"
        )
        header = ["filter", "sp ms", "cv2 ms", "scipy ms", "sp f32 ms", "sp/cv2", "sp/f32"]
        print(_row(header + ["sp/copy"]) + "\n" + _row(["---"] * (len(header) + 1)))
        copy_out = np.empty_like(data)
        for name, (ours, opencv, scipy) in filters(np.dtype(dtype)).items():
            if match not in name:
                continue
            out, out32 = np.empty_like(data), np.empty_like(floats)
            candidates = {
                "sp": lambda s=ours, x=data, o=out: s(x, out=o),
                "cv2": lambda c=opencv, x=data: _per_frame(c)(x),
                "f32": lambda s=ours, o=out32: s(floats, out=o),
                "copy": lambda x=data, o=copy_out: np.copyto(o, x),
            }
            if frames == 1:
                candidates["scipy"] = lambda c=scipy, x=data: c(x)
            t = best(candidates, rounds)
            scipy_ms = f"{t['scipy'] * 1e3:.2f}" if "scipy" in t else "-"
            print(
                _row(
                    [
                        name,
                        f"{t['sp'] * 1e3:.2f}",
                        f"{t['cv2'] * 1e3:.2f}",
                        scipy_ms,
                        f"{t['f32'] * 1e3:.2f}",
                        f"{t['sp'] / t['cv2']:.2f}",
                        f"{t['sp'] / t['f32']:.2f}",
                        f"{t['sp'] / t['copy']:.2f}",
                    ]
                )
            )


def chain_table(frames: int, rounds: int, rng: np.random.Generator) -> None:
    """gaussian 5x5 -> mean 3x3 -> sobel: stencilpipe fused against OpenCV's three calls."""
    shape = (SIZE, SIZE) if frames == 1 else (frames, SIZE, SIZE)
    where = "one frame" if frames == 1 else f"{frames}-frame stack"
    stages = [sp.library.gaussian(1.0, truncate=2.0), sp.library.mean(3), sp.library.sobel(0)]
    fused = sp.chain(*stages)

    def opencv(frame: np.ndarray) -> None:
        y = cv2.GaussianBlur(frame, (5, 5), 1.0, borderType=REFLECT)
        y = cv2.blur(y, (3, 3), borderType=REFLECT)
        cv2.Sobel(y, -1, 0, 1, borderType=REFLECT)

    print(f"\n## chain gaussian 5x5 -> mean 3x3 -> sobel, {where}, best of {rounds}; {load()}\n")
    print(_row(["dtype", "sp fused ms", "cv2 x3 ms", "copy ms", "sp/cv2", "sp/copy"]))
    print(_row(["---"] * 6))
    for dtype in (np.uint8, np.uint16, np.float32):
        data = rng.integers(0, 256, shape).astype(dtype)
        copy_out = np.empty_like(data)
        t = best(
            {
                "sp": lambda x=data: fused(x),
                "cv2": lambda x=data: _per_frame(opencv)(x),
                "copy": lambda x=data, o=copy_out: np.copyto(o, x),
            },
            rounds,
        )
        print(
            _row(
                [
                    np.dtype(dtype).name,
                    f"{t['sp'] * 1e3:.2f}",
                    f"{t['cv2'] * 1e3:.2f}",
                    f"{t['copy'] * 1e3:.2f}",
                    f"{t['sp'] / t['cv2']:.2f}",
                    f"{t['sp'] / t['copy']:.2f}",
                ]
            )
        )


_COMPILE_SCRIPT = textwrap.dedent(
    """
    import time
    start = time.perf_counter()
    import numpy as np
    import stencilpipe as sp
    imported = time.perf_counter()
    lib = sp.library
    five = sp.chain(lib.gaussian(1.0, truncate=2.0), lib.mean(3), lib.sobel(0), lib.laplace(),
                    lib.median(3))
    five(np.zeros((64, 64), np.uint8))
    print(imported - start, time.perf_counter() - imported)
    """
)


def compile_table() -> None:
    """Cold compile (empty kernel cache) and warm load of a 5-stage uint8 chain, fresh processes."""
    print("\n## 5-stage chain (gaussian, mean, sobel, laplace, median) on uint8, fresh processes\n")
    print(_row(["cache", "import s", "first call s"]) + "\n" + _row(["---"] * 3))
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "STENCILPIPE_CACHE_DIR": cache}
        for what in ("cold (empty)", "warm"):
            run = subprocess.run(
                [sys.executable, "-c", _COMPILE_SCRIPT],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            imported, first = map(float, run.stdout.split())
            print(_row([what, f"{imported:.2f}", f"{first:.2f}"]))


def large_table(rounds: int, rng: np.random.Generator) -> None:
    """Large windows as the per-point kernels compute them today, one uint8 frame."""
    frame = rng.integers(0, 256, (SIZE, SIZE)).astype(np.uint8)
    box = np.ones((15, 15), np.uint8)
    # The library's gaussian reaches 4 sigma (scipy's truncate), 65x65; OpenCV's own size
    # for 8-bit data reaches 3 sigma, 49x49: a smaller filter, not the same one.
    wide = 2 * int(4.0 * 8.0 + 0.5) + 1
    cases = {
        "mean 31x31": (sp.library.mean(31), lambda: cv2.blur(frame, (31, 31), borderType=REFLECT)),
        "gaussian sigma 8": (
            sp.library.gaussian(8.0),
            lambda: cv2.GaussianBlur(frame, (wide, wide), 8.0, borderType=REFLECT),
        ),
        "minimum 15x15": (
            sp.library.minimum(15),
            lambda: cv2.erode(frame, box, borderType=REFLECT),
        ),
        "maximum 15x15": (
            sp.library.maximum(15),
            lambda: cv2.dilate(frame, box, borderType=REFLECT),
        ),
    }
    print(f"\n## large windows today, one uint8 frame, best of {rounds}; {load()}\n")
    print(_row(["filter", "compile s", "sp ms", "cv2 ms", "sp/cv2"]) + "\n" + _row(["---"] * 5))
    for name, (ours, opencv) in cases.items():
        out = np.empty_like(frame)
        start = time.perf_counter()
        ours(frame[:64, :64])
        compiled = time.perf_counter() - start
        t = best({"sp": lambda s=ours, o=out: s(frame, out=o), "cv2": opencv}, rounds)
        print(
            _row(
                [
                    name,
                    f"{compiled:.1f}",
                    f"{t['sp'] * 1e3:.2f}",
                    f"{t['cv2'] * 1e3:.2f}",
                    f"{t['sp'] / t['cv2']:.2f}",
                ]
            )
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds per frame row")
    parser.add_argument("--stack", type=int, default=64, help="frames in the stack")
    parser.add_argument("--large", action="store_true", help="also time the large windows")
    parser.add_argument("--only", choices=["frame", "stack", "chain", "compile"], default=None)
    parser.add_argument("--match", default="", help="only the filters whose name contains it")
    parser.add_argument(
        "--threads",
        type=int,
        default=THREADS,
        help="threads of both libraries (1: steadier ratios on a shared machine)",
    )
    args = parser.parse_args()
    set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    rng = np.random.default_rng(0)
    print(f"threads: stencilpipe {args.threads}, cv2 {cv2.getNumThreads()}, scipy 1")
    if args.only in (None, "frame"):
        filter_table(1, args.rounds, rng, args.match)
    if args.only in (None, "stack"):
        filter_table(args.stack, max(3, args.rounds // 3), rng, args.match)
    if args.only in (None, "chain"):
        chain_table(1, args.rounds, rng)
        chain_table(args.stack, max(3, args.rounds // 3), rng)
    if args.only in (None, "compile"):
        compile_table()
    if args.large:
        large_table(max(3, args.rounds // 3), rng)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"\n(benchmark took {time.perf_counter() - start:.0f} s)")
