"""The atomic-write helper, and the once-per-run preparation that a cluster may repeat."""

from __future__ import annotations

import doctest
import importlib
import os

import numpy as np
import pytest
import zarr

from stencilpipe.io import atomic
from stencilpipe.io.atomic import new_run, remove_own_temps, remove_stale_temps, write_atomic
from stencilpipe.io.zarrio import _create, _Layout


def test_failed_write_leaves_no_file(tmp_path):
    def half_then_fail(fh):
        fh.write(b"half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        write_atomic(tmp_path / "a.tif", half_then_fail)
    assert list(tmp_path.iterdir()) == []


def test_replaces_an_existing_file_whole(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"old contents")
    assert write_atomic(tmp_path / "a.bin", lambda fh: fh.write(b"new")) == 3
    assert (tmp_path / "a.bin").read_bytes() == b"new"


def test_stale_temps_of_other_runs_go_and_this_runs_stay(tmp_path):
    this, other = new_run(), new_run()
    mine = tmp_path / f".a.tif.{this}-{new_run()}.tmp"
    stale = tmp_path / f".b.tif.{other}-{new_run()}.tmp"
    lookalikes = [tmp_path / ".c.tif.tmp", tmp_path / f"d.tif.{other}-{other}.tmp"]
    for path in [mine, stale, *lookalikes]:
        path.write_bytes(b"x")
    assert remove_stale_temps(tmp_path, {this}) == 1
    assert not stale.exists() and mine.exists() and all(p.exists() for p in lookalikes)


def test_a_run_removes_its_own_leftover_temps_and_no_others(tmp_path):
    this, other = new_run(), new_run()
    mine = [tmp_path / f".{n}.tif.{this}-{new_run()}.tmp" for n in "ab"]
    theirs = tmp_path / f".c.tif.{other}-{new_run()}.tmp"
    for path in [*mine, theirs]:
        path.write_bytes(b"x")
    assert remove_own_temps(tmp_path, this) == 2
    assert not any(p.exists() for p in mine) and theirs.exists()
    assert remove_own_temps(tmp_path / "never-made", this) == 0


@pytest.fixture
def disk_calls(monkeypatch):
    """What the atomic writes ask of the disk, in order: ``("fsync", path)`` for each fsync,
    ``("replace", final)`` for each rename, ``("syncfs", path)`` for each file system flush
    (the paths that the descriptors name, from /proc)."""
    calls = []

    def named(fd):
        return os.readlink(f"/proc/self/fd/{fd}")

    def fsync(fd, real=os.fsync):
        calls.append(("fsync", named(fd)))
        real(fd)

    def replace(source, target, real=os.replace):
        calls.append(("replace", str(target)))
        real(source, target)

    real_syncfs = atomic._syncfs()

    def syncfs(fd):
        calls.append(("syncfs", named(fd)))
        return real_syncfs(fd) if real_syncfs is not None else 0

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    monkeypatch.setattr(atomic.os, "replace", replace)
    monkeypatch.setattr(atomic, "_syncfs", lambda: syncfs)
    return calls


def test_per_file_durability_fsyncs_each_file_before_renaming_it(tmp_path, disk_calls):
    final = tmp_path / "a.bin"
    write_atomic(final, lambda fh: fh.write(b"data"), durability="per-file")
    (kind, temp), rename = disk_calls
    assert kind == "fsync" and temp.startswith(str(tmp_path / ".a.bin."))
    assert rename == ("replace", str(final)) and final.read_bytes() == b"data"


def test_batch_durability_flushes_once_when_the_run_ends(tmp_path, disk_calls):
    """No fsync per file (the default): the run's last step flushes the file system once,
    and fsyncs the directory (its renames)."""
    run = new_run()
    for name in "abc":
        write_atomic(tmp_path / name, lambda fh: fh.write(b"data"), run=run)
    assert [kind for kind, _ in disk_calls] == ["replace"] * 3
    disk_calls.clear()
    remove_own_temps(tmp_path, run)
    assert disk_calls == [("syncfs", str(tmp_path)), ("fsync", str(tmp_path))]
    assert [(tmp_path / name).read_bytes() for name in "abc"] == [b"data"] * 3


def test_batch_durability_starts_the_writeback_of_large_files_only(tmp_path, monkeypatch):
    """Batch writes start the writeback of files of 1 MiB or more (the flush then waits for
    less) and leave small ones to the flush; per-file writes fsync instead. The hint changes
    no byte of what is written."""
    started = []
    real = atomic.start_writeback

    def start(fd):
        started.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(atomic, "start_writeback", start)
    big = np.random.default_rng(0).integers(0, 256, atomic.WRITEBACK_FROM, np.uint8).tobytes()
    write_atomic(tmp_path / "big", lambda fh: fh.write(big))
    write_atomic(tmp_path / "small", lambda fh: fh.write(b"record"))
    write_atomic(tmp_path / "durable", lambda fh: fh.write(big), durability="per-file")
    assert len(started) == 1 and started[0].startswith(str(tmp_path / ".big."))
    assert (tmp_path / "big").read_bytes() == big and (tmp_path / "durable").read_bytes() == big
    assert (tmp_path / "small").read_bytes() == b"record"


def test_a_write_flushes_its_file_system_once_for_its_outputs_and_their_records(
    tmp_path, disk_calls
):
    """imsave writes the outputs and their provenance records (two folders on one file
    system): one syncfs at the end, after which both folders are fsync'd (each flush waits
    for all that any process dirtied, so one per folder cost twice)."""
    import dask.array as da

    import stencilpipe as sp

    frames = np.arange(3 * 8 * 8, dtype=np.uint8).reshape(3, 8, 8)
    sp.imsave(da.from_array(frames, chunks=(1, 8, 8)), tmp_path / "out")
    out, records = str(tmp_path / "out"), str(tmp_path / "out" / ".stencilpipe" / "records")
    syncs = [i for i, (kind, _) in enumerate(disk_calls) if kind == "syncfs"]
    assert [disk_calls[i] for i in syncs] == [("syncfs", out)]
    last_rename = max(i for i, (kind, _) in enumerate(disk_calls) if kind == "replace")
    assert syncs[0] > last_rename  # after every output and record is in place
    assert ("fsync", records) in disk_calls and disk_calls[-1] == ("fsync", out)
    assert len(os.listdir(records)) == 3


@pytest.mark.parametrize("target", ["out", "out.ome.zarr", "out.zarr", "out.ome.tif"])
def test_a_write_without_durability_never_waits_for_the_disk_and_still_resumes(
    tmp_path, disk_calls, target
):
    """``durability="none"``: no fsync or file system flush of an output or a record (the
    run's lock file alone is fsync'd, once), for any target; the outputs read back whole
    (by tifffile and zarr, not stencilpipe) and a rerun keeps them."""
    import tifffile

    import stencilpipe as sp

    frames = np.random.default_rng(3).integers(0, 60000, (4, 16, 24), dtype=np.uint16)
    path = tmp_path / target
    report = sp.imsave(frames, path, durability="none")
    assert report.frames_written == 4
    waits = [(kind, os.path.basename(where)) for kind, where in disk_calls if kind != "replace"]
    assert len(waits) == 1 and waits[0][0] == "fsync" and waits[0][1].startswith(".lock.")
    if target == "out":
        back = np.stack([tifffile.imread(path / f"{i:05d}.tif") for i in range(4)])
    elif target.endswith(".tif"):
        back = tifffile.imread(path)
    else:
        store = zarr.open(path, mode="r")
        back = store["s0"][:] if target.endswith(".ome.zarr") else store[:]
    np.testing.assert_array_equal(back, frames)
    assert sp.imsave(frames, path, durability="none").frames_skipped == 4


@pytest.mark.parametrize("target", ["out.ome.zarr", "out.zarr"])
def test_a_zarr_write_flushes_its_file_system_once_its_chunks_are_written(
    tmp_path, disk_calls, target
):
    """A Zarr store's chunk files are never fsync'd one by one: its write ends with one flush
    (as a folder of files does), after its last chunk and record are in place."""
    import dask.array as da

    import stencilpipe as sp

    frames = da.from_array(np.arange(3 * 8 * 8, dtype=np.uint8).reshape(3, 8, 8), (1, 8, 8))
    chunk_files = []
    real_write = zarr.storage.LocalStore.set

    async def recorded(store, key, value, *args, **kwargs):
        await real_write(store, key, value, *args, **kwargs)
        chunk_files.append((key, len(disk_calls)))

    zarr.storage.LocalStore.set = recorded
    try:
        sp.imsave(frames, tmp_path / target)
    finally:
        zarr.storage.LocalStore.set = real_write
    syncs = [i for i, (kind, _) in enumerate(disk_calls) if kind == "syncfs"]
    assert [disk_calls[i] for i in syncs] == [("syncfs", str(tmp_path / target))]
    assert all(seen <= syncs[0] for _, seen in chunk_files)
    assert len([key for key, _ in chunk_files if "/c/" in f"/{key}"]) == 3
    fsyncs = [os.path.basename(where) for kind, where in disk_calls if kind == "fsync"]
    assert fsyncs[-1] == target and all(name.startswith(".lock.") for name in fsyncs[:-1])


def test_zarr_store_creation_runs_once_per_run(tmp_path):
    """A creation task that runs again in the same run keeps the chunks written since."""
    layout = _Layout(
        str(tmp_path / "a.zarr"), False, (2, 4), np.dtype("u1"), (1, 4), ("t", "y"), "auto"
    )
    run = new_run()
    _create(layout, run=run, create=True)
    zarr.open_array(layout.store, mode="r+")[0] = 7
    _create(layout, run=run, create=True)
    assert zarr.open_array(layout.store, mode="r")[0, 0] == 7
    _create(layout, run=new_run(), create=True)  # a new overwrite=True write starts afresh
    assert zarr.open_array(layout.store, mode="r")[0, 0] == 0


@pytest.mark.parametrize(
    "module",
    [
        "atomic",
        "lock",
        "provenance",
        "read",
        "write",
        "stackinfo",
        "sources",
        "targets",
        "stencilpipe.io",
    ],
)
def test_docstring_examples_run(module):
    name = module if "." in module else f"stencilpipe.io.{module}"
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted and not result.failed


def test_numpys_short_write_to_a_full_device_counts_as_a_full_file_system():
    """tifffile writes pixels with ndarray.tofile, whose error on a full disk has no errno."""
    with open("/dev/full", "wb") as fh, pytest.raises(OSError) as raised:
        np.zeros(1 << 16, np.uint8).tofile(fh)
    assert raised.value.errno is None and atomic.is_full(raised.value)
    assert not atomic.is_full(OSError("cannot be decoded")) and not atomic.is_full(ValueError())


def test_an_output_record_holds_the_written_files_crc32(tmp_path):
    import json
    import zlib

    from stencilpipe.io import imsave

    frames = np.random.default_rng(1).integers(0, 60000, (3, 300, 200), dtype=np.uint16)
    imsave(frames, tmp_path / "out", compression="zlib")
    for name in ["00000.tif", "00001.tif", "00002.tif"]:
        data = (tmp_path / "out" / name).read_bytes()
        record = json.loads((tmp_path / "out/.stencilpipe/records" / f"{name}.json").read_text())
        assert record["output"] == {"size": len(data), "crc32": f"{zlib.crc32(data):08x}"}


@pytest.mark.parametrize("size", [0, 5, (1 << 20) - 1, 1 << 20, (1 << 23) + 3], ids=str)
def test_a_files_digest_is_its_crc32_whether_mapped_or_read(tmp_path, size):
    """Files from 1 MiB up are mapped, smaller ones read into a buffer (in several pieces
    past 8 MiB): either way the digest is zlib's CRC-32 of the file's bytes."""
    import zlib

    from stencilpipe.io.provenance import file_digest

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "output.bin"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        fh.read(3)  # where the handle stands does not matter
        assert file_digest(fh) == {"size": size, "crc32": f"{zlib.crc32(data):08x}"}
