"""
A drop-in for dask-image
========================

``stencilpipe.ndfilters`` has every function of ``dask_image.ndfilters`` with the same
parameters and defaults, and gives scipy.ndimage's values, integer casting included.
Switching is one import; here both run on the same chunked Dask array and the arrays are
compared.
"""

import dask.array as da
import dask_image.ndfilters as dask_ndf
import matplotlib.pyplot as plt
import numpy as np
from skimage import data

import stencilpipe.ndfilters as ndf  # instead of: import dask_image.ndfilters as ndf

rng = np.random.default_rng(4)
coins = data.coins()[:, :300]  # uint8, 303 x 300
noisy = np.clip(coins + rng.normal(0, 20, coins.shape), 0, 255).astype(np.uint8)
image = da.from_array(noisy, chunks=(101, 150))

calls = {
    "gaussian_filter(sigma=2)": lambda module: module.gaussian_filter(image, 2),
    "median_filter(size=5)": lambda module: module.median_filter(image, size=5),
    "sobel(axis=0), float32": lambda module: module.sobel(image.astype(np.float32), axis=0),
}

fig, axes = plt.subplots(len(calls), 4, figsize=(11, 8), layout="constrained")
for row, (name, call) in zip(axes, calls.items()):
    ours = call(ndf).compute()
    theirs = call(dask_ndf).compute()
    difference = np.abs(ours.astype(np.float64) - theirs)
    print(f"{name:26} {ours.dtype}: largest difference from dask-image {difference.max():g}")
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-3)
    pictures = (
        (noisy, "input", {}),
        (ours, f"stencilpipe.ndfilters.{name}", {}),
        (theirs, f"dask_image.ndfilters.{name}", {}),
        (difference, f"|difference|, largest {difference.max():g}", {"vmin": 0, "vmax": 1}),
    )
    for ax, (picture, title, scale) in zip(row, pictures):
        ax.imshow(picture, cmap="gray", **scale)
        ax.set_title(title, fontsize=8)
        ax.set_axis_off()
plt.show()
