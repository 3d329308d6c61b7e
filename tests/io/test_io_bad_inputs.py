"""A corpus of bad inputs, each with the message it gets: one error that names every bad
file and why, before any task runs; ``skip_bad=True`` leaves them out."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import tifffile
from io_samples import frame, write_pngs
from PIL import Image

from stencilpipe.errors import ImageStackError
from stencilpipe.io import imread, inspect
from stencilpipe.io.errors import BadImageFile
from stencilpipe.io.formats import scan_file


def good_png(path):
    Image.fromarray(frame(0)).save(path)


def empty(path):
    path.write_bytes(b"")


def text(path):
    path.write_text("frame list, not a frame\n")


def truncated_tiff(path):
    tifffile.imwrite(path, frame(0, np.uint16))  # 2560 bytes of pixels after the header
    data = path.read_bytes()
    path.write_bytes(data[:1000])


def truncated_png(path):
    good_png(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def truncated_jpeg(path):
    Image.fromarray(frame(0, np.uint8, (32, 40, 3))).save(path, format="JPEG")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 20])


def corrupt_tiff(path):
    path.write_bytes(b"II*\0" + b"\xff" * 60)


def corrupt_png(path):
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 60)


def absurd_tiff(path):
    """A compressed TIFF whose header claims an image 2**30 pixels wide."""
    tifffile.imwrite(path, frame(0), compression="zlib")
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["ImageWidth"].overwrite(2**30)


def bigger(path):
    Image.fromarray(frame(0, np.uint8, (32, 41))).save(path)


def sixteen_bit(path):
    Image.fromarray(frame(0, np.uint16)).save(path)


def colour(path):
    Image.fromarray(frame(0, np.uint8, (32, 40, 3))).save(path)


def stack_of_five(path):
    tifffile.imwrite(path, np.stack([frame(i) for i in range(5)]))


CORPUS = [
    ("empty.png", empty, r"empty file \(0 bytes\)"),
    ("notes.txt", text, "not an image"),
    ("fake.png", text, "not an image"),
    ("trunc.tif", truncated_tiff, r"truncated \(needs \d+ bytes, has 1000\)"),
    ("trunc.png", truncated_png, r"truncated \(the PNG end marker is missing\)"),
    ("trunc.jpg", truncated_jpeg, r"truncated \(the JPEG end marker is missing\)"),
    ("corrupt.tif", corrupt_tiff, r"corrupt TIFF \("),
    ("corrupt.png", corrupt_png, r"corrupt PNG \("),
    ("absurd.tif", absurd_tiff, r"header claims \d+\.\d+ GiB per frame .* the file is corrupt"),
    ("wide.png", bigger, r"shape \(32, 41\) differs from \(32, 40\) of the other 3 files"),
    ("deep.png", sixteen_bit, r"dtype uint16 differs from uint8 of the other 3 files"),
    ("rgb.png", colour, r"colour \(32, 40, 3\) among gray \(32, 40\) \(the other 3 files\)"),
    ("five.tif", stack_of_five, r"holds 5 frames, and a stack of files takes one frame per file"),
]


@pytest.mark.parametrize(("name", "make", "reason"), CORPUS, ids=[c[0] for c in CORPUS])
def test_each_bad_file_is_named_with_its_reason(tmp_path, name, make, reason):
    write_pngs(tmp_path, ["a", "b", "c"])
    make(tmp_path / name)
    with pytest.raises(ImageStackError) as caught:
        imread(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"1 of 4 files in {tmp_path} cannot be read: {name}: ")
    assert re.search(reason, message), message
    assert message.endswith("pass skip_bad=True (--skip-bad on the command line) to leave them out")
    assert "\n" not in message


def test_one_message_lists_every_bad_file_and_skip_bad_leaves_them_out(tmp_path):
    frames = write_pngs(tmp_path, ["f1", "f2", "f3"])
    for name, make, _ in CORPUS:
        make(tmp_path / name)
    with pytest.raises(ImageStackError) as caught:
        imread(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{len(CORPUS)} of {len(CORPUS) + 3} files in {tmp_path}")
    for name, _, reason in CORPUS:
        assert re.search(
            re.escape(name) + ": " + reason.replace("3 files", r"\d+ files"), message
        ), name

    stack = imread(tmp_path, skip_bad=True)
    np.testing.assert_array_equal(stack.compute(), np.stack(frames))
    info = inspect(tmp_path, skip_bad=True)
    assert info.frame_names == ("f1", "f2", "f3")
    assert sorted(os.path.basename(p) for p, _ in info.bad_files) == sorted(c[0] for c in CORPUS)
    assert f"skipped  {len(CORPUS)} bad files:" in str(info)


def test_majority_decides_what_is_odd(tmp_path):
    """Two 16-bit files among one 8-bit: the 8-bit one is the odd file."""
    sixteen_bit(tmp_path / "a.png")
    sixteen_bit(tmp_path / "b.png")
    good_png(tmp_path / "c.png")
    with pytest.raises(
        ImageStackError, match=r"c.png: dtype uint8 differs from uint16 of the other 2"
    ):
        imread(tmp_path)


def test_a_long_list_is_cut(tmp_path):
    good_png(tmp_path / "good.png")
    for i in range(25):
        text(tmp_path / f"bad{i}.txt")
    with pytest.raises(
        ImageStackError, match=r"bad19.txt: not an image; and 5 more; pass skip_bad"
    ):
        imread(tmp_path)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("missing", r"no such file or directory: .*missing"),
        ("empty_dir", r"directory .*empty_dir holds no files"),
        ("empty_dir/*.png", r"no files match '.*empty_dir/\*.png'"),
        ("nowhere/*.png", r"no files match .* \(directory .*nowhere does not exist\)"),
        ("trunc.tif", r"trunc.tif: truncated \(needs"),
    ],
)
def test_missing_and_empty_sources(tmp_path, source, message):
    (tmp_path / "empty_dir").mkdir()
    truncated_tiff(tmp_path / "trunc.tif")
    with pytest.raises(ImageStackError, match=message):
        imread(str(tmp_path / source))


def test_all_bad_even_with_skip_bad(tmp_path):
    text(tmp_path / "a.txt")
    empty(tmp_path / "b.png")
    with pytest.raises(ImageStackError, match=r"none of the 2 files .* can be read: a.txt: not"):
        imread(tmp_path, skip_bad=True)


def test_unopenable_file_is_named():
    with pytest.raises(BadImageFile, match=r"gone.png: cannot be opened \(No such file"):
        scan_file("gone.png")


def test_bad_image_file_is_an_image_stack_error_and_a_value_error():
    assert issubclass(BadImageFile, ImageStackError) and issubclass(BadImageFile, ValueError)
