"""Border points along the last axis computed on patches (stencils/codegen_cpu.py).

The points within a halo of either end of a row run the interior function on a small
copy of the values they read, folded once per call; every mode, lopsided halos, several
arrays with a scalar, frames narrower than the halo, 1-D to 3-D. Oracle: scipy.ndimage's
correlate of the same weights (integer values in float64: exact), and for a cval no
patch can hold (NaN) the folding path, against scipy too. The compiled strip loop of
stencils/fused.py is checked to run, and to give the Python loop's result.
"""

import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe import ndfilters
from stencilpipe.stencils import fused

MODES = ["reflect", "mirror", "nearest", "wrap", "constant"]
SHAPES_2D = [(1, 1), (1, 2), (2, 3), (3, 5), (6, 9)]


@sp.stencil
def lopsided(x):
    return x[0, -2] + 2 * x[0, 1] - 3 * x[-1, 0] + 5 * x[1, 1]


LOPSIDED = np.zeros((3, 5))
LOPSIDED[1, 0], LOPSIDED[1, 3], LOPSIDED[0, 2], LOPSIDED[2, 3] = 1, 2, -3, 5


@sp.stencil
def two_arrays(a, b, s):
    return a[0, -1] * s + b[0, 2] - a[1, 1]


@sp.stencil
def along_1d(x):
    return x[-1] + 4 * x[2]


@sp.stencil
def volume(x):
    return x[0, 0, -1] + 3 * x[1, 0, 1] - x[0, -1, 2]


@sp.stencil
def hypervolume(x):
    return x[0, 1, 0, -1] - 2 * x[-1, 0, 2, 0] + 3 * x[0, 0, -2, 1] + x[1, -1, 0, 0]


HYPERVOLUME = np.zeros((3, 3, 5, 3))
HYPERVOLUME[1, 2, 2, 0], HYPERVOLUME[0, 1, 4, 1] = 1, -2
HYPERVOLUME[1, 1, 0, 2], HYPERVOLUME[2, 0, 2, 1] = 3, 1


def correlate(x, weights, mode, cval):
    return ndi.correlate(x, weights, mode=mode, cval=cval)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", SHAPES_2D)
def test_lopsided_kernel_equals_scipy_in_every_mode_and_shape(mode, shape):
    x = np.random.default_rng(0).integers(-50, 50, shape).astype(np.float64)
    got = lopsided(x, boundary=mode, cval=7.0)
    np.testing.assert_array_equal(got, correlate(x, LOPSIDED, mode, 7.0))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (4, 7), (5, 40)])
def test_two_arrays_and_a_scalar(mode, shape):
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-9, 9, shape).astype(np.float64) for _ in range(2))
    wa = np.zeros((3, 5))
    wa[1, 1], wa[2, 3] = 3, -1
    wb = np.zeros((3, 5))
    wb[1, 4] = 1
    expected = correlate(a, wa, mode, 2.0) + correlate(b, wb, mode, 2.0)
    np.testing.assert_array_equal(two_arrays(a, b, 3.0, boundary=mode, cval=2.0), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 9])
def test_one_dimensional_frames(mode, n):
    x = np.random.default_rng(2).integers(0, 20, (3, n)).astype(np.float64)
    weights = np.array([0, 0, 1.0, 0, 0, 4, 0])  # offsets -3..3
    expected = np.stack([ndi.correlate1d(r, weights, mode=mode, cval=1.0) for r in x])
    np.testing.assert_array_equal(along_1d(x, boundary=mode, cval=1.0), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 4), (4, 5, 6)])
def test_volumes(mode, shape):
    x = np.random.default_rng(3).integers(-9, 9, shape).astype(np.float64)
    weights = np.zeros((3, 3, 5))
    weights[1, 1, 1], weights[2, 1, 3], weights[1, 0, 4] = 1, 3, -1
    np.testing.assert_array_equal(
        volume(x, boundary=mode, cval=4.0), correlate(x, weights, mode, 4.0)
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 4, 2), (3, 6, 5, 4)])
def test_four_dimensional_kernels_fold_along_every_middle_axis(mode, shape):
    """Rows outside along the middle axes (1 and 2) read a block of folded rows."""
    x = np.random.default_rng(8).integers(-9, 9, shape).astype(np.float64)
    got = hypervolume(x, boundary=mode, cval=-5.0)
    np.testing.assert_array_equal(got, correlate(x, HYPERVOLUME, mode, -5.0))


@pytest.mark.parametrize("cval", [3, 300, -1, 2.5])
@pytest.mark.parametrize("mode", MODES)
def test_integer_volumes_with_any_cval_equal_scipy(mode, cval):
    """uint8 volumes through the drop-in correlate, whose ``cval`` scipy reads as a float
    (300, -1 and 2.5 are no uint8 row)."""
    x = np.random.default_rng(9).integers(0, 256, (4, 5, 9)).astype(np.uint8)
    weights = np.zeros((3, 3, 5))
    weights[1, 1, 1], weights[2, 1, 3], weights[1, 0, 4] = 1, 3, -1
    got = ndfilters.correlate(x, weights, mode=mode, cval=cval)
    np.testing.assert_array_equal(got, ndi.correlate(x, weights, mode=mode, cval=cval))


def test_a_nan_cval_on_volumes_takes_the_folding_path():
    x = np.random.default_rng(10).integers(0, 9, (3, 4, 6)).astype(np.float32)
    weights = np.zeros((3, 3, 5))
    weights[1, 1, 1], weights[2, 1, 3], weights[1, 0, 4] = 1, 3, -1
    got = volume(x, boundary="constant", cval=np.nan)
    expected = correlate(x.astype(np.float64), weights, "constant", np.nan)
    np.testing.assert_array_equal(got, expected.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16])
@pytest.mark.parametrize("mode", MODES)
def test_integer_inputs_saturate_as_the_folding_path(dtype, mode):
    info = np.iinfo(dtype)
    x = np.random.default_rng(4).integers(info.min, info.max, (5, 11), endpoint=True)
    x = x.astype(dtype)
    wide = correlate(x.astype(np.float64), LOPSIDED, mode, 3.0)
    expected = np.clip(wide, info.min, info.max).astype(dtype)
    np.testing.assert_array_equal(lopsided(x, boundary=mode, cval=3), expected)


def test_a_nan_cval_takes_the_folding_path():
    x = np.random.default_rng(5).integers(0, 9, (4, 6)).astype(np.float32)
    got = lopsided(x, boundary="constant", cval=np.nan)
    expected = correlate(x.astype(np.float64), LOPSIDED, "constant", np.nan).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def test_the_library_median_and_mean_equal_scipy_at_the_borders():
    x = np.random.default_rng(6).integers(0, 256, (7, 33)).astype(np.uint8)
    for mode in MODES:
        median = sp.library.median(3, boundary=mode, cval=9)(x)
        np.testing.assert_array_equal(median, ndi.median_filter(x, 3, mode=mode, cval=9))
        mean = sp.library.mean(3, boundary=mode, cval=9)(x)
        exact = ndi.uniform_filter(x.astype(np.float64), 3, mode=mode, cval=9)
        np.testing.assert_array_equal(mean, np.rint(exact).astype(np.uint8))


def test_separable_passes_run_in_the_compiled_strip_loop(monkeypatch):
    """A library mean's passes are generated kernels: their strips run compiled, with the
    Python loop's result, on one frame and a stack, strips of a few rows."""
    monkeypatch.setattr(fused, "STRIP_BYTES", 1)
    monkeypatch.setattr(fused, "MIN_STRIP_ROWS", 3)
    stack = np.random.default_rng(7).integers(0, 256, (3, 20, 17)).astype(np.uint8)
    mean = sp.library.mean(5)
    passes = mean.strip_passes(np.dtype(np.uint8), np.dtype(np.uint8), "reflect", 0)
    assert fused._compiled_strips(passes, 3) is not None
    compiled = mean(stack)
    monkeypatch.setattr(fused, "_compiled_strips", lambda *args: None)
    np.testing.assert_array_equal(compiled, mean(stack))
    exact = ndi.uniform_filter(stack.astype(np.float64), (1, 5, 5))
    np.testing.assert_array_equal(compiled, np.rint(exact).astype(np.uint8))
