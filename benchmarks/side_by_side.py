"""Timing candidates side by side: every round runs each candidate once, in turn, so that the
load that other processes put on the machine falls on all of them alike; each candidate's
figure is its best round."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping


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
        for name, run in candidates.items():
            before()
            start = time.perf_counter()
            run()
            if round_:
                best[name] = min(best[name], time.perf_counter() - start)
    before()
    return list(best.items())


def load() -> str:
    """The machine: cores and load averages (1, 5, 15 minutes)."""
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load {one:.1f} / {five:.1f} / {fifteen:.1f}"
