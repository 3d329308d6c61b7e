"""A 5-D OME-TIFF through a pipeline run (a 3-D mean) to OME-Zarr and to OME-TIFF: the
outputs, read back by ngff-zarr and tifffile, have the input's axes, physical sizes, units
and channel names, and scipy's values on each (t, c) volume; a rerun keeps them."""

from __future__ import annotations

import io

import ngff_zarr
import numpy as np
import tifffile
from rich.console import Console
from scipy import ndimage as ndi

from stencilpipe.pipeline import parse_config, run

DATA = np.random.default_rng(3).integers(0, 4000, (2, 3, 5, 24, 28), dtype=np.uint16)
OME = {
    "axes": "TCZYX",
    "PhysicalSizeX": 0.2,
    "PhysicalSizeY": 0.2,
    "PhysicalSizeZ": 1.0,
    "TimeIncrement": 60.0,
    "Channel": {"Name": ["DAPI", "GFP", "RFP"]},
}


def expected() -> np.ndarray:
    """scipy's mean of each (t, c) volume, rounded to nearest (the library's rounding)."""
    out = np.empty_like(DATA)
    for t in range(DATA.shape[0]):
        for c in range(DATA.shape[1]):
            volume = ndi.uniform_filter(DATA[t, c].astype(np.float64), 3, mode="reflect")
            out[t, c] = np.rint(volume)
    return out


def run_to(tmp_path, output: str):
    config = parse_config(
        {"input": "in.ome.tif", "output": output, "stages": [{"mean": {"size": 3, "ndim": 3}}]},
        base_dir=tmp_path,
    )
    return run(config, console=Console(file=io.StringIO()), progress=False)


def test_ome_tiff_through_a_run_to_ome_zarr_and_ome_tiff(tmp_path):
    tifffile.imwrite(tmp_path / "in.ome.tif", DATA, ome=True, metadata=OME)
    for output in ("out.ome.zarr", "out.ome.tif"):
        assert run_to(tmp_path, output).written == 30
        again = run_to(tmp_path, output)
        assert (again.kept, again.written) == (30, 0)

    image = ngff_zarr.from_ngff_zarr(str(tmp_path / "out.ome.zarr"), validate=True)
    level = image.images[0]
    assert level.dims == ("t", "c", "z", "y", "x")
    assert level.scale == {"t": 60.0, "c": 1.0, "z": 1.0, "y": 0.2, "x": 0.2}
    assert level.axes_units["z"] == "micrometer" and level.axes_units["t"] == "second"
    assert [c.label for c in image.metadata.omero.channels] == ["DAPI", "GFP", "RFP"]
    np.testing.assert_array_equal(np.asarray(level.data), expected())

    with tifffile.TiffFile(tmp_path / "out.ome.tif") as tif:
        pixels = tifffile.xml2dict(tif.ome_metadata)["OME"]["Image"]["Pixels"]
        assert tif.series[0].axes == "TCZYX"
        assert (pixels["PhysicalSizeX"], pixels["PhysicalSizeZ"]) == (0.2, 1.0)
        assert pixels["TimeIncrement"] == 60.0
        assert [c["Name"] for c in pixels["Channel"]] == ["DAPI", "GFP", "RFP"]
        np.testing.assert_array_equal(tif.series[0].asarray(), expected())
