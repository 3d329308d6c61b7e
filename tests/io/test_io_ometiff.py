"""One multi-page OME-TIFF output: read back by tifffile (series axes, OME-XML), written by
many tasks, atomic, resumable."""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np
import pytest
import tifffile

from stencilpipe.io import TargetError, imread, imsave
from stencilpipe.io.metadata import Metadata

DATA = np.arange(2 * 3 * 4 * 16 * 20, dtype=np.uint16).reshape(2, 3, 4, 16, 20)
OME = {
    "axes": "TCZYX",
    "PhysicalSizeX": 0.25,
    "PhysicalSizeY": 0.25,
    "PhysicalSizeZ": 1.5,
    "TimeIncrement": 4.0,
    "Channel": {"Name": ["DAPI", "GFP", "RFP"]},
}


@pytest.fixture
def ome_tiff(tmp_path):
    path = tmp_path / "in" / "cells.ome.tif"
    path.parent.mkdir()
    tifffile.imwrite(path, DATA, ome=True, metadata=OME)
    return path


def pixels_of(path):
    with tifffile.TiffFile(path) as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        return tif.series[0].axes, tif.series[0].asarray(), pixels


def test_ome_tiff_output_has_the_inputs_axes_sizes_and_channels(ome_tiff, tmp_path):
    report = imsave(imread(ome_tiff) * 2, tmp_path / "out" / "cells.ome.tif")
    assert (report.frames_written, report.files) == (24, (str(tmp_path / "out" / "cells.ome.tif"),))
    axes, pixels, about = pixels_of(tmp_path / "out" / "cells.ome.tif")
    assert axes == "TCZYX"
    np.testing.assert_array_equal(pixels, DATA * 2)
    assert (about["PhysicalSizeX"], about["PhysicalSizeY"], about["PhysicalSizeZ"]) == (
        0.25,
        0.25,
        1.5,
    )
    assert about["PhysicalSizeZUnit"] == "µm" and about["TimeIncrement"] == 4.0
    assert [c["Name"] for c in about["Channel"]] == ["DAPI", "GFP", "RFP"]
    assert sorted(os.listdir(tmp_path / "out")) == [".stencilpipe", "cells.ome.tif"]


def test_every_block_writes_its_own_planes(tmp_path):
    """Blocks of one plane each, written by threads in any order, give the right file."""
    array = da.from_array(DATA, chunks=(1, 1, 1, 16, 20))
    with dask.config.set(scheduler="threads", num_workers=4):
        imsave(array, tmp_path / "t.ome.tif", metadata=Metadata("tczyx"))
    axes, pixels, _ = pixels_of(tmp_path / "t.ome.tif")
    assert axes == "TCZYX"
    np.testing.assert_array_equal(pixels, DATA)


def test_rgb_frames_and_frames_of_unknown_kind(tmp_path):
    rgb = np.arange(3 * 8 * 9 * 3, dtype=np.uint8).reshape(3, 8, 9, 3)
    imsave(rgb, tmp_path / "rgb.ome.tiff")
    axes, pixels, _ = pixels_of(tmp_path / "rgb.ome.tiff")
    assert axes in ("QYXS", "IYXS")  # tifffile's letters for frames of unknown kind
    np.testing.assert_array_equal(pixels, rgb)


def test_a_rerun_keeps_the_file_and_new_inputs_rewrite_it(ome_tiff, tmp_path):
    out = tmp_path / "o.ome.tif"
    imsave(imread(ome_tiff) + 1, out)
    first = os.stat(out).st_mtime_ns
    report = imsave(imread(ome_tiff) + 1, out)
    assert (report.frames_written, report.frames_skipped) == (0, 24)
    assert os.stat(out).st_mtime_ns == first
    report = imsave(imread(ome_tiff) + 2, out)
    assert (report.frames_written, report.frames_stale) == (24, 24)
    np.testing.assert_array_equal(pixels_of(out)[1], DATA + 2)


def test_a_failed_write_leaves_no_file_and_the_rerun_completes(ome_tiff, tmp_path):
    out = tmp_path / "o.ome.tif"

    def fail_on_second_time_point(block, block_info=None):
        if block_info[0]["array-location"][0][0] == 1:
            raise RuntimeError("disk hiccup")
        return block

    broken = imread(ome_tiff).map_blocks(fail_on_second_time_point, dtype=DATA.dtype)
    with pytest.raises(RuntimeError, match="disk hiccup"):
        imsave(broken, out)
    assert not out.exists()  # the planes written so far sit in a temporary file only
    imsave(imread(ome_tiff), out)
    np.testing.assert_array_equal(pixels_of(out)[1], DATA)
    assert sorted(os.listdir(tmp_path)) == [".stencilpipe", "in", "o.ome.tif"]


def test_compression_is_refused_with_the_way_out(ome_tiff, tmp_path):
    with pytest.raises(TargetError, match=r"uncompressed.*\.ome\.zarr"):
        imsave(imread(ome_tiff), tmp_path / "o.ome.tif", compression="zlib")
    assert not (tmp_path / "o.ome.tif").exists()
