"""Built-in filters against scipy.ndimage's filters of the same name."""

import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from oracle import MODES

RNG = np.random.default_rng(7)
FLOAT = RNG.standard_normal((2, 23, 31))
UINT8 = RNG.integers(0, 256, (2, 23, 31), dtype=np.uint8)
VOLUME = RNG.standard_normal((9, 10, 11))


def per_frame(scipy_filter, stack, **kwargs):
    return np.stack([scipy_filter(frame, **kwargs) for frame in stack])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [3, 4, (2, 5)])
def test_extrema_and_median_are_exact(mode, size):
    for ours, theirs in [
        (sp.library.minimum, ndi.minimum_filter),
        (sp.library.maximum, ndi.maximum_filter),
        (sp.library.median, ndi.median_filter),
    ]:
        got = ours(size, boundary=mode)(UINT8)
        want = per_frame(theirs, UINT8, size=size, mode=mode)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_float_mean_sobel_laplace(mode):
    cases = [
        (sp.library.mean(3), per_frame(ndi.uniform_filter, FLOAT, size=3, mode=mode)),
        (sp.library.mean((2, 5)), per_frame(ndi.uniform_filter, FLOAT, size=(2, 5), mode=mode)),
        (sp.library.sobel(0), per_frame(ndi.sobel, FLOAT, axis=0, mode=mode)),
        (sp.library.sobel(axis=-1), per_frame(ndi.sobel, FLOAT, axis=-1, mode=mode)),
        (sp.library.laplace(), per_frame(ndi.laplace, FLOAT, mode=mode)),
    ]
    for stencil, want in cases:
        # Same sums in another order: equal to double rounding, not always bit for bit.
        np.testing.assert_allclose(stencil(FLOAT, boundary=mode), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_integer_valued_floats_are_bit_exact(mode):
    x = UINT8.astype(np.float32)
    for stencil, want in [
        (sp.library.sobel(1), per_frame(ndi.sobel, x, axis=1, mode=mode)),
        (sp.library.laplace(), per_frame(ndi.laplace, x, mode=mode)),
        (sp.library.maximum(3), per_frame(ndi.maximum_filter, x, size=3, mode=mode)),
    ]:
        np.testing.assert_array_equal(stencil(x, boundary=mode), want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sigma", [0.8, 1.5, (1.0, 2.0)])
def test_gaussian_to_1e6_relative(mode, sigma):
    got = sp.library.gaussian(sigma, boundary=mode)(FLOAT.astype(np.float32))
    want = per_frame(ndi.gaussian_filter, FLOAT, sigma=sigma, mode=mode)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_gaussian_truncate_sets_the_radius():
    assert sp.library.gaussian(1.0).halo == ((4, 4), (4, 4))
    assert sp.library.gaussian(1.0, truncate=2.0).halo == ((2, 2), (2, 2))


def test_integer_mean_rounds_to_nearest():
    got = sp.library.mean(3)(UINT8)
    want = np.rint(per_frame(ndi.uniform_filter, UINT8.astype(np.float64), size=3))
    np.testing.assert_array_equal(got, want.astype(np.uint8))


def test_integer_sobel_saturates():
    got = sp.library.sobel(0)(UINT8)
    want = per_frame(ndi.sobel, UINT8.astype(np.int64), axis=0)
    np.testing.assert_array_equal(got, np.clip(want, 0, 255).astype(np.uint8))


def test_three_dimensional_filters():
    np.testing.assert_allclose(
        sp.library.gaussian(1.0, ndim=3)(VOLUME),
        ndi.gaussian_filter(VOLUME, 1.0),
        rtol=1e-6,
        atol=1e-9,
    )
    np.testing.assert_array_equal(
        sp.library.median(3, ndim=3)(VOLUME), ndi.median_filter(VOLUME, 3)
    )
    np.testing.assert_allclose(sp.library.laplace(ndim=3)(VOLUME), ndi.laplace(VOLUME), atol=1e-12)


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="sigma must be positive"):
        sp.library.gaussian(0)
    with pytest.raises(ValueError, match="size"):
        sp.library.mean(0)
    with pytest.raises(ValueError, match="axis=2"):
        sp.library.sobel(2)


@pytest.mark.parametrize("count", [3, 5, 9, 25, 49, 81, 2, 4, 16, 64])
def test_a_mean_multiplies_by_the_reciprocal_only_where_rounding_cannot_tell(count):
    """library._divided_by: for every sum of 16-bit values, rint(sum * (1/count)) equals
    rint(sum / count) whenever a multiplication is generated."""
    from stencilpipe.library import _divided_by

    sums = np.arange(65535 * count + 1, dtype=np.float64)
    assert "*" in _divided_by(count)
    np.testing.assert_array_equal(np.rint(sums * (1 / count)), np.rint(sums / count))
    assert "/" in _divided_by(6) and "/" in _divided_by(10)


@pytest.mark.parametrize("count", [3, 9, 25, 49, 63, 81, 121, 4, 64])
def test_float32_means_round_like_float64_for_the_dtypes_that_get_them(count):
    """library._exact_in_float32: for every sum of ``count`` values of each dtype it
    allows, float32 arithmetic rounds to the same integer as float64."""
    from stencilpipe.library import _exact_in_float32

    allowed = _exact_in_float32(count)
    assert np.dtype(np.uint8) in allowed and (np.dtype(np.uint16) in allowed) == (count < 64)
    for dtype in allowed:
        info = np.iinfo(dtype)
        sums = np.arange(info.min * count, info.max * count + 1, dtype=np.int64)
        exact = np.rint(sums / count)
        narrow = np.rint(sums.astype(np.float32) * np.float32(1 / count))
        np.testing.assert_array_equal(narrow, exact)


def test_the_int8_mean_computes_in_float32_and_equals_the_float64_kernel():
    x = RNG.integers(-128, 128, (3, 37, 29), dtype=np.int8)
    mean = sp.library.mean(3)
    (narrow, *_), (wide, *_) = (
        mean.strip_passes(x.dtype, x.dtype, "reflect", 0),
        mean.strip_passes(np.dtype(np.float64), np.dtype(np.float64), "reflect", 0),
    )
    assert narrow.out_dtype == np.float32 and wide.out_dtype == np.float64
    full = mean.with_options()
    full.passes = None
    np.testing.assert_array_equal(mean(x), full(x))
