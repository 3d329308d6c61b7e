"""2-D box minima and maxima in one pass, and multi-pass filters' kept intermediates, against
scipy.ndimage (exact)."""

from __future__ import annotations

import threading

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import ALIASES, DTYPES, MODES, assert_dask_same, assert_same, sample

import stencilpipe.ndfilters as ndf
from stencilpipe.ndfilters import _order

#: Boxes per point (up to 3x3), as one BoxExtremum pass (up to 31 rows), even sides, one
#: side longer than the 7x9 frame, and 32 rows (the line passes again).
BOXES = [(2, 2), (2, 3), (3, 3), (4, 5), (5, 3), (6, 6), (15, 15), (3, 12), (31, 4), (32, 4)]
ORIGINS = [-1, 0, 1, (1, -1), (0, 1)]


def pairs(name, x, **kwargs):
    """(ours, scipy's) of ``name`` for every box and valid origin."""
    for size in BOXES:
        for origin in ORIGINS:
            try:
                expected = getattr(ndi, name)(x, size, origin=origin, **kwargs)
            except ValueError:  # an origin that moves a 2-long side off its centre
                continue
            yield getattr(ndf, name)(x, size, origin=origin, **kwargs), expected


@pytest.mark.parametrize("mode", MODES + ALIASES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_boxes_every_mode_dtype_and_origin(mode, dtype):
    x = sample(dtype)
    for name in ("minimum_filter", "maximum_filter"):
        for cval in (7, -1.5):  # -1.5 is no integer: read as a double, by the line passes
            for ours, theirs in pairs(name, x, mode=mode, cval=cval):
                assert_same(ours, theirs)


@pytest.mark.parametrize("mode", MODES)
def test_last_two_axes_of_a_stack(mode):
    """A 3-D array filtered over its last two axes (size 1, ``axes=`` or a footprint)."""
    x = sample("uint16", 3)
    for name in ("minimum_filter", "maximum_filter"):
        ours, scipy = getattr(ndf, name), getattr(ndi, name)
        for size, origin in [((1, 5, 4), (0, 1, -1)), ((1, 2, 3), 0), ((1, 15, 3), 0)]:
            kwargs = {"mode": mode, "cval": 3, "origin": origin}
            assert_same(ours(x, size, **kwargs), scipy(x, size, **kwargs))
        box = np.ones((4, 6), bool)
        kwargs = {"mode": mode, "axes": (1, 2), "origin": (1, 0)}
        assert_same(ours(x, footprint=box, **kwargs), scipy(x, footprint=box, **kwargs))
        assert_same(ours(x, (5, 5), axes=(2, 1)), scipy(x, (5, 5), axes=(2, 1)))
        assert_same(ours(x, (3, 5, 5), mode=mode), scipy(x, (3, 5, 5), mode=mode))


def test_one_pass_where_the_box_applies(monkeypatch):
    """A 2-D box over the last two axes in one mode is one pass; per-axis modes, boxes over
    other axes and cvals outside the dtype keep a line pass per axis."""
    counts = []
    run = _order.filtered
    monkeypatch.setattr(
        _order,
        "filtered",
        lambda array, passes, *rest: counts.append(len(passes)) or run(array, passes, *rest),
    )
    x, stack = sample("uint8"), sample("uint8", 3)
    ndf.minimum_filter(x, (5, 6), mode="grid-mirror")
    ndf.maximum_filter(x, (4, 3), mode=["reflect", "grid-mirror"])
    ndf.maximum_filter(stack, (1, 9, 9), mode="wrap")
    assert counts == [1, 1, 1]
    counts.clear()
    ndf.minimum_filter(x, 5, mode=["reflect", "nearest"])
    ndf.minimum_filter(stack, (5, 5, 1))
    ndf.minimum_filter(x, 5, mode="constant", cval=0.5)
    ndf.minimum_filter(x, (32, 3))
    assert counts == [2, 2, 2, 2]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_dask_chunks_smaller_than_the_box(mode, dtype):
    x = sample(dtype)
    for size, origin in [(5, 0), ((6, 4), (1, -1)), ((15, 3), 0)]:
        kwargs = {"size": size, "mode": mode, "cval": 2, "origin": origin}
        assert_dask_same(ndf.minimum_filter, x, ndi.minimum_filter(x, **kwargs), **kwargs)
        assert_dask_same(ndf.maximum_filter, x, ndi.maximum_filter(x, **kwargs), **kwargs)
    stack = sample(dtype, 3)
    kwargs = {"size": (1, 5, 5), "mode": mode}
    assert_dask_same(ndf.maximum_filter, stack, ndi.maximum_filter(stack, **kwargs), **kwargs)


def test_kept_intermediates_never_leak_into_results():
    """Multi-pass filters write their intermediates into arrays kept between calls: results
    of earlier calls stay as they were, and calls in several threads (Dask's blocks) agree
    with scipy."""
    x = sample("float32", 3)
    first = ndf.uniform_filter(x, 3)
    expected = first.copy()
    for size in (3, 5, (2, 4, 3)):
        ndf.uniform_filter(x, size)
        ndf.minimum_filter(x, size)
        ndf.gaussian_filter(x, 1.5)
    np.testing.assert_array_equal(first, expected)
    results, errors = {}, []

    def call(k):
        try:
            for _ in range(5):
                results[k] = ndf.uniform_filter(x * k, 3 + k % 2)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=call, args=(k,)) for k in range(1, 5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for k, result in results.items():
        assert_same(result, ndi.uniform_filter(x * k, 3 + k % 2), rtol=1e-5)
    lazy = da.from_array(x, chunks=(2, 3, 4))
    with dask.config.set(scheduler="threads"):
        assert_same(ndf.uniform_filter(lazy, 3).compute(), ndi.uniform_filter(x, 3), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int32"])
@pytest.mark.parametrize("size", [9, 11, 12, 13, 15])
def test_integer_means_along_the_last_axis(dtype, size):
    """Integer means along the last axis around the running-sum threshold."""
    x = np.concatenate([sample(dtype, seed=seed) for seed in range(3)], -1)
    for mode in MODES:
        for origin in (-1, 0, 1):
            kwargs = {"mode": mode, "origin": origin, "cval": 4}
            assert_same(
                ndf.uniform_filter1d(x, size, **kwargs), ndi.uniform_filter1d(x, size, **kwargs)
            )
