"""Output and storage keys of a config reach the write: levels, storage_options, durability,
and a 3-D stage on a stack without z is refused (read back with ngff-zarr, s3fs, tifffile)."""

from __future__ import annotations

import io
import os

import ngff_zarr
import numpy as np
import pytest
import tifffile
from rich.console import Console
from scipy import ndimage as ndi

from stencilpipe.errors import ConfigError
from stencilpipe.io import atomic
from stencilpipe.pipeline import parse_config, run

FRAMES = np.random.default_rng(5).integers(0, 4000, (4, 20, 22), dtype=np.uint16)


def run_config(tmp_path, **keys):
    data = {"input": "in/*.tif", "stages": [{"mean": {"size": 3}}], **keys}
    config = parse_config(data, base_dir=tmp_path)
    return run(config, console=Console(file=io.StringIO()), progress=False)


def write_inputs(tmp_path):
    (tmp_path / "in").mkdir()
    for i, frame in enumerate(FRAMES):
        tifffile.imwrite(tmp_path / "in" / f"f{i}.tif", frame)


def expected():
    return np.stack([np.rint(ndi.uniform_filter(f.astype(float), 3)) for f in FRAMES])


def test_levels_reach_the_ome_zarr_output(tmp_path):
    write_inputs(tmp_path)
    assert run_config(tmp_path, output="out.ome.zarr", levels=2).written == 4
    image = ngff_zarr.from_ngff_zarr(str(tmp_path / "out.ome.zarr"), validate=True)
    assert len(image.images) == 2
    np.testing.assert_array_equal(np.asarray(image.images[0].data), expected())
    assert image.images[1].data.shape[-2:] == (10, 11)


def test_storage_options_reach_s3_inputs_and_outputs(tmp_path, s3):
    import s3fs

    options, bucket = s3
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    for i, frame in enumerate(FRAMES):
        buffer = io.BytesIO()
        tifffile.imwrite(buffer, frame)
        fs.pipe(f"{bucket}/in/f{i}.tif", buffer.getvalue())
    keys = dict(
        input=f"s3://{bucket}/in/*.tif", output=f"s3://{bucket}/out/", storage_options=options
    )
    config = parse_config({"stages": [{"mean": {"size": 3}}], **keys}, base_dir=tmp_path)
    assert run(config, console=Console(file=io.StringIO()), progress=False).written == 4
    again = run(config, console=Console(file=io.StringIO()), progress=False)
    assert (again.kept, again.written) == (4, 0)
    got = [tifffile.imread(io.BytesIO(fs.cat(f"{bucket}/out/f{i}.tif"))) for i in range(4)]
    np.testing.assert_array_equal(np.stack(got), expected())


def test_per_file_durability_fsyncs_every_output(tmp_path, monkeypatch):
    write_inputs(tmp_path)
    synced = []

    def fsync(fd, real=os.fsync):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    assert run_config(tmp_path, output="out/", durability="per-file").written == 4
    out = str(tmp_path / "out")
    temps = [os.path.basename(p) for p in synced if os.path.dirname(p) == out]
    # each output's temporary file, fsync'd before its rename
    assert {t.split(".tif.")[0] + ".tif" for t in temps} == {f".f{i}.tif" for i in range(4)}
    np.testing.assert_array_equal(
        np.stack([tifffile.imread(tmp_path / "out" / f"f{i}.tif") for i in range(4)]), expected()
    )


def test_a_3d_stage_on_a_stack_without_z_is_refused(tmp_path):
    data = np.zeros((3, 2, 16, 16), np.uint16)
    tifffile.imwrite(tmp_path / "in.ome.tif", data, ome=True, metadata={"axes": "TCYX"})
    config = parse_config(
        {"input": "in.ome.tif", "output": "out/", "stages": [{"mean": {"size": 3, "ndim": 3}}]},
        base_dir=tmp_path,
    )
    with pytest.raises(ConfigError, match="stages:.*c"):
        run(config, console=Console(file=io.StringIO()), progress=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("output", ["out/", "out.ome.zarr"])
def test_durability_none_runs_without_a_flush_and_resumes(tmp_path, monkeypatch, output):
    """``durability: none``: the run flushes nothing (no syncfs, no fsync but its lock
    file's); its outputs are whole and a rerun keeps them all."""
    write_inputs(tmp_path)
    waits = []

    def fsync(fd, real=os.fsync):
        waits.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic, "_syncfs", lambda: waits.append("syncfs") or (lambda fd: 0))
    assert run_config(tmp_path, output=output, durability="none").written == 4
    assert waits and all(name.startswith(".lock.") for name in waits)
    if output == "out/":
        got = np.stack([tifffile.imread(tmp_path / "out" / f"f{i}.tif") for i in range(4)])
    else:
        image = ngff_zarr.from_ngff_zarr(str(tmp_path / output))
        got = np.asarray(image.images[0].data)
    np.testing.assert_array_equal(got, expected())
    assert run_config(tmp_path, output=output, durability="none").kept == 4
