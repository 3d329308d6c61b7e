"""Fused chains and separable filters (stencils/fused.py).

A fused chain must equal its stages applied one after another over whole frames, bit for
bit; strips are forced down to one row, so that every strip edge, every halo wider than
a strip and every true frame edge is crossed. Separable filters are checked against
their full (2-D) kernel and against scipy.ndimage.
"""

import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import declared_window, lopsided, smooth
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.stencils import fused, threads

# Kept small: every (stage, mode, dtype) is one more kernel to compile on a fresh machine.
POOL = {
    "gaussian": lambda mode: sp.library.gaussian(1.0, boundary=mode),
    "mean2x5": lambda mode: sp.library.mean((2, 5), boundary=mode),
    "sobel": lambda mode: sp.library.sobel(0, boundary=mode),
    "lopsided": lambda mode: lopsided.with_options(boundary=mode),
    "declared": lambda mode: declared_window.with_options(boundary=mode, cval=3),
}
FUSED_MODES = ["reflect", "mirror", "constant"]  # wrap never fuses: test_wrap_...
DTYPES = [np.uint8, np.float32]


def whole(stencil):
    """The same stencil without its separable passes: the full kernel."""
    copy = stencil.with_options()
    copy.passes = None
    return copy


def one_by_one(stages, values):
    for stage in stages:
        values = stage(values)
    return values


@pytest.fixture
def one_row_strips(monkeypatch):
    monkeypatch.setattr(fused, "STRIP_BYTES", 1)
    monkeypatch.setattr(fused, "MIN_STRIP_ROWS", 1)


@st.composite
def stacks(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 19)), draw(st.integers(1, 12)))
    seed = draw(st.integers(0, 2**16))
    values = np.random.default_rng(seed).integers(0, 256, shape)
    return values.astype(dtype)


@settings(max_examples=25, deadline=None)
@given(
    values=stacks(),
    names=st.lists(st.sampled_from(sorted(POOL)), min_size=2, max_size=3),
    modes=st.lists(st.sampled_from(FUSED_MODES), min_size=3, max_size=3),
    strips=st.sampled_from([1, 3, None]),
)
def test_a_fused_chain_is_bit_for_bit_the_stages_one_by_one(values, names, modes, strips):
    """Any stages, modes (each its own), dtypes, frame sizes down to 1x1, strip heights."""
    stages = [POOL[name](mode) for name, mode in zip(names, modes)]
    want = one_by_one(stages, values)
    saved = fused.STRIP_BYTES, fused.MIN_STRIP_ROWS
    if strips is not None:
        fused.STRIP_BYTES, fused.MIN_STRIP_ROWS = 1, strips
    try:
        got = sp.chain(*stages)(values)
    finally:
        fused.STRIP_BYTES, fused.MIN_STRIP_ROWS = saved
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sp.chain(*stages, fuse=False)(values), want)


# Few cases: each is several kernels to compile on a fresh machine.
@pytest.mark.parametrize("mode", ["reflect", "mirror"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int32])
def test_separable_integer_mean_is_bit_exact_and_equals_scipy_rounded(one_row_strips, mode, dtype):
    x = np.random.default_rng(4).integers(0, 1000, (2, 37, 29)).astype(dtype)
    for size in (3, (2, 5)):
        mean = sp.library.mean(size, boundary=mode)
        assert mean.passes is not None
        got = mean(x)
        np.testing.assert_array_equal(got, whole(mean)(x))
        want = np.stack([ndi.uniform_filter(f.astype(float), size, mode=mode) for f in x])
        np.testing.assert_array_equal(got, np.rint(want).astype(dtype))


@pytest.mark.parametrize("mode", ["reflect", "nearest"])
def test_separable_gaussian_equals_the_full_kernel_to_rounding(one_row_strips, mode):
    x = np.random.default_rng(5).standard_normal((2, 41, 33))
    gaussian = sp.library.gaussian((0.5, 1.0), boundary=mode)
    np.testing.assert_allclose(gaussian(x), whole(gaussian)(x), rtol=1e-12, atol=1e-13)
    want = np.stack([ndi.gaussian_filter(f, (0.5, 1.0), mode=mode) for f in x])
    np.testing.assert_allclose(gaussian(x), want, rtol=1e-12, atol=1e-13)
    pixels = np.random.default_rng(6).integers(0, 256, (2, 41, 33)).astype(np.uint8)
    difference = gaussian(pixels).astype(int) - whole(gaussian)(pixels).astype(int)
    assert np.abs(difference).max() <= 1 and np.count_nonzero(difference) <= 2


def test_wrap_chains_run_unfused_and_equal_the_stages(one_row_strips):
    x = np.random.default_rng(12).integers(0, 256, (2, 17, 9)).astype(np.uint8)
    stages = [POOL["gaussian"]("wrap"), smooth.with_options(boundary="reflect")]
    np.testing.assert_array_equal(sp.chain(*stages)(x), one_by_one(stages, x))


def test_constant_and_wrap_use_the_full_kernel():
    x = np.random.default_rng(8).integers(0, 256, (19, 23)).astype(np.uint8)
    for mode in ("constant", "wrap"):
        mean = sp.library.mean(3, boundary=mode, cval=7)
        (step,) = mean.strip_passes(x.dtype, x.dtype, mode, 7)
        assert step.kernel.stencil is mean or step.kernel.stencil.func is mean.func
        want = np.rint(ndi.uniform_filter(x.astype(float), 3, mode=mode, cval=7)).astype(np.uint8)
        np.testing.assert_array_equal(mean(x), want)


def test_fused_chains_on_dask_chunks_equal_the_unfused_chain():
    x = np.random.default_rng(9).integers(0, 256, (3, 40, 50)).astype(np.uint8)
    stages = [POOL["gaussian"]("reflect"), POOL["mean2x5"]("nearest"), POOL["sobel"]("mirror")]
    want = one_by_one(stages, x)
    with dask.config.set(scheduler="sync"):
        for chunks in [(1, -1, -1), (2, 13, 17)]:
            lazy = sp.chain(*stages)(da.from_array(x, chunks=chunks))
            np.testing.assert_array_equal(lazy.compute(), want)


def test_the_result_does_not_depend_on_the_number_of_threads():
    x = np.random.default_rng(10).integers(0, 256, (3, 300, 64)).astype(np.uint8)
    pipeline = sp.chain(POOL["gaussian"]("reflect"), POOL["mean2x5"]("reflect"))
    before = threads.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            threads.set_num_threads(n)
            results.append(pipeline(x))
    finally:
        threads.set_num_threads(before)
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])


def test_intermediates_are_not_materialised():
    """Fused: the output plus cache-sized strips. One by one: every intermediate frame."""
    x = np.random.default_rng(11).standard_normal((1, 4096, 1024))
    stages = [sp.library.gaussian(1.0), sp.library.mean(3), sp.library.sobel(0)]
    pipeline = sp.chain(*stages)
    pipeline(x[:, :64, :64])  # compile outside the measurement
    peaks = {}
    for name, run in [("fused", pipeline), ("one by one", sp.chain(*stages, fuse=False))]:
        tracemalloc.start()
        run(x)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    frame = x.nbytes  # 32 MiB; each thread's strips take up to STRIP_BYTES per pass
    assert peaks["fused"] < 1.5 * frame, peaks
    assert peaks["one by one"] >= 2 * frame, peaks


def test_precompiling_a_separable_filter_compiles_its_passes_not_the_2d_kernel(monkeypatch):
    """The pipeline precompiles its stages in the client: only what a call runs. (A
    filter made again shares what the first compiled, so the 2-D kernel may exist from
    another test: what counts is that precompiling does not ask for it.)"""
    asked = []
    compiled = sp.Stencil.compiled
    monkeypatch.setattr(
        sp.Stencil,
        "compiled",
        lambda self, *args: asked.append((self, args)) or compiled(self, *args),
    )
    mean = sp.library.mean(3)
    uint8 = np.dtype(np.uint8)
    assert mean.precompile(uint8) == uint8
    steps = mean.strip_passes(uint8, uint8, "reflect", 0)
    assert len(steps) == 2 and all(step.kernel.apply.signatures for step in steps)
    assert not [args for stencil, args in asked if stencil is mean]
    wrapped = sp.library.mean(3, boundary="wrap")  # wrap runs the 2-D kernel: compiled
    wrapped.precompile(uint8)
    assert ((uint8,), uint8, "wrap") in [args for stencil, args in asked if stencil is wrapped]
    assert wrapped.compiled((uint8,), uint8, "wrap").apply.signatures
