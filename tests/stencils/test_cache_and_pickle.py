"""Compiled code is reused: in-process per specialisation, across processes from disk; stencils pickle."""

import importlib
import pickle
import subprocess
import sys
import textwrap

import cloudpickle
import numpy as np
import pytest
from kernels import smooth
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe import ndfilters


def test_a_specialisation_is_compiled_once_per_dtype_and_mode():
    x = np.arange(30, dtype=np.uint8).reshape(5, 6)
    smooth(x)
    first = smooth.compiled((x.dtype,), x.dtype, "reflect")
    smooth(x + 1)
    assert smooth.compiled((x.dtype,), x.dtype, "reflect") is first
    assert smooth.compiled((np.dtype(np.float32),), np.dtype(np.float32), "reflect") is not first


def test_a_filter_made_again_runs_the_code_compiled_for_the_first():
    """``sp.library.gaussian(1)(frame)`` in a loop makes the filter each time: it must not
    generate and load a module each time (15-50 ms a call)."""
    x = np.random.default_rng(0).random((9, 11))
    first, again = sp.library.gaussian(1.5), sp.library.gaussian(1.5, boundary="wrap")
    assert again._compiled is first._compiled
    assert sp.library.gaussian(2)._compiled is not first._compiled
    kernel = first.compiled((x.dtype,), x.dtype, "wrap")
    assert again.compiled((x.dtype,), x.dtype, "wrap") is kernel
    expected = ndi.gaussian_filter(x, 1.5, mode="wrap", truncate=4.0)
    np.testing.assert_allclose(again(x), expected, rtol=1e-12)


def test_a_function_defined_again_under_its_name_is_compiled_again():
    """generic_filter's kernels hold the user's function: one defined again (as in a
    notebook cell run again) is another function, never the old one's kernel."""
    x = np.random.default_rng(1).random((8, 9))

    def spread(values):
        return values.max()

    first = ndfilters.generic_filter(x, spread, size=3)

    def spread(values):  # noqa: F811 - the cell, run again with another body
        return values.min()

    np.testing.assert_array_equal(first, ndi.generic_filter(x, np.max, size=3))
    np.testing.assert_array_equal(
        ndfilters.generic_filter(x, spread, size=3), ndi.generic_filter(x, np.min, size=3)
    )


def test_a_fresh_process_loads_the_compiled_kernel_from_disk(tmp_path):
    script = textwrap.dedent(
        """
        import numpy as np, stencilpipe as sp
        f = sp.library.sobel(0)  # not separable: its one kernel runs
        x = np.ones((8, 8), np.uint16)
        f(x)
        stats = f.compiled((x.dtype,), x.dtype, "reflect").apply.stats
        print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
        """
    )
    env = {"STENCILPIPE_CACHE_DIR": str(tmp_path), "PATH": ""}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        for _ in range(2)
    ]
    first, second = (run.stdout.split() for run in runs)
    assert (first, second) == (["0", "1"], ["1", "0"])  # compiled, then loaded
    assert list(tmp_path.glob("kernels/*.py")) and list(tmp_path.glob("kernels/__pycache__/*.nbc"))


GENERIC_SCRIPT = """
import importlib, sys
import numpy as np
from scipy import ndimage as ndi
import stencilpipe.ndfilters as ndf

def spread(values):
    return values.max() - values.min()

function = {"np.std": np.std, "spread": spread}[sys.argv[1]]
stencil = importlib.import_module("stencilpipe.stencils.stencil")
if sys.argv[2] == "written out":
    stencil.SMALL_CALL = 0
x = np.random.default_rng(0).random((9, 10))
got = ndf.generic_filter(x, function, size=3)
assert np.allclose(got, ndi.generic_filter(x, function, size=3), rtol=1e-12)
if sys.argv[2] == "written out":
    made = stencil._generated.values()
    dispatchers = [k.apply for _, _, compiled in made for k in compiled.kernels.values()]
else:  # the small call's loop (a module of its own where it may be cached)
    loops = [m for n, m in sys.modules.items() if n.startswith("_stencilpipe_gen_generic_window")]
    dispatchers = [m.generic_window for m in loops]
stats = [d.stats for d in dispatchers]
print(sum(sum(s.cache_hits.values()) for s in stats), sum(sum(s.cache_misses.values()) for s in stats))
"""


@pytest.mark.parametrize(
    "function, path, loads",
    [
        ("np.std", "written out", ["1", "0"]),
        ("spread", "written out", ["0", "1"]),
        ("np.std", "small", ["1", "0"]),
    ],
    ids=["numpy", "user", "numpy, small call"],
)
def test_generic_filter_kernels_calling_numpy_are_cached_on_disk(tmp_path, function, path, loads):
    """A kernel calling one of NumPy's functions is loaded by the next process; one calling
    a user's function is compiled again (it may have changed), and gives its own values.
    The loop of small calls (``ndfilters._generic_window``) is cached as the kernel is."""
    env = {"STENCILPIPE_CACHE_DIR": str(tmp_path), "PATH": ""}
    runs = [
        subprocess.run(
            [sys.executable, "-c", GENERIC_SCRIPT, function, path],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        for _ in range(2)
    ]
    first, second = (run.stdout.split() for run in runs)
    assert (first, second) == (["0", "1"], loads)


def test_stencils_pickle_without_compiled_code_and_compute_the_same():
    x = np.random.default_rng(0).integers(0, 255, (12, 13), dtype=np.uint8)
    gaussian = sp.library.gaussian(1.0)
    bumped = smooth.with_options(boundary="wrap")
    stages = (gaussian, bumped)
    want = [stage(x) for stage in stages]  # compiled here
    copies = [pickle.loads(cloudpickle.dumps(s)) for s in stages]
    assert copies[0]._compiled is gaussian._compiled  # made again from its source: shared
    assert copies[1]._compiled is smooth._compiled  # smooth's own, found by name
    for copy, expected in zip(copies, want):
        np.testing.assert_array_equal(copy(x), expected)


def test_a_copy_shares_code_with_its_original_after_others_were_generated(monkeypatch):
    """A long-lived process (a worker, a test session) generates more filters than it keeps:
    a filter made again after its code was dropped, then pickled, must not unpickle as an
    older copy's code, so that the copy finds the original's compiled kernels."""
    stencil_module = importlib.import_module("stencilpipe.stencils.stencil")
    monkeypatch.setattr(stencil_module, "_GENERATED_KEPT", 3)
    pickle.loads(pickle.dumps(sp.library.gaussian(1.25)))
    for size in range(3, 12, 2):  # more sources than are kept: gaussian(1.25)'s is dropped
        sp.library.median(size)
    again = sp.library.gaussian(1.25)
    x = np.random.default_rng(2).integers(0, 255, (10, 11), dtype=np.uint8)
    want = again(x)
    copy = pickle.loads(pickle.dumps(again))
    assert copy._compiled is again._compiled
    np.testing.assert_array_equal(copy(x), want)


def test_precompile_compiles_without_running_and_reports_kernel_errors():
    @sp.stencil
    def inverse(x):
        return 255 // x[0, 0]  # would raise ZeroDivisionError if it ran on zeros

    assert inverse.precompile(np.uint8) == np.dtype(np.uint8)
    assert inverse.compiled((np.dtype(np.uint8),), np.dtype(np.uint8), "reflect").apply.signatures
    assert sp.library.sobel(0, dtype=np.float32).precompile(np.uint16) == np.dtype(np.float32)

    @sp.stencil
    def broken(x):
        return x[0, 0] + "a"

    with pytest.raises(sp.KernelError, match="'broken'"):
        broken.precompile(np.float32)


def test_a_process_unpickles_stencils_that_share_compiled_code():
    """Every Dask task unpickles its own copy of its stencils: the copies run the code the
    first one compiled, generated and loaded once per process, not once per task."""
    median, other = sp.library.median(5), sp.library.median(5, boundary="nearest")
    x = np.arange(2 * 9 * 11, dtype=np.uint8).reshape(2, 9, 11)
    data = pickle.dumps(sp.chain(median, sp.library.gaussian(1.0)))
    first = pickle.loads(data)
    first(x)
    again = pickle.loads(data)
    for copy, original in zip(again.stages, first.stages, strict=True):
        assert copy._compiled is original._compiled
    assert again.stages[0]._compiled.kernels, "the copy runs the code the first one compiled"
    np.testing.assert_array_equal(again(x), sp.chain(median, sp.library.gaussian(1.0))(x))
    assert pickle.loads(pickle.dumps(other)).boundary == "nearest"
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(other))(x), other(x))


def test_a_kernel_is_known_compiled_by_what_its_source_is_made_from(tmp_path, monkeypatch):
    """Whether a kernel is in the disk cache is read from a marker named by its kernel's
    code, constants and dtypes: made by running it, not by another constant's kernel."""
    monkeypatch.setenv("STENCILPIPE_CACHE_DIR", str(tmp_path))
    source = "def scaled(x):\n    return x[-1, 0] * SCALE + x[1, 0]\n"
    made = {
        scale: sp.Stencil.from_source("scaled", source, {"SCALE": scale}) for scale in (2, 3)
    }
    u8, f4 = np.dtype(np.uint8), np.dtype(np.float32)
    marker = made[2]._marker((u8,), f4)
    assert marker != made[3]._marker((u8,), f4) != made[2]._marker((f4,), f4)
    assert marker == sp.Stencil.from_source("scaled", source, {"SCALE": 2})._marker((u8,), f4)
    assert not marker.exists()
    x = np.arange(20, dtype=np.uint8).reshape(4, 5)
    got = made[2](x, out=np.empty(x.shape, f4))
    assert marker.exists()
    assert not made[3]._marker((u8,), f4).exists()
    padded = np.pad(x.astype(np.float64), 1, mode="symmetric")
    np.testing.assert_array_equal(got, padded[:-2, 1:-1] * 2 + padded[2:, 1:-1])
