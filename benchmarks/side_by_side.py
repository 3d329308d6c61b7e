"""Timing candidates side by side: every round runs each candidate once, in turn, so that the
load that other processes put on the machine falls on all of them alike; each candidate's
figure is its best round.

Each round runs them in another order (shuffled, the same in every run of a script), so
no candidate always runs after the same one: what a call leaves behind (another library's
threads spinning, or a core left idle by a long single-threaded call, which a virtual
machine hands back to its host) falls on each in turn. In a fixed order stencilpipe always ran after scipy's
50-600 ms single-threaded call and OpenCV after stencilpipe's two threads: ``integer.py
--only frame``, two runs each, uint8 gaussian 5x5 1.60-1.69x OpenCV in the fixed order,
1.20-1.32x shuffled; 3x3 median 1.34-1.41x, 1.05-1.09x."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Mapping

import llvmlite.binding


def interleaved(
    candidates: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 3,
    before: Callable[[], object] = lambda: None,
) -> list[tuple[str, float]]:
    """``(name, best seconds)`` of each candidate over ``rounds`` rounds after a warm-up
    round (untimed); ``before()`` runs untimed before each call (emptying an output)."""
    best = dict.fromkeys(candidates, float("inf"))
    for round_ in range(rounds + 1):
        for name in random.Random(round_).sample(list(candidates), len(candidates)):
            run = candidates[name]
            before()
            start = time.perf_counter()
            run()
            if round_:
                best[name] = min(best[name], time.perf_counter() - start)
    before()
    return list(best.items())


def load() -> str:
    """The machine: cores, their model as LLVM names it (the code Numba generates for them
    differs: AVX2, AVX-512) and load averages (1, 5, 15 minutes)."""
    one, five, fifteen = os.getloadavg()
    model = llvmlite.binding.get_host_cpu_name()
    return f"{os.cpu_count()} cores ({model}), load {one:.1f} / {five:.1f} / {fifteen:.1f}"
