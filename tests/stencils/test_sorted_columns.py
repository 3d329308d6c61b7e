"""Ranks over boxes by sorted columns (``window_kernels.rank_sorted_columns``).

2-D and 3-D boxes of floats and 32-bit integers, and big 2-D boxes of 16-bit integers, keep
each column of the window sorted and move a split through them (:mod:`stencilpipe.stencils.
order` gives the keys that sort). Oracles: scipy.ndimage per frame, and the k-th value of
each ``np.pad`` window sorted by ``np.sort`` (NaN last) where scipy's own order is not a
total one (NaN).
"""

import dask.array as da
import numpy as np
import pytest
from asked import kernels_asked
from scipy import ndimage as ndi

import stencilpipe as sp
import stencilpipe.ndfilters as ndf
from oracle import MODES, NUMPY_PAD_MODE
from stencilpipe.stencils import order
from stencilpipe.stencils.windows import RankWindow

RNG = np.random.default_rng(41)

SORTED_DTYPES = [np.float32, np.float64, np.int32, np.uint32, np.int16, np.uint16]


def frames(dtype, shape):
    if np.dtype(dtype).kind == "f":
        return (RNG.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


def sorted_windows_rank(stack, size, rank, mode, cval):
    """The ``rank``-th value of each window by np.sort of the ``np.pad``-ed windows."""
    pad = [(0, 0)] + [(s // 2, s - s // 2 - 1) for s in size]
    extra = {"constant_values": cval} if mode == "constant" else {}
    padded = np.pad(stack, pad, mode=NUMPY_PAD_MODE[mode], **extra)
    windows = np.lib.stride_tricks.sliding_window_view(padded, size, axis=(1, 2))
    return np.sort(windows.reshape(*stack.shape, -1), axis=-1)[..., rank]


def window(size, dtypes=SORTED_DTYPES):
    """``size``, checked to be one the sorted columns take for every dtype of ``dtypes``."""
    reach = tuple((s // 2, s - 1 - s // 2) for s in size)
    for dtype in dtypes:
        assert RankWindow(reach, 1).loop_name(np.dtype(dtype)) == "rank_sorted_columns"
    return size


@pytest.mark.parametrize("dtype", SORTED_DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_medians_equal_scipy(dtype, mode):
    """Square and oblong boxes, odd and even, on frames smaller than the window too; each
    stencil called twice (the first call compiles the loop; rows split over the threads in
    :func:`test_rows_split_across_threads`)."""
    for shape in [(2, 37, 61), (1, 5, 9)]:
        x = frames(dtype, shape)
        for size in [window((13, 13)), window((7, 25)), window((26, 7))]:
            stencil = sp.library.median(size, boundary=mode, cval=7)
            want = np.stack([ndi.median_filter(f, size=size, mode=mode, cval=7) for f in x])
            with kernels_asked(stencil) as asked:
                for _ in range(2):
                    got = stencil(x)
                    np.testing.assert_array_equal(got, want, err_msg=f"{size} {shape}")
            assert not asked, "the per-point kernel was compiled on the CPU"


def test_every_rank_and_percentile():
    x = frames(np.float32, (1, 30, 41))
    size = window((9, 21))
    for rank in [0, 1, 5, 94, 188, 187]:
        want = ndi.rank_filter(x[0], rank, size=size, mode="mirror")
        np.testing.assert_array_equal(ndf.rank_filter(x[0], rank, size=size, mode="mirror"), want)
    for percentile in [3, 50, 97.5]:
        want = ndi.percentile_filter(x[0], percentile, size=size)
        np.testing.assert_array_equal(ndf.percentile_filter(x[0], percentile, size=size), want)


def test_flat_smooth_and_repeated_values():
    """Ties (flat regions, few distinct values) and slow ramps, where the split moves far."""
    flat = np.full((1, 40, 50), 3.5, np.float32)
    steps = RNG.integers(0, 4, (1, 40, 50)).astype(np.float32)
    ramp = np.cumsum(RNG.standard_normal((1, 40, 50)), axis=2).astype(np.float64)
    for x in (flat, steps, ramp):
        for size in [window((15, 15)), window((11, 17))]:
            want = ndi.median_filter(x[0], size=size)
            np.testing.assert_array_equal(sp.library.median(size)(x)[0], want)


def test_extreme_values_sort_exactly():
    """The dtype's smallest and largest values, next to the sentinels' keys; infinities,
    signed zeros and subnormals; uint32 values above int32's range (their keys are int64)."""
    size = window((13, 13))
    big = np.array([0, 1, 2**32 - 1, 2**32 - 2, 2**31, 2**31 - 1], np.uint64)
    for x in [
        RNG.choice(np.array([-np.inf, np.inf, -0.0, 0.0, 1e-45, -3e38], np.float32), (1, 30, 40)),
        RNG.choice(np.array([-np.inf, np.inf, -0.0, 5e-324, 1.7e308], np.float64), (1, 30, 40)),
        RNG.choice(np.array([-(2**31), 2**31 - 1, 0, -1], np.int32), (1, 30, 40)),
        RNG.choice(big.astype(np.uint32), (1, 30, 40)),
    ]:
        want = sorted_windows_rank(x, size, 84, "reflect", 0)
        got = sp.library.median(size)(x)
        np.testing.assert_array_equal(got, want)  # -0.0 == 0.0: either is scipy's median


def test_nan_ranks_above_infinity():
    """NaN (any sign and payload) sorts above +inf, as np.sort puts it (for ranks other
    than the minimum and maximum, which compare as scipy's do)."""
    x = frames(np.float32, (1, 30, 40))
    x[RNG.random(x.shape) < np.linspace(0.1, 0.9, 40)] = np.nan  # medians NaN on the right
    x[0, 3, :] = -np.float32(np.nan)
    x[0, 5, 7] = np.inf
    size = window((13, 13))
    for rank in [1, 84, 167]:
        want = sorted_windows_rank(x, size, rank, "nearest", 0)
        got = ndf.rank_filter(x[0], rank, size=size, mode="nearest")
        np.testing.assert_array_equal(got, want[0])
        if rank == 84:
            assert np.isnan(want).any() and not np.isnan(want).all()


def test_output_dtype_and_dask_chunks():
    x = frames(np.float64, (3, 50, 47))
    size = window((12, 13))
    want = np.stack([ndi.median_filter(f, size=size, mode="wrap") for f in x])
    stencil = sp.library.median(size, boundary="wrap", dtype=np.int16)
    lazy = da.from_array(x, chunks=(2, 17, 20))
    saturated = np.clip(np.rint(want), -(2**15), 2**15 - 1).astype(np.int16)
    np.testing.assert_array_equal(stencil(lazy).compute(), saturated)
    np.testing.assert_array_equal(stencil(x), saturated)


def test_which_windows_take_the_sorted_columns():
    """Per the measured crossovers (SORTED_ABOVE): 2-D and 3-D boxes of floats and 32-bit
    integers, 2-D boxes of 16-bit integers; 8-bit, 64-bit integers, footprints and lines
    never."""

    def loop(dtype, reach, points=None):
        return RankWindow(reach, 1, points).loop_name(np.dtype(dtype))

    box = ((6, 6), (6, 6))  # 13x13
    for dtype in [np.float32, np.float64, np.int32, np.uint32, np.int16, np.uint16]:
        assert loop(dtype, box) == "rank_sorted_columns"
    five = ((2, 2), (2, 2))  # 5x5: 32-bit values' network vectorises, 64-bit ones' does not
    assert loop(np.float64, five) == "rank_sorted_columns"
    assert loop(np.float32, five) == loop(np.int32, five) == loop(np.uint16, five) == "rank_network"
    assert loop(np.uint8, box) == "rank_columns"
    assert loop(np.int64, box) == "rank_network"
    assert loop(np.uint16, box, tuple(range(1, 169))) == "rank_histogram"  # a footprint
    assert loop(np.float32, box, tuple(range(1, 169))) == "rank_network"
    small, big = ((1, 1), (1, 1), (1, 1)), ((3, 3), (3, 3), (3, 3))  # 3x3x3, 7x7x7
    assert loop(np.float64, small) == loop(np.float32, big) == "rank_sorted_columns"
    assert loop(np.float32, small) == loop(np.uint16, small) == "rank_network"
    assert loop(np.uint16, big) == "rank_histogram"
    assert loop(np.float64, ((10, 10),)) == "rank_network"  # a line


def test_keys_sort_as_numpy_sorts():
    """:mod:`order`'s keys (in plain Python here; Numba compiles the same functions) sort
    values as np.sort does, NaN last, and map back to the same bits (NaN to a NaN)."""
    specials = [-np.inf, -1.5, -0.0, 0.0, 1e-40, 2.0, np.inf, np.nan, -np.nan]
    for dtype in [np.float32, np.float64, np.int16, np.uint16, np.int32, np.uint32]:
        dtype = np.dtype(dtype)
        key = order.key_dtype(dtype)
        lowest, highest = order.key_bounds(key)
        if dtype.kind == "f":
            values = np.concatenate([np.array(specials, dtype), frames(dtype, (200,))])
        else:
            info = np.iinfo(dtype)
            values = np.concatenate([[info.min, info.max, 0], frames(dtype, (200,))]).astype(dtype)
        keys = np.array([order.order_key(v, key.type) for v in values])
        assert keys.min() > lowest and keys.max() < highest
        by_key = values[np.argsort(keys, kind="stable")]
        np.testing.assert_array_equal(by_key, np.sort(values))  # NaN compare equal here
        back = np.array([order.from_order_key(k, dtype.type) for k in keys], dtype)
        same = (back == values) | (np.isnan(back) & np.isnan(values)) if dtype.kind == "f" else back == values
        assert same.all()
    assert order.key_dtype(np.dtype(np.int64)) is None and order.key_dtype(np.dtype(bool)) is None


def test_rows_split_across_threads():
    """A call of over 2**20 elements splits its rows over the threads: each range builds its
    columns from its own first row, mid-frame."""
    x = frames(np.float32, (1031, 1024))
    size = window((9, 9), [np.float32])
    want = ndi.median_filter(x, size=size, mode="mirror")
    for _ in range(2):  # the first call compiles on one thread, the second splits
        np.testing.assert_array_equal(ndf.median_filter(x, size, mode="mirror"), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("mode", MODES)
def test_volumes_equal_scipy(dtype, mode):
    """The window goes back and forth through the planes and rows: boxes odd and even, flat
    along an axis, wider than the volume; ranks other than the median. float32 and int32
    boxes of up to 175 elements take the network on keys (the last two sizes, and every
    float64 one, are checked to take the sorted columns)."""
    x = frames(dtype, (2, 9, 11, 13))
    sizes = [(3, 3, 3), (5, 2, 7), (1, 5, 7), (4, 3, 3), (5, 5, 8), (11, 13, 3)]
    if dtype == np.float64:
        sizes = [window(size, [dtype]) for size in sizes]
    else:
        sizes[-2:] = [window(size, [dtype]) for size in sizes[-2:]]
    for size in sizes:
        for frame in x:
            want = ndi.median_filter(frame, size=size, mode=mode, cval=7)
            got = ndf.median_filter(frame, size, mode=mode, cval=7)
            np.testing.assert_array_equal(got, want, err_msg=f"{size}")
    for rank in [1, 100, 198]:
        want = ndi.rank_filter(x[0], rank, size=(5, 5, 8), mode=mode, cval=7)
        got = ndf.rank_filter(x[0], rank, (5, 5, 8), mode=mode, cval=7)
        np.testing.assert_array_equal(got, want)


def test_volumes_split_across_threads_and_chunks():
    """A volume of over 2**20 elements, its planes split over the threads (each range sorts
    its columns afresh), and as Dask chunks."""
    x = frames(np.float64, (17, 250, 250))
    want = ndi.median_filter(x, size=window((3, 3, 3), [np.float64]), mode="reflect")
    for _ in range(2):
        np.testing.assert_array_equal(ndf.median_filter(x, 3), want)
    lazy = da.from_array(x[:, :60, :70], chunks=(5, 25, 30))
    np.testing.assert_array_equal(
        ndf.median_filter(lazy, 3).compute(), ndi.median_filter(x[:, :60, :70], size=3)
    )
