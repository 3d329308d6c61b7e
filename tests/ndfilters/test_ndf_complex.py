"""Complex input and weights against scipy.ndimage: the real and imaginary parts filtered apart."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import assert_same

import stencilpipe.ndfilters as ndf

RNG = np.random.default_rng(4)
PLANE = RNG.standard_normal((7, 9)) + 1j * RNG.standard_normal((7, 9))
W1 = np.array([1, 2 + 1j, -0.5j])
W2 = np.array([[1, 0.5j], [2, -1 + 1j]])
CALLS = [
    ("correlate1d", (W1,), {"mode": "constant", "cval": 1 + 2j}),
    ("convolve1d", (W1,), {"axis": 0}),
    ("correlate1d", (W1.real,), {"mode": "wrap"}),
    ("correlate", (W2,), {}),
    ("convolve", (W2,), {"mode": "nearest", "origin": (0, -1)}),
    ("uniform_filter", (3,), {"mode": "constant", "cval": -1j}),
    ("uniform_filter1d", (4,), {}),
    ("gaussian_filter", (1.5,), {}),
    ("gaussian_filter1d", (1.0,), {"order": 1}),
    ("sobel", (), {}),
    ("prewitt", (), {"axis": 0}),
    ("laplace", (), {}),
    ("gaussian_laplace", (1.0,), {}),
    ("gaussian_gradient_magnitude", (1.0,), {}),
]


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("call", range(len(CALLS)))
def test_complex_input_numpy_and_dask(dtype, call):
    name, args, kwargs = CALLS[call]
    x = PLANE.astype(dtype)
    expected = getattr(ndi, name)(x, *args, **kwargs)
    rtol = 1e-5 if dtype == "complex64" else 1e-12
    assert_same(getattr(ndf, name)(x, *args, **kwargs), expected, rtol=rtol)
    lazy = getattr(ndf, name)(da.from_array(x, chunks=(3, 4)), *args, **kwargs)
    assert isinstance(lazy, da.Array) and lazy.dtype == expected.dtype
    assert_same(lazy.compute(), expected, rtol=rtol)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32", "float64"])
def test_complex_weights_on_real_input_and_output_dtypes(dtype):
    x = (PLANE.real * 20).astype(dtype)
    for name, weights in (("correlate", W2), ("convolve", W2), ("correlate1d", W1)):
        for output in (None, np.complex128):
            expected = getattr(ndi, name)(x, weights, output=output)
            assert_same(getattr(ndf, name)(x, weights, output=output), expected)
    out = np.zeros(x.shape, np.complex64)
    assert ndf.convolve1d(x, W1, output=out) is out
    assert_same(out, ndi.convolve1d(x, W1, output=np.zeros_like(out)))


def test_what_scipy_refuses_is_refused():
    with pytest.raises(ValueError, match="complex-valued cval"):
        ndf.correlate(PLANE.real, W2, mode="constant", cval=1j)
    with pytest.raises(RuntimeError, match="complex dtype"):
        ndf.correlate1d(PLANE, W1, output=np.zeros(PLANE.shape))
    with pytest.warns(UserWarning, match="promoting"):
        assert ndf.correlate(PLANE, W2, output=np.float32).dtype == np.complex64
    for name in ("median_filter", "minimum_filter", "generic_filter1d"):
        with pytest.raises(TypeError, match="Complex"):
            getattr(ndf, name)(PLANE, *((np.mean,) if name == "generic_filter1d" else ()), 3)
