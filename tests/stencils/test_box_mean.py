"""Big 2-D integer means as running sums (``windows.BoxMean``), against exact arithmetic.

The library's mean of an integer frame over more than ``BOX_MEAN_ABOVE`` elements runs
column and row running sums in int32 with one float division per point; the oracle is
the box's int64 sum from np.pad, divided and rounded to nearest (half to even), which
is the library's documented rounding.
"""

import dask.array as da
import numpy as np
import pytest
from asked import kernels_asked

import stencilpipe as sp
from oracle import MODES, NUMPY_PAD_MODE
from stencilpipe.library import BOX_MEAN_ABOVE
from stencilpipe.stencils.windows import BoxMean

RNG = np.random.default_rng(31)

WINDOWS = [(21, 21), (31, 31), (11, 41), (20, 24)]
DTYPES = [np.uint8, np.int8, np.uint16, np.int16]


def frames(dtype, shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, int(info.max) + 1, shape, dtype=dtype)


def exact_mean(stack, size, mode, cval=0):
    """Each window's int64 sum divided by its count, rounded half to even, saturated."""
    pad = [(0, 0)] + [(s // 2, s - s // 2 - 1) for s in size]
    extra = {"constant_values": cval} if mode == "constant" else {}
    padded = np.pad(stack.astype(np.int64), pad, mode=NUMPY_PAD_MODE[mode], **extra)
    sums = np.lib.stride_tricks.sliding_window_view(padded, size, axis=(1, 2)).sum((-2, -1))
    info = np.iinfo(stack.dtype)
    return np.clip(np.rint(sums / np.prod(size)), info.min, info.max).astype(stack.dtype)


def test_windows_run_as_running_sums():
    stencil = sp.library.mean(21)
    assert 21 * 21 > BOX_MEAN_ABOVE
    for dtype in DTYPES:
        (kernel,) = stencil.pass_kernels(np.dtype(dtype), "reflect", np.dtype(dtype))
        assert isinstance(kernel, BoxMean)
    # a float output keeps the fraction: not the integer passes
    (kernel, *_) = stencil.pass_kernels(np.dtype(np.uint8), "reflect", np.dtype(np.float32))
    assert not isinstance(kernel, BoxMean)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_equal_exact_rounding(dtype, mode):
    x = frames(dtype, (2, 45, 300))
    for size in WINDOWS:
        stencil = sp.library.mean(size, boundary=mode, cval=3)
        want = exact_mean(x, size, mode, 3)
        with kernels_asked(stencil) as asked:
            np.testing.assert_array_equal(stencil(x), want, err_msg=f"{size}")
            np.testing.assert_array_equal(stencil(x), want, err_msg=f"{size}, threads")
        assert not asked or mode in ("constant", "wrap")


def test_ties_round_to_even():
    """An even count: sums that are odd multiples of count / 2 are exact ties."""
    x = np.zeros((1, 40, 40), np.uint8)
    x[0, ::2, ::2] = 255  # many windows hold the same number of 255s
    x[0, 1::4, 1::4] = 1
    for size in [(20, 24), (22, 22)]:
        np.testing.assert_array_equal(sp.library.mean(size)(x), exact_mean(x, size, "reflect"))


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 7, 3), (3, 30, 129), (1, 120, 9)])
def test_odd_shapes_and_stacks(shape):
    x = frames(np.uint16, shape)
    for mode in ("reflect", "mirror", "nearest"):
        np.testing.assert_array_equal(
            sp.library.mean(25, boundary=mode)(x), exact_mean(x, (25, 25), mode)
        )


def test_dask_chunks_and_fused_chains_equal_numpy():
    x = frames(np.uint8, (3, 80, 90))
    lazy = da.from_array(x, chunks=(2, 30, 33))
    box = sp.library.mean(31)
    want = exact_mean(x, (31, 31), "reflect")
    np.testing.assert_array_equal(box(lazy).compute(), want)
    small = sp.library.mean(3)
    chained = sp.chain(box, small)
    np.testing.assert_array_equal(chained(x), small(want))
    np.testing.assert_array_equal(chained(lazy).compute(), small(want))


@pytest.mark.parametrize("dtype", [*DTYPES, np.int32, np.uint32])
@pytest.mark.parametrize("mode", MODES)
def test_ndfilters_uniform_along_lines_of_integers(dtype, mode):
    """ndfilters' uniform filter of integers sums each line exactly, by doubling
    (``window_kernels.window_sums``: windows of one to several binary digits, beyond the
    unrolled runs at 64 and 400): scipy's values, and its stores."""
    from scipy import ndimage as ndi

    import stencilpipe.ndfilters as ndf

    x = frames(dtype, (7, 301))
    for size in (1, 2, 3, 17, 31, 64, 400):
        want = ndi.uniform_filter1d(x, size, axis=1, mode=mode, cval=3)
        got = ndf.uniform_filter1d(x, size, axis=1, mode=mode, cval=3)
        np.testing.assert_array_equal(got, want, err_msg=str(size))
    want = ndi.uniform_filter(x, 31, mode=mode, output=np.uint8)
    np.testing.assert_array_equal(ndf.uniform_filter(x, 31, mode=mode, output=np.uint8), want)
    lazy = da.from_array(x, chunks=(3, 100))
    np.testing.assert_array_equal(
        ndf.uniform_filter(lazy, (5, 31), mode=mode).compute(),
        ndi.uniform_filter(x, (5, 31), mode=mode),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1], ids=["across", "along"])
def test_ndfilters_running_means_in_int32_and_float32_are_scipys(dtype, axis):
    """8- and 16-bit means into an output holding the input's range sum in int32 and
    divide in float32 (``windows.narrow_mean``), which must truncate as scipy's double
    does: full-range, constant-extreme and one-below-a-multiple lines, window sizes up to
    the float32 bound (255 for 16 bits: narrow) and past it (256: in double), every
    mode, outputs that are narrow and that are not (wider, float, wrapping). uint8
    windows of up to 257 sum in uint16 (257 x 255 is its largest value); 258 in int32."""
    from scipy import ndimage as ndi

    import stencilpipe.ndfilters as ndf
    from stencilpipe.stencils.windows import narrow_mean

    info = np.iinfo(dtype)
    assert narrow_mean(np.dtype(np.uint16), np.dtype(np.uint16), 255)
    assert not narrow_mean(np.dtype(np.uint16), np.dtype(np.uint16), 256)
    length = 600
    alternating = np.where(np.arange(length) % 7 == 0, info.max - 1, info.max)
    lines = np.stack(
        [
            frames(dtype, length),
            np.full(length, info.max),
            np.full(length, info.min),
            alternating,
            np.where(np.arange(length) % 5 == 0, info.min + 1, info.min),
        ]
    ).astype(dtype)
    x = np.ascontiguousarray(lines.T if axis == 0 else lines)
    outputs = [None, np.int32, np.float32, np.uint8 if dtype != np.uint8 else np.int8]
    for mode in ["reflect", "nearest", "mirror", "wrap", "constant"]:
        for size in (17, 63, 255, 256, 257, 258):
            for output in outputs:
                want = ndi.uniform_filter1d(x, size, axis=axis, mode=mode, output=output, cval=3)
                got = ndf.uniform_filter1d(x, size, axis=axis, mode=mode, output=output, cval=3)
                np.testing.assert_array_equal(got, want, err_msg=f"{mode} {size} {output}")


def test_the_truncating_reciprocal_divides_every_uint8_window_sum_exactly():
    """uint8 running means multiply their uint16 sums by ``truncating_reciprocal(size)``
    instead of dividing: every sum of every window size they take (up to 257) truncates to
    the integer quotient, the oracle."""
    from stencilpipe.stencils.windows import truncating_reciprocal

    for size in range(1, 258):
        sums = np.arange(255 * size + 1)
        got = (sums.astype(np.float32) * truncating_reciprocal(size)).astype(np.int64)
        np.testing.assert_array_equal(got, sums // size, err_msg=f"size {size}")
    # The nearest float32 of 1 / 41 lies below it: some multiple of 41 truncates one short.
    size = 41
    sums = np.arange(255 * size + 1)
    nearest = np.float32(1) / np.float32(size)
    assert ((sums.astype(np.float32) * nearest).astype(np.int64) != sums // size).any()
