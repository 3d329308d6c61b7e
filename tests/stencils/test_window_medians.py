"""Big 8-bit medians in constant time per point, and window passes under ``wrap``.

A 2-D box median of 8-bit data over more than ``HISTOGRAM_ABOVE`` elements runs
Perreault and Hebert's column histograms (``window_kernels.rank_columns``), in
stripes of ``STRIPE`` columns with rows split across threads; single window passes
(a median, ndfilters' 1-D minimum, maximum and mean) also run under ``wrap``, on whole
frames. Oracles: scipy.ndimage on each frame, OpenCV's medianBlur (BORDER_REPLICATE,
scipy's ``nearest``).
"""

import cv2
import dask.array as da
import numpy as np
import pytest
from asked import kernels_asked
from scipy import ndimage as ndi

import stencilpipe as sp
import stencilpipe.ndfilters as ndf
from oracle import MODES
from stencilpipe.stencils import window_kernels
from stencilpipe.stencils.windows import HISTOGRAM_ABOVE

RNG = np.random.default_rng(23)

#: Windows over HISTOGRAM_ABOVE elements, square and not, odd and even.
WINDOWS = [(13, 13), (15, 15), (7, 23), (16, 11)]


def frames(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


def per_frame(scipy_filter, stack, **kwargs):
    return np.stack([scipy_filter(frame, **kwargs) for frame in stack])


def twice(stencil, x):
    """The stencil's result on its first call (one thread) and on its second (rows split
    across the threads, each range starting its column histograms mid-frame)."""
    first = stencil(x)
    return first, stencil(x)


def test_windows_take_the_column_histograms():
    assert all(h * w > HISTOGRAM_ABOVE for h, w in WINDOWS)
    assert window_kernels.STRIPE < 300  # the frames below span several stripes


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("mode", MODES)
def test_big_medians_equal_scipy(dtype, mode):
    x = frames(dtype, (2, 41, 300))
    for size in WINDOWS:
        stencil = sp.library.median(size, boundary=mode, cval=7)
        want = per_frame(ndi.median_filter, x, size=size, mode=mode, cval=7)
        with kernels_asked(stencil) as asked:
            for got in twice(stencil, x):
                np.testing.assert_array_equal(got, want, err_msg=f"{size} {mode}")
        assert not asked, "the per-point kernel was compiled"


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 5, 3), (3, 16, 129), (1, 150, 17), (2, 33, 257)])
def test_odd_shapes_and_stacks(shape):
    x = frames(np.uint8, shape)
    for mode in MODES:
        want = per_frame(ndi.median_filter, x, size=(15, 13), mode=mode)
        for got in twice(sp.library.median((15, 13), boundary=mode), x):
            np.testing.assert_array_equal(got, want, err_msg=mode)


def test_skewed_values_and_every_rank():
    """Values crowded into one coarse bin, or spread over two, and ranks near the ends."""
    crowded = frames(np.uint8, (40, 150)) % 16 + 112
    split = frames(np.uint8, (40, 150)) // 128 * 200
    for x in (crowded, split):
        for rank in (1, 84, 167):
            got = ndf.rank_filter(x, rank, size=13)
            np.testing.assert_array_equal(got, ndi.rank_filter(x, rank, size=13), str(rank))


def test_opencv_median_blur():
    x = frames(np.uint8, (517, 389))
    for size in (13, 15, 21):
        np.testing.assert_array_equal(
            ndf.median_filter(x, size, mode="nearest"), cv2.medianBlur(x, size)
        )


def test_uint8_output_of_int8_input():
    x = frames(np.int8, (2, 30, 140))
    got = sp.library.median(15, dtype=np.uint8)(x)
    want = np.clip(per_frame(ndi.median_filter, x, size=15), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
def test_dask_chunks_equal_numpy(mode):
    x = frames(np.uint8, (3, 70, 150))
    lazy = da.from_array(x, chunks=(2, 25, 60))
    stencil = sp.library.median(15, boundary=mode)
    np.testing.assert_array_equal(stencil(lazy).compute(), stencil(x))
    np.testing.assert_array_equal(stencil(x), per_frame(ndi.median_filter, x, size=15, mode=mode))


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.float32])
def test_wrap_runs_the_window_pass(dtype):
    x = (
        frames(dtype, (2, 23, 31))
        if np.dtype(dtype).kind != "f"
        else RNG.random((2, 23, 31), dtype)
    )
    for size in [(15, 15), (3, 17)]:
        stencil = sp.library.median(size, boundary="wrap")
        want = per_frame(ndi.median_filter, x, size=size, mode="wrap")
        with kernels_asked(stencil) as asked:
            for got in twice(stencil, x):
                np.testing.assert_array_equal(got, want, err_msg=str(size))
        assert not asked, "the per-point kernel was compiled"
        lazy = da.from_array(x, chunks=(1, 10, 12))
        np.testing.assert_array_equal(stencil(lazy).compute(), want)


def test_wrap_volumes():
    x = frames(np.uint16, (2, 9, 10, 11))
    stencil = sp.library.median((5, 7, 5), ndim=3, boundary="wrap")
    want = per_frame(ndi.median_filter, x, size=(5, 7, 5), mode="wrap")
    with kernels_asked(stencil) as asked:
        np.testing.assert_array_equal(stencil(x), want)
    assert not asked


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.float32])
def test_wrap_one_dimensional_passes(dtype):
    """ndfilters' minimum, maximum and mean run one window pass per axis: under wrap too."""
    x = frames(dtype, (19, 43)) if np.dtype(dtype).kind != "f" else RNG.random((19, 43), dtype)
    for ours, theirs in [
        (ndf.minimum_filter, ndi.minimum_filter),
        (ndf.maximum_filter, ndi.maximum_filter),
        (ndf.uniform_filter, ndi.uniform_filter),
    ]:
        for size in (17, (21, 5), 31):
            want = theirs(x, size, mode="wrap")
            np.testing.assert_array_equal(ours(x, size, mode="wrap"), want, err_msg=ours.__name__)
            lazy = da.from_array(x, chunks=(7, 11))
            np.testing.assert_array_equal(ours(lazy, size, mode="wrap").compute(), want)


@pytest.mark.parametrize("dtype", [np.uint16, np.int16])
@pytest.mark.parametrize("mode", MODES)
def test_big_16_bit_medians_equal_scipy(dtype, mode):
    """16-bit windows slide a histogram of three levels (fine, middle, coarse)."""
    noisy = frames(dtype, (1, 30, 70))
    smooth = np.cumsum(frames(np.int8, (1, 30, 70)), axis=2).astype(dtype)  # small steps
    for x in (noisy, smooth):
        for size in [(13, 13), (7, 25)]:
            stencil = sp.library.median(size, boundary=mode, cval=7)
            want = per_frame(ndi.median_filter, x, size=size, mode=mode, cval=7)
            np.testing.assert_array_equal(stencil(x), want, err_msg=f"{size}")
        volume = x.reshape(1, 5, 6, 70)
        want = per_frame(ndi.median_filter, volume, size=(3, 5, 13), mode=mode, cval=7)
        got = sp.library.median((3, 5, 13), ndim=3, boundary=mode, cval=7)(volume)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "dtype", [np.uint8, np.int8, np.uint16, np.int32, np.int64, np.float32, np.float64]
)
@pytest.mark.parametrize("mode", MODES)
def test_a_3x3_median_by_sorted_columns_equals_scipy(dtype, mode):
    """The CPU's 3x3 median (``window_kernels.median_box3``): frames from one pixel to
    several rows per thread, a stack, cval inside the dtype's range; on the first call
    and with rows split across threads; a chunked Dask stack too."""
    rng = np.random.default_rng(5)
    median = sp.library.median(3, boundary=mode, cval=7)
    with kernels_asked(median) as asked:
        for shape in [(1, 1), (1, 4), (2, 2), (3, 1), (5, 9), (3, 64, 70)]:
            low = -100 if np.dtype(dtype).kind != "u" else 0
            x = rng.integers(low, 100, shape).astype(dtype)
            want = ndi.median_filter(x, (1,) * (x.ndim - 2) + (3, 3), mode=mode, cval=7)
            for got in twice(median, x):
                np.testing.assert_array_equal(got, want, err_msg=f"{shape}")
        lazy = da.from_array(x, chunks=(2, 20, 30))
        np.testing.assert_array_equal(median(lazy).compute(), want)
    assert not asked, "the per-point network was compiled on the CPU"


@pytest.mark.parametrize("mode", MODES)
def test_a_1x3x3_median_of_volumes_runs_the_3x3_pass_per_plane(mode):
    """``median((1, 3, 3), ndim=3)`` runs the same pass over each plane of each volume."""
    median = sp.library.median((1, 3, 3), ndim=3, boundary=mode, cval=7)
    x = np.random.default_rng(6).integers(0, 200, (2, 4, 9, 11)).astype(np.uint16)
    want = ndi.median_filter(x, (1, 1, 3, 3), mode=mode, cval=7)
    with kernels_asked(median) as asked:
        for got in twice(median, x):
            np.testing.assert_array_equal(got, want)
        lazy = da.from_array(x, chunks=(1, 3, 5, 6))
        np.testing.assert_array_equal(median(lazy).compute(), want)
    assert not asked, "the per-point network was compiled on the CPU"


def test_a_3x3_median_of_8_bit_frames_equals_opencv():
    x = frames(np.uint8, (300, 257))
    median = sp.library.median(3, boundary="nearest")
    np.testing.assert_array_equal(median(x), cv2.medianBlur(x, 3))
