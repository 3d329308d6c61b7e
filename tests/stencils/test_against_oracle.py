"""Compiled CPU stencils against the kernel evaluated by a Python loop on np.pad-ed input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import declared_window, diff, lopsided, smooth, thresh, volume

from oracle import MODES, kernel_by_loop

DTYPES = [np.uint8, np.uint16, np.int16, np.int32, np.float32, np.float64]


def random_array(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def check(stencil, arrays, scalars=(), *, mode="reflect", cval=0, **call):
    got = stencil(*arrays, *scalars, boundary=mode, cval=cval, **call)
    want = kernel_by_loop(
        stencil.func,
        arrays,
        scalars,
        halo=stencil.halo,
        mode=mode,
        cval=cval,
        out_dtype=got.dtype if stencil.dtype is None else stencil.dtype,
    )
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_2d_every_mode_and_dtype(mode, dtype):
    x = random_array((2, 13, 17), dtype)
    check(smooth, [x], mode=mode, cval=7)
    check(lopsided, [x], mode=mode, cval=7)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_3d_every_mode(mode, dtype):
    check(volume, [random_array((6, 7, 9), dtype, seed=1)], mode=mode, cval=3)


def test_batch_dims_are_loop_dims():
    stack = random_array((2, 3, 11, 12), np.uint8)
    out = smooth(stack)
    assert out.shape == stack.shape
    for index in np.ndindex(stack.shape[:2]):
        np.testing.assert_array_equal(out[index], smooth(stack[index]))


def test_several_inputs_broadcast_their_batch_dims():
    a = random_array((4, 9, 10), np.int16, seed=2)
    b = random_array((9, 10), np.int16, seed=3)
    check(diff, [a, b])
    assert diff.signature == "(n,m),(n,m)->(n,m)"


@pytest.mark.parametrize("t", [0, 40, -5])
def test_trailing_scalar_parameters(t):
    check(thresh, [random_array((10, 11), np.int16, seed=4)], (t,), mode="nearest")
    assert thresh.signature == "(n,m),()->(n,m)"


def test_loops_over_a_declared_neighborhood():
    assert declared_window.halo == ((2, 2), (1, 1))
    check(declared_window, [random_array((9, 8), np.uint8)], mode="mirror")
    check(declared_window, [random_array((9, 8), np.float64)], mode="wrap")


def test_integer_outputs_saturate_instead_of_wrapping():
    x = np.full((5, 5), 250, np.uint8)
    x[2, 2] = 0
    out = lopsided(x)  # 3*250 - 250 + 125 - 250 = 375 -> 255; and negatives -> 0
    check(lopsided, [x])
    assert out.max() == 255 and out.dtype == np.uint8


def test_dtype_option_sets_the_output_dtype():
    x = random_array((8, 9), np.uint8)
    as_float = smooth.with_options(dtype=np.float32)
    assert as_float(x).dtype == np.float32
    check(as_float, [x])


def test_out_is_filled_and_returned():
    x = random_array((3, 12, 10), np.uint16)
    out = np.zeros_like(x)
    assert smooth(x, out=out) is out
    np.testing.assert_array_equal(out, smooth(x))


def test_non_contiguous_input_and_output():
    x = random_array((20, 30), np.float32)[::2, ::3]
    out = np.zeros((20, 20), np.float32).T[::2, ::2]
    assert smooth(x, out=out) is out
    check(smooth, [x])
    np.testing.assert_array_equal(out, smooth(np.ascontiguousarray(x)))


def test_empty_inputs_give_empty_outputs():
    assert smooth(np.zeros((0, 5, 5), np.uint8)).shape == (0, 5, 5)
    assert smooth(np.zeros((4, 0), np.uint8)).shape == (4, 0)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 4), st.integers(1, 9), st.integers(1, 9)),
    mode=st.sampled_from(MODES),
    seed=st.integers(0, 2**16),
)
def test_any_shape_including_frames_smaller_than_the_halo(shape, mode, seed):
    x = random_array(shape, np.int16, seed=seed)
    check(lopsided, [x], mode=mode, cval=-3)
    check(declared_window, [x], mode=mode, cval=11)


def test_the_result_does_not_depend_on_the_number_of_threads():
    from stencilpipe.stencils import threads

    x = random_array((3, 40, 33), np.int32, seed=9)
    before = threads.get_num_threads()
    try:
        threads.set_num_threads(1)
        serial = lopsided(x)
        threads.set_num_threads(3)
        np.testing.assert_array_equal(lopsided(x), serial)
    finally:
        threads.set_num_threads(before)
    check(lopsided, [x])
