"""generic_filter1d against scipy.ndimage.generic_filter1d: every mode, origin, axis, dtype, Dask."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import MODES, assert_same, sample

import stencilpipe.ndfilters as ndf
from stencilpipe.errors import KernelError

WEIGHTS = np.array([1.1, 2.2, 3.3])


def weighted(line, out, weights, total):
    """scipy's own test function: a correlation written out over the extended line."""
    weights = weights / total
    for i in range(line.shape[0] - 2):
        out[i] = line[i] * weights[0] + line[i + 1] * weights[1] + line[i + 2] * weights[2]


def running_max(line, out):
    """Reads the whole window; the output depends on every value of it."""
    for i in range(out.shape[0]):
        out[i] = line[i : i + 4].max() - line[i]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_numpy_and_dask_match_scipy(mode, dtype):
    x = sample(dtype, 3)
    extra = {"extra_arguments": (WEIGHTS,), "extra_keywords": {"total": WEIGHTS.sum()}}
    for function, size, origin, more in ((weighted, 3, -1, extra), (running_max, 4, 1, {})):
        for axis in (0, -1):
            kwargs = dict(axis=axis, mode=mode, cval=2.5, origin=origin, **more)
            expected = ndi.generic_filter1d(x, function, size, **kwargs)
            assert_same(ndf.generic_filter1d(x, function, size, **kwargs), expected)
            lazy = ndf.generic_filter1d(da.from_array(x, chunks=2), function, size, **kwargs)
            assert isinstance(lazy, da.Array)
            assert_same(lazy.compute(), expected)


def test_output_and_errors_as_scipy():
    x = sample("int16")
    expected = ndi.generic_filter1d(x, running_max, 4, output=np.float32)
    assert_same(ndf.generic_filter1d(x, running_max, 4, output=np.float32), expected)
    with pytest.raises(ValueError, match="invalid origin"):
        ndf.generic_filter1d(x, running_max, 3, origin=2)
    with pytest.raises(RuntimeError, match="invalid filter size"):
        ndf.generic_filter1d(x, running_max, 0)


def test_a_function_numba_cannot_compile_is_one_clear_error():
    def uses_a_dict(line, out):
        out[:] = {"a": line}["a"][: out.shape[0]].tolist()

    with pytest.raises(
        KernelError, match="generic_filter1d: Numba cannot compile function 'uses_a_dict'"
    ):
        ndf.generic_filter1d(np.ones((3, 4)), uses_a_dict, 3)
