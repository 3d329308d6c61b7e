"""
A first filter
==============

A kernel is a Python function of the neighbourhood, indexed relative to the output point:
``x[0, 0]`` is the pixel itself, ``x[-1, 0]`` the one above it. :func:`stencilpipe.stencil`
infers how far the kernel reaches (its halo), compiles it for the input's dtype on the first
call, and fills the borders by a boundary mode (``reflect`` by default, as scipy.ndimage).
"""

import matplotlib.pyplot as plt
import numpy as np
from scipy import ndimage as ndi
from skimage import data

import stencilpipe as sp


@sp.stencil
def smooth(x):
    above = x[-1, -1] + x[-1, 0] + x[-1, 1]
    level = x[0, -1] + x[0, 0] + x[0, 1]
    below = x[1, -1] + x[1, 0] + x[1, 1]
    return (above + level + below) // 9


print(smooth.halo, smooth.signature)

# %%
# A photograph with salt-and-pepper noise: the mean smears the noise, the built-in median
# (a selection network, compiled the same way) removes it.

rng = np.random.default_rng(0)
noisy = data.camera()[::2, ::2].copy()  # 256 x 256, uint8
specks = rng.random(noisy.shape)
noisy[specks < 0.04] = 0
noisy[specks > 0.96] = 255

smoothed = smooth(noisy)  # NumPy in, NumPy out: uint8, same shape
median = sp.library.median(3)(noisy)

fig, axes = plt.subplots(1, 3, figsize=(9, 3.4), layout="constrained")
for ax, image, title in zip(
    axes, (noisy, smoothed, median), ("input", "smooth (3x3 mean)", "library.median(3)")
):
    ax.imshow(image, cmap="gray", vmin=0, vmax=255)
    ax.set_title(title)
    ax.set_axis_off()
plt.show()

# %%
# The same values as scipy.ndimage: the median exactly, the integer mean as scipy's float
# mean floored.

assert np.array_equal(median, ndi.median_filter(noisy, size=3, mode="reflect"))
expected = ndi.uniform_filter(noisy.astype(np.float64), size=3, mode="reflect") * 9
assert np.array_equal(smoothed, (np.rint(expected).astype(np.int64) // 9).astype(np.uint8))
print("median and mean agree with scipy.ndimage")

# %%
# Leading axes are batch axes: a stack of frames is filtered frame by frame.

stack = np.stack([noisy, noisy[::-1]])
print(smooth(stack).shape)
