"""``out=`` may alias the input, wholly or in part: the result is that of the call without ``out=``.

The GPU path is checked in cuda_simulator_cases.py; Dask refuses ``out=`` (results are lazy).
"""

import dask.array as da
import numpy as np
import pytest

import stencilpipe as sp

RNG = np.random.default_rng(5)

FILTERS = {
    "mean": sp.library.mean(3),
    "gaussian": sp.library.gaussian(1.0),
    "sobel0": sp.library.sobel(0),
    "sobel1": sp.library.sobel(1),
    "laplace": sp.library.laplace(),
    "minimum": sp.library.minimum(3),
    "maximum": sp.library.maximum(3),
    "median": sp.library.median(3),
}


def buffer(dtype):
    """A (3, 14, 17) stack: big enough for views shifted by a row, a column or a frame."""
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal((3, 14, 17)).astype(dtype)
    return RNG.integers(0, 256, (3, 14, 17)).astype(dtype)


# (input, out) as views of one buffer: the same memory, shifted rows, columns, frames, reversed.
OVERLAPS = {
    "same": lambda b: (b, b),
    "rows": lambda b: (b[:, :-1], b[:, 1:]),
    "rows_back": lambda b: (b[:, 1:], b[:, :-1]),
    "columns": lambda b: (b[:, :, :-2], b[:, :, 2:]),
    "frames": lambda b: (b[:-1], b[1:]),
    "reversed": lambda b: (b, b[:, ::-1]),
    "transposed": lambda b: (b[:, :14, :14], b[:, :14, :14].transpose(0, 2, 1)),
}


def check(function, overlap, dtype, **options):
    memory = buffer(dtype)
    x, out = OVERLAPS[overlap](memory)
    want = function(x.copy(), **options)
    got = function(x, out=out, **options)
    assert got is out
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("overlap", OVERLAPS)
@pytest.mark.parametrize("name", FILTERS)
def test_every_library_filter(name, overlap):
    check(FILTERS[name], overlap, np.float64)
    check(FILTERS[name], overlap, np.uint8, boundary="constant", cval=3)


@pytest.mark.parametrize("overlap", OVERLAPS)
@pytest.mark.parametrize("fuse", [True, False])
def test_chains_fused_and_not(overlap, fuse):
    stages = (FILTERS["gaussian"], FILTERS["median"], FILTERS["sobel0"])
    check(sp.chain(*stages, fuse=fuse), overlap, np.float32)
    check(sp.chain(FILTERS["mean"], FILTERS["maximum"], fuse=fuse), overlap, np.uint8)


def test_an_out_that_only_shares_the_buffer_is_written_directly():
    memory = buffer(np.float64)
    x, out = memory[:, ::2], memory[:, 1::2]  # interleaved rows: no element in common
    want = FILTERS["mean"](x.copy())
    assert FILTERS["mean"](x, out=out) is out
    np.testing.assert_array_equal(out, want)


def test_chain_out_dtype_and_dask_refusal():
    x = buffer(np.uint8)
    out = np.empty(x.shape, np.float32)
    both = sp.chain(FILTERS["mean"], FILTERS["sobel0"])
    assert both(x, out=out) is out
    np.testing.assert_array_equal(
        out, FILTERS["sobel0"](FILTERS["mean"](x), out=np.empty_like(out))
    )
    with pytest.raises(TypeError, match="out= is not supported for dask arrays"):
        both(da.from_array(x), out=out)
