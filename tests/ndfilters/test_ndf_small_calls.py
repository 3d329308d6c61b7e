"""Small calls run loops compiled once per dtype; big calls the kernels written out per weights.

Both must give scipy's values, and the same doubles as each other (each adds a point's
terms in scipy's order), so a result does not depend on the size of the call or of a
Dask array's chunks. ``stencil.SMALL_CALL`` is set to pick each path on small arrays.
"""

from __future__ import annotations

import importlib

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import MODES, sample

import stencilpipe.ndfilters as ndf
from stencilpipe.ndfilters import _kernels
from stencils.asked import kernels_asked

#: The module, not the ``stencil`` decorator that ``stencilpipe.stencils`` exports.
stencil_module = importlib.import_module("stencilpipe.stencils.stencil")
PATHS = {"small": 1 << 62, "written out": 0}

#: (name, call) of the filters whose CPU passes depend on the call's size.
CALLS = [
    ("symmetric", lambda x, **kw: ndf.correlate1d(x, [1.0, 2.5, 1.0], axis=0, **kw)),
    ("antisymmetric", lambda x, **kw: ndf.correlate1d(x, [-1.5, 0.0, 1.5], axis=-1, **kw)),
    ("general, origin", lambda x, **kw: ndf.correlate1d(x, [0.5, -1, 2, 0.25], 1, origin=1, **kw)),
    ("gaussian order 2", lambda x, **kw: ndf.gaussian_filter(x, 1.3, order=2, **kw)),
    ("sobel", lambda x, **kw: ndf.sobel(x, **kw)),
    ("correlate", lambda x, **kw: ndf.correlate(x, np.arange(9.0).reshape(3, 3) / 7 - 0.5, **kw)),
    ("convolve, origin", lambda x, **kw: ndf.convolve(x, np.ones((2, 3)) / 5, origin=-1, **kw)),
    ("maximum of a cross", lambda x, **kw: ndf.maximum_filter(x, footprint=CROSS, **kw)),
    ("rank of a box", lambda x, **kw: ndf.rank_filter(x, 2, size=3, **kw)),
    ("generic np.max", lambda x, **kw: ndf.generic_filter(x, np.max, footprint=CROSS, **kw)),
    ("generic, arguments", lambda x, **kw: ndf.generic_filter(x, scaled_sum, **ARGS, **kw)),
]
CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], bool)
#: Five values: NumPy's sum adds them in order, as Numba's does (it pairs from eight).
ARGS = {"footprint": CROSS, "extra_arguments": (0.75,)}


def scaled_sum(values, scale):
    return values.sum() * scale - values[0]


SCIPY = {
    "symmetric": lambda x, **kw: ndi.correlate1d(x, [1.0, 2.5, 1.0], axis=0, **kw),
    "antisymmetric": lambda x, **kw: ndi.correlate1d(x, [-1.5, 0.0, 1.5], axis=-1, **kw),
    "general, origin": lambda x, **kw: ndi.correlate1d(x, [0.5, -1, 2, 0.25], 1, origin=1, **kw),
    "gaussian order 2": lambda x, **kw: ndi.gaussian_filter(x, 1.3, order=2, **kw),
    "sobel": lambda x, **kw: ndi.sobel(x, **kw),
    "correlate": lambda x, **kw: ndi.correlate(x, np.arange(9.0).reshape(3, 3) / 7 - 0.5, **kw),
    "convolve, origin": lambda x, **kw: ndi.convolve(x, np.ones((2, 3)) / 5, origin=-1, **kw),
    "maximum of a cross": lambda x, **kw: ndi.maximum_filter(x, footprint=CROSS, **kw),
    "rank of a box": lambda x, **kw: ndi.rank_filter(x, 2, size=3, **kw),
    "generic np.max": lambda x, **kw: ndi.generic_filter(x, np.max, footprint=CROSS, **kw),
    "generic, arguments": lambda x, **kw: ndi.generic_filter(x, scaled_sum, **ARGS, **kw),
}


@pytest.fixture(params=list(PATHS))
def path(request, monkeypatch):
    monkeypatch.setattr(stencil_module, "SMALL_CALL", PATHS[request.param])
    if request.param == "small":  # even where the kernel written out is compiled already
        monkeypatch.setattr(stencil_module.Stencil, "_at_hand", lambda *args: False)
    return request.param


#: Every dtype on the new path; two on the path of kernels written out (each weights and
#: dtype compiles one: its other dtypes are the older tests' own).
PATH_DTYPES = [("small", d) for d in ("uint8", "int16", "uint16", "int32", "float32", "float64")]
PATH_DTYPES += [("written out", "uint16"), ("written out", "float64")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("path", "dtype"), PATH_DTYPES, indirect=["path"])
@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_either_path_gives_scipys_values(path, name, call, dtype, mode):
    x = sample(dtype)
    for cval in [0, 3, 2.5] if mode == "constant" else [0]:
        expected = SCIPY[name](x, mode=mode, cval=cval)
        np.testing.assert_array_equal(call(x, mode=mode, cval=cval), expected)


@pytest.mark.parametrize("shape", [(1,), (2, 1), (1, 1, 1), (3, 1, 5), (4, 6, 5)])
def test_small_frames_and_volumes(path, shape):
    x = np.random.default_rng(1).integers(0, 1000, shape).astype(np.uint16)
    ones = np.ones((3,) * len(shape))
    weights = np.arange(ones.size, dtype=np.float64).reshape(ones.shape) / 10 - 1
    for mode in MODES:
        got = ndf.correlate(x, weights, mode=mode, cval=5)
        np.testing.assert_array_equal(got, ndi.correlate(x, weights, mode=mode, cval=5))
        got = ndf.gaussian_filter(x, 0.8, mode=mode, cval=5)
        np.testing.assert_array_equal(got, ndi.gaussian_filter(x, 0.8, mode=mode, cval=5))


def test_four_axes_keep_the_kernel_written_out(path):
    """The window loops take up to 3 axes: a 4-D correlation runs its kernel written out
    on small calls too, with scipy's values."""
    x = sample("float32", 3).reshape(5, 6, 7, 1)
    weights = np.arange(24.0).reshape(2, 3, 2, 2) / 24
    terms = tuple(
        (tuple(i - n // 2 for i, n in zip(index, weights.shape)), float(w))
        for index, w in np.ndenumerate(weights)
    )
    made = _kernels.correlate_kernel(terms, np.dtype(np.float32))
    with kernels_asked(made) as asked:
        got = ndf.correlate(x, weights, mode="wrap")
    assert asked  # on either path
    np.testing.assert_allclose(got, ndi.correlate(x, weights, mode="wrap"), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_both_paths_add_the_same_doubles(monkeypatch, dtype):
    """Floats with every rounding in play: the two paths agree bit for bit, and so does a
    chunked Dask array whose chunks are small calls while the whole array is a big one."""
    x = (np.random.default_rng(2).standard_normal((40, 50)) * 1e3).astype(dtype)
    weights = np.random.default_rng(3).standard_normal((3, 4))
    calls = [
        lambda a: ndf.gaussian_filter(a, 1.7, order=(0, 1), mode="mirror"),
        lambda a: ndf.correlate(a, weights, mode="reflect"),
        lambda a: ndf.correlate1d(a, weights[0], axis=0, mode="nearest"),
    ]
    for call in calls:
        monkeypatch.setattr(stencil_module, "SMALL_CALL", 0)
        written_out = call(x)
        chunked = call(da.from_array(x, chunks=(7, 11)))
        monkeypatch.setattr(stencil_module, "SMALL_CALL", 1 << 62)
        monkeypatch.setattr(stencil_module.Stencil, "_at_hand", lambda *args: False)
        small = call(x)
        assert written_out.tobytes() == small.tobytes()
        # The chunks (7x11 and their halos) are small calls; the whole array (40x50) is not.
        monkeypatch.setattr(stencil_module, "SMALL_CALL", 1000)
        assert chunked.compute(scheduler="sync").tobytes() == written_out.tobytes()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """An empty kernel cache: no kernel written out was compiled on this machine before."""
    monkeypatch.setenv("STENCILPIPE_CACHE_DIR", str(tmp_path))


def test_a_small_call_never_asks_for_the_kernel_written_out(monkeypatch, empty_cache):
    """Weights not seen before, on a small array: no per-weights kernel is compiled."""
    monkeypatch.setattr(stencil_module, "SMALL_CALL", 1 << 62)
    x = sample("uint16", 3)
    weights = (0.125, 0.25, 0.3125, 0.25, 0.0625)
    made = _kernels.correlate1d_kernel(weights, 0, np.dtype(np.uint16), True)
    with kernels_asked(made) as asked:
        got = ndf.correlate1d(x, weights, axis=1)
    assert asked == []
    np.testing.assert_array_equal(got, ndi.correlate1d(x, weights, axis=1))
    monkeypatch.setattr(stencil_module, "SMALL_CALL", 0)
    with kernels_asked(made) as asked:
        ndf.correlate1d(x, weights, axis=1)
    assert asked  # the big call's path: the kernel written out


def test_a_stencil_moves_on_to_its_kernel_written_out_after_much_small_work(
    monkeypatch, empty_cache
):
    monkeypatch.setattr(stencil_module, "SMALL_WORK", 100)
    x = sample("uint16")  # 63 elements
    weights = (0.375, 0.5, 0.125)
    made = _kernels.correlate1d_kernel(weights, 0, np.dtype(np.uint16), False)
    made._compiled.small_work = 0  # another test may have run these weights
    expected = ndi.correlate1d(x, weights)
    with kernels_asked(made) as asked:
        for _ in range(2):
            np.testing.assert_array_equal(ndf.correlate1d(x, weights), expected)
        assert asked == []  # 126 elements written in small calls
        np.testing.assert_array_equal(ndf.correlate1d(x, weights), expected)
    assert asked


def test_a_kernel_compiled_already_serves_small_calls_at_once(monkeypatch, empty_cache):
    """Once a big call has compiled the kernel written out, small calls run it too."""
    monkeypatch.setattr(stencil_module, "SMALL_CALL", 1 << 62)
    x = sample("int16")
    weights = (0.25, -0.5, 0.75, 1.0)
    made = _kernels.correlate1d_kernel(weights, 0, np.dtype(np.int16), False)
    expected = ndi.correlate1d(x, weights)
    assert not made._compiled.modules  # these weights are this test's own
    with kernels_asked(made) as asked:
        np.testing.assert_array_equal(ndf.correlate1d(x, weights), expected)
        assert asked == []
        monkeypatch.setattr(stencil_module, "SMALL_CALL", 0)  # a big call compiles it
        np.testing.assert_array_equal(ndf.correlate1d(x, weights), expected)
        monkeypatch.setattr(stencil_module, "SMALL_CALL", 1 << 62)
        del asked[:]
        np.testing.assert_array_equal(ndf.correlate1d(x, weights), expected)
    assert asked


SCRIPT = """
import importlib, sys
import numpy as np
import stencilpipe.ndfilters as ndf
stencil_module = importlib.import_module("stencilpipe.stencils.stencil")
stencil_module.SMALL_CALL = 0 if sys.argv[1] == "big" else 1 << 62
x = np.arange(63, dtype=np.uint8).reshape(7, 9)
ndf.correlate1d(x, [0.5, 0.25, 0.125, 0.0625, 0.0625], axis=0)
from stencilpipe.ndfilters import _kernels
made = _kernels.correlate1d_kernel((0.5, 0.25, 0.125, 0.0625, 0.0625), 0, np.dtype(np.uint8), True)
print(len(made._compiled.modules))
"""


def test_a_kernel_in_the_disk_cache_serves_small_calls_at_once(tmp_path):
    """A later process's small call loads the kernel an earlier one compiled."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "STENCILPIPE_CACHE_DIR": str(tmp_path)}

    def modules_loaded(size: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, size], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        return int(done.stdout.split()[-1])

    assert modules_loaded("small") == 0  # empty cache: the loop, no kernel compiled
    assert modules_loaded("big") == 1  # compiles the kernel written out (disk-cached)
    assert modules_loaded("small") == 1  # loads it from the disk cache
