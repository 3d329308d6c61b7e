"""Backends: chunks move to the GPU once and back once per pipeline, whatever the stages."""

import sys
import threading

import dask
import dask.array as da
import numpy as np
import pytest
import tifffile

import stencilpipe as sp
from stencilpipe import backends
from stencilpipe.cluster import connect
from stencilpipe.errors import ClusterError
from stencilpipe.pipeline import parse_config, plan
from stencilpipe.pipeline.config import ClusterConfig

NO_GPU = backends.gpu_status() is not None


class Recorder:
    """Counts chunk moves; stands in for CuPy where it is missing."""

    def __init__(self, convert):
        self.convert = convert
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, chunk):
        with self.lock:
            self.calls += 1
        return self.convert(chunk)


@pytest.fixture
def recording_backend(monkeypatch):
    to_device = Recorder(np.asarray)
    to_host = Recorder(backends.BACKENDS["numpy"].convert)
    monkeypatch.setitem(
        backends.BACKENDS, "recording", backends.Backend("recording", to_device, np.empty)
    )
    monkeypatch.setitem(backends.BACKENDS, "numpy", backends.Backend("numpy", to_host, np.empty))
    run_module = sys.modules["stencilpipe.pipeline.run"]  # the module, not the run() it exports
    monkeypatch.setattr(run_module, "choose_backend", lambda requested, shape: "recording")
    return to_device, to_host


@pytest.mark.parametrize("stages", [["mean"], ["gaussian", "mean", "sobel"]])
def test_each_chunk_moves_once_each_way_whatever_the_number_of_stages(
    tmp_path, recording_backend, stages
):
    to_device, to_host = recording_backend
    (tmp_path / "in").mkdir()
    frames = np.random.default_rng(0).integers(0, 256, (8, 24, 20), dtype=np.uint8)
    for index, frame in enumerate(frames):
        tifffile.imwrite(tmp_path / "in" / f"f{index}.tif", frame)
    config = parse_config(
        {
            "input": str(tmp_path / "in"),
            "output": str(tmp_path / "out"),
            "chunks": [2, -1, -1],
            "stages": [{name: {"sigma": 1.0} if name == "gaussian" else {}} for name in stages],
        }
    )
    work = plan(config)
    assert work.backend == "recording" and work.stack.numblocks[0] == 4
    with dask.config.set(scheduler="sync"):
        report = work.report().compute()
    assert report.frames_written == 8
    assert (to_device.calls, to_host.calls) == (4, 4)
    want = frames
    for stage in [
        sp.library.FILTERS[name](**({"sigma": 1.0} if name == "gaussian" else {}))
        for name in stages
    ]:
        want = stage(want)
    for index in range(8):
        np.testing.assert_array_equal(
            tifffile.imread(tmp_path / "out" / f"f{index}.tif"), want[index]
        )


def test_to_backend_keeps_dask_arrays_lazy_with_the_right_meta():
    x = da.arange(24, dtype=np.int16).reshape(2, 3, 4).rechunk((1, 3, 4))
    moved = sp.to_backend(x, "numpy")
    assert isinstance(moved._meta, np.ndarray) and moved.chunks == x.chunks
    np.testing.assert_array_equal(moved.compute(), x.compute())
    with pytest.raises(sp.BackendError, match="unknown backend 'tpu'"):
        sp.to_backend(x, "tpu")


@pytest.mark.skipif(not NO_GPU, reason="checks the machines without a GPU")
def test_without_a_gpu_auto_is_the_cpu_and_cupy_fails_at_start_with_one_message():
    assert backends.choose_backend("auto", (2048, 2048)) == "numpy"
    with pytest.raises(sp.BackendError) as info:
        backends.choose_backend("cupy", (2048, 2048))
    assert "backend 'cupy' needs a GPU" in str(info.value) and "\n" not in str(info.value)


def test_auto_keeps_small_frames_on_the_cpu(monkeypatch):
    monkeypatch.setattr(backends, "gpu_status", lambda: None)  # pretend a GPU is present
    assert backends.choose_backend("auto", (64, 64)) == "numpy"  # measured: the CPU wins there
    assert backends.choose_backend("auto", (512, 512)) == "cupy"


def test_gpu_cluster_without_dask_cuda_is_a_clear_error():
    pytest.importorskip("distributed")
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        with pytest.raises(ClusterError, match="cluster.gpu needs dask-cuda"):
            with connect(ClusterConfig(gpu=True)):
                pass
    else:
        pytest.skip("dask-cuda is installed: the GPU cluster itself is tested on the GPU machine")
