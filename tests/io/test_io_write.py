"""imsave: outputs read back bit for bit by tifffile, Pillow and zarr; names mirrored from
the input; atomic under failure; resumable; refuses to touch the inputs; lazy on request."""

from __future__ import annotations

import io
import json
import os
import tempfile
import zlib

import dask
import numpy as np
import pytest
import tifffile
import zarr
from dask.delayed import Delayed
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from io_samples import files_in, frame
from PIL import Image

from stencilpipe.io import TargetError, WriteReport, imread, imsave, plan_write
from stencilpipe.io.formats import Tiff
from stencilpipe.io.provenance import Provenance

NAMES = ["img_1", "img_2", "img_3", "img_10", "img_11"]
#: The provenance of tests whose second write adds ``counting`` (which changes the graph's
#: token, not the values): they say that the writes are the same computation.
SAME = Provenance.of({"computation": "the frames of the input, as read"})


def smooth(stack):
    """A vertical 3-point mean per frame, as a user's stencil would be."""

    def mean3(block):
        wide = block.astype(np.uint16)
        out = wide.copy()
        out[:, 1:-1] = (wide[:, :-2] + wide[:, 1:-1] + wide[:, 2:]) // 3
        return out.astype(np.uint8)

    return stack.map_overlap(mean3, depth=(0, 1, 0), boundary="reflect", dtype=np.uint8)


def counting(stack, calls: list):
    """``stack``, through a map_blocks that records each block it computes."""

    def record(block, block_info=None):
        calls.append(block_info[0]["chunk-location"][0])
        return block

    return stack.map_blocks(record, meta=np.empty((0,) * stack.ndim, stack.dtype))


def read_tiffs(folder, names):
    return np.stack([tifffile.imread(folder / f"{name}.tif") for name in names])


def test_mirrors_input_names_and_matches_numpy(pngs, tmp_path):
    folder, frames = pngs
    result = smooth(imread(str(folder / "*.png"), chunks=(2, 32, 40)))
    report = imsave(result, tmp_path / "out")
    assert files_in(tmp_path / "out") == sorted(f"{n}.tif" for n in NAMES)
    np.testing.assert_array_equal(read_tiffs(tmp_path / "out", NAMES), result.compute())
    assert report == WriteReport(
        str(tmp_path / "out"),
        5,
        0,
        report.bytes_written,
        tuple(str(tmp_path / "out" / f"{n}.tif") for n in NAMES),
    )
    assert report.bytes_written == sum(os.path.getsize(p) for p in report.files)
    assert str(report).startswith(f"{tmp_path / 'out'}: wrote 5 frames (")


def test_png_pattern_read_back_with_pillow(pngs, tmp_path):
    folder, frames = pngs
    imsave(imread(folder) // 2, str(tmp_path / "out" / "*.png"))
    for name, data in zip(NAMES, frames, strict=True):
        with Image.open(tmp_path / "out" / f"{name}.png") as image:
            np.testing.assert_array_equal(np.asarray(image), data // 2)


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("out", ["00000.tif", "00001.tif", "00002.tif"]),
        ("out/", ["00000.tif", "00001.tif", "00002.tif"]),
        ("out/*.png", ["00000.png", "00001.png", "00002.png"]),
        ("out/f_{:03d}.png", ["f_000.png", "f_001.png", "f_002.png"]),
        ("out/{name}-x.tiff", ["00000-x.tiff", "00001-x.tiff", "00002-x.tiff"]),
    ],
)
def test_index_names_when_the_source_is_unknown(tmp_path, target, expected):
    data = np.stack([frame(i) for i in range(3)])
    imsave(data, str(tmp_path / target))
    assert files_in(tmp_path / "out") == expected


def test_explicit_names_and_single_file(tmp_path):
    data = np.stack([frame(i, np.uint16) for i in range(2)])
    imsave(data, tmp_path / "out", names=["left", "right"], compression="zlib")
    np.testing.assert_array_equal(read_tiffs(tmp_path / "out", ["left", "right"]), data)
    with tifffile.TiffFile(tmp_path / "out" / "left.tif") as tif:
        assert tif.pages[0].compression == tifffile.COMPRESSION.ADOBE_DEFLATE
    imsave(data[0], str(tmp_path / "one" / "only.png"))
    with Image.open(tmp_path / "one" / "only.png") as image:
        np.testing.assert_array_equal(np.asarray(image), data[0])


def test_colour_frames(tmp_path):
    data = np.stack([frame(i, np.uint8, (32, 40, 3)) for i in range(2)])
    imsave(data, str(tmp_path / "out" / "*.png"))
    imsave(data, str(tmp_path / "out" / "*.tif"))
    with Image.open(tmp_path / "out" / "00001.png") as image:
        np.testing.assert_array_equal(np.asarray(image), data[1])
    np.testing.assert_array_equal(tifffile.imread(tmp_path / "out" / "00001.tif"), data[1])


def test_spatially_tiled_input_is_written_whole(pngs, tmp_path):
    folder, frames = pngs
    imsave(imread(folder, chunks=(2, 16, 20)), tmp_path / "out")
    np.testing.assert_array_equal(read_tiffs(tmp_path / "out", NAMES), np.stack(frames))


@settings(max_examples=15, deadline=None)
@given(
    data=arrays(
        st.sampled_from([np.uint8, np.uint16]),
        st.tuples(st.integers(1, 3), st.integers(1, 9), st.integers(1, 9)),
    ),
    ext=st.sampled_from([".tif", ".png"]),
)
def test_round_trip_any_small_stack(data, ext):
    with tempfile.TemporaryDirectory() as folder:
        imsave(data, os.path.join(folder, "*" + ext))
        for i, page in enumerate(data):
            path = os.path.join(folder, f"{i:05d}{ext}")
            if ext == ".tif":
                got = tifffile.imread(path)
            else:
                with Image.open(path) as image:
                    got = np.asarray(image)
            np.testing.assert_array_equal(got.reshape(page.shape), page)


# --- failure, retries, resume ---------------------------------------------------------


def test_a_write_that_fails_midway_leaves_nothing_and_a_rerun_completes(
    pngs, tmp_path, monkeypatch
):
    folder, frames = pngs
    out = tmp_path / "out"
    original = Tiff.write

    def half_then_fail(self, fh, data, compression, tags=None):
        if data.shape == frames[2].shape and (data == frames[2]).all():  # img_3
            buffer = io.BytesIO()
            original(self, buffer, data, compression)
            fh.write(buffer.getvalue()[: len(buffer.getvalue()) // 2])
            raise OSError("disk on fire")
        original(self, fh, data, compression)

    monkeypatch.setattr(Tiff, "write", half_then_fail)
    with pytest.raises(OSError, match="disk on fire"):
        imsave(imread(folder, chunks=(1, 32, 40)), out)
    left = files_in(out)
    assert "img_3.tif" not in left and not [name for name in left if name.startswith(".")]
    assert set(left) <= {f"{name}.tif" for name in NAMES}

    monkeypatch.undo()
    report = imsave(imread(folder, chunks=(1, 32, 40)), out)
    assert (report.frames_written, report.frames_skipped) == (5 - len(left), len(left))
    np.testing.assert_array_equal(read_tiffs(out, NAMES), np.stack(frames))


def test_stale_temporary_files_are_removed_when_a_write_starts(pngs, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    stale = out / f".img_3.tif.{'ab' * 6}-{'cd' * 6}.tmp"
    stale.write_bytes(b"II*\0 half a file")
    (out / ".keep").write_text("not ours")
    imsave(imread(pngs[0]), out)
    assert files_in(out) == [".keep"] + sorted(f"{n}.tif" for n in NAMES)


def test_resume_computes_only_the_missing_frames(pngs, tmp_path):
    folder, frames = pngs
    out = tmp_path / "out"
    calls: list[int] = []
    imsave(counting(imread(folder, chunks=(1, 32, 40)), calls), out)
    assert sorted(calls) == [0, 1, 2, 3, 4]
    mtimes = {name: os.stat(out / name).st_mtime_ns for name in files_in(out)}
    os.remove(out / "img_2.tif")
    os.remove(out / "img_11.tif")

    calls.clear()
    report = imsave(counting(imread(folder, chunks=(1, 32, 40)), calls), out)
    assert sorted(calls) == [1, 4]
    assert (report.frames_written, report.frames_skipped) == (2, 3)
    assert report.files == (str(out / "img_2.tif"), str(out / "img_11.tif"))
    for name in ["img_1.tif", "img_3.tif", "img_10.tif"]:
        assert os.stat(out / name).st_mtime_ns == mtimes[name]
    np.testing.assert_array_equal(read_tiffs(out, NAMES), np.stack(frames))

    calls.clear()
    assert imsave(counting(imread(folder, chunks=(1, 32, 40)), calls), out).frames_written == 0
    assert calls == []


def test_resume_inside_a_block_writes_only_the_missing_frame(pngs, tmp_path):
    folder, _ = pngs
    out = tmp_path / "out"
    imsave(imread(folder, chunks=(3, 32, 40)), out, provenance=SAME)
    mtimes = {name: os.stat(out / name).st_mtime_ns for name in files_in(out)}
    os.remove(out / "img_2.tif")
    calls: list[int] = []
    report = imsave(counting(imread(folder, chunks=(3, 32, 40)), calls), out, provenance=SAME)
    assert calls == [0] and report.files == (str(out / "img_2.tif"),)
    for name in ["img_1.tif", "img_3.tif", "img_10.tif", "img_11.tif"]:
        assert os.stat(out / name).st_mtime_ns == mtimes[name]


def test_overwrite_rewrites_everything(pngs, tmp_path):
    folder, _ = pngs
    imsave(imread(folder), tmp_path / "out")
    calls: list[int] = []
    report = imsave(
        counting(imread(folder, chunks=(1, 32, 40)), calls), tmp_path / "out", overwrite=True
    )
    assert sorted(calls) == [0, 1, 2, 3, 4] and report.frames_written == 5


def test_only_limits_the_write_to_the_named_outputs_even_with_overwrite(pngs, tmp_path):
    """``plan_write(only=...)``, as a run's frame-by-frame retry uses it."""
    folder, frames = pngs
    out = tmp_path / "out"
    imsave(np.zeros((5, 32, 40), np.uint8), out, names=NAMES)
    calls: list[int] = []
    wanted = {str(out / "img_3.tif"), str(out / "img_11.tif")}
    write = plan_write(
        counting(imread(folder, chunks=(1, 32, 40)), calls), out, overwrite=True, only=wanted
    )
    report = write.report().compute()
    assert sorted(calls) == [2, 4] and set(report.files) == wanted
    assert (report.frames_written, report.frames_skipped) == (2, 3)
    for index, name in enumerate(NAMES):
        expected = frames[index] if str(out / f"{name}.tif") in wanted else 0
        np.testing.assert_array_equal(tifffile.imread(out / f"{name}.tif"), expected)


def test_a_rerun_keeps_only_outputs_whose_provenance_holds_and_whose_bytes_verify(pngs, tmp_path):
    """imsave's own provenance: the array's graph token (here: another computation, ``+ 1``,
    or another input file) and each output's size and checksum."""
    folder, frames = pngs
    out = tmp_path / "out"
    imsave(imread(folder, chunks=(1, 32, 40)), out)
    mtimes = {name: os.stat(out / name).st_mtime_ns for name in files_in(out)}
    report = imsave(imread(folder, chunks=(1, 32, 40)), out)
    assert (report.frames_written, report.frames_skipped) == (0, 5)
    assert {name: os.stat(out / name).st_mtime_ns for name in files_in(out)} == mtimes

    report = imsave(imread(folder) + 1, out)
    assert (report.frames_written, report.frames_stale, report.frames_damaged) == (5, 5, 0)
    np.testing.assert_array_equal(read_tiffs(out, NAMES), np.stack(frames) + 1)
    assert "recomputed 5 stale" in str(report)

    whole = (out / "img_3.tif").read_bytes()
    (out / "img_3.tif").write_bytes(whole[: len(whole) // 2])  # truncated, as by a crash
    (out / "img_10.tif").write_bytes(whole)  # a whole file, but another frame's
    report = imsave(imread(folder) + 1, out)
    assert (report.frames_written, report.frames_stale, report.frames_damaged) == (2, 0, 2)
    np.testing.assert_array_equal(read_tiffs(out, NAMES), np.stack(frames) + 1)

    Image.fromarray(frames[0] // 2).save(folder / "img_1.png")  # an input rewritten
    report = imsave(imread(folder) + 1, out)
    assert report.frames_stale == 5  # the graph's token covers every input
    np.testing.assert_array_equal(tifffile.imread(out / "img_1.tif"), frames[0] // 2 + 1)


def test_records_hold_zlibs_crc32_and_an_older_versions_record_is_recomputed_once(
    pngs, tmp_path
):
    """Each record holds the output's size and the CRC-32 that zlib computes of its bytes;
    a record of an older version (a BLAKE2b checksum, no CRC-32) is neither trusted nor
    taken for damage: its output is recomputed once, as stale, and then kept."""
    folder, frames = pngs
    out = tmp_path / "out"
    imsave(imread(folder), out)
    records = out / ".stencilpipe" / "records"
    for name in NAMES:
        data = (out / f"{name}.tif").read_bytes()
        record = json.loads((records / f"{name}.tif.json").read_text())
        assert record["output"] == {"size": len(data), "crc32": f"{zlib.crc32(data):08x}"}

    older = json.loads((records / "img_2.tif.json").read_text())
    older["output"] = {"size": older["output"]["size"], "blake2b": "0" * 32}
    (records / "img_2.tif.json").write_text(json.dumps(older))
    report = imsave(imread(folder), out)
    assert (report.frames_written, report.frames_stale, report.frames_damaged) == (1, 1, 0)
    assert "crc32" in json.loads((records / "img_2.tif.json").read_text())["output"]
    np.testing.assert_array_equal(read_tiffs(out, NAMES), np.stack(frames))
    assert imsave(imread(folder), out).frames_skipped == 5


def test_an_outdated_output_whose_frame_then_fails_is_not_left_behind(pngs, tmp_path):
    folder, frames = pngs
    out = tmp_path / "out"
    imsave(imread(folder, chunks=(1, 32, 40)), out)

    def fail_on_img_3(block, block_info=None):
        if block_info[0]["chunk-location"][0] == 2:
            raise ZeroDivisionError("img_3")
        return block + 1

    stack = imread(folder, chunks=(1, 32, 40))
    with pytest.raises(ZeroDivisionError):
        imsave(stack.map_blocks(fail_on_img_3, dtype=stack.dtype), out)
    assert "img_3.tif" not in files_in(out)  # not the output of the first computation
    assert not (out / ".stencilpipe" / "records" / "img_3.tif.json").exists()
    for name in files_in(out):  # what is there is the second computation's
        index = NAMES.index(name.removesuffix(".tif"))
        np.testing.assert_array_equal(tifffile.imread(out / name), frames[index] + 1)


def test_a_task_that_runs_twice_writes_the_same_bytes(pngs, tmp_path):
    folder, _ = pngs
    lazy = imsave(imread(folder), tmp_path / "out", compute=False, compression="zstd")
    lazy.compute()
    first = {n: (tmp_path / "out" / n).read_bytes() for n in files_in(tmp_path / "out")}
    lazy.compute()
    assert first == {n: (tmp_path / "out" / n).read_bytes() for n in files_in(tmp_path / "out")}


def test_compute_false_writes_nothing_until_computed(pngs, tmp_path):
    folder, frames = pngs
    calls: list[int] = []
    lazy = imsave(counting(imread(folder), calls), tmp_path / "out", compute=False)
    assert isinstance(lazy, Delayed)
    assert not (tmp_path / "out").exists() and calls == []
    report = lazy.compute()
    assert report.frames_written == 5 and calls == [0]
    np.testing.assert_array_equal(read_tiffs(tmp_path / "out", NAMES), np.stack(frames))


def test_threaded_scheduler(pngs, tmp_path):
    folder, frames = pngs
    with dask.config.set(scheduler="threads"):
        imsave(imread(folder, chunks=(1, 32, 40)), str(tmp_path / "out" / "*.png"))
    for name, data in zip(NAMES, frames, strict=True):
        with Image.open(tmp_path / "out" / f"{name}.png") as image:
            np.testing.assert_array_equal(np.asarray(image), data)


# --- refusals -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("in", r"refusing to write to .*in: it is .*in, which holds the input"),
        ("in/*.png", r"refusing to write to .*in/\*.png: it is .*in, which holds the input"),
        ("in/smooth/", r"refusing to write to .*smooth/: it is inside .*in, which holds"),
        ("in/smooth.zarr", r"it is inside .*in, which holds the input"),
        ("out/../in/*.tif", r"refusing target .*: it contains '..'"),
        ("../out/", r"refusing target .*: it contains '..'"),
    ],
)
def test_refuses_to_write_into_the_inputs(pngs, tmp_path, monkeypatch, target, message):
    monkeypatch.chdir(tmp_path)
    before = files_in(pngs[0])
    with pytest.raises(TargetError, match=message):
        imsave(imread("in") + 1, target)
    assert files_in(pngs[0]) == before


def test_refuses_to_overwrite_an_input_file(tmp_path):
    data = np.stack([frame(i) for i in range(2)])
    tifffile.imwrite(tmp_path / "stack.tif", data)
    with pytest.raises(TargetError, match=r"refusing to overwrite the input file .*stack.tif"):
        imsave(imread(tmp_path / "stack.tif"), tmp_path, names=["stack", "other"])


def test_refuses_to_write_inside_a_zarr_input(tmp_path):
    zarr.create_array(tmp_path / "a.zarr", data=np.stack([frame(0)]))
    with pytest.raises(TargetError, match=r"inside .*a.zarr, which holds the input"):
        imsave(imread(tmp_path / "a.zarr"), tmp_path / "a.zarr" / "out")


@pytest.mark.parametrize(
    ("target", "names", "message"),
    [
        ("out", ["a", "a"], r"1 output names occur more than once \(e.g. 'a.tif'\)"),
        ("out", ["a"], r"names= has 1 names for 2 frames"),
        ("out", ["a", "sub/b"], r"refusing output file name 'sub/b.tif'"),
        ("out", ["a", ".hidden"], r"refusing output file name '.hidden.tif'"),
        ("out/one.tif", None, r"names one file, but the array has 2 frames"),
        ("out/{0}{1}.tif", None, r"bad pattern"),
        ("out/*.bmp", None, r"cannot write '.bmp'"),
    ],
)
def test_bad_names_and_patterns(tmp_path, target, names, message):
    with pytest.raises(TargetError, match=message):
        imsave(np.zeros((2, 4, 4), np.uint8), str(tmp_path / target), names=names)


def test_refuses_arrays_that_are_not_frames(tmp_path):
    with pytest.raises(TargetError, match=r"cannot write an array of shape \(4,\)"):
        imsave(np.zeros(4, np.uint8), tmp_path / "out")


# --- Zarr -----------------------------------------------------------------------------------


def test_zarr_store_read_back_with_zarr(pngs, tmp_path):
    folder, frames = pngs
    report = imsave(imread(folder, chunks=(2, 16, 20)), tmp_path / "o.zarr", compression="zlib")
    store = zarr.open_array(tmp_path / "o.zarr", mode="r")
    assert store.metadata.zarr_format == 3 and store.chunks == (2, 16, 20)
    np.testing.assert_array_equal(store[:], np.stack(frames))
    assert (report.frames_written, report.bytes_written) == (5, 5 * 32 * 40)


def test_ome_zarr_colour_with_ngff_metadata(tmp_path):
    data = np.stack([frame(i, np.uint8, (32, 40, 3)) for i in range(3)])
    imsave(data, tmp_path / "c.ome.zarr")
    group = zarr.open_group(tmp_path / "c.ome.zarr", mode="r")
    ome = group.attrs["ome"]
    assert ome["version"] == "0.5"
    image = ome["multiscales"][0]
    # frames of unknown kind (not claimed as time), the RGB samples as the channel axis
    assert [a["name"] for a in image["axes"]] == ["i", "c", "y", "x"]
    level = group[image["datasets"][0]["path"]]
    assert level.metadata.dimension_names == ("i", "c", "y", "x")
    np.testing.assert_array_equal(level[:], data.transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(imread(tmp_path / "c.ome.zarr").compute(), level[:])


def test_zarr_resume_computes_only_missing_chunks(pngs, tmp_path):
    folder, frames = pngs
    store = tmp_path / "o.zarr"
    imsave(imread(folder, chunks=(1, 32, 40)), store, provenance=SAME)
    os.remove(store / "c" / "3" / "0" / "0")
    calls: list[int] = []
    report = imsave(counting(imread(folder, chunks=(1, 32, 40)), calls), store, provenance=SAME)
    assert calls == [3] and (report.frames_written, report.frames_skipped) == (1, 4)
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], np.stack(frames))


def test_zarr_chunks_of_another_computation_or_damaged_are_rewritten(pngs, tmp_path):
    folder, frames = pngs
    store = tmp_path / "o.zarr"
    imsave(imread(folder, chunks=(2, 32, 40)), store)
    report = imsave(imread(folder, chunks=(2, 32, 40)) + 1, store)
    assert (report.frames_written, report.frames_stale) == (5, 5)
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], np.stack(frames) + 1)

    chunk = store / "c" / "1" / "0" / "0"  # frames 2 and 3
    chunk.write_bytes(chunk.read_bytes()[:-3])
    report = imsave(imread(folder, chunks=(2, 32, 40)) + 1, store)
    assert (report.frames_written, report.frames_skipped, report.frames_damaged) == (2, 3, 2)
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], np.stack(frames) + 1)


def test_zarr_all_zero_frames_count_as_written(tmp_path):
    """Empty chunks are written too, so that a rerun does not compute them again."""
    imsave(np.zeros((2, 4, 4), np.uint8), tmp_path / "z.zarr")
    assert imsave(np.zeros((2, 4, 4), np.uint8), tmp_path / "z.zarr").frames_skipped == 2


def test_zarr_target_of_another_shape_is_refused_unless_stencilpipe_wrote_it(tmp_path):
    zarr.create_array(tmp_path / "z.zarr", shape=(2, 4, 4), dtype="u1", chunks=(1, 4, 4))
    with pytest.raises(TargetError, match=r"already holds an array of shape \(2, 4, 4\)"):
        imsave(np.zeros((3, 4, 4), np.uint8), tmp_path / "z.zarr")
    imsave(np.ones((3, 4, 4), np.uint8), tmp_path / "z.zarr", overwrite=True)
    assert zarr.open_array(tmp_path / "z.zarr", mode="r")[:].sum() == 48

    # Written by stencilpipe: another computation, of another dtype, is stale and replaces it.
    report = imsave(np.full((3, 4, 4), 0.5, np.float32), tmp_path / "z.zarr")
    assert (report.frames_written, report.frames_stale) == (3, 3)
    np.testing.assert_array_equal(
        zarr.open_array(tmp_path / "z.zarr", mode="r")[:], np.full((3, 4, 4), 0.5, np.float32)
    )


def test_zarr_compute_false_creates_nothing(tmp_path):
    lazy = imsave(np.zeros((2, 4, 4), np.uint8), tmp_path / "z.ome.zarr", compute=False)
    assert not (tmp_path / "z.ome.zarr").exists()
    assert lazy.compute().frames_written == 2


def test_unknown_zarr_compression(tmp_path):
    with pytest.raises(TargetError, match=r"unknown Zarr compression 'lzw'"):
        imsave(np.zeros((2, 4, 4), np.uint8), tmp_path / "z.zarr", compression="lzw")
