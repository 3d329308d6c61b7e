"""Many threads (and processes) building and compiling stencils at once, on an empty cache.

CPython 3.11 breaks when two threads convert ``ast`` trees at once (python/cpython
gh-106905: ``SystemError: AST constructor recursion depth mismatch``, seen when the
garbage collector runs a GIL-releasing finalizer mid-parse). Here every ``ast.parse``
hands the GIL over on entry, as such a finalizer does, and records whether another
thread was parsing at the same time: never, since compilation is serialised. Each
specialisation is generated, loaded and compiled by Numba exactly once, and every result
matches scipy.ndimage or a plain loop. Fresh processes running fused chains on Dask's
threaded scheduler fill one empty cache at once; a later process loads every kernel from it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from oracle import kernel_by_loop

stencil_module = importlib.import_module("stencilpipe.stencils.stencil")

THREADS = 8


def box(x):
    return (x[-1, 0] + x[0, -1] + x[0, 0] + x[0, 1] + x[1, 0]) // 5


@pytest.fixture
def parses_alone(monkeypatch):
    """Patch ``ast.parse`` to hand the GIL over on entry; yields the list of parses that
    found another thread parsing."""
    real_parse = ast.parse
    guard = threading.Lock()
    parsing: set[int] = set()
    overlaps: list[int] = []

    def parse(*args, **kwargs):
        me = threading.get_ident()
        with guard:
            if parsing - {me}:
                overlaps.append(me)
            parsing.add(me)
        try:
            time.sleep(0.001)
            return real_parse(*args, **kwargs)
        finally:
            with guard:
                parsing.discard(me)

    monkeypatch.setattr(ast, "parse", parse)
    return overlaps


@pytest.fixture
def loads(monkeypatch, tmp_path):
    """An empty kernel cache, and none of the generated modules or stencils this process
    already made (earlier tests in it would have compiled some: a filter made again shares
    their code); yields the names of the generated modules executed, one per execution."""
    monkeypatch.setenv("STENCILPIPE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(stencil_module, "_generated", {})
    monkeypatch.setattr(stencil_module, "_unpickled", {})
    for name in [name for name in sys.modules if name.startswith("_stencilpipe_gen_")]:
        monkeypatch.delitem(sys.modules, name)
    loaded: list[str] = []
    real_module_from_spec = importlib.util.module_from_spec

    def module_from_spec(spec):
        if spec.name.startswith("_stencilpipe_gen_"):
            loaded.append(spec.name)
        return real_module_from_spec(spec)

    monkeypatch.setattr(importlib.util, "module_from_spec", module_from_spec)
    return loaded


# Builders of stages, each built anew in every thread, and their oracles on float64 frames.
STAGES = {
    "median": (lambda: sp.library.median((1, 3)), lambda f: ndi.median_filter(f, (1, 3))),
    "sobel": (lambda: sp.library.sobel(1), lambda f: ndi.sobel(f, 1)),
    "max": (lambda: sp.library.maximum((3, 1)), lambda f: ndi.maximum_filter(f, (3, 1))),
    "laplace": (
        lambda: sp.library.laplace(boundary="nearest"),
        lambda f: ndi.laplace(f, mode="nearest"),
    ),
    "box": (
        lambda: sp.stencil(box, boundary="wrap"),
        lambda f: kernel_by_loop(box, [f], halo=((1, 1), (1, 1)), mode="wrap"),
    ),
}


def _at_depth(depth, task):
    """Run ``task`` ``depth`` frames deeper: threads parse at different stack depths, which
    is what makes CPython's shared ast recursion counter disagree."""
    return _at_depth(depth - 1, task) if depth else task()


def test_threads_compile_each_specialisation_once_and_never_parse_at_once(parses_alone, loads):
    frames = np.random.default_rng(3).integers(0, 100, (2, 9, 11)).astype(np.float64)
    names = [name for name in STAGES for _ in range(2)]  # each stage asked for twice at once
    shared = {name: build() for name, (build, _) in STAGES.items()}
    start = threading.Barrier(len(names))
    loads.clear()
    parses_alone.clear()

    def work(k):
        name = names[k]
        start.wait()
        mine = STAGES[name][0]()  # analysis in this thread
        return mine(frames), shared[name](frames)  # and the shared one, compiled once

    with ThreadPoolExecutor(len(names)) as pool:
        results = list(pool.map(lambda k: _at_depth(3 * k, lambda: work(k)), range(len(names))))

    assert parses_alone == []
    for name, (mine, theirs) in zip(names, results):
        want = np.stack([STAGES[name][1](frame) for frame in frames])
        np.testing.assert_allclose(mine, want, rtol=1e-12, err_msg=name)
        np.testing.assert_array_equal(theirs, mine, err_msg=name)
    # One module per specialisation, although two threads built and called each stage and
    # a third (shared) copy was called from both.
    assert sorted(loads) == sorted(set(loads)) and len(loads) == len(STAGES)
    for name, stage in shared.items():
        kernel = stage.compiled((frames.dtype,), frames.dtype, stage.boundary)
        stats = kernel.apply.stats
        assert len(kernel.apply.signatures) == 1, name
        assert sum(stats.cache_misses.values()) == 1, name  # Numba compiled it once


CHAINS_SCRIPT = textwrap.dedent(
    """
    import sys
    import dask, dask.array as da, numpy as np, stencilpipe as sp
    filters = [sp.library.maximum(3), sp.library.minimum(3), sp.library.laplace()]
    chains = [sp.chain(filters[a], filters[b]) for a in range(3) for b in range(3)][:8]
    x = np.random.default_rng(7).integers(0, 100, (8, 12, 10)).astype(np.float64)
    lazy = da.from_array(x, chunks=(1, -1, -1))
    with dask.config.set(scheduler="threads", num_workers=8):
        results = dask.compute(*[chain(lazy) for chain in chains])
    np.save(sys.argv[1], np.stack(results))
    stats = [k.apply.stats for f in filters for k in f._compiled.kernels.values()]
    print(sum(sum(s.cache_misses.values()) for s in stats), sum(sum(s.cache_hits.values()) for s in stats))
    """
)
FILTERS_2D = [lambda f: ndi.maximum_filter(f, 3), lambda f: ndi.minimum_filter(f, 3), ndi.laplace]


@pytest.mark.slow
def test_fresh_processes_fill_one_empty_cache_at_once_and_a_later_one_loads_it(tmp_path):
    env = {"STENCILPIPE_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}

    def start(k):
        command = [sys.executable, "-c", CHAINS_SCRIPT, str(tmp_path / f"run{k}.npy")]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)

    filling = [start(k) for k in range(2)]  # at once, on the empty cache
    counts = [process.communicate(timeout=120)[0].split() for process in filling]
    assert [process.returncode for process in filling] == [0, 0]
    # Each compiled what the other had not yet saved, and loaded the rest (compiles, loads).
    assert [int(compiles) + int(loads) for compiles, loads in counts] == [3, 3]
    later = start(2)
    assert later.communicate(timeout=120)[0].split() == ["0", "3"]  # all three from disk

    x = np.random.default_rng(7).integers(0, 100, (8, 12, 10)).astype(np.float64)
    pairs = [(a, b) for a in range(3) for b in range(3)][:8]
    want = np.stack([[FILTERS_2D[b](FILTERS_2D[a](frame)) for frame in x] for a, b in pairs])
    for k in range(3):
        np.testing.assert_allclose(np.load(tmp_path / f"run{k}.npy"), want, rtol=1e-12)


SIGNATURE_SCRIPT = textwrap.dedent(
    """
    import pathlib, sys, time
    import numpy as np, stencilpipe as sp
    from numba.core import caching

    folder, variant = pathlib.Path(sys.argv[1]), sys.argv[2]
    real_load_index = caching.IndexDataCacheFile._load_index

    def load_index_then_meet_the_other(self):
        # Widens the window between Numba reading an index and writing it back: the first
        # save of `apply` waits (at most 3 s) until the other process reaches the same point.
        index = real_load_index(self)
        first_save = "apply" in self._index_name and not (folder / variant).exists()
        if variant != "both" and first_save and sys._getframe(1).f_code.co_name == "save":
            (folder / variant).touch()
            deadline = time.monotonic() + 3
            while len(list(folder.glob("[ab]"))) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        return index

    caching.IndexDataCacheFile._load_index = load_index_then_meet_the_other
    f = sp.library.sobel(0)
    x = np.random.default_rng(1).random((2, 16, 16))
    inputs = {"a": [x], "b": [x[:, :, ::2]], "both": [x, x[:, :, ::2]]}[variant]
    results = [f(v) for v in inputs]  # a C-contiguous and a strided input: two signatures
    np.save(folder / f"{variant}.npy", np.concatenate(results, axis=-1))
    stats = f.compiled((x.dtype,), x.dtype, "reflect").apply.stats
    print(sum(stats.cache_misses.values()), sum(stats.cache_hits.values()))
    """
)


def test_two_processes_saving_two_signatures_of_one_kernel_at_once_keep_both(tmp_path):
    env = {"STENCILPIPE_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}

    def run(variant):
        command = [sys.executable, "-c", SIGNATURE_SCRIPT, str(tmp_path), variant]
        return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)

    savers = [run("a"), run("b")]
    assert [process.communicate(timeout=120)[0].split() for process in savers] == [["1", "0"]] * 2
    # A later process finds both signatures in the cache, each with its own machine code.
    assert run("both").communicate(timeout=120)[0].split() == ["0", "2"]
    x = np.random.default_rng(1).random((2, 16, 16))
    want = np.concatenate([[ndi.sobel(frame, 0) for frame in v] for v in (x, x[:, :, ::2])], -1)
    np.testing.assert_allclose(np.load(tmp_path / "both.npy"), want, rtol=1e-12)
