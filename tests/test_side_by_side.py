"""The benchmarks' side-by-side timer: each round runs every candidate once, in an order of
its own, so no candidate always runs after the same one (what a call leaves behind, such as
another library's spinning threads or a core left idle, falls on each in turn)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))

from side_by_side import interleaved  # noqa: E402


def test_every_round_runs_each_candidate_once_and_none_always_after_the_same_one():
    calls = []
    names = ["sp", "cv2", "f32", "copy", "scipy"]
    got = interleaved({name: lambda n=name: calls.append(n) for name in names}, rounds=9)
    assert [name for name, _ in got] == names and all(s >= 0 for _, s in got)
    rounds = [calls[k : k + len(names)] for k in range(0, len(calls), len(names))]
    assert len(rounds) == 10 and all(sorted(r) == sorted(names) for r in rounds)
    for name in names:
        before = {a for a, b in zip(calls, calls[1:]) if b == name}
        assert len(before) >= 3, (name, before)
