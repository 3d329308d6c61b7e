"""Big windows across float rows that share cache sets run a ring of rows, not the kernel
written out: scipy's values either way, and the same doubles as the kernel written out.

``stencil.SMALL_CALL`` is set to 0 so that the small arrays here are big calls (the path
that picks between the two), and the rows' widths decide: 1024 float32 or 512 float64
elements are 4 KiB, so their rows share cache sets; 1000 elements do not.
"""

from __future__ import annotations

import importlib

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import MODES

import stencilpipe.ndfilters as ndf
from stencilpipe.ndfilters import _kernels
from stencils.asked import kernels_asked

#: The module, not the ``stencil`` decorator that ``stencilpipe.stencils`` exports.
stencil_module = importlib.import_module("stencilpipe.stencils.stencil")

#: (weights, origin): symmetric, antisymmetric, general with an origin, even length.
rng = np.random.default_rng(7)
_w = rng.standard_normal(17)
WEIGHTS = [
    (_w + _w[::-1], 0),
    (_w - _w[::-1], 0),
    (_w, 3),
    (rng.standard_normal(14), -2),
]


@pytest.fixture
def big_calls(monkeypatch):
    monkeypatch.setattr(stencil_module, "SMALL_CALL", 0)


def test_rows_share_sets_for_float_and_16_bit_rows_a_multiple_of_4_kib_apart():
    share = stencil_module.rows_share_sets
    assert share((1, 40, 1024), np.dtype(np.float32))
    assert share((3, 40, 512), np.dtype(np.float64))
    assert share((1, 40, 2048), np.dtype(np.float32))
    assert not share((1, 40, 1000), np.dtype(np.float32))
    assert not share((1, 40, 1536), np.dtype(np.float32))  # 6 KiB
    assert share((1, 40, 2048), np.dtype(np.uint16))
    assert share((1, 40, 4096), np.dtype(np.int16))
    assert not share((1, 40, 4096), np.dtype(np.uint8))  # 8-bit rows: no faster
    assert not share((1, 40, 1024), np.dtype(np.int32))
    assert not share((40, 1024), np.dtype(np.float32))  # a line: no rows


@pytest.mark.parametrize("dtype", ["float32", "float64", "uint16", "int16"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("weights, origin", WEIGHTS, ids=["sym", "antisym", "origin", "even"])
def test_a_big_window_across_shared_rows_runs_the_ring(big_calls, dtype, mode, weights, origin):
    """Against scipy bit for bit, and no kernel written out asked for."""
    width = 4096 // np.dtype(dtype).itemsize  # rows 4 KiB apart
    x = (np.random.default_rng(1).standard_normal((2, 23, width)) * 1e3).astype(dtype)
    made = _kernels.correlate1d_kernel(
        tuple(map(float, weights)), origin, np.dtype(dtype), across=True
    )
    with kernels_asked(made) as asked:
        got = ndf.correlate1d(x, weights, axis=1, mode=mode, cval=2.5, origin=origin)
    assert asked == []
    want = ndi.correlate1d(x, weights, axis=1, mode=mode, cval=2.5, origin=origin)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("width", [1000, 1024])
def test_the_ring_adds_the_kernels_doubles(big_calls, width):
    """The ring of rows and the kernel written out (rows that share no sets) give the same
    float64 values, and so does a Dask array whose chunks are of either kind."""
    x = np.random.default_rng(2).standard_normal((30, width)) * 1e3
    weights = np.random.default_rng(3).standard_normal(15)
    made = _kernels.correlate1d_kernel(tuple(map(float, weights)), 0, np.dtype(np.float64), True)
    with kernels_asked(made) as asked:
        got = ndf.correlate1d(x[None], weights, axis=1)[0]
    assert bool(asked) == (width == 1000)
    np.testing.assert_array_equal(got, ndi.correlate1d(x, weights, axis=0))
    chunked = ndf.correlate1d(da.from_array(x, chunks=(7, 512)), weights, axis=0)
    np.testing.assert_array_equal(chunked.compute(), got)


def test_strips_of_wide_rows_and_rows_split_between_calls(big_calls):
    """Rows wider than one strip of the ring (256 KiB of a 17-row window: 1927 float64),
    and a run of rows that starts and stops inside a line, as threads split them."""
    x = np.random.default_rng(4).standard_normal((3, 19, 4096))
    weights = WEIGHTS[2][0]
    for mode in MODES:
        got = ndf.correlate1d(x, weights, axis=1, mode=mode, origin=3)
        np.testing.assert_array_equal(got, ndi.correlate1d(x, weights, axis=1, mode=mode, origin=3))
    made = _kernels.correlate1d_kernel(tuple(map(float, weights)), 3, np.dtype(np.float64), True)
    (ring,) = made.passes["shared_sets"]
    rows = ring.compiled((x.dtype,), x.dtype, "mirror")
    out = np.zeros_like(x)
    for start, stop in [(0, 5), (5, 31), (31, 57)]:  # (lines, rows) flattened: 3 x 19
        rows.run(x, out, 0.0, start=start, stop=stop)
    np.testing.assert_array_equal(out, ndi.correlate1d(x, weights, axis=1, mode="mirror", origin=3))
