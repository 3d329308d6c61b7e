"""imread / inspect on stacks that other libraries wrote: PNG and TIFF files, a multi-page
TIFF, Zarr and OME-Zarr stores."""

from __future__ import annotations

import importlib
import os
import random

import dask
import dask.array as da
import numpy as np
import pytest
import skimage
import tifffile
import zarr
from hypothesis import given
from hypothesis import strategies as st
from io_samples import frame, write_pngs
from natsort import natsort_keygen, natsorted, ns
from PIL import Image

from stencilpipe.errors import ImageStackError
from stencilpipe.io import StackInfo, imread, inspect, source_names
from stencilpipe.io.formats import PILLOW
from stencilpipe.io.read import default_chunks
from stencilpipe.io.sources import natural_key
from stencilpipe.io.tiffmeta import page_tags

MULTIPAGE = os.path.join(skimage.data_dir, "multipage.tif")


def test_glob_reads_frames_in_natural_order(pngs):
    folder, frames = pngs
    stack = imread(str(folder / "*.png"))
    assert stack.shape == (5, 32, 40) and stack.dtype == np.uint8
    np.testing.assert_array_equal(stack.compute(), np.stack(frames))
    assert source_names(stack) == ["img_1", "img_2", "img_3", "img_10", "img_11"]


def test_directory_reads_every_image(pngs):
    folder, frames = pngs
    np.testing.assert_array_equal(imread(folder).compute(), np.stack(frames))


def test_hidden_files_and_subdirectories_are_ignored(pngs):
    folder, frames = pngs
    (folder / ".DS_Store").write_bytes(b"junk")
    (folder / "sub").mkdir()
    assert imread(folder).shape[0] == len(frames)


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30, unique=True))
def test_natural_key_orders_numbers_by_value(numbers):
    names = [f"frame_{n}.tif" for n in numbers]
    random.Random(0).shuffle(names)
    assert sorted(names, key=natural_key) == [f"frame_{n}.tif" for n in sorted(numbers)]


@given(st.text(alphabet="aZ09 ._-/\u00c4\u0663", max_size=12))
def test_natural_key_is_natsorts_key_ignoring_case(text):
    """Its own split of ASCII text (and natsort's of other text) gives natsort's key."""
    assert natural_key(text) == natsort_keygen(alg=ns.IGNORECASE)(text)


@given(st.lists(st.text(alphabet="aB019_.\u00e9\u0663", max_size=8), max_size=20))
def test_natural_order_is_natsorts(names):
    """Keys of ASCII and non-ASCII names compare with each other as natsort's do."""
    assert sorted(names, key=natural_key) == natsorted(names, alg=ns.IGNORECASE)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
@pytest.mark.parametrize("compression", ["tiff_lzw", "tiff_adobe_deflate"])
def test_pillow_compressed_tiffs(tmp_path, dtype, compression):
    frames = [frame(i, dtype) for i in range(3)]
    for i, data in enumerate(frames):
        Image.fromarray(data).save(tmp_path / f"p{i}.tif", compression=compression)
    stack = imread(str(tmp_path / "*.tif"))
    assert stack.dtype == dtype
    np.testing.assert_array_equal(stack.compute(), np.stack(frames))


def test_tifffile_colour_tiffs(tmp_path):
    frames = [frame(i, np.uint8, (32, 40, 3)) for i in range(3)]
    for i, data in enumerate(frames):
        tifffile.imwrite(tmp_path / f"c{i}.tif", data, photometric="rgb", compression="zlib")
    stack = imread(tmp_path)
    assert stack.shape == (3, 32, 40, 3)
    np.testing.assert_array_equal(stack.compute(), np.stack(frames))


def test_png_and_tiff_mix_when_shape_and_dtype_agree(tmp_path):
    a, b = frame(0), frame(1)
    Image.fromarray(a).save(tmp_path / "f1.png")
    tifffile.imwrite(tmp_path / "f2.tif", b)
    np.testing.assert_array_equal(imread(tmp_path).compute(), np.stack([a, b]))


def test_skimage_multipage_tiff():
    stack = imread(MULTIPAGE)
    assert stack.shape == (2, 15, 10)
    np.testing.assert_array_equal(stack.compute(), tifffile.imread(MULTIPAGE))
    info = inspect(MULTIPAGE)
    assert (info.kind, info.frames, info.frame_names) == ("tiff", 2, None)


def test_multipage_tiff_stack_and_bigtiff(tmp_path):
    data = np.stack([frame(i, np.uint16) for i in range(7)])
    for name, options in [
        ("stack.tif", {}),
        ("big.tif", {"bigtiff": True}),
        ("ome.ome.tif", {"ome": True}),
    ]:
        tifffile.imwrite(tmp_path / name, data, **options)
        stack = imread(tmp_path / name, chunks=(3, 32, 40))
        assert stack.chunks[0] == (3, 3, 1)
        np.testing.assert_array_equal(stack.compute(), data)


def test_plain_zarr_arrays(tmp_path):
    data = np.stack([frame(i) for i in range(4)])
    zarr.create_array(tmp_path / "a.zarr", data=data, chunks=(2, 16, 20))
    np.testing.assert_array_equal(imread(tmp_path / "a.zarr").compute(), data)
    zarr.create_array(tmp_path / "one.zarr", data=data[0])
    assert imread(tmp_path / "one.zarr").shape == (1, 32, 40)


def test_ome_zarr_image_first_level(tmp_path):
    """An NGFF 0.4 image (Zarr v2) with axes t, c, z, y, x and two levels."""
    data = np.arange(2 * 1 * 3 * 32 * 40, dtype=np.uint16).reshape(2, 1, 3, 32, 40)
    group = zarr.open_group(tmp_path / "img.ome.zarr", mode="w", zarr_format=2)
    group.create_array("0", data=data)
    group.create_array("1", data=data[..., ::2, ::2])
    axes = [
        {"name": n, "type": t}
        for n, t in zip("tczyx", ["time", "channel"] + ["space"] * 3, strict=True)
    ]
    group.attrs["multiscales"] = [
        {"version": "0.4", "axes": axes, "datasets": [{"path": "0"}, {"path": "1"}]}
    ]
    stack = imread(tmp_path / "img.ome.zarr")
    assert stack.shape == (2, 3, 32, 40)  # t and z stay apart; the single channel goes
    assert inspect(tmp_path / "img.ome.zarr").axes == "tzyx"
    np.testing.assert_array_equal(stack.compute(), data[:, 0])


def test_zarr_group_without_multiscales_is_refused(tmp_path):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    group.create_array("raw", shape=(2, 3, 4), dtype="u1")
    with pytest.raises(ImageStackError, match="without OME-NGFF 'multiscales'.*raw"):
        imread(tmp_path / "g.zarr")


def test_opening_reads_no_pixels(pngs, monkeypatch):
    reads = []
    monkeypatch.setattr(
        type(PILLOW), "read", lambda self, path, index, storage_options=None: reads.append(path)
    )
    stack = imread(pngs[0])
    info = inspect(pngs[0])
    assert stack.shape == info.shape and not reads


def test_chunks_default_and_override(pngs):
    folder, _ = pngs
    assert imread(folder).chunks == ((5,), (32,), (40,))
    with dask.config.set({"array.chunk-size": "3kB"}):  # two 1280-byte frames per chunk
        assert imread(folder).chunks[0] == (2, 2, 1)
    tiles = imread(folder, chunks=(1, 16, 20))
    assert tiles.chunks == ((1,) * 5, (16, 16), (20, 20))
    np.testing.assert_array_equal(tiles.compute(), imread(folder).compute())


def test_default_chunks_spread_frames_evenly():
    # 7 frames (28 MiB): 8 would be 32 MiB, which glibc serves as fresh pages each time
    assert default_chunks((200, 2048, 2048), np.dtype("uint8")) == (7, 2048, 2048)
    assert default_chunks((33, 2048, 2048), np.dtype("uint8")) == (7, 2048, 2048)  # 5 chunks
    with dask.config.set({"array.chunk-size": "8MiB"}):  # a smaller Dask setting holds
        assert default_chunks((200, 2048, 2048), np.dtype("uint8")) == (2, 2048, 2048)
    assert default_chunks((3, 10, 10), np.dtype("uint8")) == (3, 10, 10)
    assert default_chunks((3, 20000, 20000), np.dtype("float64")) == (1, 20000, 20000)


def test_same_source_same_name_different_chunks_different_name(pngs):
    folder, _ = pngs
    assert imread(folder).name == imread(folder).name
    assert imread(folder).name != imread(folder, chunks=(1, 32, 40)).name


def test_inspect_summary(pngs):
    info = inspect(pngs[0])
    assert isinstance(info, StackInfo)
    assert (info.frames, info.shape, info.dtype, info.nbytes) == (5, (5, 32, 40), np.uint8, 6400)
    assert info.frame_names == ("img_1", "img_2", "img_3", "img_10", "img_11")
    text = str(info)
    for expected in [
        "frames   5",
        "(5, 32, 40) uint8, gray",
        "6.25 kiB",
        "1 chunk of up to (5, 32, 40)",
    ]:
        assert expected in text


def test_source_names_survive_transforms(pngs):
    stack = imread(pngs[0], chunks=(2, 32, 40))
    smooth = stack.map_overlap(lambda b: b // 2, depth=(0, 1, 1), boundary="reflect")
    names = ["img_1", "img_2", "img_3", "img_10", "img_11"]
    assert source_names(smooth.astype(np.float32) * 2) == names
    assert source_names(smooth[:2]) is None  # frame count changed
    assert source_names(da.zeros((5, 3, 3))) is None


def test_source_names_of_two_different_inputs_are_ambiguous(tmp_path):
    write_pngs(tmp_path / "a", ["x1", "x2"])
    write_pngs(tmp_path / "b", ["y1", "y2"])
    a, b = imread(tmp_path / "a"), imread(tmp_path / "b")
    assert source_names(a + b) is None
    assert source_names(a + imread(tmp_path / "a", chunks=(1, 32, 40))) == ["x1", "x2"]


def test_a_file_changed_after_opening_fails_with_its_name(pngs):
    folder, _ = pngs
    stack = imread(folder)
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(folder / "img_3.png")
    with pytest.raises(ImageStackError, match=r"img_3.png: changed since it was opened"):
        stack.compute()


@pytest.mark.parametrize(
    ("shape", "message"),
    [((5,), r"a 1-d array holds no 2-D frames"), ((1, 2, 3, 4, 5), r"cannot tell frames from")],
)
def test_zarr_arrays_that_are_not_frames(tmp_path, shape, message):
    zarr.create_array(tmp_path / "a.zarr", shape=shape, dtype="u1")
    with pytest.raises(ImageStackError, match=message):
        imread(tmp_path / "a.zarr")


def _tifffile_needs(path) -> int:
    """The size a TIFF file must have to hold its image data, as tifffile's pages say."""
    with tifffile.TiffFile(path) as tif:
        page = tif.pages.first
        return max(o + n for o, n in zip(page.dataoffsets, page.databytecounts, strict=True))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"bigtiff": True},
        {"byteorder": ">"},
        {"compression": "zlib"},
        {"tile": (16, 16)},
        {"rowsperstrip": 3},
        {"resolution": (2.5, 4.0), "resolutionunit": 3, "description": "frame"},
        {"photometric": "rgb", "shape": (40, 48, 3)},
    ],
)
def test_a_tiff_directory_read_from_the_first_bytes_agrees_with_tifffile(tmp_path, options):
    """The directory that a file of a stack is compared with: its data's extent and its
    resolution tags as tifffile reads them; a different layout (shape, dtype, codec)
    compares unequal; a file of two images gives none (tifffile reads it)."""
    from stencilpipe.io.formats import TIFF
    from stencilpipe.io.tiffmeta import page_tags

    shape = options.pop("shape", (40, 48))
    data = np.random.default_rng(1).integers(0, 60000, shape).astype(np.uint16)
    tifffile.imwrite(tmp_path / "a.tif", data, **options)
    directory = TIFF.head(str(tmp_path / "a.tif"))
    assert directory.needs == _tifffile_needs(tmp_path / "a.tif")
    with tifffile.TiffFile(tmp_path / "a.tif") as tif:
        assert directory.tags(tif.pages.first.description or None) == page_tags(tif.pages.first)
    tifffile.imwrite(tmp_path / "b.tif", data + 1, **options)
    assert TIFF.head(str(tmp_path / "b.tif")).layout == directory.layout
    for other in (data.astype(np.uint8), data[:-1]):
        tifffile.imwrite(tmp_path / "c.tif", other, **options)
        assert TIFF.head(str(tmp_path / "c.tif")).layout != directory.layout
    tifffile.imwrite(tmp_path / "d.tif", np.stack([data, data]), metadata=None, **options)
    assert TIFF.head(str(tmp_path / "d.tif")) is None


def test_files_that_start_like_the_first_are_read_without_parsing_their_directory(
    tmp_path, monkeypatch
):
    """Files whose bytes before their pixels equal the first file's (one writer, one shape,
    one resolution) have its directory, unparsed; one of them truncated is still found,
    and one with another resolution (other bytes) is parsed. Tags and pixels are tifffile's."""
    formats = importlib.import_module("stencilpipe.io.formats")
    parses = []
    real = formats.TiffDirectory.parse.__func__

    def parse(cls, head):
        parses.append(head[:8])
        return real(cls, head)

    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(3)
    frames = {f"f{i}": rng.integers(0, 65535, (40, 30), dtype=np.uint16) for i in range(6)}
    for name, data in frames.items():
        resolution = (3.0, 3.0) if name == "f4" else (2.0, 2.0)
        tifffile.imwrite(folder / f"{name}.tif", data, resolution=resolution, description="x")
    whole = (folder / "f2.tif").read_bytes()
    (folder / "f2.tif").write_bytes(whole[:-7])  # the same directory bytes, data cut short

    monkeypatch.setattr(formats.TiffDirectory, "parse", classmethod(parse))
    info = inspect(folder, skip_bad=True)
    assert len(parses) == 2  # the first file's directory, and f4's (another resolution)
    assert [os.path.basename(path) for path, _ in info.bad_files] == ["f2.tif"]
    assert info.bad_files[0][1].startswith("truncated")
    for path, tags in zip(info.files, info.file_tags, strict=True):
        with tifffile.TiffFile(path) as tif:
            assert tags == page_tags(tif.pages.first)
    good = [name for name in frames if name != "f2"]
    expected = np.stack([tifffile.imread(folder / f"{name}.tif") for name in good])
    np.testing.assert_array_equal(imread(folder, skip_bad=True).compute(), expected)


def test_a_stack_of_tiffs_parses_only_the_files_unlike_the_first(tmp_path, monkeypatch):
    """tifffile parses the first file and the files whose directory differs from it; each
    other file is compared with it from its first bytes. The headers, the bad files and
    their reasons, and the tags each output keeps are those of a full parse."""
    read = importlib.import_module("stencilpipe.io.read")
    parsed = []
    real = read.scan_file

    def scan_file(path, *args, **kwargs):
        parsed.append(os.path.basename(path))
        return real(path, *args, **kwargs)

    folder = tmp_path / "in"
    folder.mkdir()
    rng = np.random.default_rng(2)
    frames = {f"f{i:02d}": rng.integers(0, 256, (30, 20), dtype=np.uint8) for i in range(12)}
    for i, (name, data) in enumerate(frames.items()):
        tifffile.imwrite(folder / f"{name}.tif", data, resolution=(1 + i, 2.0))
    tifffile.imwrite(folder / "f03.tif", frames["f03"].astype(np.uint16))  # another dtype
    tifffile.imwrite(folder / "f05.tif", frames["f05"], compression="zlib")  # another codec
    whole = (folder / "f07.tif").read_bytes()
    (folder / "f07.tif").write_bytes(whole[:-10])  # truncated
    (folder / "f09.tif").write_bytes(b"II*\0" + whole[4:40])  # a broken directory

    monkeypatch.setattr(read, "scan_file", scan_file)
    info = inspect(folder, skip_bad=True)
    assert parsed == ["f00.tif", "f03.tif", "f05.tif", "f07.tif", "f09.tif"]
    monkeypatch.undo()
    assert info.bad_files == inspect(folder, skip_bad=True).bad_files  # unchanged reasons
    reasons = {os.path.basename(path): why for path, why in info.bad_files}
    assert set(reasons) == {"f03.tif", "f07.tif", "f09.tif"}
    assert reasons["f07.tif"].startswith("truncated") and "uint16" in reasons["f03.tif"]

    for path, tags in zip(info.files, info.file_tags, strict=True):
        with tifffile.TiffFile(path) as tif:
            assert tags == page_tags(tif.pages.first)
    stack = imread(folder, skip_bad=True)
    good = [name for name in frames if f"{name}.tif" not in reasons]
    np.testing.assert_array_equal(stack.compute(), np.stack([frames[n] for n in good]))
