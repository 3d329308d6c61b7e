"""Minimum, maximum, median, rank and percentile filters against scipy.ndimage (exact)."""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import ALIASES, DTYPES, MODES, assert_dask_same, assert_same, sample

import stencilpipe.ndfilters as ndf
from stencilpipe.ndfilters import _kernels, _order

CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], bool)
CORNERS = np.array([[1, 0, 1], [0, 1, 0], [1, 0, 1]], bool)
BALL = ndi.generate_binary_structure(3, 1)


def both(name, x, *args, **kwargs):
    """(ours, scipy's) of filter ``name``."""
    return getattr(ndf, name)(x, *args, **kwargs), getattr(ndi, name)(x, *args, **kwargs)


@pytest.mark.parametrize("mode", MODES + ALIASES)
@pytest.mark.parametrize("dtype", ["uint8", "float64"])
def test_every_filter_every_mode(mode, dtype):
    x = sample(dtype)
    calls = [
        ("minimum_filter", (), {"size": (2, 3)}),
        ("maximum_filter", (), {"footprint": CORNERS}),
        ("median_filter", (), {"size": 3}),
        ("rank_filter", (2,), {"footprint": CROSS}),
        ("percentile_filter", (70,), {"size": (3, 2)}),
    ]
    for name, args, kwargs in calls:
        assert_same(*both(name, x, *args, mode=mode, cval=9, **kwargs))


@pytest.mark.parametrize("dtype", DTYPES + ("int8", "int64", "uint64", "bool"))
@pytest.mark.parametrize("ndim", [2, 3])
def test_every_dtype_and_ndim(dtype, ndim):
    x = sample(dtype, ndim)
    footprint = CROSS if ndim == 2 else BALL
    assert_same(*both("median_filter", x, size=3))
    assert_same(*both("minimum_filter", x, footprint=footprint))
    assert_same(*both("maximum_filter", x, size=(2,) * ndim))


@pytest.mark.parametrize("cval", [-1, 2.7, 300, -0.5])
def test_cval_is_read_as_scipy_reads_it(cval):
    """Boxes read a double, footprints the value cast into the input dtype, 1-D rank
    filters an int64."""
    x = sample("uint8")
    for output in (None, np.float64):
        kwargs = {"mode": "constant", "cval": cval, "output": output}
        assert_same(*both("minimum_filter", x, size=3, **kwargs))
        assert_same(*both("maximum_filter", x, footprint=CORNERS, **kwargs))
        assert_same(*both("rank_filter", x, 3, footprint=CROSS, **kwargs))
        assert_same(*both("median_filter", x[0], 3, **kwargs))
        assert_same(*both("rank_filter", x[0], -2, 4, **kwargs))


@pytest.mark.parametrize("origin", [1, -1, (0, 1), (-1, 0)])
def test_origin(origin):
    x = sample("int32")
    assert_same(*both("minimum_filter", x, size=3, origin=origin))
    assert_same(*both("maximum_filter", x, footprint=CORNERS, origin=origin))
    assert_same(*both("rank_filter", x, 1, size=(3, 3), origin=origin))


def test_axes_and_per_axis_modes():
    x = sample("float32", 3)
    modes = ("wrap", "constant")
    assert_same(*both("minimum_filter", x, size=(3, 2), axes=(0, 2), mode=modes, cval=1))
    assert_same(*both("median_filter", x, footprint=CROSS, axes=(1, 2)))
    assert_same(*both("maximum_filter", x, size=3, mode=("wrap", "nearest", "mirror")))


@pytest.mark.parametrize("mode", MODES)
def test_1d_filters_along_each_axis(mode):
    x = sample("int32", 3)
    for name in ("minimum_filter1d", "maximum_filter1d"):
        for axis in (0, 1, -1):
            for size, origin in ((3, 0), (4, 1), (2, -1)):
                ours, theirs = both(name, x, size, axis=axis, mode=mode, cval=-4, origin=origin)
                assert_same(ours, theirs)


def test_size_one_is_the_identity_and_output_casts():
    x = sample("float64")
    assert_same(*both("median_filter", x, size=1))
    assert_same(*both("minimum_filter", x, size=1, output=np.int16))
    assert_same(*both("rank_filter", x * 100, 1, size=3, output=np.uint8))


def test_bad_arguments_fail_as_in_scipy():
    x = sample("uint8")
    with pytest.raises(RuntimeError, match="rank not within"):
        ndf.rank_filter(x, 9, size=3)
    with pytest.raises(RuntimeError, match="invalid percentile"):
        ndf.percentile_filter(x, 120, size=3)
    with pytest.raises(ValueError, match="All-zero footprint"):
        ndf.minimum_filter(x, footprint=np.zeros((3, 3)))
    with pytest.raises(RuntimeError, match="no footprint"):
        ndf.median_filter(x)
    with pytest.raises(ValueError, match="invalid origin"):
        ndf.maximum_filter(x, size=3, origin=2)
    with pytest.raises(TypeError, match="Complex"):
        ndf.median_filter(x.astype(complex), size=3)
    with pytest.warns(UserWarning, match="ignoring size"):
        ndf.median_filter(x, size=5, footprint=CROSS)


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
def test_dask_any_chunking(mode):
    for ndim in (2, 3):
        x = sample("uint16", ndim)
        footprint = CROSS if ndim == 2 else BALL
        kwargs = {"mode": mode, "cval": 3}
        assert_dask_same(ndf.median_filter, x, ndf.median_filter(x, 3, **kwargs), size=3, **kwargs)
        assert_dask_same(
            ndf.minimum_filter,
            x,
            ndf.minimum_filter(x, footprint=footprint, **kwargs),
            footprint=footprint,
            **kwargs,
        )
        assert_dask_same(
            ndf.maximum_filter, x, ndf.maximum_filter(x, 4, **kwargs), size=4, **kwargs
        )


@pytest.mark.parametrize("scheduler", ["threads", "sync", "processes"])
def test_dask_halo_paths(scheduler):
    """On threads a chunk's task reads its neighbours' pieces itself (one task per chunk);
    for other processes the halo is map_overlap's slices. Both give scipy's values, with
    an asymmetric halo (origin) over chunks thinner than it."""
    x = sample("uint8", 3)
    expected = ndi.maximum_filter(x, footprint=BALL, origin=(1, 0, -1))
    with dask.config.set(scheduler=scheduler):
        for chunks in [(1, x.shape[1], 3), (2, 3, 5)]:
            lazy = ndf.maximum_filter(
                da.from_array(x, chunks=chunks), footprint=BALL, origin=(1, 0, -1)
            )
            overlap = any(name.startswith("overlap") for name in lazy.dask.layers)
            assert overlap == (scheduler == "processes")
            assert len(lazy.dask.layers[lazy.name]) == lazy.npartitions
            np.testing.assert_array_equal(lazy.compute(scheduler="sync"), expected)


BIG_WINDOWS = [(7, 7), (6, 5), (13, 13), (3, 3, 3), (4, 5, 3)]


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
def test_big_box_windows(mode, dtype):
    """Boxes above 25 elements run the window loops (a selection network run as data, or a
    sliding histogram for 8/16-bit boxes above 150 elements; wrap over a padded copy):
    scipy's values, on frames smaller than the window too."""
    for size in BIG_WINDOWS:
        x = sample(dtype, len(size), seed=len(size) + size[0])
        for operation, args in [("median_filter", ()), ("rank_filter", (3,))]:
            kwargs = {"size": size, "mode": mode, "cval": 5}
            assert_same(*both(operation, x, *args, **kwargs))
        kwargs = {"size": size, "mode": mode, "cval": 5}
        assert_same(*both("percentile_filter", x, 80, origin=1, **kwargs))


def test_big_box_windows_on_dask():
    x = sample("uint16", 3)
    for size in [(3, 3, 3), (5, 5, 5)]:
        expected = ndi.median_filter(x, size=size)
        assert_dask_same(ndf.median_filter, x, expected, size=size)


def disk(radius: int) -> np.ndarray:
    yy, xx = np.mgrid[-radius : radius + 1, -radius : radius + 1]
    return yy**2 + xx**2 <= radius**2


#: Footprints above 25 elements: a disk (one run per line), rings (two runs on some
#: lines; the big one above 150 elements, where 8/16-bit data slide a histogram), a ball
#: with a hole.
BIG_FOOTPRINTS = [
    disk(7),
    disk(4) & ~np.pad(disk(2), 2),
    disk(9) & ~np.pad(disk(3), 6),
    np.pad(ndi.generate_binary_structure(3, 2), 1, constant_values=True),
]


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32"])
def test_big_footprints(mode, dtype):
    """Footprints above 25 elements run the window loops over the runs (histogram) or
    places (network) of the footprint in its box: scipy's values, exactly."""
    for footprint in BIG_FOOTPRINTS:
        tiles = [sample(dtype, footprint.ndim, seed=seed) for seed in range(4)]
        row = np.concatenate(tiles, -1)
        x = np.concatenate([row, row[::-1]], 0)
        count = int(footprint.sum())
        for operation, args in [
            ("median_filter", ()),
            ("rank_filter", (count - 2,)),
            ("minimum_filter", ()),
            ("percentile_filter", (30,)),
        ]:
            kwargs = {"footprint": footprint, "mode": mode, "cval": 5}
            np.testing.assert_array_equal(*both(operation, x, *args, **kwargs))


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap", "mirror"])
@pytest.mark.parametrize("dtype", ["uint8", "float32", "int64"])
def test_long_box_extrema(mode, dtype):
    """Box minima and maxima longer than 3 along an axis run van Herk/Gil-Werman passes
    (wrap over a padded copy), windows longer than the array and shifted by origin too."""
    x = sample(dtype, 3)
    for size, origin in [(15, 0), ((5, 4, 9), 1), ((6, 40, 3), -1)]:
        for operation in ("minimum_filter", "maximum_filter"):
            kwargs = {"size": size, "mode": mode, "cval": 7, "origin": origin}
            np.testing.assert_array_equal(*both(operation, x, **kwargs))


def test_wrap_windows_on_dask():
    """Wrap over chunks: each block's halo comes from the far end, the window loops then
    read a padded copy of the block."""
    x = sample("uint16", 2)
    for kwargs in [{"size": 7}, {"footprint": disk(3)}]:
        expected = ndi.median_filter(x, mode="wrap", **kwargs)
        assert_dask_same(ndf.median_filter, x, expected, mode="wrap", **kwargs)
    expected = ndi.maximum_filter(x, size=(9, 5), mode="wrap")
    assert_dask_same(ndf.maximum_filter, x, expected, size=(9, 5), mode="wrap")


@pytest.mark.parametrize("mode", MODES + ALIASES)
@pytest.mark.parametrize("dtype", ["bool", *DTYPES])
def test_a_3x3_median_of_frames_runs_the_library_s_3x3_pass(mode, dtype, monkeypatch):
    """A 3x3 median over 2-D frames, or a (1, 3, 3) one over a stack, runs the library's
    sorted-columns pass on the CPU (``window_kernels.median_box3``) for every dtype but
    bool (read as uint8) and mode, a cval the dtype holds or not (scipy reads it as a
    double), chunked or not."""
    made = []
    real = _kernels.median_3x3_kernel
    monkeypatch.setattr(_order, "median_3x3_kernel", lambda *key: made.append(key) or real(*key))
    for ndim, size in [(2, 3), (3, (1, 3, 3))]:
        x = sample(dtype, ndim)
        footprint = np.ones(np.broadcast_to(size, (ndim,)), bool)
        for cval in (1, 2.5):
            for kwargs in ({"size": size}, {"footprint": footprint}):
                got, want = both("median_filter", x, mode=mode, cval=cval, **kwargs)
                assert_same(got, want)
        want = ndi.median_filter(x, size, mode=mode)
        assert_dask_same(ndf.median_filter, x, want, size=size, mode=mode)
    assert {key[1] for key in made} == (set() if dtype == "bool" else {2, 3}), made


@pytest.mark.parametrize("name, args", [("median_filter", ()), ("rank_filter", (2,))])
def test_rank_filters_of_bools_take_a_cval(name, args):
    """A bool input's cval reaches the kernel as a bool (it was refused: not a number)."""
    x = sample("bool")
    for cval in (0, 1, True):
        got, want = both(name, x, *args, size=3, mode="constant", cval=cval)
        assert_same(got, want)
