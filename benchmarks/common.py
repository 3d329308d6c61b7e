"""Timing helpers shared by the benchmarks: best-of-N wall time and a ratio table."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_time(fn: Callable[[], object], *, repeat: int = 20, warmup: int = 2) -> float:
    """Best wall time of ``fn()`` over ``repeat`` runs, in seconds (after ``warmup`` runs)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def print_table(title: str, rows: list[tuple[str, float]], anchor: str) -> None:
    """Print ``rows`` of (name, seconds) with each one's ratio to the ``anchor`` row."""
    reference = dict(rows)[anchor]
    print(f"\n## {title}\n")
    print(f"| {'what':<52} | {'ms':>9} | {'x ' + anchor:>22} |")
    print(f"|{'-' * 54}|{'-' * 11}|{'-' * 24}|")
    for name, seconds in rows:
        print(f"| {name:<52} | {seconds * 1e3:9.3f} | {seconds / reference:22.2f} |")
