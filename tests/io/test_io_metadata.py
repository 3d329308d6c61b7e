"""Axes, physical sizes, units and channel names: read from OME-TIFF, ImageJ hyperstacks,
TIFF resolution tags and OME-Zarr, kept through filters, and written back; every file is
made and read back by tifffile, zarr or ngff-zarr, never by stencilpipe alone."""

from __future__ import annotations

import json

import ngff_zarr
import numpy as np
import pytest
import scipy.ndimage as ndi
import tifffile
import zarr
from io_samples import frame

from stencilpipe import library
from stencilpipe.errors import ImageStackError
from stencilpipe.io import TargetError, imread, imsave, inspect, read_image
from stencilpipe.io.metadata import Metadata

#: A 5-D stack (t, c, z, y, x) and what its OME-XML says about it.
TCZYX = np.arange(2 * 3 * 4 * 16 * 20, dtype=np.uint16).reshape(2, 3, 4, 16, 20)
OME = {
    "axes": "TCZYX",
    "PhysicalSizeX": 0.25,
    "PhysicalSizeY": 0.5,
    "PhysicalSizeZ": 2.0,
    "PhysicalSizeZUnit": "nm",
    "TimeIncrement": 30.0,
    "TimeIncrementUnit": "ms",
    "Channel": {"Name": ["DAPI", "GFP", "RFP"]},
}


@pytest.fixture
def ome_tiff(tmp_path):
    path = tmp_path / "cells.ome.tif"
    tifffile.imwrite(path, TCZYX, ome=True, metadata=OME)
    return path


def test_ome_tiff_axes_scale_units_and_channels(ome_tiff):
    stack = imread(ome_tiff)
    assert stack.shape == TCZYX.shape  # was (24, 16, 20): t, c and z flattened together
    np.testing.assert_array_equal(stack.compute(), tifffile.imread(ome_tiff))
    info = inspect(ome_tiff)
    assert info.axes == "tczyx" and info.frames == 24 and info.frame_shape == (16, 20)
    assert info.scale == (30.0, 1.0, 2.0, 0.5, 0.25)
    assert info.units == ("millisecond", None, "nanometer", "micrometer", "micrometer")
    assert info.channel_names == ("DAPI", "GFP", "RFP")
    about = json.loads(json.dumps(info.as_dict()))
    assert about["axes"] == "tczyx" and about["scale"]["z"] == 2.0
    assert about["channel_names"] == ["DAPI", "GFP", "RFP"]
    assert "channels DAPI, GFP, RFP" in info.summary()
    assert "z 2 nanometer" in info.summary()


def test_ome_dimension_order_is_put_in_filter_order(tmp_path):
    """An OME-TIFF stored z before c: the array comes back c, z, y, x (z next to y, x)."""
    stored = TCZYX[0].transpose(1, 0, 2, 3)  # (z, c, y, x)
    tifffile.imwrite(tmp_path / "zc.ome.tif", stored, ome=True, metadata={"axes": "ZCYX"})
    stack = imread(tmp_path / "zc.ome.tif")
    assert inspect(tmp_path / "zc.ome.tif").axes == "czyx"
    np.testing.assert_array_equal(stack.compute(), TCZYX[0])


def test_imagej_hyperstack(tmp_path):
    data = TCZYX.transpose(0, 2, 1, 3, 4).astype(np.uint8)  # ImageJ stores t, z, c
    tifffile.imwrite(
        tmp_path / "ij.tif",
        data,
        imagej=True,
        resolution=(4.0, 2.0),
        metadata={"axes": "TZCYX", "spacing": 1.5, "unit": "um", "finterval": 2.0},
    )
    info = inspect(tmp_path / "ij.tif")
    assert info.axes == "tczyx"
    assert info.scale == (2.0, 1.0, 1.5, 0.5, 0.25)
    assert info.units == ("second", None, "micrometer", "micrometer", "micrometer")
    np.testing.assert_array_equal(
        imread(tmp_path / "ij.tif").compute(), data.transpose(0, 2, 1, 3, 4)
    )


def test_resolution_tags_of_a_tiff_and_of_a_directory(tmp_path):
    (tmp_path / "d").mkdir()
    for i in range(3):
        tifffile.imwrite(
            tmp_path / "d" / f"f{i}.tif",
            frame(i),
            resolution=(1e4, 2e4),
            resolutionunit="CENTIMETER",
        )
    for source in (tmp_path / "d" / "f0.tif", tmp_path / "d"):
        info = inspect(source)
        assert info.axes == "iyx"
        assert info.scale == pytest.approx((1.0, 5e-5, 1e-4))
        assert info.units == (None, "centimeter", "centimeter")


def test_plain_files_and_zarr_have_frames_of_unknown_kind(pngs, tmp_path):
    folder, _ = pngs
    assert (inspect(folder).axes, inspect(folder).scale) == ("iyx", (1.0, 1.0, 1.0))
    zarr.create_array(tmp_path / "a.zarr", data=np.zeros((2, 8, 9), np.uint8))
    assert inspect(tmp_path / "a.zarr").axes == "iyx"


def test_ome_zarr_input_axes_units_scale_and_channel_labels(tmp_path):
    data = TCZYX[:, :2]
    group = zarr.open_group(tmp_path / "in.ome.zarr", mode="w", zarr_format=2)
    group.create_array("0", data=data)
    units = {"t": "second", "z": "micrometer", "y": "micrometer", "x": "micrometer"}
    types = {"t": "time", "c": "channel"}
    axes = [
        {"name": a, "type": types.get(a, "space"), **({"unit": units[a]} if a in units else {})}
        for a in "tczyx"
    ]
    scale = [{"type": "scale", "scale": [5.0, 1.0, 3.0, 0.5, 0.5]}]
    group.attrs["multiscales"] = [
        {
            "version": "0.4",
            "axes": axes,
            "datasets": [{"path": "0", "coordinateTransformations": scale}],
        }
    ]
    group.attrs["omero"] = {"channels": [{"label": "nuclei"}, {"label": "membrane"}]}
    info = inspect(tmp_path / "in.ome.zarr")
    assert (info.axes, info.scale) == ("tczyx", (5.0, 1.0, 3.0, 0.5, 0.5))
    assert info.units == ("second", None, "micrometer", "micrometer", "micrometer")
    assert info.channel_names == ("nuclei", "membrane")
    np.testing.assert_array_equal(imread(tmp_path / "in.ome.zarr").compute(), data)


def test_a_3d_filter_never_mixes_time_points_or_channels(ome_tiff):
    """Each (t, c) volume is filtered on its own: scipy on that volume is the oracle."""
    stack = imread(ome_tiff).astype(np.float32)
    result = library.mean(3, ndim=3)(stack).compute()
    for t in range(2):
        for c in range(3):
            volume = TCZYX[t, c].astype(np.float32)
            expected = ndi.uniform_filter(volume, 3, mode="reflect")
            np.testing.assert_allclose(result[t, c], expected, rtol=1e-5)


def test_ome_zarr_output_keeps_axes_scale_units_and_channels(ome_tiff, tmp_path):
    """ngff-zarr, validating against the NGFF schema, sees what the OME-TIFF said."""
    report = imsave(imread(ome_tiff) + 1, tmp_path / "out.ome.zarr", levels=3)
    assert report.frames_written == 24  # 2-D frames, as for files
    again = imsave(imread(ome_tiff) + 1, tmp_path / "out.ome.zarr", levels=3)
    assert (again.frames_written, again.frames_skipped) == (0, 24)
    multiscales = ngff_zarr.from_ngff_zarr(str(tmp_path / "out.ome.zarr"), validate=True)
    image = multiscales.images[0]
    assert image.dims == ("t", "c", "z", "y", "x")
    assert image.scale == {"t": 30.0, "c": 1.0, "z": 2.0, "y": 0.5, "x": 0.25}
    assert image.axes_units == {
        "t": "millisecond",
        "c": None,
        "z": "nanometer",
        "y": "micrometer",
        "x": "micrometer",
    }
    assert [c.label for c in multiscales.metadata.omero.channels] == ["DAPI", "GFP", "RFP"]
    np.testing.assert_array_equal(np.asarray(image.data), TCZYX + 1)
    assert len(multiscales.images) == 3  # levels: every other pixel in y, x, per level
    for level, lower in enumerate(multiscales.images[1:], start=1):
        step = 2**level
        assert lower.scale["y"] == 0.5 * step and lower.scale["z"] == 2.0
        np.testing.assert_array_equal(np.asarray(lower.data), (TCZYX + 1)[..., ::step, ::step])


def test_metadata_given_to_imsave(tmp_path):
    meta = Metadata.of("czyx", {"z": 4.0, "y": 0.1, "x": 0.1}, {"z": "µm"}, ["a", "b"])
    imsave(np.zeros((2, 3, 8, 9), np.uint8), tmp_path / "g.ome.zarr", metadata=meta)
    image = ngff_zarr.from_ngff_zarr(str(tmp_path / "g.ome.zarr"), validate=True).images[0]
    assert image.dims == ("c", "z", "y", "x") and image.scale["z"] == 4.0
    assert image.axes_units["z"] == "micrometer"


def test_tiff_directory_output_keeps_each_inputs_tags(tmp_path):
    (tmp_path / "in").mkdir()
    for i, res in enumerate([(100.0, 100.0), (200.0, 50.0)]):
        tifffile.imwrite(
            tmp_path / "in" / f"f{i}.tif",
            frame(i),
            resolution=res,
            resolutionunit="CENTIMETER",
            description=f"frame {i} of the microscope",
            metadata=None,
        )
    imsave(imread(tmp_path / "in") + 1, tmp_path / "out")
    for i, res in enumerate([(100.0, 100.0), (200.0, 50.0)]):
        with tifffile.TiffFile(tmp_path / "out" / f"f{i}.tif") as tif:
            page = tif.pages[0]
            assert page.get_resolution() == pytest.approx(res)
            assert page.resolutionunit == tifffile.RESUNIT.CENTIMETER
            assert page.description == f"frame {i} of the microscope"
            np.testing.assert_array_equal(page.asarray(), frame(i) + 1)


def test_an_nd_stack_to_files_gets_one_file_per_plane(ome_tiff, tmp_path):
    imsave(imread(ome_tiff), tmp_path / "planes")
    written = sorted(p.name for p in (tmp_path / "planes").glob("*.tif"))
    assert len(written) == 24
    np.testing.assert_array_equal(
        tifffile.imread(tmp_path / "planes" / written[5]), TCZYX.reshape(24, 16, 20)[5]
    )


def test_read_image_and_its_metadata_carried_to_a_numpy_result(ome_tiff, tmp_path):
    """A NumPy result has no graph to find its input in: metadata= carries the axes."""
    image = read_image(ome_tiff)
    assert (image.axes, image.channel_names) == ("tczyx", ("DAPI", "GFP", "RFP"))
    assert image.as_dict()["units"]["t"] == "millisecond"
    result = np.asarray(image.data) // 2
    imsave(result, tmp_path / "n.ome.zarr", metadata=image.metadata)
    imsave(image, tmp_path / "same.ome.tif")
    zarr_image = ngff_zarr.from_ngff_zarr(str(tmp_path / "n.ome.zarr"), validate=True).images[0]
    assert zarr_image.dims == ("t", "c", "z", "y", "x") and zarr_image.scale["z"] == 2.0
    np.testing.assert_array_equal(np.asarray(zarr_image.data), TCZYX // 2)
    with tifffile.TiffFile(tmp_path / "same.ome.tif") as tif:
        assert tif.series[0].axes == "TCZYX"
        np.testing.assert_array_equal(tif.series[0].asarray(), TCZYX)


def test_which_axes_a_stage_filters(ome_tiff, tmp_path, pngs):
    assert inspect(ome_tiff).filtered_axes(3) == "zyx"
    assert inspect(pngs[0]).filtered_axes(3) == "iyx"  # frames of unknown kind serve as z
    tifffile.imwrite(tmp_path / "tc.ome.tif", TCZYX[:, :, 0], ome=True, metadata={"axes": "TCYX"})
    info = inspect(tmp_path / "tc.ome.tif")
    assert info.filtered_axes(2) == "yx"
    with pytest.raises(ImageStackError, match=r"3-D stage would filter across the c axis"):
        info.filtered_axes(3)


def test_zarr_v2_output_is_ngff_0_4(ome_tiff, tmp_path):
    out = tmp_path / "v2.ome.zarr"
    report = imsave(imread(ome_tiff), out, zarr_format=2, levels=2, compression="zstd")
    assert report.frames_written == 24
    assert zarr.open_group(out, mode="r").metadata.zarr_format == 2
    multiscales = ngff_zarr.from_ngff_zarr(str(out), validate=True)
    assert zarr.open_group(out, mode="r").attrs["multiscales"][0]["version"] == "0.4"
    image = multiscales.images[0]
    assert image.dims == ("t", "c", "z", "y", "x") and image.scale["z"] == 2.0
    np.testing.assert_array_equal(np.asarray(image.data), TCZYX)
    again = imsave(imread(ome_tiff), out, zarr_format=2, levels=2, compression="zstd")
    assert (again.frames_written, again.frames_skipped) == (0, 24)


def test_sharded_zarr_one_object_per_block_one_chunk_per_frame(ome_tiff, tmp_path):
    out = tmp_path / "s.ome.zarr"
    stack = imread(ome_tiff, chunks=(1, 3, 4, 16, 20))  # two blocks: one per time point
    report = imsave(stack, out, shards=True)
    assert report.frames_written == 24
    level = zarr.open_group(out, mode="r")["s0"]
    assert (level.shards, level.chunks) == ((1, 3, 4, 16, 20), (1, 1, 1, 16, 20))
    assert sorted(p.name for p in (out / "s0" / "c").iterdir()) == ["0", "1"]
    np.testing.assert_array_equal(level[:], TCZYX)
    image = ngff_zarr.from_ngff_zarr(str(out), validate=True).images[0]
    np.testing.assert_array_equal(np.asarray(image.data), TCZYX)
    again = imsave(imread(ome_tiff, chunks=(1, 3, 4, 16, 20)), out, shards=True)
    assert (again.frames_written, again.frames_skipped) == (0, 24)
    with pytest.raises(TargetError, match="shards=True needs zarr_format=3"):
        imsave(stack, tmp_path / "v2.zarr", shards=True, zarr_format=2)


def test_a_store_written_again_in_the_other_zarr_format_is_replaced(ome_tiff, tmp_path):
    out = tmp_path / "f.ome.zarr"
    imsave(imread(ome_tiff), out)
    report = imsave(imread(ome_tiff), out, zarr_format=2)
    assert (report.frames_written, report.frames_stale) == (24, 24)
    assert zarr.open_group(out, mode="r").metadata.zarr_format == 2
    np.testing.assert_array_equal(zarr.open_group(out, mode="r")["s0"][:], TCZYX)
