"""Stencils on Dask arrays: lazy, gufunc-like, equal to the NumPy result whatever the chunking."""

import time

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import declared_window, diff, lopsided, smooth, volume

import stencilpipe as sp
from oracle import MODES


@pytest.fixture(autouse=True)
def synchronous_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


def chunking(draw, length):
    """Random chunk sizes that add up to ``length``."""
    sizes = []
    while sum(sizes) < length:
        sizes.append(min(draw(st.integers(1, max(1, length // 2))), length - sum(sizes)))
    return tuple(sizes)


@st.composite
def chunked_stacks(draw):
    shape = (draw(st.integers(1, 3)), draw(st.integers(1, 14)), draw(st.integers(1, 14)))
    chunks = tuple(chunking(draw, n) for n in shape)
    seed = draw(st.integers(0, 2**16))
    values = np.random.default_rng(seed).integers(-300, 300, shape).astype(np.int16)
    return values, chunks


def test_whole_frame_chunks_are_processed_as_they_are():
    x = np.random.default_rng(0).integers(0, 256, (6, 20, 30), dtype=np.uint8)
    lazy = smooth(da.from_array(x, chunks=(2, -1, -1)))
    assert isinstance(lazy, da.Array) and lazy.dtype == np.uint8 and lazy.chunks[0] == (2, 2, 2)
    assert "overlap" not in " ".join(map(str, lazy.dask.layers))
    np.testing.assert_array_equal(lazy.compute(), smooth(x))


@settings(max_examples=60, deadline=None)
@given(stack=chunked_stacks(), mode=st.sampled_from(MODES))
def test_any_chunking_gives_the_numpy_result_bit_for_bit(stack, mode):
    values, chunks = stack
    lazy = da.from_array(values, chunks=chunks)
    for kernel in (lopsided, declared_window):
        got = kernel(lazy, boundary=mode, cval=5).compute()
        np.testing.assert_array_equal(got, kernel(values, boundary=mode, cval=5))


@pytest.mark.parametrize("mode", MODES)
def test_volumes_cut_along_every_axis(mode):
    v = np.random.default_rng(1).standard_normal((9, 10, 11)).astype(np.float32)
    got = volume(da.from_array(v, chunks=(4, 3, 5)), boundary=mode).compute()
    np.testing.assert_array_equal(got, volume(v, boundary=mode))


def test_several_dask_and_numpy_inputs_mix():
    a = np.random.default_rng(2).integers(-99, 99, (3, 12, 13)).astype(np.int32)
    b = np.random.default_rng(3).integers(-99, 99, (12, 13)).astype(np.int32)
    got = diff(da.from_array(a, chunks=(1, 5, 4)), b).compute()
    np.testing.assert_array_equal(got, diff(a, b))


def test_dtype_and_errors_are_known_before_compute():
    lazy = da.zeros((2, 8, 8), dtype=np.uint8, chunks=(1, 4, 4))
    assert smooth.with_options(dtype=np.float32)(lazy).dtype == np.float32
    with pytest.raises(sp.BoundaryError):
        smooth(lazy, boundary="constant", cval=-1)
    with pytest.raises(sp.KernelError, match="core shape"):
        diff(lazy, da.zeros((8, 9), dtype=np.uint8))


@settings(max_examples=25, deadline=None)
@given(stack=chunked_stacks(), modes=st.lists(st.sampled_from(MODES), min_size=2, max_size=3))
def test_a_chain_equals_its_stages_applied_in_turn(stack, modes):
    values, chunks = stack
    stages = [
        kernel.with_options(boundary=mode)
        for kernel, mode in zip([lopsided, smooth, declared_window], modes)
    ]
    pipeline = sp.chain(*stages)
    want = values
    for stage in stages:
        want = stage(want)
    np.testing.assert_array_equal(pipeline(values), want)
    np.testing.assert_array_equal(pipeline(da.from_array(values, chunks=chunks)).compute(), want)


def test_a_chain_of_whole_frame_chunks_is_one_task_per_chunk():
    x = da.zeros((4, 16, 16), dtype=np.float32, chunks=(1, -1, -1))
    lazy = sp.chain(sp.library.gaussian(1.0), sp.library.mean(3), sp.library.sobel(0))(x)
    (optimized,) = dask.optimize(lazy)
    assert len(optimized.__dask_graph__()) <= 2 * x.npartitions


def test_the_seed_scale_builds_fast_and_computes_one_chunk_for_one_frame():
    start = time.perf_counter()
    x = da.ones((1_000_000, 1000, 1000), chunks=("auto", -1, -1), dtype="int8")
    y = smooth(x)
    assert time.perf_counter() - start < 10
    assert y.shape == x.shape and y.dtype == np.int8
    (first,) = dask.optimize(y[0])
    assert len(first.__dask_graph__()) <= 4  # ones, smooth, getitem: one chunk's tasks
    np.testing.assert_array_equal(first.compute(), np.ones((1000, 1000), np.int8))


def test_inside_dask_tasks_kernels_use_only_the_task_thread(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from stencilpipe.stencils import threads

    class Recording(ThreadPoolExecutor):
        submitted = 0

        def submit(self, *args, **kwargs):
            Recording.submitted += 1
            return super().submit(*args, **kwargs)

    monkeypatch.setattr(threads, "_threads", 2)
    monkeypatch.setattr(threads, "_executor", Recording(1))
    x = np.random.default_rng(4).integers(0, 99, (4, 64, 64)).astype(np.int32)
    smooth(x)  # the first call compiles, in the calling thread
    want = smooth(x)  # outside Dask: the rows are split over two threads
    assert Recording.submitted > 0
    Recording.submitted = 0
    with dask.config.set(scheduler="threads"):
        got = smooth(da.from_array(x, chunks=(1, -1, -1))).compute()
    assert Recording.submitted == 0  # Dask's threads are the only ones
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("in_process", [True, False])
def test_wrap_reads_the_far_end_on_threads_and_on_workers(monkeypatch, in_process):
    """On threads each chunk's task reads its halo from the far end itself; where tasks go
    to other processes Dask's periodic overlap brings it (``_runs_in_this_process``)."""
    from stencilpipe.stencils import dask_apply

    monkeypatch.setattr(dask_apply, "_runs_in_this_process", lambda: in_process)
    v = np.random.default_rng(2).integers(-300, 300, (3, 17, 19)).astype(np.int16)
    lazy = da.from_array(v, chunks=(2, (4, 9, 4), (3, 3, 13)))
    for kernel in (lopsided, declared_window):
        got = kernel(lazy, boundary="wrap")
        assert ("overlap" in " ".join(map(str, got.dask.layers))) != in_process
        np.testing.assert_array_equal(got.compute(), kernel(v, boundary="wrap"))
