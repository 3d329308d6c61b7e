"""Stacks on object storage: a real S3 endpoint (moto's server on 127.0.0.1) and fsspec's
memory file system. Outputs are read back with s3fs, tifffile and zarr, not stencilpipe."""

from __future__ import annotations

import functools
import http.server
import importlib.util
import io
import os
import subprocess
import sys
import threading

import fsspec
import numpy as np
import pytest
import s3fs
import tifffile
import zarr
from io_samples import frame
from PIL import Image

from stencilpipe.errors import ImageStackError
from stencilpipe.io import Provenance, TargetError, imread, imsave, inspect

#: One computation for every write of a test: resume then judges the inputs alone (the
#: default, the graph's token, changes with any input).
SAME = Provenance.of({"test": "urls"}, "same")

NAMES = ["img_1", "img_2", "img_10", "img_11"]
#: An endpoint where nothing listens, tried once (botocore retries take seconds).
NOWHERE = {"endpoint_url": "http://127.0.0.1:9", "config_kwargs": {"retries": {"max_attempts": 1}}}


def png(data: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(data).save(out, format="PNG")
    return out.getvalue()


def put_pngs(fs, folder: str) -> list[np.ndarray]:
    """One PNG per name, put in reverse order (the listing order must not matter)."""
    frames = [frame(i) for i in range(len(NAMES))]
    for name, data in reversed(list(zip(NAMES, frames, strict=True))):
        fs.pipe_file(f"{folder}/{name}.png", png(data))
    return frames


@pytest.fixture
def memory_folder(request):
    fs = fsspec.filesystem("memory")
    folder = f"/t{abs(hash(request.node.nodeid))}"
    yield fs, folder
    fs.rm(folder, recursive=True)


def test_memory_glob_in_natural_order_with_per_file_errors(memory_folder):
    fs, folder = memory_folder
    frames = put_pngs(fs, folder)
    fs.pipe_file(f"{folder}/notes.png", b"not a picture")
    with pytest.raises(ImageStackError, match=r"1 of 5 files .*notes\.png: not an image"):
        imread(f"memory://{folder}/*.png")
    stack = imread(f"memory://{folder}/*.png", skip_bad=True)
    np.testing.assert_array_equal(stack.compute(), np.stack(frames))
    info = inspect(f"memory://{folder}", skip_bad=True)
    assert info.frame_names == tuple(NAMES)
    assert [why for _, why in info.bad_files] == ["not an image"]


def test_memory_ome_tiff_keeps_its_axes(memory_folder):
    fs, folder = memory_folder
    data = np.arange(2 * 3 * 8 * 9, dtype=np.uint16).reshape(2, 3, 8, 9)
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, data, ome=True, metadata={"axes": "CZYX", "PhysicalSizeZ": 3.0})
    fs.pipe_file(f"{folder}/a.ome.tif", buffer.getvalue())
    info = inspect(f"memory://{folder}/a.ome.tif")
    assert (info.axes, info.scale[1]) == ("czyx", 3.0)
    np.testing.assert_array_equal(imread(f"memory://{folder}/a.ome.tif").compute(), data)


def test_s3_files_in_and_out_identical_pixels_and_resume(s3):
    options, bucket = s3
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    frames = put_pngs(fs, f"{bucket}/in")
    stack = imread(f"s3://{bucket}/in/*.png", storage_options=options)
    report = imsave(stack + 1, f"s3://{bucket}/out/", storage_options=options, provenance=SAME)
    assert report.frames_written == 4
    for name, data in zip(NAMES, frames, strict=True):  # whole objects, read back by tifffile
        np.testing.assert_array_equal(
            tifffile.imread(io.BytesIO(fs.cat_file(f"{bucket}/out/{name}.tif"))), data + 1
        )
    again = imread(f"s3://{bucket}/in/*.png", storage_options=options) + 1
    report = imsave(again, f"s3://{bucket}/out/", storage_options=options, provenance=SAME)
    assert (report.frames_written, report.frames_skipped) == (0, 4)
    fs.pipe_file(f"{bucket}/in/img_2.png", png(frames[1] // 2))  # one input changes
    changed = imread(f"s3://{bucket}/in/*.png", storage_options=options) + 1
    report = imsave(changed, f"s3://{bucket}/out/", storage_options=options, provenance=SAME)
    assert (report.frames_written, report.frames_stale, report.frames_skipped) == (1, 1, 3)
    np.testing.assert_array_equal(
        tifffile.imread(io.BytesIO(fs.cat_file(f"{bucket}/out/img_2.tif"))), frames[1] // 2 + 1
    )


def test_s3_ome_zarr_out_through_zarrs_fsspec_store(s3):
    options, bucket = s3
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    frames = put_pngs(fs, f"{bucket}/in")
    url = f"s3://{bucket}/o.ome.zarr"
    imsave(imread(f"s3://{bucket}/in", storage_options=options), url, storage_options=options)
    group = zarr.open_group(url, mode="r", storage_options=options)
    assert [a["name"] for a in group.attrs["ome"]["multiscales"][0]["axes"]] == ["i", "y", "x"]
    np.testing.assert_array_equal(group["s0"][:], np.stack(frames))
    again = imread(f"s3://{bucket}/in", storage_options=options)
    report = imsave(again, url, storage_options=options)
    assert (report.frames_written, report.frames_skipped) == (0, 4)


def test_s3_ome_tiff_out_is_one_object_with_its_ome_xml(s3):
    options, bucket = s3
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    data = np.arange(2 * 3 * 8 * 9, dtype=np.uint16).reshape(2, 3, 8, 9)
    buffer = io.BytesIO()
    meta = {"axes": "CZYX", "PhysicalSizeZ": 3.0, "Channel": {"Name": ["a", "b"]}}
    tifffile.imwrite(buffer, data, ome=True, metadata=meta)
    fs.pipe_file(f"{bucket}/in.ome.tif", buffer.getvalue())
    url = f"s3://{bucket}/out.ome.tif"
    stack = imread(f"s3://{bucket}/in.ome.tif", storage_options=options)
    report = imsave(stack + 1, url, storage_options=options, provenance=SAME)
    assert report.frames_written == 6
    with tifffile.TiffFile(io.BytesIO(fs.cat_file(f"{bucket}/out.ome.tif"))) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.series[0].axes == "CZYX" and pixels["PhysicalSizeZ"] == 3.0
        assert [c["Name"] for c in pixels["Channel"]] == ["a", "b"]
        np.testing.assert_array_equal(tif.series[0].asarray(), data + 1)
    again = imread(f"s3://{bucket}/in.ome.tif", storage_options=options) + 1
    report = imsave(again, url, storage_options=options, provenance=SAME)
    assert (report.frames_written, report.frames_skipped) == (0, 6)


def listing(fs, bucket):
    fs.invalidate_cache()
    return sorted(fs.find(bucket))


@pytest.mark.parametrize(
    ("where", "options", "message"),
    [
        ("s3://no-such-bucket/in/*.png", {}, r"bucket 'no-such-bucket' does not exist"),
        ("s3://{bucket}/in/*.png", {"anon": True}, r"access denied .*check the credentials"),
        ("s3://{bucket}/in/*.png", NOWHERE, r"cannot reach"),
        ("nosuchscheme://x/in/*.png", {}, r"not a file system fsspec knows"),
    ],
)
def test_bad_input_urls_say_what_to_check_in_one_line(s3, where, options, message):
    known, bucket = s3
    fs = s3fs.S3FileSystem(**known, skip_instance_cache=True)
    put_pngs(fs, f"{bucket}/in")
    where = where.format(bucket=bucket)
    with pytest.raises(ImageStackError, match=message) as caught:
        imread(where, storage_options={**known, **options} if "s3" in where else options)
    assert "\n" not in str(caught.value) and where.split("*")[0] in str(caught.value)


def test_a_scheme_without_its_package_names_the_package():
    if importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs is installed here")  # the message is for those who lack it
    with pytest.raises(ImageStackError, match=r"gs://b/in/\*\.tif: .*pip install gcsfs"):
        imread("gs://b/in/*.tif")


@pytest.mark.parametrize(
    ("target", "options", "message"),
    [
        ("s3://no-such-bucket/out/", {}, r"bucket 'no-such-bucket' does not exist"),
        ("s3://no-such-bucket/o.ome.zarr", {}, r"bucket 'no-such-bucket' does not exist"),
        ("s3://{bucket}/out/", NOWHERE, r"cannot reach"),
    ],
)
def test_bad_output_urls_are_refused_before_anything_is_written(s3, target, options, message):
    known, bucket = s3
    fs = s3fs.S3FileSystem(**known, skip_instance_cache=True)
    before = listing(fs, bucket)
    with pytest.raises(TargetError, match=message) as caught:
        imsave(
            np.zeros((2, 8, 9), np.uint8),
            target.format(bucket=bucket),
            storage_options={**known, **options},
        )
    assert "\n" not in str(caught.value)
    assert listing(fs, bucket) == before


@pytest.fixture
def http_folder(tmp_path):
    """``(url, folder)``: a plain HTTP server on 127.0.0.1 serving ``folder``."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_http_reads_and_refuses_writes(http_folder):
    url, folder = http_folder
    data = np.arange(3 * 8 * 9, dtype=np.uint16).reshape(3, 8, 9)
    tifffile.imwrite(folder / "a.ome.tif", data, ome=True, metadata={"axes": "ZYX"})
    assert inspect(f"{url}/a.ome.tif").axes == "zyx"
    np.testing.assert_array_equal(imread(f"{url}/a.ome.tif").compute(), data)
    with pytest.raises(TargetError, match=r"http:// URLs are read only"):
        imsave(data, f"{url}/out/")
    assert sorted(p.name for p in folder.iterdir()) == ["a.ome.tif"]


def test_cli_inspect_on_s3_with_credentials_from_the_environment(s3):
    """``stencilpipe inspect`` reads credentials and the endpoint the usual way (AWS_*
    variables); a missing bucket is one line on stderr and exit code 2."""
    options, bucket = s3
    fs = s3fs.S3FileSystem(**options, skip_instance_cache=True)
    buffer = io.BytesIO()
    tifffile.imwrite(buffer, np.zeros((3, 4, 8, 9), np.uint8), ome=True, metadata={"axes": "CZYX"})
    fs.pipe_file(f"{bucket}/a.ome.tif", buffer.getvalue())
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": options["key"],
        "AWS_SECRET_ACCESS_KEY": options["secret"],
        "AWS_ENDPOINT_URL": options["endpoint_url"],
    }
    command = [sys.executable, "-m", "stencilpipe", "inspect"]
    found = subprocess.run(
        [*command, f"s3://{bucket}/a.ome.tif"], env=env, capture_output=True, text=True, timeout=120
    )
    assert found.returncode == 0, found.stderr
    assert "axes     czyx" in found.stdout
    missing = subprocess.run(
        [*command, "s3://no-such-bucket/a.tif"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0
    assert "s3://no-such-bucket/a.tif: the bucket 'no-such-bucket' does not exist" in missing.stderr
