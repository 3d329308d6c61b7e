"""The dtypes stencilpipe.ndfilters takes (issue 14): scipy's (bool, every integer, float32/64,
big-endian converted), float16 (which scipy refuses) computed in float32, and one clear
TypeError for the rest. scipy.ndimage is the oracle."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import assert_same, sample

import stencilpipe.ndfilters as ndf

CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], bool)
#: One call of each kind of filter: N-D weights, 1-D passes stored between passes (sobel,
#: gaussian), components combined (laplace, gradient magnitude), order statistics, generic.
CALLS = [
    ("correlate", (np.array([[1, 2], [0.5, -1]]),), {}),
    ("uniform_filter", (3,), {}),
    ("gaussian_filter", (1.2,), {}),
    ("sobel", (), {}),
    ("prewitt", (), {"axis": 0}),
    ("laplace", (), {}),
    ("gaussian_gradient_magnitude", (1.0,), {}),
    ("minimum_filter", (), {"footprint": CROSS}),
    ("median_filter", (3,), {}),
    ("percentile_filter", (30,), {"footprint": CROSS}),
    ("generic_filter", (np.mean, 3), {}),
]
INTEGERS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]


def _check(x):
    for name, args, kwargs in CALLS:
        with np.errstate(invalid="ignore"):
            expected = getattr(ndi, name)(x, *args, **kwargs)
        if expected.dtype.kind == "b":  # scipy's bool output holds its byte: nonzero is True
            expected = expected.view(np.uint8) != 0
        assert_same(getattr(ndf, name)(x, *args, **kwargs), expected)


@pytest.mark.parametrize("dtype", ["bool", *INTEGERS])
def test_bool_and_every_integer_dtype_as_scipy(dtype):
    """bool passes store scipy's byte (sobel of bool: -1 is 255, read back as 255)."""
    _check(sample(dtype))


def test_float16_is_computed_in_float32_and_returned_as_float16():
    x = sample("float16")
    for name, args, kwargs in CALLS:
        got = getattr(ndf, name)(x, *args, **kwargs)
        expected = getattr(ndi, name)(x.astype(np.float32), *args, **kwargs).astype(np.float16)
        assert_same(got, expected, rtol=1e-3)
    assert ndf.uniform_filter(x, 3, output=np.float16).dtype == np.float16


@pytest.mark.parametrize("dtype", [">i2", ">u4", ">f4", ">f8"])
def test_big_endian_input_is_converted(dtype):
    x = sample(dtype.replace(">", "<")).astype(dtype)
    _check(x)
    assert ndf.sobel(x).dtype.isnative


@pytest.mark.parametrize("dtype", ["U3", "O", "M8[s]", "m8[s]", "longdouble", "V4"])
def test_other_dtypes_raise_one_clear_type_error(dtype):
    x = np.zeros((4, 5), dtype)
    for name, args, kwargs in CALLS:
        with pytest.raises(TypeError, match=f"{name}: input dtype .* is not supported"):
            getattr(ndf, name)(x, *args, **kwargs)
    with pytest.raises(TypeError, match="output dtype"):
        ndf.uniform_filter(np.zeros((4, 5)), 3, output=np.dtype(dtype))
