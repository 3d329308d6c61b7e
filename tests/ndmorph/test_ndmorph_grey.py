"""Grey morphology against scipy.ndimage (the oracle): flat and non-flat elements, dtypes, Dask."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi

import stencilpipe.ndmorph as ndm

FUNCTIONS = ("grey_erosion", "grey_dilation", "grey_opening", "grey_closing")
RNG = np.random.default_rng(11)
#: Values near both ends of uint8, so that a structure's offsets wrap as scipy's C code wraps.
IMAGE = RNG.integers(0, 256, (7, 9)).astype(np.uint8)
STRUCTURE = np.array([[0, 40, -3], [100, 5, 2]])
CASES = [
    {"size": 3},
    {"size": (2, 3), "origin": (0, -1), "mode": ("wrap", "nearest")},
    {"footprint": [[1, 0, 1], [0, 1, 1]], "mode": "mirror"},
    {"structure": STRUCTURE},
    {"structure": STRUCTURE, "mode": "constant", "cval": -1},
    {"structure": STRUCTURE, "footprint": [[1, 0, 1], [1, 1, 0]], "origin": (-1, 1)},
]


def _as(dtype):
    if np.dtype(dtype).kind == "u":
        return IMAGE.astype(dtype)
    return (IMAGE.astype(np.int64) - 128).astype(dtype)


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_numpy_and_dask_match_scipy(name, case):
    kwargs = CASES[case]
    for dtype in ("uint8", "int16", "float32", "float64"):
        x = _as(dtype)
        expected = getattr(ndi, name)(x, **kwargs)
        got = getattr(ndm, name)(x, **kwargs)
        assert isinstance(got, np.ndarray) and got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected, err_msg=dtype)
    lazy = getattr(ndm, name)(da.from_array(x, chunks=(3, 4)), **kwargs)
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), expected)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "uint32", "int64", "uint64"])
def test_a_structure_on_every_integer_dtype(dtype):
    """The first offset is added in double, the others in the input's type (scipy's C)."""
    x = _as(dtype)
    for name in ("grey_erosion", "grey_dilation"):
        kwargs = {"structure": STRUCTURE * 3, "output": np.float64}
        np.testing.assert_array_equal(
            getattr(ndm, name)(x, **kwargs), getattr(ndi, name)(x, **kwargs), err_msg=name
        )


def test_three_dimensions_axes_and_output():
    volume = RNG.integers(0, 1000, (4, 5, 6)).astype(np.uint16)
    for name in FUNCTIONS:
        for kwargs in ({"size": (1, 3, 2)}, {"structure": STRUCTURE, "axes": (0, 2)}):
            out = np.empty(volume.shape, np.int32)
            assert getattr(ndm, name)(volume, output=out, **kwargs) is out
            np.testing.assert_array_equal(
                out, getattr(ndi, name)(volume, output=np.int32, **kwargs)
            )


def test_bad_arguments_raise_as_scipy_raises():
    with pytest.raises(ValueError, match="size, footprint, or structure"):
        ndm.grey_erosion(IMAGE)
    for name in ("grey_erosion", "grey_dilation"):  # scipy's dilation: an IndexError
        with pytest.raises(RuntimeError, match="incorrect shape|must match"):
            getattr(ndm, name)(IMAGE, structure=np.ones(3))
    with pytest.raises(ValueError, match="All-zero"):
        ndm.grey_erosion(IMAGE, footprint=np.zeros((3, 3)))
    with pytest.warns(UserWarning, match="ignoring size"):
        ndm.grey_opening(IMAGE, size=3, footprint=np.ones((2, 2)))
