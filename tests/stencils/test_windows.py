"""Big windows: minima, maxima and medians run as window passes, against scipy.ndimage.

The library's minimum, maximum and median over windows bigger than their per-point
kernels suit run on the CPU as the loops of :mod:`stencilpipe.stencils.windows`
(van Herk/Gil-Werman, a sliding histogram, quickselect). Results must equal scipy's
on the whole array whatever the dtype, mode, window shape, chunking or fusion, and
the per-point kernel is then never compiled.
"""

import dask.array as da
import numpy as np
import pytest
from asked import kernels_asked
from scipy import ndimage as ndi

import stencilpipe as sp
from oracle import MODES, NUMPY_PAD_MODE
from stencilpipe.stencils.windows import BoxExtremum, ExtremumPass

RNG = np.random.default_rng(11)


def frames(dtype, shape=(2, 37, 45)):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


def per_frame(scipy_filter, stack, **kwargs):
    return np.stack([scipy_filter(frame, **kwargs) for frame in stack])


def padded_windows(stack, size, mode, cval):
    """Every window of every frame, from np.pad: ``(frames, *frame, *size)``."""
    pad = [(0, 0)] + [(s // 2, s - s // 2 - 1) for s in size]
    extra = {"constant_values": cval} if mode == "constant" else {}
    padded = np.pad(stack, pad, mode=NUMPY_PAD_MODE[mode], **extra)
    return np.lib.stride_tricks.sliding_window_view(padded, size, axis=(1, 2))


def exact_oracles(stack, size, mode, cval):
    """Minimum, maximum and median by NumPy on the padded windows: exact for int64,
    which scipy's filters read through float64 (a median off by up to 254 here)."""
    windows = padded_windows(stack, size, mode, cval).reshape(*stack.shape, -1)
    rank = windows.shape[-1] // 2
    median = np.partition(windows, rank, axis=-1)[..., rank]
    return [windows.min(axis=-1), windows.max(axis=-1), median]


FILTERS = [
    (sp.library.minimum, ndi.minimum_filter),
    (sp.library.maximum, ndi.maximum_filter),
    (sp.library.median, ndi.median_filter),
]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16, np.float32, np.int64])
@pytest.mark.parametrize("mode", MODES)
def test_big_windows_equal_scipy(dtype, mode):
    x = frames(dtype)
    cval = 5
    for size in [(9, 9), (15, 4), (3, 17)]:
        exact = exact_oracles(x, size, mode, cval)
        for (ours, theirs), oracle in zip(FILTERS, exact):
            stencil = ours(size, boundary=mode, cval=cval)
            if np.dtype(dtype).itemsize == 8 and np.dtype(dtype).kind == "i":
                want = oracle
            else:
                want = per_frame(theirs, x, size=size, mode=mode, cval=cval)
                np.testing.assert_array_equal(oracle, want)  # the two oracles agree
            with kernels_asked(stencil) as asked:
                got = stencil(x)
            np.testing.assert_array_equal(got, want, err_msg=f"{stencil.name} {size}")
            assert not asked, "the per-point kernel was compiled on the CPU"


@pytest.mark.parametrize("mode", MODES)
def test_volumes(mode):
    x = frames(np.uint8, (2, 13, 14, 15))
    for ours, theirs in FILTERS:
        stencil = ours((7, 5, 9), ndim=3, boundary=mode)
        want = per_frame(theirs, x, size=(7, 5, 9), mode=mode)
        np.testing.assert_array_equal(stencil(x), want)


def test_one_dimensional_lines():
    x = frames(np.float64, (4, 70))
    for ours, theirs in FILTERS:
        np.testing.assert_array_equal(ours(51, ndim=1)(x), per_frame(theirs, x, size=51))


def test_windows_wider_than_the_frame():
    x = frames(np.uint8, (1, 6, 5))
    for mode in MODES:
        for ours, theirs in FILTERS:
            want = per_frame(theirs, x, size=(13, 11), mode=mode)
            np.testing.assert_array_equal(ours((13, 11), boundary=mode)(x), want)


def test_dask_chunks_and_fused_chains():
    x = frames(np.uint16, (3, 64, 70))
    lazy = da.from_array(x, chunks=(2, 20, 23))
    for ours, theirs in FILTERS:
        stencil = ours(11)
        want = per_frame(theirs, x, size=11)
        np.testing.assert_array_equal(stencil(lazy).compute(), want)
        smooth = sp.library.mean(3)
        chained = sp.chain(stencil, smooth)
        np.testing.assert_array_equal(chained(x), smooth(want))
        np.testing.assert_array_equal(chained(lazy).compute(), smooth(want))


def test_wrap_over_frames_and_chunks():
    """Under wrap the passes run over whole frames (a strip of rows cannot wrap), a
    frame per thread, and Dask's chunks (computed on its threads) wrap around the whole
    array."""
    x = frames(np.uint16, (5, 40, 33))
    lazy = da.from_array(x, chunks=(2, 15, 20))
    for ours, theirs in FILTERS:
        stencil = ours(11, boundary="wrap")
        want = per_frame(theirs, x, size=11, mode="wrap")
        with kernels_asked(stencil) as asked:
            np.testing.assert_array_equal(stencil(x), want)
            np.testing.assert_array_equal(stencil(lazy).compute(), want)
        assert not asked, "the per-point kernel was compiled on the CPU"


def test_output_dtype_saturates():
    x = frames(np.int16)
    got = sp.library.median(9, dtype=np.uint8)(x)
    want = np.clip(per_frame(ndi.median_filter, x, size=9), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)


def _box(which, size, passes, **options):
    """The library's minimum or maximum over a 2-D ``size`` window, run by ``passes``:
    ``"box"`` (one :class:`BoxExtremum`) or ``"axes"`` (an :class:`ExtremumPass` per axis)."""
    stencil = (sp.library.minimum if which == "min" else sp.library.maximum)(size, **options)
    reach = tuple((s // 2, s - s // 2 - 1) for s in size)
    largest = which == "max"
    if passes == "box":
        stencil.passes = {"cpu": (BoxExtremum(reach, largest),)}
    else:
        stencil.passes = {
            "cpu": tuple(ExtremumPass(d, *r, largest, 2) for d, r in enumerate(reach) if any(r))
        }
    return stencil


BOX_SIZES = [(5, 5), (3, 4), (2, 7), (15, 15), (13, 11), (1, 6), (8, 1), (16, 3)]


@pytest.mark.parametrize("passes", ["box", "axes"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.int16, np.float32, np.int64])
@pytest.mark.parametrize("mode", MODES)
def test_short_windows_equal_scipy(passes, dtype, mode):
    """Small and medium boxes, one pass over memory (BoxExtremum) or per axis (ExtremumPass,
    whose short windows across wide rows compare the rows directly): scipy's results on
    frames wider than the direct path's threshold, odd and even sizes, every mode."""
    x = frames(dtype, (2, 23, 70))
    cval = 7
    for size in BOX_SIZES:
        exact = exact_oracles(x, size, mode, cval)
        for which, oracle in zip(["min", "max"], exact):
            got = _box(which, size, passes, boundary=mode, cval=cval)(x)
            np.testing.assert_array_equal(got, oracle, err_msg=f"{which} {size}")
            if np.dtype(dtype) != np.int64:
                scipy_filter = ndi.minimum_filter if which == "min" else ndi.maximum_filter
                want = per_frame(scipy_filter, x, size=size, mode=mode, cval=cval)
                np.testing.assert_array_equal(got, want, err_msg=f"{which} {size}")


@pytest.mark.parametrize("passes", ["box", "axes"])
def test_short_windows_on_frames_narrower_than_the_window(passes):
    x = frames(np.uint16, (3, 5, 4))
    for mode in MODES:
        for size in [(7, 9), (6, 5), (11, 2)]:
            for which, scipy_filter in [("min", ndi.minimum_filter), ("max", ndi.maximum_filter)]:
                got = _box(which, size, passes, boundary=mode, cval=3)(x)
                want = per_frame(scipy_filter, x, size=size, mode=mode, cval=3)
                np.testing.assert_array_equal(got, want, err_msg=f"{which} {size} {mode}")


def test_box_extremum_strips_threads_and_chunks():
    """Odd row counts (a lone last row of a thread's share), fused chains and Dask chunks."""
    x = frames(np.uint8, (3, 65, 97))
    lazy = da.from_array(x, chunks=(2, 21, 40))
    smooth = sp.library.mean(3)
    for mode in ["reflect", "wrap", "constant"]:
        stencil = _box("min", (5, 7), "box", boundary=mode, cval=9)
        want = per_frame(ndi.minimum_filter, x, size=(5, 7), mode=mode, cval=9)
        np.testing.assert_array_equal(stencil(x), want)
        np.testing.assert_array_equal(stencil(lazy).compute(), want)
        np.testing.assert_array_equal(sp.chain(stencil, smooth)(x), smooth(want))
