"""Stencils on a real GPU with CuPy: bit for bit the CPU path for integer kernels, scipy's filters.

Skipped, with the reason, where CuPy or a CUDA device is missing; ``benchmarks/gpu.sh``
runs them on a GPU machine. Float kernels agree with the CPU path to rounding,
not bit for bit: NVVM contracts ``a * b + c`` into fused multiply-adds.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from kernels import declared_window, diff, lopsided, smooth, thresh, volume
from test_against_oracle import random_array

import stencilpipe as sp
from cuda_device import cupy_and_marks
from oracle import MODES, kernel_by_loop
from stencilpipe.errors import KernelError

cupy, pytestmark = cupy_and_marks()

INTEGER_DTYPES = [np.uint8, np.int16, np.int32]


def same_as_cpu(stencil, arrays, scalars=(), **call):
    """The stencil on CuPy copies of ``arrays`` gives a CuPy array, bit for bit the CPU path's."""
    got = stencil(*map(cupy.asarray, arrays), *scalars, **call)
    assert isinstance(got, cupy.ndarray)
    want = stencil(*arrays, *scalars, **call)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(cupy.asnumpy(got), want)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", INTEGER_DTYPES)
def test_integer_kernels_are_bit_identical_to_the_cpu_path(mode, dtype):
    x = random_array((3, 61, 67), dtype)
    same_as_cpu(smooth, [x], boundary=mode, cval=7)
    same_as_cpu(lopsided, [x], boundary=mode, cval=7)
    same_as_cpu(volume, [random_array((9, 10, 11), dtype, seed=1)], boundary=mode, cval=3)
    # Frames smaller than the halo ((2, 2), (1, 1)).
    same_as_cpu(declared_window, [random_array((2, 1, 3), dtype, seed=2)], boundary=mode, cval=5)


@pytest.mark.parametrize("mode", MODES)
def test_against_the_oracle(mode):
    x = random_array((2, 7, 9), np.int16, seed=3)
    got = cupy.asnumpy(lopsided(cupy.asarray(x), boundary=mode, cval=-3))
    want = kernel_by_loop(lopsided.func, [x], halo=lopsided.halo, mode=mode, cval=-3)
    np.testing.assert_array_equal(got, want)


def test_float_kernels_agree_with_the_cpu_path_to_rounding():
    for dtype, tolerance in [(np.float32, 1e-6), (np.float64, 1e-12)]:
        x = random_array((2, 50, 70), dtype, seed=4)
        for stencil in (smooth, volume, declared_window):
            got = cupy.asnumpy(stencil(cupy.asarray(x)))
            np.testing.assert_allclose(got, stencil(x), rtol=tolerance, atol=tolerance * 100)


def test_batch_dimensions_inputs_and_scalars():
    same_as_cpu(smooth, [random_array((2, 3, 40, 30), np.uint8, seed=5)])
    shapes = [((4, 30, 20), (30, 20)), ((2, 1, 9, 8), (2, 3, 9, 8)), ((3, 1, 9, 8), (1, 2, 9, 8))]
    for first, second in shapes:
        arrays = [random_array(first, np.int16, seed=6), random_array(second, np.int16, seed=7)]
        same_as_cpu(diff, arrays)
    for t in (0, 40, -5, 2.5):
        same_as_cpu(thresh, [random_array((30, 31), np.int16, seed=10)], (t,), boundary="nearest")
    same_as_cpu(smooth.with_options(dtype=np.float32), [random_array((20, 21), np.uint8, seed=11)])


def test_saturation():
    x = np.full((50, 50), 250, np.uint8)
    x[::7, ::5] = 0
    same_as_cpu(lopsided, [x])
    same_as_cpu(sp.library.sobel(0), [x])


def test_out_is_written_through_any_strides_and_returned():
    x = random_array((2, 30, 40), np.uint8, seed=12)
    big = cupy.zeros((2, 60, 40), np.uint8)
    out = big[:, ::2]
    assert smooth(cupy.asarray(x), out=out) is out
    np.testing.assert_array_equal(cupy.asnumpy(big[:, ::2]), smooth(x))
    assert int(big[:, 1::2].max()) == 0


def test_numba_device_arrays_give_numba_device_arrays():
    from numba import cuda

    x = random_array((30, 40), np.uint16, seed=13)
    got = smooth(cuda.to_device(x))
    assert cuda.is_cuda_array(got) and not isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(got.copy_to_host(), smooth(x))


def test_runs_on_cupys_current_stream():
    x = random_array((4, 256, 256), np.uint8, seed=14)
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        device = cupy.asarray(x)
        got = smooth(device)
        again = smooth(got)  # reads what the first launch wrote: same stream, in order
    stream.synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(again), smooth(smooth(x)))


def test_more_rows_than_the_grid_holds(monkeypatch):
    from stencilpipe.stencils import codegen_cuda

    monkeypatch.setattr(codegen_cuda, "MAX_GRID_Y", 3)
    same_as_cpu(lopsided, [random_array((5, 300, 20), np.int16, seed=15)], boundary="mirror")


def test_dask_arrays_of_cupy_chunks():
    import dask.array as da

    x = random_array((3, 64, 48), np.uint8, seed=16)
    lazy = smooth(da.from_array(cupy.asarray(x), chunks=(1, 20, 48)))
    got = lazy.compute(scheduler="synchronous")
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(got), smooth(x))


@pytest.mark.parametrize("mode", MODES)
def test_library_against_cupyx_scipy_ndimage(mode):
    from cupyx.scipy import ndimage as cndi

    rng = np.random.default_rng(17)
    uint8 = cupy.asarray(rng.integers(0, 256, (97, 101), dtype=np.uint8))
    floats = cupy.asarray(rng.standard_normal((97, 101)))
    exact = [
        (sp.library.median(3), cndi.median_filter(uint8, 3, mode=mode)),
        (sp.library.minimum((2, 5)), cndi.minimum_filter(uint8, (2, 5), mode=mode)),
        (sp.library.maximum(4), cndi.maximum_filter(uint8, 4, mode=mode)),
    ]
    for stencil, want in exact:
        cupy.testing.assert_array_equal(stencil(uint8, boundary=mode), want)
    close = [
        (sp.library.mean(3), cndi.uniform_filter(floats, 3, mode=mode)),
        (
            sp.library.gaussian(1.0, truncate=2.0),
            cndi.gaussian_filter(floats, 1.0, truncate=2.0, mode=mode),
        ),
        (sp.library.sobel(0), cndi.sobel(floats, 0, mode=mode)),
        (sp.library.laplace(), cndi.laplace(floats, mode=mode)),
    ]
    for stencil, want in close:
        cupy.testing.assert_allclose(stencil(floats, boundary=mode), want, rtol=1e-10, atol=1e-10)
    mean = cndi.uniform_filter(uint8.astype(np.float64), 3, mode=mode)
    rounded = cupy.rint(mean).astype(np.uint8)
    cupy.testing.assert_array_equal(sp.library.mean(3)(uint8, boundary=mode), rounded)


def test_library_integer_filters_are_bit_identical_to_the_cpu_path():
    x = random_array((2, 80, 90), np.uint8, seed=18)
    library = sp.library
    for stencil in (library.mean(3), library.median(3), library.sobel(1), library.laplace()):
        same_as_cpu(stencil, [x])


def test_a_kernel_that_does_not_compile_says_so():
    @sp.stencil
    def broken(x):
        return x[0, 0] + "1"

    with pytest.raises(KernelError, match="does not compile"):
        broken(cupy.zeros((4, 4), np.uint8))


def test_compiled_kernels_are_cached_on_disk(tmp_path):
    script = textwrap.dedent(
        """
        import cupy, stencilpipe as sp
        sp.library.mean(3)(cupy.ones((16, 16), cupy.uint8))
        cupy.cuda.Device().synchronize()
        """
    )
    env = {**os.environ, "STENCILPIPE_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True)
    assert list(tmp_path.glob("kernels/*_cuda_*.py"))
    assert list(tmp_path.glob("kernels/__pycache__/*.nbc")), "numba-cuda wrote no disk cache"
