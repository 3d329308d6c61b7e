"""
A custom stencil
================

Kernels can branch, loop over constant ranges, take several arrays and trailing scalar
arguments. Here: a local-contrast kernel (the pixel minus the darkest pixel of its 5x5
window, a loop the compiler unrolls), and a threshold with a scalar argument, on
scikit-image's coins.
"""

import matplotlib.pyplot as plt
import numpy as np
from skimage import data

import stencilpipe as sp


@sp.stencil(boundary="nearest")
def contrast(x):
    darkest = x[0, 0]
    for i in range(-2, 3):
        for j in range(-2, 3):
            darkest = min(darkest, x[i, j])
    return x[0, 0] - darkest


@sp.stencil
def above(x, t):
    return 255 if x[0, 0] > t else 0


coins = data.coins()
local = contrast(coins)
mask = above(local, 40)
print("halo", contrast.halo, "| signature of above:", above.signature)

fig, axes = plt.subplots(1, 3, figsize=(10, 3), layout="constrained")
for ax, image, title in zip(
    axes, (coins, local, mask), ("coins", "contrast (x - 5x5 min)", "above(contrast, 40)")
):
    ax.imshow(image, cmap="gray")
    ax.set_title(title)
    ax.set_axis_off()
plt.show()

# %%
# The result is the kernel applied to the frame padded by the boundary mode (``nearest`` is
# NumPy's ``edge``); that is how the tests check every kernel.

padded = np.pad(coins, 2, mode="edge")
windows = np.lib.stride_tricks.sliding_window_view(padded, (5, 5))
assert np.array_equal(local, coins - windows.min(axis=(-2, -1)))
print("equal to np.pad + the plain loop")

# %%
# The module stencilpipe generated and compiled for ``above`` on uint8 input: an interior
# function without bounds checks, a border function that folds indices by the boundary mode,
# and a store that saturates to the output dtype. It is cached on disk, so a fresh process
# loads it instead of compiling.

print(above.generated_source(np.uint8))
