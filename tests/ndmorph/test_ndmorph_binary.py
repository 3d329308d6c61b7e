"""Binary morphology against scipy.ndimage (the oracle) and dask_image.ndmorph."""

from __future__ import annotations

import dask.array as da
import dask_image.ndmorph as dim
import numpy as np
import pytest
import scipy.ndimage as ndi

import stencilpipe.ndmorph as ndm

FUNCTIONS = ("binary_erosion", "binary_dilation", "binary_opening", "binary_closing")
RNG = np.random.default_rng(5)
IMAGE = RNG.random((9, 11)) < 0.65
VOLUME = RNG.random((5, 6, 7)) < 0.7
MASK = RNG.random(IMAGE.shape) < 0.6
#: Asymmetric, even-sized, without its centre: every way the origin arithmetic can go wrong.
HOOK = np.array([[1, 1, 0], [0, 0, 1]], bool)
CASES = [
    {},
    {"iterations": 2},
    {"iterations": 0},  # until nothing changes
    {"structure": HOOK, "origin": (0, 1), "border_value": 1},
    {"structure": np.ones((2, 3)), "iterations": 3, "mask": MASK},
    {"structure": ndi.generate_binary_structure(2, 2), "origin": -1, "iterations": -1},
]
CHUNKS = [(3, 4), (9, 2), ((2, 7), (5, 1, 5))]


def _call(name, image, kwargs):
    # dask-image's opening/closing put origin before mask; keywords keep both orders apart.
    return getattr(ndm, name)(image, **kwargs)


@pytest.mark.parametrize("name", FUNCTIONS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_numpy_and_dask_match_scipy(name, case):
    kwargs = CASES[case]
    expected = getattr(ndi, name)(IMAGE, **kwargs)
    got = _call(name, IMAGE, kwargs)
    assert isinstance(got, np.ndarray) and got.dtype == bool
    np.testing.assert_array_equal(got, expected)
    for chunks in CHUNKS:
        lazy = _call(name, da.from_array(IMAGE, chunks=chunks), kwargs)
        assert isinstance(lazy, da.Array) and lazy.dtype == bool
        np.testing.assert_array_equal(lazy.compute(), expected, err_msg=f"chunks={chunks}")


@pytest.mark.parametrize("name", FUNCTIONS)
def test_dask_image_gives_the_same_on_the_same_chunks(name):
    image = da.from_array(IMAGE.astype(np.uint8) * 7, chunks=(4, 5))
    kwargs = {"structure": HOOK, "iterations": 2, "mask": MASK, "border_value": 1}
    expected = getattr(dim, name)(image, **kwargs).compute()
    np.testing.assert_array_equal(_call(name, image, kwargs).compute(), expected)


def test_three_dimensions_axes_and_a_lazy_mask():
    mask = RNG.random(VOLUME.shape) < 0.8
    for name in FUNCTIONS:
        expected = getattr(ndi, name)(VOLUME, iterations=2, mask=mask)
        lazy = da.from_array(VOLUME, chunks=(2, 3, 4))
        got = getattr(ndm, name)(lazy, iterations=2, mask=da.from_array(mask, chunks=3))
        np.testing.assert_array_equal(got.compute(), expected, err_msg=name)
        expected = getattr(ndi, name)(VOLUME, structure=HOOK, axes=(0, 2))
        got = getattr(ndm, name)(VOLUME, structure=HOOK, axes=(0, 2))
        np.testing.assert_array_equal(got, expected, err_msg=name)


def test_until_nothing_changes_on_dask_runs_to_the_fixed_point():
    """A line eroded from one end needs as many rounds as it is long: more than one overlap."""
    line = np.ones((3, 40), bool)
    structure = np.array([[0, 1, 1]], bool)
    expected = ndi.binary_erosion(line, structure, iterations=-1)
    assert not expected.any()
    got = ndm.binary_erosion(da.from_array(line, chunks=(3, 5)), structure, iterations=-1)
    np.testing.assert_array_equal(got.compute(), expected)


def test_an_empty_structure_and_an_output_array():
    empty = np.zeros((3, 3), bool)
    for name in ("binary_erosion", "binary_dilation"):
        np.testing.assert_array_equal(
            getattr(ndm, name)(IMAGE, empty), getattr(ndi, name)(IMAGE, empty)
        )
    out = np.zeros(IMAGE.shape, np.int16)
    assert ndm.binary_dilation(IMAGE, output=out) is out
    np.testing.assert_array_equal(out, ndi.binary_dilation(IMAGE, output=np.zeros_like(out)))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"iterations": 1.5}, TypeError),
        ({"border_value": 0.5}, TypeError),
        ({"structure": np.ones((3, 3, 3))}, RuntimeError),
        ({"structure": np.ones((0, 3))}, RuntimeError),
        ({"mask": np.ones((2, 2))}, RuntimeError),
        ({"origin": 2}, ValueError),
    ],
)
def test_bad_arguments_raise_what_scipy_or_dask_image_raises(kwargs, error):
    with pytest.raises(error):
        ndm.binary_erosion(IMAGE, **kwargs)
    with pytest.raises(TypeError, match="Complex"):
        ndm.binary_dilation(IMAGE.astype(complex))
