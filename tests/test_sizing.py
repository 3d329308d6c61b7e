"""Chunk sizing from the workers' memory, and the dry run's estimate, against plain counts."""

import dask.array as da
import numpy as np
import pytest

from stencilpipe.errors import ClusterError
from stencilpipe.pipeline.sizing import (
    TASKS_SHARE,
    WORKER_BASELINE,
    WORKER_CEILING,
    estimate,
    frames_per_chunk,
)


def test_frames_per_chunk_fills_the_share_of_memory_and_no_more():
    frame = 2048 * 2048 * 2  # uint16
    limit = 4 * 2**30
    for threads in (1, 2, 4):
        frames = frames_per_chunk(frame, frame, limit, threads)
        held = threads * 2 * (frames * frame * 2)  # each chunk twice, input and output
        assert held <= TASKS_SHARE * limit < threads * 2 * ((frames + 1) * frame * 2)
    assert frames_per_chunk(frame, frame, None, 2) is None


def test_frames_per_chunk_leaves_the_workers_own_memory_alone():
    # Two 400 MB workers (issue 18): the share would allow 4 frames of 2048 x 2048 uint16,
    # but with the ~256 MiB a worker holds itself only 2 stay under the ceiling.
    frame = 2048 * 2048 * 2
    limit = 400 * 10**6
    frames = frames_per_chunk(frame, frame, limit, 1)
    assert WORKER_BASELINE + 2 * frames * 2 * frame <= WORKER_CEILING * limit
    assert frames == 2 < int(TASKS_SHARE * limit // (4 * frame))


@pytest.mark.parametrize("threads", [1, 4])
def test_a_limit_below_what_a_worker_needs_is_refused_with_the_least_that_would_do(threads):
    frame = 2048 * 2048 * 2
    limit = 200 * 10**6  # a worker was restarted for every task (benchmarks/cluster_memory.py)
    with pytest.raises(ClusterError, match="memory limit of 190.73 MiB cannot hold a task") as e:
        frames_per_chunk(frame, frame, limit, threads)
    least = int(str(e.value).split("at least ")[1].split(" MiB")[0].split(".")[0]) * 2**20
    assert frames_per_chunk(frame, frame, least + 2**20, threads) >= 1


@pytest.mark.parametrize(
    "chunks, halo",
    [
        ((4, 64, 64), ((2, 2), (2, 2))),  # frames only: nothing read twice
        ((4, 16, 64), ((2, 2), (2, 2))),
        ((4, 16, 10), ((3, 1), (0, 5))),
        ((1, 7, 9), ((1, 1), (1, 1))),
    ],
)
def test_halo_overhead_is_what_map_overlap_reads(chunks, halo):
    stack = da.zeros((8, 64, 64), dtype=np.uint8, chunks=chunks)
    depth = {0: 0, 1: halo[0], 2: halo[1]}
    cut = {axis: d if len(stack.chunks[axis]) > 1 else 0 for axis, d in depth.items()}
    overlapped = da.overlap.overlap(stack, depth=cut, boundary="none")
    want = 100 * (overlapped.size / stack.size - 1)
    got = estimate(stack, stack, 1, halo, threads_per_worker=1, memory_limit=None)
    assert got.halo_overhead == pytest.approx(want)
    assert got.chunks == np.prod(stack.numblocks)
    assert got.chunk_shape == tuple(max(c) for c in stack.chunks)


def test_peak_per_worker_counts_its_threads_chunks():
    stack = da.zeros((10, 100, 100), dtype=np.uint16, chunks=(5, 100, 100))
    result = stack.astype(np.float32)
    got = estimate(stack, result, 7, ((1, 1), (1, 1)), threads_per_worker=3, memory_limit=2**30)
    assert got.peak_per_worker == 3 * 2 * 5 * 100 * 100 * (2 + 4)
    assert got.tasks == 7 and got.memory_limit == 2**30
    assert (
        "3 of 5 x 100 x 100" not in got.lines()[0]
        and got.lines()[0] == "chunks:  2 of 5 x 100 x 100"
    )


def write_stack(folder, frames=12, shape=(64, 80)):
    import tifffile

    folder.mkdir()
    stack = np.random.default_rng(4).integers(0, 4000, (frames, *shape), dtype=np.uint16)
    for i, frame in enumerate(stack):
        tifffile.imwrite(folder / f"f{i:02d}.tif", frame)
    return stack


def test_chunks_auto_fits_a_workers_memory(tmp_path):
    """With a worker memory limit of 40 frames' worth, its one thread's task holds at most
    TASKS_SHARE of it: 4 frames per chunk (in + out uint16, twice over); the values are
    scipy's whatever the chunking."""
    from scipy import ndimage as ndi

    from stencilpipe.pipeline import parse_config
    from stencilpipe.pipeline.run import Workers, plan

    stack = write_stack(tmp_path / "in", frames=96)  # balanced: 6 per chunk; memory: 4
    config = parse_config(
        {"input": "in/*.tif", "output": "out/", "stages": [{"mean": {"size": 3}}]},
        base_dir=tmp_path,
    )
    frame = 64 * 80 * 2
    limit = int((WORKER_BASELINE + 18 * frame) / WORKER_CEILING)  # room for 4 frames' tasks
    work = plan(config, workers=Workers(memory_limit=limit, threads=1))
    per_chunk = frames_per_chunk(frame, frame, limit, 1)
    assert per_chunk == 4 and max(work.stack.chunks[0]) == per_chunk
    want = np.stack([np.rint(ndi.uniform_filter(f.astype(float), 3)) for f in stack])
    np.testing.assert_array_equal(work.result.compute(), want)


def test_dry_run_prints_the_estimate_and_writes_nothing(tmp_path):
    import json
    import subprocess
    import sys

    write_stack(tmp_path / "in")
    (tmp_path / "run.yaml").write_text(
        "input: in/*.tif\noutput: out/\nstages:\n  - mean: {size: 3}\nchunks: 3\n"
    )
    command = [sys.executable, "-m", "stencilpipe", "run", "--dry-run", "--json", "run.yaml"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)["estimate"]
    assert got["chunks"] == 4 and got["chunk_shape"] == [3, 64, 80]
    assert got["halo_overhead_percent"] == 0  # whole frames: nothing read twice
    assert got["peak_bytes_per_worker"] > 0 and got["tasks"] > got["chunks"]
    assert not (tmp_path / "out").exists()
    text = subprocess.run(command[:-2] + ["run.yaml"], cwd=tmp_path, capture_output=True, text=True)
    assert "chunks:  4 of 3 x 64 x 80" in text.stdout and "per worker at most" in text.stdout
