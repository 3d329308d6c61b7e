"""The drop-in namespaces and whole runs on a real GPU: CuPy in, CuPy out, scipy's values.

``stencilpipe.ndfilters``/``ndmorph`` on CuPy arrays (and Dask arrays of CuPy chunks) against
scipy.ndimage on the host copy; a run with ``backend: cupy`` and one with ``--gpu``
(dask-cuda's LocalCUDACluster) against the same run on the CPU, files read back by tifffile.
Order statistics and morphology are exact; weighted filters on integers may differ by one
(NVVM fuses multiply-adds, so a rounding tie can fall the other way), floats to rounding.

Skipped, with the reason, where CuPy or a CUDA device is missing; ``benchmarks/gpu.sh``
runs them on a GPU machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import tifffile
from rich.console import Console
from scipy import ndimage as ndi

import stencilpipe.ndfilters as ndf
import stencilpipe.ndmorph as ndm
from cuda_device import cupy_and_marks
from stencilpipe.pipeline import parse_config, run

cupy, pytestmark = cupy_and_marks()

MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
DISK = np.hypot(*np.mgrid[-3:4, -3:4]) <= 3
WEIGHTS = np.arange(1.0, 13.0).reshape(3, 4) - 6
# (function, positional arguments after the image, keyword arguments)
FILTERS = [
    ("gaussian_filter", (1.5,), {}),
    ("uniform_filter", (5,), {}),
    ("uniform_filter", (31,), {}),
    ("median_filter", (), {"size": 3}),
    ("median_filter", (), {"size": 15}),
    ("minimum_filter", (), {"footprint": DISK}),
    ("maximum_filter", (), {"size": (3, 7)}),
    ("percentile_filter", (30,), {"size": 5}),
    ("rank_filter", (-2,), {"size": 4}),
    ("sobel", (), {"axis": 0}),
    ("prewitt", (), {"axis": 1}),
    ("laplace", (), {}),
    ("gaussian_laplace", (1.0,), {}),
    ("gaussian_gradient_magnitude", (1.0,), {}),
    ("correlate", (WEIGHTS,), {}),
    ("convolve", (WEIGHTS,), {"origin": 1}),
    ("uniform_filter1d", (7,), {"axis": 0}),
    ("gaussian_filter1d", (2.0,), {"axis": -1, "order": 1}),
    ("minimum_filter1d", (5,), {}),
]
ORDER_STATISTICS = {"median_filter", "minimum_filter", "maximum_filter", "percentile_filter",
                    "rank_filter", "minimum_filter1d"}  # fmt: skip


def image(dtype, shape=(61, 67), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype) * 100
    return rng.integers(0, np.iinfo(dtype).max, shape, endpoint=True).astype(dtype)


def assert_like_scipy(name: str, got, want: np.ndarray) -> None:
    assert isinstance(got, cupy.ndarray), type(got)
    got = cupy.asnumpy(got)
    assert got.dtype == want.dtype
    if name in ORDER_STATISTICS:
        np.testing.assert_array_equal(got, want)
    elif want.dtype.kind in "ui":
        difference = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert difference.max() <= 1, f"{name}: off by {difference.max()}"
    else:
        scale = float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


CASES = [(f, np.uint16, mode) for f in FILTERS for mode in MODES] + [
    (f, dtype, "reflect") for f in FILTERS for dtype in (np.uint8, np.float32)
]


@pytest.mark.parametrize(
    ("case", "dtype", "mode"), CASES, ids=[f"{c[0]}-{np.dtype(d).name}-{m}" for c, d, m in CASES]
)
def test_ndfilters_on_cupy_give_cupy_and_scipys_values(case, dtype, mode):
    name, args, kwargs = case
    host = image(dtype)
    got = getattr(ndf, name)(cupy.asarray(host), *args, mode=mode, **kwargs)
    assert_like_scipy(name, got, getattr(ndi, name)(host, *args, mode=mode, **kwargs))


def test_three_d_windows_on_cupy():
    host = image(np.uint16, shape=(12, 30, 31), seed=1)
    for name, kwargs in [("median_filter", {"size": 7}), ("maximum_filter", {"size": 5}),
                         ("uniform_filter", {"size": (3, 5, 7)})]:  # fmt: skip
        got = getattr(ndf, name)(cupy.asarray(host), mode="mirror", **kwargs)
        want = getattr(ndi, name)(host, mode="mirror", **kwargs)
        assert_like_scipy(name, got, want)


@pytest.mark.parametrize("mode", ["wrap", "reflect"])
def test_dask_arrays_of_cupy_chunks_are_the_whole_arrays_result(mode):
    """Chunked (where dask-image's ``wrap`` wraps within edge chunks): scipy on the whole array."""
    import dask.array as da

    host = image(np.uint16, shape=(70, 90), seed=2)
    lazy_input = da.from_array(cupy.asarray(host), chunks=(20, 25))
    for name, args, kwargs in [("median_filter", (), {"size": 5}), ("uniform_filter", (7,), {}),
                               ("gaussian_filter", (2.0,), {})]:  # fmt: skip
        lazy = getattr(ndf, name)(lazy_input, *args, mode=mode, **kwargs)
        assert isinstance(lazy._meta, cupy.ndarray)
        got = lazy.compute(scheduler="threads")
        assert_like_scipy(name, got, getattr(ndi, name)(host, *args, mode=mode, **kwargs))


def test_a_new_kernel_launched_from_many_threads_at_once():
    """numba-cuda loads a kernel's module on its first launch: eight threads at once must not
    load it twice (they did: "key already in dictionary", in a Dask worker's threads)."""
    from concurrent.futures import ThreadPoolExecutor
    from threading import Barrier

    import stencilpipe as sp

    @sp.stencil
    def fresh(x):  # a kernel no other test has launched in this process
        return x[-1, 1] - x[1, -1] + 3

    host = image(np.uint8, shape=(8, 40, 50), seed=5).astype(np.int32)
    barrier = Barrier(8)

    def launch(k):
        frame = cupy.asarray(host[k])
        barrier.wait()
        return cupy.asnumpy(fresh(frame))

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(launch, range(8)))
    for k, got in enumerate(results):
        np.testing.assert_array_equal(got, fresh(host[k]))


def test_ndmorph_on_cupy_is_scipys():
    binary = image(np.uint8, shape=(50, 60), seed=3) > 100
    grey = image(np.uint8, shape=(50, 60), seed=4)
    structure = ndi.generate_binary_structure(2, 1)
    cases = [
        ("binary_erosion", binary, {"structure": structure, "iterations": 2}),
        ("binary_dilation", binary, {"structure": DISK, "border_value": 1}),
        ("binary_opening", binary, {"iterations": 2}),
        ("binary_closing", binary, {"structure": DISK}),
        ("grey_erosion", grey, {"size": (3, 5)}),
        ("grey_dilation", grey, {"footprint": DISK}),
        ("grey_opening", grey, {"size": 4, "mode": "wrap"}),
        ("grey_closing", grey, {"footprint": DISK, "mode": "mirror"}),
    ]
    for name, host, kwargs in cases:
        got = getattr(ndm, name)(cupy.asarray(host), **kwargs)
        assert isinstance(got, cupy.ndarray), name
        np.testing.assert_array_equal(cupy.asnumpy(got), getattr(ndi, name)(host, **kwargs), name)


@pytest.fixture
def stack(tmp_path) -> dict[str, np.ndarray]:
    (tmp_path / "in").mkdir()
    frames = {f"f{i:02d}": image(np.uint16, shape=(96, 128), seed=10 + i) for i in range(12)}
    for name, frame in frames.items():
        tifffile.imwrite(tmp_path / "in" / f"{name}.tif", frame)
    return frames


STAGES = [{"gaussian": {"sigma": 1.5}}, {"median": {"size": 3}}, {"sobel": {"axis": 0}}]


def outputs(folder, names) -> dict[str, np.ndarray]:
    return {name: tifffile.imread(folder / f"{name}.tif") for name in names}


def test_a_run_on_cupy_chunks_writes_the_cpu_runs_files(tmp_path, stack):
    """``backend: cupy``: every stage on the device, the same files as ``backend: numpy``."""
    for backend in ("numpy", "cupy"):
        config = {"input": "in", "output": f"out-{backend}", "stages": STAGES, "backend": backend}
        summary = run(
            parse_config(config, base_dir=tmp_path), console=Console(quiet=True), progress=False
        )
        assert not summary.failures and summary.written == len(stack), summary
    cpu, gpu = (outputs(tmp_path / f"out-{b}", stack) for b in ("numpy", "cupy"))
    for name in stack:
        difference = np.abs(cpu[name].astype(np.int64) - gpu[name].astype(np.int64))
        # sobel of a uint16 median wraps like scipy's; the gaussian's ties can differ by one
        # on the GPU, which sobel then carries to at most 1 + 2 + 1 neighbours' weights.
        assert difference.max() <= 4, f"{name}: off by {difference.max()}"
        assert np.count_nonzero(difference) <= difference.size // 100


def test_cli_gpu_runs_on_dask_cuda_and_writes_the_cpu_runs_files(tmp_path, stack):
    pytest.importorskip("dask_cuda", reason="dask-cuda is not installed")
    stages = "mean:size=3,median:size=5"
    env = {**os.environ, "NO_COLOR": "1"}
    for flags, folder in [((), "out-cpu"), (("--gpu",), "out-gpu")]:
        command = [sys.executable, "-m", "stencilpipe", "apply", stages, "in", folder,
                   "--no-dashboard", *flags]  # fmt: skip
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
    cpu, gpu = (outputs(tmp_path / folder, stack) for folder in ("out-cpu", "out-gpu"))
    for name in stack:
        np.testing.assert_array_equal(gpu[name], cpu[name], name)
