"""generic_filter (Numba-compiled user functions) and threshold_local against scipy/dask-image."""

from __future__ import annotations

import dask.array as da
import dask_image.ndfilters as dif
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import MODES, assert_dask_same, assert_same, sample

import stencilpipe.ndfilters as ndf
from stencilpipe import KernelError


def value_range(values):
    return values.max() - values.min()


def weighted(values, scale, shift=0.0):
    total = 0.0
    for k in range(values.size):
        total += values[k] * (k + 1)
    return total * scale + shift


@pytest.mark.parametrize("mode", MODES)
def test_python_function_every_mode(mode):
    x = sample("float64")
    expected = ndi.generic_filter(x, value_range, size=3, mode=mode, cval=0.5)
    assert_same(ndf.generic_filter(x, value_range, size=3, mode=mode, cval=0.5), expected)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "float32"])
def test_footprint_origin_extra_arguments_and_integer_store(dtype):
    x = sample(dtype)
    footprint = np.array([[1, 0, 1], [0, 1, 1]], bool)
    kwargs = {
        "footprint": footprint,
        "origin": (0, -1),
        "extra_arguments": (0.25,),
        "extra_keywords": {"shift": np.float64(-3.0)},  # a NumPy scalar, as scipy passes
    }
    expected = ndi.generic_filter(x, weighted, **kwargs)
    assert_same(ndf.generic_filter(x, weighted, **kwargs), expected)


def test_numpy_functions_and_3d():
    x = sample("float64", 3)
    assert_same(
        ndf.generic_filter(x, np.std, size=(2, 3, 2)), ndi.generic_filter(x, np.std, size=(2, 3, 2))
    )


def test_dask_chunked_like_numpy():
    x = sample("float32")
    expected = ndf.generic_filter(x, value_range, size=3, mode="wrap")
    assert_dask_same(lambda a: ndf.generic_filter(a, value_range, size=3, mode="wrap"), x, expected)


def test_function_numba_cannot_compile_is_one_clear_error():
    x = sample("float64")
    with pytest.raises(KernelError, match="Numba cannot compile function 'as_text'"):

        def as_text(values):
            return str(values)

        ndf.generic_filter(x, as_text, size=3)
    with pytest.raises(KernelError, match="Numba cannot compile"):  # raised before compute
        ndf.generic_filter(da.from_array(x, chunks=4), as_text, size=3)


@pytest.mark.parametrize("method", ["gaussian", "mean", "median", "generic"])
def test_threshold_local_matches_dask_image(method):
    x = sample("uint16")
    param = value_range if method == "generic" else None
    expected = dif.threshold_local(da.from_array(x), 5, method, 3, "nearest", param).compute()
    result = ndf.threshold_local(x, 5, method, 3, "nearest", param)
    assert_same(result, expected)
    lazy = ndf.threshold_local(da.from_array(x, chunks=(3, 4)), 5, method, 3, "nearest", param)
    assert_same(lazy.compute(), expected)


def test_one_kernel_per_output_dtype_serves_every_mode():
    """A kernel calling the user's function takes seconds to compile: the input is read as
    float64, padded with the mode, so one kernel per output dtype serves every mode (and
    every chunking); the values stay scipy's, ``cval`` a double outside the array."""
    from stencilpipe.ndfilters import _generic

    def spread(values):
        return values.max() - values.min() + 0.25

    _generic._cached_kernel.cache_clear()
    for dtype in ["uint8", "int16", "float32"]:
        x = sample(dtype)
        lazy = da.from_array(x, chunks=(5, 7))
        for mode in MODES:
            want = ndi.generic_filter(x, spread, size=(3, 4), mode=mode, cval=-1.5)
            assert_same(ndf.generic_filter(x, spread, size=(3, 4), mode=mode, cval=-1.5), want)
            got = ndf.generic_filter(lazy, spread, size=(3, 4), mode=mode, cval=-1.5)
            assert_same(got.compute(), want)
    assert _generic._cached_kernel.cache_info().currsize == 3
