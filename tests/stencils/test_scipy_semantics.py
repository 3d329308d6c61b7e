"""Where the docs promise scipy.ndimage's semantics: constant padding of separable passes,
saturation of 64-bit integer results, NaN as cval; and the refusals around them."""

import dask
import dask.array as da
import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from oracle import kernel_by_loop
from stencilpipe.errors import BoundaryError

RNG = np.random.default_rng(17)
FLOAT = RNG.standard_normal((2, 11, 13))
VOLUME = RNG.standard_normal((7, 8, 9))
UINT8 = RNG.integers(0, 256, (2, 11, 13), dtype=np.uint8)


def per_frame(scipy_filter, stack, **kwargs):
    return np.stack([scipy_filter(frame, **kwargs) for frame in stack])


def run_everywhere(stencil, x, **options):
    """The stencil on NumPy, on a Dask array whose chunks cut the frames, and fused in a chain."""
    numpy = stencil(x, **options)
    with dask.config.set(scheduler="sync"):
        chunked = stencil(da.from_array(x, chunks=(1, 4, 5)), **options).compute()
    fused = sp.chain(sp.library.maximum(1), stencil.with_options(**options))(x)
    return {"numpy": numpy, "dask": chunked, "fused": fused}


@pytest.mark.parametrize("cval", [2.5, -1.0, 0.0])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sobel_pads_each_pass_with_cval_as_scipy_does(axis, cval):
    want = per_frame(ndi.sobel, FLOAT, axis=axis, mode="constant", cval=cval)
    for where, got in run_everywhere(
        sp.library.sobel(axis), FLOAT, boundary="constant", cval=cval
    ).items():
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=where)


def test_sobel_of_volumes_and_integers_under_constant():
    for axis in range(3):
        got = sp.library.sobel(axis, ndim=3)(VOLUME, boundary="constant", cval=-1.5)
        want = ndi.sobel(VOLUME, axis, mode="constant", cval=-1.5)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    # Integers: scipy's sums in int64 (no wrap there), then stencilpipe's saturation to uint8.
    want = per_frame(ndi.sobel, UINT8.astype(np.int64), axis=1, mode="constant", cval=7)
    got = sp.library.sobel(1)(UINT8, boundary="constant", cval=7)
    np.testing.assert_array_equal(got, np.clip(want, 0, 255).astype(np.uint8))


@pytest.mark.parametrize("cval", [2.5, -3.0])
def test_mean_and_gaussian_under_constant_match_scipy(cval):
    cases = [
        (
            sp.library.mean(3),
            per_frame(ndi.uniform_filter, FLOAT, size=3, mode="constant", cval=cval),
        ),
        (
            sp.library.mean((2, 5)),
            per_frame(ndi.uniform_filter, FLOAT, size=(2, 5), mode="constant", cval=cval),
        ),
        (
            sp.library.gaussian(1.0),
            per_frame(ndi.gaussian_filter, FLOAT, sigma=1.0, mode="constant", cval=cval),
        ),
        (sp.library.laplace(), per_frame(ndi.laplace, FLOAT, mode="constant", cval=cval)),
    ]
    for stencil, want in cases:
        for where, got in run_everywhere(stencil, FLOAT, boundary="constant", cval=cval).items():
            np.testing.assert_allclose(
                got, want, rtol=1e-12, atol=1e-12, err_msg=f"{stencil.name} {where}"
            )


def big_integers(dtype, shape, seed):
    """Values across the whole range of a 64-bit dtype, multiples of 2**40: every sum the
    filters below make is exact in float64, so the Python-int oracle is the exact answer."""
    rng = np.random.default_rng(seed)
    low = -(2**23) if np.dtype(dtype).kind == "i" else 0
    return (rng.integers(low, 2**23, shape) * 2**40).astype(dtype)


def exact_sobel(frame, axis, cval):
    """scipy's 2-D sobel in Python ints: the derivative along ``axis``, then the smoothing
    along the other axis, each pass padding its input with cval."""

    def padded(values, along):  # np.pad would turn the Python ints into int64
        edge = list(values.shape)
        edge[along] = 1
        fill = np.full(edge, cval, dtype=object)
        return np.concatenate([fill, values, fill], axis=along)

    def taps(values, along, weights):
        n = values.shape[along]
        return sum(w * np.take(values, range(k, n - 2 + k), along) for k, w in enumerate(weights))

    derivative = taps(padded(np.array(frame.tolist(), dtype=object), axis), axis, (-1, 0, 1))
    return taps(padded(derivative, 1 - axis), 1 - axis, (1, 2, 1))


def saturated(values, dtype):
    info = np.iinfo(dtype)
    return np.clip(values, int(info.min), int(info.max)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
@pytest.mark.parametrize("mode", ["reflect", "constant"])
def test_64_bit_integers_saturate(dtype, mode):
    x = big_integers(dtype, (2, 9, 10), seed=1)
    cval = 2**62 if mode == "constant" else 0
    for axis, stencil in [
        (0, sp.library.sobel(0)),
        (1, sp.library.sobel(1)),
        (None, sp.library.laplace()),
        (None, sp.library.mean(3)),
        (None, sp.library.maximum(3)),
        (None, sp.library.median(3)),
    ]:
        got = stencil(x, boundary=mode, cval=cval)
        assert got.dtype == dtype
        if stencil.name == "sobel" and mode == "constant":
            want = np.stack([exact_sobel(frame, axis, cval) for frame in x])
            np.testing.assert_array_equal(got, saturated(want, dtype))
            continue
        want = kernel_by_loop(
            stencil.func, [x], halo=stencil.halo, mode=mode, cval=cval, out_dtype=dtype
        )
        np.testing.assert_array_equal(got, want, err_msg=stencil.name)
    info = np.iinfo(dtype)
    edges = sp.library.sobel(0)(x)
    assert edges.max() == info.max and edges.min() == info.min  # both ends are reached


def test_float_results_saturate_at_the_exact_64_bit_bounds():
    mean = sp.library.mean(1)
    values = np.array([[-1e30, -(2.0**63), -5.0, 2.0**53, 2.0**63 - 1024, 2.0**63, 1e30, 2.0**64]])
    int64 = mean.with_options(dtype=np.int64)(values)
    np.testing.assert_array_equal(
        int64, [[-(2**63), -(2**63), -5, 2**53, 2**63 - 1024, 2**63 - 1, 2**63 - 1, 2**63 - 1]]
    )
    uint64 = mean.with_options(dtype=np.uint64)(values)
    np.testing.assert_array_equal(
        uint64, np.array([[0, 0, 0, 2**53, 2**63 - 1024, 2**63, 2**64 - 1, 2**64 - 1]], np.uint64)
    )
    # Integer results pass between 64-bit types without going through float.
    top = np.full((1, 3), 2**64 - 1, np.uint64)
    np.testing.assert_array_equal(
        sp.library.maximum(1, dtype=np.int64)(top), np.full((1, 3), 2**63 - 1)
    )
    exact = np.full((1, 3), 2**62 + 1, np.int64)
    np.testing.assert_array_equal(
        sp.library.maximum(1, dtype=np.uint64)(exact), exact.astype(np.uint64)
    )
    np.testing.assert_array_equal(sp.library.maximum(1, dtype=np.uint64)(-exact), np.zeros((1, 3)))


def test_nan_fills_float_inputs_and_is_refused_for_integers():
    got = sp.library.mean(3)(FLOAT, boundary="constant", cval=np.nan)
    # (uniform_filter's running sums would spread the NaN along whole lines: correlate does not.)
    weights = np.full((3, 3), 1 / 9)
    want = per_frame(ndi.correlate, FLOAT, weights=weights, mode="constant", cval=np.nan)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)  # NaN where scipy has NaN
    assert np.isnan(got[:, 0]).all() and not np.isnan(got[:, 1:-1, 1:-1]).any()
    with pytest.raises(
        BoundaryError, match=r"mean: cval=nan needs a float input, but the input dtype is uint8"
    ):
        sp.library.mean(3)(UINT8, boundary="constant", cval=float("nan"))
    with pytest.raises(BoundaryError, match=r"cval must be a single number, got 'a'"):
        sp.library.mean(3)(UINT8, boundary="constant", cval="a")


def test_a_float_sobel_axis_is_a_type_error_naming_the_parameter():
    with pytest.raises(TypeError, match=r"sobel: axis must be an int, got 0\.0"):
        sp.library.sobel(0.0)
    assert sp.library.sobel(np.int64(1)).halo == ((1, 1), (1, 1))
