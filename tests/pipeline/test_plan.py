"""Planning a run: chunking for balance, the dry-run description, nothing computed."""

import numpy as np
import tifffile

from stencilpipe.pipeline import parse_config, plan


def write_stack(folder, frames):
    folder.mkdir()
    for index in range(frames):
        tifffile.imwrite(folder / f"f{index}.tif", np.full((16, 16), index, np.uint8))


def config_for(tmp_path, output="out", stages=("mean",), **keys):
    """The config of a run from ``tmp_path/in`` to ``tmp_path/<output>``."""
    return parse_config(
        {
            "input": str(tmp_path / "in"),
            "output": str(tmp_path / output),
            "stages": list(stages),
            **keys,
        }
    )


def test_auto_chunks_give_every_worker_thread_several_chunks(tmp_path):
    write_stack(tmp_path / "in", 20)
    config = config_for(tmp_path, cluster={"n_workers": 2, "threads_per_worker": 1})
    work = plan(config)
    assert max(work.stack.chunks[0]) == 2  # ceil(20 frames / (8 chunks x 2 threads))
    assert not (tmp_path / "out").exists()
    assert "20 frames" in work.describe() and "mean" in work.describe()


def test_integer_chunks_are_frames_per_chunk(tmp_path):
    write_stack(tmp_path / "in", 5)
    config = config_for(tmp_path, chunks=3)
    assert plan(config).stack.chunks[0] == (3, 2)


def test_fuse_false_runs_the_stages_one_by_one_to_the_same_result(tmp_path):
    import dask

    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for index in range(3):
        tifffile.imwrite(folder / f"f{index}.tif", rng.integers(0, 256, (40, 30), np.uint8))
    results = {}
    for fuse in (True, False):
        stages = [{"gaussian": {"sigma": 1.0}}, "mean", {"sobel": {"axis": 0}}]
        config = config_for(tmp_path, f"out-{fuse}", stages, fuse=fuse)
        work = plan(config)
        assert work.result.dask is not None and work.config.fuse is fuse
        assert ("unfused" in work.describe()) is not fuse
        with dask.config.set(scheduler="sync"):
            results[fuse] = work.result.compute()
    np.testing.assert_array_equal(results[True], results[False])
