"""Medians of floats and 16/32-bit data: the window loops side by side, with OpenCV and scipy.

Each row times ``stencilpipe.ndfilters.median_filter`` (or ``rank_filter``) as a user calls
it, the loop it picks (:meth:`RankWindow.loop_name`: sorted columns, the selection network
on order keys, the histogram) and the other candidate loop forced on the same window, so
the thresholds of ``windows.SORTED_ABOVE`` can be checked on the machine at hand; then
OpenCV's ``medianBlur`` of the same frame scaled to uint8 (above 5x5 it takes 8-bit frames
only: what a user would switch to) where the window is a square, and scipy.ndimage's
``median_filter`` of the same data (one call: seconds to minutes).

Every candidate of a row runs once per round, in turn (:func:`side_by_side.interleaved`),
so a load change hits them alike; figures are each one's best round.

Run: ``python benchmarks/medians.py [--threads N] [--rounds N] [--scipy]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
from scipy import ndimage as ndi
from side_by_side import interleaved, load

import stencilpipe.ndfilters as ndf
from stencilpipe.stencils.threads import set_num_threads
from stencilpipe.stencils.windows import RankWindow

#: (label, dtype, shape, size or footprint): frames, lines, a footprint and volumes.
CASES: list[tuple[str, type, tuple[int, ...], Any]] = [
    ("15x15", np.float32, (2048, 2048), (15, 15)),
    ("15x15", np.uint16, (2048, 2048), (15, 15)),
    ("15x15", np.float64, (2048, 2048), (15, 15)),
    ("15x15", np.int32, (2048, 2048), (15, 15)),
    ("9x9", np.float32, (2048, 2048), (9, 9)),
    ("7x7", np.float32, (2048, 2048), (7, 7)),
    ("disk r5", np.float32, (2048, 2048), "disk"),
    ("line 31", np.float32, (64, 65536), (1, 31)),
    ("line 101", np.float32, (64, 65536), (1, 101)),
    ("7x7x7", np.float32, (64, 256, 256), (7, 7, 7)),
    ("5x5x5", np.float32, (64, 256, 256), (5, 5, 5)),
    ("5x5x5", np.float64, (64, 256, 256), (5, 5, 5)),
]


def disk(radius: int) -> np.ndarray:
    """A disk footprint, as skimage.morphology.disk draws it."""
    y, x = np.mgrid[-radius : radius + 1, -radius : radius + 1]
    return x * x + y * y <= radius * radius


def data(dtype: type, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 1000).astype(dtype)
    return rng.integers(0, 60000, shape).astype(dtype)


def window_options(size: Any) -> dict[str, Any]:
    """``median_filter``'s keyword for ``size``, as ndfilters and scipy take it: a disk of
    radius 5 for "disk"."""
    return {"footprint": disk(5)} if isinstance(size, str) else {"size": size}


def window_of(size: Any) -> RankWindow:
    """The window loop ``median_filter`` runs for ``size`` (a footprint for "disk")."""
    if isinstance(size, str):
        places = tuple(int(p) for p in np.flatnonzero(disk(5)))
        return RankWindow(((5, 5), (5, 5)), len(places) // 2, places)
    reach = tuple((s // 2, s - 1 - s // 2) for s in size)
    return RankWindow(reach, int(np.prod(size)) // 2)


@dataclass(frozen=True)
class Forced(RankWindow):
    """A window that runs loop ``loop`` whatever its dtype and size."""

    loop: str = "rank_network"

    def loop_name(self, dtype: np.dtype) -> str:
        return self.loop


def forced(step: RankWindow, loop: str, x: np.ndarray) -> Callable[[], object]:
    """``step`` run by ``loop`` on ``x`` as a pass (reflect), rows over the threads."""
    kernel = Forced(step.reach, step.rank, step.points, loop).compiled(
        (x.dtype,), x.dtype, "reflect"
    )
    frames = x[None]
    out = np.empty_like(frames)
    rows = frames.shape[0] * frames.shape[1]
    return lambda: kernel(frames, out, 0, rows=rows)


def row(label: str, dtype: type, shape: tuple[int, ...], size: Any, args: Any) -> None:
    rng = np.random.default_rng(0)
    x = data(dtype, shape, rng)
    step = window_of(size)
    chosen = step.loop_name(np.dtype(dtype))
    options = window_options(size)
    candidates: dict[str, Callable[[], object]] = {
        "stencilpipe": lambda: ndf.median_filter(x, **options)
    }
    if chosen == "rank_sorted_columns":  # what the window took before: a histogram for 16-bit
        other = "rank_histogram" if np.dtype(dtype).itemsize == 2 else "rank_network"
    else:
        other = "rank_sorted_columns"
    if other != "rank_sorted_columns" or (step.points is None and len(step.reach) > 1):
        candidates[other] = forced(step, other, x)
    if len(shape) == 2 and not isinstance(size, str) and size[0] == size[1]:
        narrow = cv2.normalize(x, None, 0, 255, cv2.NORM_MINMAX).astype(np.uint8)
        candidates["cv2 uint8"] = lambda: cv2.medianBlur(narrow, size[0])
    times = dict(interleaved(candidates, rounds=args.rounds))
    cells = [
        label,
        np.dtype(dtype).name,
        "x".join(map(str, shape)),
        chosen.replace("rank_", ""),
        f"{times['stencilpipe'] * 1e3:.1f}",
    ]
    cells.append(
        f"{times[other] * 1e3:.1f} ({other.replace('rank_', '')})" if other in times else "-"
    )
    cells.append(
        f"{times['stencilpipe'] / times['cv2 uint8']:.2f}" if "cv2 uint8" in times else "-"
    )
    if args.scipy:
        start = time.perf_counter()
        ndi.median_filter(x, **options)
        cells.append(f"{(time.perf_counter() - start) * 1e3:.0f}")
    print("| " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scipy", action="store_true", help="also time scipy (minutes)")
    parser.add_argument("--match", default="", help="only the rows whose label has it")
    args = parser.parse_args()
    set_num_threads(args.threads)
    cv2.setNumThreads(args.threads)
    print(f"# medians, {args.threads} threads, best of {args.rounds} ({load()})\n")
    header = ["window", "dtype", "shape", "loop", "ms", "other loop ms", "x cv2 uint8"]
    header += ["scipy ms"] if args.scipy else []
    print("| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for label, dtype, shape, size in CASES:
        if args.match in label:
            row(label, dtype, shape, size, args)
    print(f"\n({load()})")


if __name__ == "__main__":
    main()
