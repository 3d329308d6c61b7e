"""Shared inputs and comparisons for stencilpipe.ndfilters against scipy.ndimage (the oracle)."""

from __future__ import annotations

import dask.array as da
import numpy as np

#: scipy's filter modes, the grid-* aliases included.
MODES = ("reflect", "constant", "nearest", "mirror", "wrap")
ALIASES = ("grid-mirror", "grid-constant", "grid-wrap")
DTYPES = ("uint8", "uint16", "int32", "float32", "float64")
SHAPES = {2: (7, 9), 3: (5, 6, 7)}
#: Chunkings of the 2-D and 3-D shapes: cut everywhere, chunks smaller than halos, uneven.
CHUNKS = {
    2: [(3, 4), (1, 9), (7, 2), ((2, 5), (4, 1, 4))],
    3: [(2, 3, 4), (5, 1, 7), ((1, 4), (6,), (3, 2, 2))],
}


def sample(dtype, ndim: int = 2, seed: int = 0) -> np.ndarray:
    """A small array spanning ``dtype``'s range (ints: negatives too)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed + 17 * ndim)
    shape = SHAPES[ndim]
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 50).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -(2**40)), min(int(info.max), 2**40)
    return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)


def assert_same(actual, expected, rtol: float = 1e-6) -> None:
    """Same type family, dtype and shape; exact for integers and bools, ``rtol`` for floats."""
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected)
    else:
        scale = max(float(np.nanmax(np.abs(expected))), 1.0) if expected.size else 1.0
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


def assert_dask_same(function, array: np.ndarray, expected: np.ndarray, **kwargs) -> None:
    """``function`` on Dask versions of ``array`` (each chunking) is lazy and gives ``expected``."""
    for chunks in CHUNKS[array.ndim]:
        lazy = function(da.from_array(array, chunks=chunks), **kwargs)
        assert isinstance(lazy, da.Array), type(lazy)
        assert lazy.dtype == expected.dtype
        np.testing.assert_array_equal(lazy.compute(), expected, err_msg=f"chunks={chunks}")
