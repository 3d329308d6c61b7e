"""Generated CUDA kernels under Numba's CUDA simulator, against the oracle and the CPU path.

Run by ``test_cuda_simulator.py`` in a subprocess with ``NUMBA_ENABLE_CUDASIM=1``
(it must be set before Numba is imported); skipped when imported any other way.
The simulator runs each thread as Python, so arrays are tiny. Inputs are
``numba.cuda.to_device`` arrays (the simulator has no CuPy); every kernel reads
through widened accumulators, so no value here can overflow.
"""

import os

import numpy as np
import pytest
from kernels import declared_window, diff, lopsided, smooth, thresh, volume
from test_against_oracle import random_array

import stencilpipe as sp
from oracle import MODES, kernel_by_loop
from stencilpipe.errors import BoundaryError, KernelError

pytestmark = pytest.mark.skipif(
    os.environ.get("NUMBA_ENABLE_CUDASIM") != "1",
    reason="run by test_cuda_simulator.py in a subprocess with NUMBA_ENABLE_CUDASIM=1",
)


@sp.stencil
def central_difference(x):
    return x[1] - x[-2]


def device(array):
    from numba import cuda

    return cuda.to_device(np.ascontiguousarray(array))


def host(array):
    return array.copy_to_host()


def check(stencil, arrays, scalars=(), *, mode="reflect", cval=0, against_cpu=False):
    """The stencil on device copies of ``arrays`` equals the oracle (and the CPU path)."""
    got = stencil(*map(device, arrays), *scalars, boundary=mode, cval=cval)
    assert type(got).__name__ == "FakeCUDAArray"  # device in, device out
    got = host(got)
    out_dtype = stencil.dtype if stencil.dtype is not None else np.result_type(*arrays)
    want = kernel_by_loop(
        stencil.func, arrays, scalars, halo=stencil.halo, mode=mode, cval=cval, out_dtype=out_dtype
    )
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    if against_cpu:
        np.testing.assert_array_equal(got, stencil(*arrays, *scalars, boundary=mode, cval=cval))


@pytest.mark.parametrize("mode", MODES)
def test_2d_every_mode_and_asymmetric_halo(mode):
    check(smooth, [random_array((2, 6, 9), np.uint8)], mode=mode, cval=7, against_cpu=True)
    check(lopsided, [random_array((5, 8), np.int16, seed=1)], mode=mode, cval=-3)


@pytest.mark.parametrize("mode", MODES)
def test_3d_every_mode(mode):
    check(volume, [random_array((4, 5, 6), np.int16, seed=2)], mode=mode, cval=3)
    check(volume, [random_array((4, 5, 6), np.float32, seed=3)], mode=mode, cval=3)


@pytest.mark.parametrize("mode", MODES)
def test_1d_kernel(mode):
    check(central_difference, [random_array((3, 7), np.int32, seed=4)], mode=mode, cval=2)


@pytest.mark.parametrize("mode", MODES)
def test_frames_smaller_than_the_halo(mode):
    for shape in [(1, 1), (2, 1), (1, 3), (3, 2)]:
        check(declared_window, [random_array(shape, np.int16, seed=5)], mode=mode, cval=11)
        check(lopsided, [random_array(shape, np.uint8, seed=6)], mode=mode, cval=9)


def test_batch_dimensions():
    check(smooth, [random_array((2, 3, 5, 6), np.uint16, seed=7)], against_cpu=True)


def test_several_inputs_broadcast_their_batch_dimensions():
    a = random_array((3, 5, 6), np.int16, seed=8)
    b = random_array((5, 6), np.int16, seed=9)
    check(diff, [a, b], mode="wrap")
    # (2, 1) against (2, 3) batch dimensions cannot be flattened into one stride: looped launches.
    for first, second in [((2, 1, 4, 5), (2, 3, 4, 5)), ((3, 1, 4, 5), (1, 2, 4, 5))]:
        arrays = [random_array(first, np.int16, seed=10), random_array(second, np.int16, seed=11)]
        check(diff, arrays)


@pytest.mark.parametrize("t", [0, 40, -5, 2.5])
def test_scalar_parameters(t):
    check(thresh, [random_array((6, 7), np.int16, seed=12)], (t,), mode="nearest")


def test_loops_over_a_declared_neighborhood():
    check(declared_window, [random_array((6, 5), np.uint8, seed=13)], mode="mirror")
    check(declared_window, [random_array((6, 5), np.float64, seed=14)], mode="wrap")


def test_integer_outputs_saturate_and_round_half_to_even():
    x = np.full((5, 5), 250, np.uint8)
    x[2, 2] = 0
    check(lopsided, [x], against_cpu=True)  # 375 -> 255 and negatives -> 0
    halves = np.arange(12, dtype=np.uint8).reshape(3, 4)
    check(sp.library.mean((1, 2)), [halves], against_cpu=True)  # every mean ends in .5


@sp.stencil
def converted_pairs(x):
    return (float(x[0, -1]) + float(x[0, 1])) * 0.25 - (float(x[-1, 0]) - float(x[1, 0])) * 0.5


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16])
def test_converted_pairs_add_in_int32_as_on_the_cpu(dtype):
    """``float(a) + float(b)`` of 8/16-bit reads, one conversion of an int32 sum: the
    oracle's values, and the CPU path's."""
    x = random_array((5, 7), dtype, seed=18)
    check(converted_pairs.with_options(dtype=np.float64), [x], mode="constant", cval=3,
          against_cpu=True)  # fmt: skip


def test_dtype_option():
    check(smooth.with_options(dtype=np.float32), [random_array((4, 5), np.uint8, seed=15)])
    check(volume.with_options(dtype=np.uint8), [random_array((3, 4, 5), np.int16, seed=16)])


@pytest.mark.parametrize("mode", ["reflect", "constant"])
def test_library_filters_equal_the_cpu_path(mode):
    uint8 = random_array((7, 8), np.uint8, seed=17)
    float32 = random_array((7, 8), np.float32, seed=18)
    for stencil, x in [
        (sp.library.mean(3), uint8),
        (sp.library.median(3), uint8),
        (sp.library.sobel(0), uint8),
        (sp.library.laplace(), float32),
        (sp.library.gaussian(1.0, truncate=2.0), float32),
    ]:
        got = host(stencil(device(x), boundary=mode, cval=1))
        np.testing.assert_array_equal(got, stencil(x, boundary=mode, cval=1))


def test_out_is_written_through_any_strides_and_returned():
    from numba import cuda

    x = random_array((2, 5, 6), np.uint8, seed=19)
    big = cuda.to_device(np.zeros((2, 10, 6), np.uint8))
    out = big[:, ::2]
    assert smooth(device(x), out=out) is out
    np.testing.assert_array_equal(host(big)[:, ::2], smooth(x))
    np.testing.assert_array_equal(host(big)[:, 1::2], 0)


def test_more_rows_than_the_grid_holds(monkeypatch):
    from stencilpipe.stencils import codegen_cuda

    monkeypatch.setattr(codegen_cuda, "MAX_GRID_Y", 1)  # one block row: the kernel loops over rows
    check(lopsided, [random_array((2, 9, 5), np.int16, seed=20)], mode="mirror")


def test_chains_run_on_the_device():
    x = random_array((6, 7), np.uint8, seed=21)
    both = sp.chain(smooth, lopsided)
    np.testing.assert_array_equal(host(both(device(x))), both(x))


def test_empty_inputs_give_empty_outputs():
    assert smooth(device(np.zeros((0, 5, 5), np.uint8))).shape == (0, 5, 5)


def test_user_errors():
    x = device(random_array((4, 5), np.int16))
    with pytest.raises(TypeError, match="host memory"):
        diff(x, np.zeros((4, 5), np.int16))
    with pytest.raises(KernelError, match="out= must be a device array of shape"):
        smooth(x, out=np.zeros((4, 5), np.int16))
    with pytest.raises(BoundaryError, match="cannot be represented"):
        smooth(x, boundary="constant", cval=0.5)
    with pytest.raises(KernelError, match="core shape"):
        diff(x, device(np.zeros((4, 6), np.int16)))


ALIASED_FILTERS = [
    sp.library.mean(3),
    sp.library.gaussian(1.0, truncate=2.0),
    sp.library.sobel(0),
    sp.library.laplace(),
    sp.library.minimum(3),
    sp.library.maximum(3),
    sp.library.median(3),
]


@pytest.mark.parametrize("stencil", ALIASED_FILTERS, ids=lambda s: s.name)
def test_out_may_alias_the_input_wholly_or_in_part(stencil):
    memory = random_array((2, 7, 6), np.float64, seed=22)
    for part in [
        lambda b: (b, b),
        lambda b: (b[:, :-1], b[:, 1:]),
        lambda b: (b[:, :, 1:], b[:, :, :-1]),
        lambda b: (b[:-1], b[1:]),
    ]:
        on_device = device(memory)
        x, out = part(on_device)
        want = host(stencil(device(host(x))))  # the same call without out=
        assert stencil(x, out=out) is out
        np.testing.assert_array_equal(host(out), want)


def test_channel_axis_on_the_device():
    rgb = random_array((2, 6, 5, 3), np.uint8, seed=23)
    mean = sp.library.mean(3)
    for axis, x in [(-1, rgb), (0, np.ascontiguousarray(np.moveaxis(rgb, -1, 0)))]:
        got = mean(device(x), channel_axis=axis)
        assert type(got).__name__ == "FakeCUDAArray"
        np.testing.assert_array_equal(host(got), mean(x, channel_axis=axis))
        np.testing.assert_array_equal(
            host(got), np.moveaxis(mean(np.moveaxis(x, axis, 0)), 0, axis)
        )
    both = sp.chain(mean, sp.library.sobel(1))
    np.testing.assert_array_equal(
        host(both(device(rgb), channel_axis=-1)), both(rgb, channel_axis=-1)
    )
    out = device(np.zeros_like(rgb))
    assert mean(device(rgb), out=out, channel_axis=-1) is out
    np.testing.assert_array_equal(host(out), mean(rgb, channel_axis=-1))


def test_sobel_under_constant_pads_each_pass_with_cval_as_scipy_does():
    from scipy import ndimage as ndi

    x = random_array((2, 6, 7), np.float64, seed=24)
    for axis in (0, 1):
        got = host(sp.library.sobel(axis)(device(x), boundary="constant", cval=2.5))
        want = np.stack([ndi.sobel(f, axis, mode="constant", cval=2.5) for f in x])
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    out = device(np.zeros((2, 6, 7), np.uint8))
    frames = random_array((2, 6, 7), np.uint8, seed=25)
    assert sp.library.sobel(1)(device(frames), out=out, boundary="constant", cval=9) is out
    np.testing.assert_array_equal(
        host(out), sp.library.sobel(1)(frames, boundary="constant", cval=9)
    )


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_64_bit_integers_saturate_on_the_device(dtype):
    low = -(2**23) if np.dtype(dtype).kind == "i" else 0
    x = (np.random.default_rng(26).integers(low, 2**23, (5, 6)) * 2**40).astype(dtype)
    for stencil in [sp.library.sobel(0), sp.library.laplace(), sp.library.mean(3)]:
        got = host(stencil(device(x)))
        np.testing.assert_array_equal(got, stencil(x))
        want = kernel_by_loop(stencil.func, [x], halo=stencil.halo, out_dtype=dtype)
        np.testing.assert_array_equal(got, want)


def test_nan_cval_on_the_device():
    x = random_array((5, 6), np.float32, seed=27)
    got = host(sp.library.mean(3)(device(x), boundary="constant", cval=np.nan))
    np.testing.assert_array_equal(got, sp.library.mean(3)(x, boundary="constant", cval=np.nan))
    assert np.isnan(got[0]).all() and not np.isnan(got[1:-1, 1:-1]).any()


def test_big_windows_run_their_per_point_kernels_on_the_device():
    """The GPU runs a big median's counting kernel and a big maximum's loop, and they give
    what the CPU's window passes give (and scipy)."""
    from scipy import ndimage as ndi

    x = random_array((3, 4), np.uint8, seed=28)
    mode = "constant"
    for stencil, theirs in [
        (sp.library.median((5, 11), boundary=mode, cval=3), ndi.median_filter),
        (sp.library.maximum((5, 3), boundary=mode, cval=3), ndi.maximum_filter),
    ]:
        got = host(stencil(device(x)))
        np.testing.assert_array_equal(got, stencil(x))
        np.testing.assert_array_equal(
            got, theirs(x, size=[b + a + 1 for b, a in stencil.halo], mode=mode, cval=3)
        )
