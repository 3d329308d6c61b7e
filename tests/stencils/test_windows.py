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
from scipy import ndimage as ndi

import stencilpipe as sp
from oracle import MODES, NUMPY_PAD_MODE

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
            np.testing.assert_array_equal(stencil(x), want, err_msg=f"{stencil.name} {size}")
            assert not stencil._compiled, "the per-point kernel was compiled on the CPU"


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
        np.testing.assert_array_equal(stencil(x), want)
        np.testing.assert_array_equal(stencil(lazy).compute(), want)
        assert not stencil._compiled, "the per-point kernel was compiled on the CPU"


def test_output_dtype_saturates():
    x = frames(np.int16)
    got = sp.library.median(9, dtype=np.uint8)(x)
    want = np.clip(per_frame(ndi.median_filter, x, size=9), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
