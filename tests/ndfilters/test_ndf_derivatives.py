"""Gaussian filters and derivatives, sobel, prewitt, laplace against scipy.ndimage."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import ALIASES, DTYPES, MODES, assert_dask_same, assert_same, sample

import stencilpipe.ndfilters as ndf


def check(name, x, *args, rtol=1e-6, scipy_name=None, **kwargs):
    ours = getattr(ndf, name)(x, *args, **kwargs)
    theirs = getattr(ndi, scipy_name or name)(x, *args, **kwargs)
    assert_same(ours, theirs, rtol=rtol)


def tolerance(dtype) -> float:
    return 1e-5 if np.dtype(dtype) == np.float32 else 1e-6


@pytest.mark.parametrize("mode", MODES + ALIASES)
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_every_filter_every_mode(mode, dtype):
    x = sample(dtype)
    rtol = tolerance(dtype)
    kwargs = {"mode": mode, "cval": 2.5 if dtype == "float32" else 3}
    check("gaussian_filter", x, 1.0, rtol=rtol, **kwargs)
    check("gaussian_laplace", x, (0.8, 1.2), rtol=rtol, **kwargs)
    check("gaussian_gradient_magnitude", x, 1.0, rtol=rtol, **kwargs)
    check("sobel", x, rtol=rtol, **kwargs)
    check("prewitt", x, 0, rtol=rtol, **kwargs)
    check("laplace", x, rtol=rtol, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES + ("int8", "int64", "uint64"))
@pytest.mark.parametrize("ndim", [2, 3])
def test_every_dtype_and_ndim(dtype, ndim):
    """Integer outputs: every pass truncated and wrapped into the dtype, as scipy does."""
    x = sample(dtype, ndim)
    rtol = tolerance(dtype)
    check("gaussian_filter", x, 0.7, rtol=rtol)
    check("sobel", x, 1, rtol=rtol)
    check("laplace", x, rtol=rtol)
    check("gaussian_gradient_magnitude", x, 0.7, rtol=rtol)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "uint16", "int16"])
def test_sobel_prewitt_laplace_of_small_integers_in_one_pass_equal_scipys(dtype, monkeypatch):
    """sobel/prewitt/laplace of 8/16-bit frames and volumes run as one correlation where
    that equals scipy's passes stored in the output dtype (wrapped, or exact), and as
    scipy's passes where it would not (constant mode, uint32/uint64 outputs, mixed modes):
    every output dtype, mode and axis, tiny arrays included, against scipy itself."""
    from stencilpipe.ndfilters import _derivatives

    one_pass = []
    real = _derivatives._correlate_nd
    monkeypatch.setattr(
        _derivatives, "_correlate_nd", lambda *a: one_pass.append(a[-1]) or real(*a)
    )
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    outputs = [None, "uint8", "int8", "int16", "int32", "uint32", "int64", "uint64", "float32"]
    modes = ["reflect", "mirror", "nearest", "wrap", "grid-mirror", "constant"]
    for shape in [(1, 1), (2, 7), (7, 1), (41, 37), (2, 1, 3), (9, 8, 7)]:
        x = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
        for output in outputs:
            for mode in modes + [("wrap", "nearest", "wrap")[: x.ndim]]:
                for name, axis in [("sobel", 0), ("sobel", -1), ("prewitt", 1), ("laplace", 0)]:
                    one_pass.clear()
                    args = (x,) if name == "laplace" else (x, axis)
                    ours = getattr(ndf, name)(*args, mode=mode, cval=7, output=output)
                    theirs = getattr(ndi, name)(*args, mode=mode, cval=7, output=output)
                    assert ours.dtype == theirs.dtype
                    np.testing.assert_array_equal(ours, theirs, err_msg=f"{name} {mode}")
                    expected = mode in modes[:-1] and output not in ("uint32", "uint64")
                    assert one_pass == ([name] if expected else [])


def test_gaussian_orders_radius_truncate_and_axes():
    x = sample("float64", 3)
    check("gaussian_filter", x, (1.0, 0.5, 2.0), order=(0, 1, 2))
    check("gaussian_filter", x, 1.5, truncate=2.0)
    check("gaussian_filter", x, 1.0, radius=(1, 2, 3), mode=("wrap", "nearest", "mirror"))
    check("gaussian_filter", x, (1.0, 2.0), axes=(0, 2), order=(1, 0))
    check("gaussian_laplace", x, 1.0, axes=(1, 2))
    check("gaussian_gradient_magnitude", x, (1.0, 0.0, 1.0))
    check("laplace", x, axes=(0,), mode="wrap")


@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_gaussian_filter1d_orders_along_each_axis(order):
    x = sample("float32", 3)
    for axis in (0, 1, 2):
        check("gaussian_filter1d", x, 1.3, axis=axis, order=order, rtol=1e-5, mode="reflect")


def test_sigma_zero_and_outputs():
    x = sample("int32")
    check("gaussian_filter", x, 0)
    check("gaussian_filter", x, 0, output=np.float32)
    check("gaussian_filter", x * 1.0, 1.2, output=np.uint8)
    check("sobel", sample("float64") * 9, output=np.int16)
    check("gaussian_laplace", sample("uint8"), 1.0, output=np.float64)
    check("gaussian_gradient_magnitude", sample("uint16"), 1.0, output=np.int8)


def test_gaussian_is_dask_images_alias():
    x = sample("float64")
    assert_same(ndf.gaussian(x, 1.5, mode="wrap"), ndi.gaussian_filter(x, 1.5, mode="wrap"))


def test_float16_is_computed_in_float32():
    x = sample("float32").astype(np.float16)
    result = ndf.gaussian_filter(x, 1.0)
    assert result.dtype == np.float16
    expected = ndi.gaussian_filter(x.astype(np.float32), 1.0).astype(np.float16)
    np.testing.assert_array_equal(result, expected)


def test_bad_arguments():
    x = sample("uint8")
    with pytest.raises(RuntimeError, match="sequence argument"):
        ndf.gaussian_filter(x, (1.0, 2.0, 3.0))
    with pytest.raises(ValueError, match="Radius"):
        ndf.gaussian_filter(x, 1.0, radius=-1)
    with pytest.raises(np.exceptions.AxisError):
        ndf.sobel(x, axis=2)


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
def test_dask_any_chunking(mode):
    for ndim in (2, 3):
        x = sample("float32", ndim)
        for name, args in [
            ("gaussian_filter", (1.0,)),
            ("sobel", ()),
            ("gaussian_gradient_magnitude", (0.8,)),
            ("laplace", ()),
        ]:
            function = getattr(ndf, name)
            expected = function(x, *args, mode=mode)
            assert_dask_same(
                lambda a, function=function, args=args: function(a, *args, mode=mode), x, expected
            )
