"""The contract every format passes: what our writer writes, the reference library reads
back bit for bit; what the reference library writes, our reader reads bit for bit."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import tifffile
from io_samples import frame
from PIL import Image

from stencilpipe.io.atomic import write_atomic
from stencilpipe.io.errors import BadImageFile, TargetError
from stencilpipe.io.formats import PILLOW, TIFF, scan_file, writer_for


def read_tifffile(path: Path) -> np.ndarray:
    return tifffile.imread(path)


def read_pillow(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image)


# (extension, compression, dtype, channels, how the reference library reads it)
WRITE_CASES = [
    (".tif", None, np.uint8, None, read_tifffile),
    (".tif", "zlib", np.uint16, None, read_tifffile),
    (".tif", "lzw", np.uint8, 3, read_tifffile),
    (".tiff", "zstd", np.float32, None, read_tifffile),
    (".tif", None, np.int16, 2, read_tifffile),
    (".png", None, np.uint8, None, read_pillow),
    (".png", None, np.uint16, None, read_pillow),
    (".png", None, np.uint8, 3, read_pillow),
    (".png", None, np.uint8, 4, read_pillow),
]


def sample(dtype, channels) -> np.ndarray:
    shape = (32, 40) if channels is None else (32, 40, channels)
    if np.dtype(dtype).kind == "f":
        return np.random.default_rng(0).standard_normal(shape).astype(dtype)
    return frame(3, dtype, shape)


@pytest.mark.parametrize(("ext", "compression", "dtype", "channels", "reference"), WRITE_CASES)
def test_writer_output_reads_back_bit_for_bit(
    tmp_path, ext, compression, dtype, channels, reference
):
    data = sample(dtype, channels)
    writer = writer_for(ext)
    writer.check(data.dtype, data.shape, compression)
    path = tmp_path / f"frame{ext}"
    size = write_atomic(path, lambda fh: writer.write(fh, data, compression))
    assert size == path.stat().st_size
    got = reference(path)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, data)


@pytest.mark.parametrize(("ext", "compression", "dtype", "channels", "reference"), WRITE_CASES)
def test_writer_is_deterministic(ext, compression, dtype, channels, reference):
    """A retried task must write the same bytes."""
    data = sample(dtype, channels)
    outputs = []
    for _ in range(2):
        buffer = io.BytesIO()
        writer_for(ext).write(buffer, data, compression)
        outputs.append(buffer.getvalue())
    assert outputs[0] == outputs[1]


def pillow_tiff(path: Path, data: np.ndarray, compression: str) -> None:
    Image.fromarray(data).save(path, compression=compression)


def tifffile_tiff(path: Path, data: np.ndarray, compression: str) -> None:
    tifffile.imwrite(path, data, compression=compression)


def pillow_png(path: Path, data: np.ndarray, compression: str) -> None:
    Image.fromarray(data).save(path)


@pytest.mark.parametrize(
    ("write", "compression", "dtype", "channels"),
    [
        (pillow_tiff, "tiff_lzw", np.uint8, None),
        (pillow_tiff, "tiff_adobe_deflate", np.uint8, None),
        (pillow_tiff, "tiff_lzw", np.uint16, None),
        (pillow_tiff, "tiff_adobe_deflate", np.uint16, None),
        (pillow_tiff, "tiff_lzw", np.uint8, 3),
        (tifffile_tiff, None, np.uint8, None),
        (tifffile_tiff, "zlib", np.uint16, None),
        (tifffile_tiff, "lzw", np.float32, None),
        (tifffile_tiff, None, np.uint8, 3),
        (pillow_png, None, np.uint8, None),
        (pillow_png, None, np.uint16, None),
        (pillow_png, None, np.uint8, 3),
        (pillow_png, None, np.uint8, 4),
    ],
)
def test_reader_reads_other_libraries_files(tmp_path, write, compression, dtype, channels):
    data = sample(dtype, channels)
    path = tmp_path / ("frame.png" if write is pillow_png else "frame.tif")
    write(path, data, compression)
    reader, header = scan_file(str(path))
    assert (header.frames, header.frame_shape, header.dtype) == (1, data.shape, data.dtype)
    got = reader.read(str(path), 0)
    assert got.dtype == data.dtype
    np.testing.assert_array_equal(got, data)


def test_big_endian_files_read_in_native_order(tmp_path):
    data = frame(1, np.uint16)
    tifffile.imwrite(tmp_path / "be.tif", data, byteorder=">")
    reader, header = scan_file(str(tmp_path / "be.tif"))
    got = reader.read(str(tmp_path / "be.tif"), 0)
    assert header.dtype == got.dtype == np.dtype("=u2")
    np.testing.assert_array_equal(got, data)


def test_palette_png_reads_as_rgb(tmp_path):
    rgb = np.zeros((32, 40, 3), np.uint8)
    rgb[:, 20:] = (200, 10, 30)
    Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE).save(tmp_path / "p.png")
    reader, header = scan_file(str(tmp_path / "p.png"))
    assert header.frame_shape == (32, 40, 3)
    np.testing.assert_array_equal(reader.read(str(tmp_path / "p.png"), 0), rgb)


@pytest.mark.parametrize(
    ("ext", "dtype", "compression", "message"),
    [
        (".png", np.float32, None, "PNG cannot hold float32"),
        (".png", np.uint8, "zlib", "PNG is always deflate-compressed"),
        (".tif", np.uint8, "no-such-codec", "compression='no-such-codec'"),
        (".jpg", np.uint8, None, "cannot write '.jpg'"),
        ("", np.uint8, None, "without an extension"),
    ],
)
def test_writers_refuse_what_they_cannot_write(ext, dtype, compression, message):
    with pytest.raises(TargetError, match=message):
        writer_for(ext).check(np.dtype(dtype), (32, 40), compression)


def test_formats_by_content_not_extension(tmp_path):
    """A PNG named .tif is read as the PNG it is."""
    data = frame(0)
    Image.fromarray(data).save(tmp_path / "a.tif", format="PNG")
    reader, _ = scan_file(str(tmp_path / "a.tif"))
    assert reader is PILLOW
    np.testing.assert_array_equal(reader.read(str(tmp_path / "a.tif"), 0), data)
    tifffile.imwrite(tmp_path / "b.png", data)
    assert scan_file(str(tmp_path / "b.png"))[0] is TIFF


def test_bad_file_error_survives_pickling():
    import pickle

    error = pickle.loads(pickle.dumps(BadImageFile("a.tif", "truncated")))
    assert (error.path, error.reason, str(error)) == ("a.tif", "truncated", "a.tif: truncated")
