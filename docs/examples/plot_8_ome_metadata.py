"""
OME metadata through a run
==========================

A stack keeps what it is: its axes, the physical size of a pixel, units and channel names,
read from OME-TIFF (or OME-Zarr, ImageJ hyperstacks, TIFF resolution tags). Channels and time
points are never filtered across: only the last axes (``y, x``) are. A run writing OME-Zarr
writes the metadata with the results.

The stack here: scikit-image's immunohistochemistry slide, separated by stain
(``skimage.color.rgb2hed``), its two stains (hematoxylin, DAB) saved as one OME-TIFF of axes
``CYX`` with 0.5 µm pixels.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import tifffile
from skimage import color, data, exposure

import stencilpipe as sp
from stencilpipe.io import read_image

folder = Path(tempfile.mkdtemp())
hed = color.rgb2hed(data.immunohistochemistry()[:256, :256])
stains = np.stack(
    [
        exposure.rescale_intensity(
            hed[..., i], in_range=tuple(np.percentile(hed[..., i], (1, 99))), out_range=(0, 65535)
        )
        for i in (0, 2)  # the slide has no eosin
    ]
).astype(np.uint16)
tifffile.imwrite(
    folder / "slide.ome.tif",
    stains,
    ome=True,
    metadata={
        "axes": "CYX",
        "PhysicalSizeX": 0.5,
        "PhysicalSizeXUnit": "µm",
        "PhysicalSizeY": 0.5,
        "PhysicalSizeYUnit": "µm",
        "Channel": {"Name": ["Hematoxylin", "DAB"]},
    },
)

image = read_image(folder / "slide.ome.tif")
print("axes", image.axes, "| shape", image.data.shape, "| scale", image.scale)
print("units", image.units, "| channels", image.channel_names)

# %%
# A run from the command line: a Gaussian over each channel's plane, into OME-Zarr.

subprocess.run(
    [sys.executable, "-m", "stencilpipe", "apply", "gaussian:sigma=2", "slide.ome.tif",
     "smoothed.ome.zarr", "--no-dashboard", "-q"],
    cwd=folder,
    check=True,
)  # fmt: skip
result = read_image(folder / "smoothed.ome.zarr")
print("axes", result.axes, "| shape", result.data.shape, "| scale", result.scale)
print("units", result.units, "| channels", result.channel_names)
assert result.channel_names == image.channel_names and result.scale == image.scale

# %%
# The same in Python gives the same pixels: ``image.data`` is a plain Dask array, and the
# filter's core axes are its last two.

in_python = sp.library.gaussian(2.0)(image.data).compute()
assert np.array_equal(in_python, result.data.compute())

fig, axes = plt.subplots(2, 2, figsize=(7, 6.6), layout="constrained")
extent = [0, 256 * image.scale[2], 256 * image.scale[1], 0]  # in micrometres
for column, name in enumerate(image.channel_names):
    for row, (stack, what) in enumerate(((image, "input"), (result, "smoothed"))):
        ax = axes[row, column]
        ax.imshow(stack.data[column], cmap="magma", extent=extent, vmin=0, vmax=65535)
        ax.set_title(f"{name}, {what}", fontsize=10)
        ax.set_xlabel(f"x ({result.units[2]})", fontsize=8)
        ax.set_ylabel(f"y ({result.units[1]})", fontsize=8)
        ax.tick_params(labelsize=7)
plt.show()
