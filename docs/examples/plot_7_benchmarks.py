"""
How fast, as charts
===================

Every speed figure of stencilpipe is a ratio measured side by side in one run against an
anchor: a memory copy of the same bytes, scipy.ndimage, OpenCV. First the figures that
``make bench`` measured for the README, then a small measurement made while this page was
built, on the machine that built it.
"""

import os
import platform
import timeit

import matplotlib.pyplot as plt
import numpy as np
from scipy import ndimage as ndi

import stencilpipe as sp

README_MACHINE = "measured by make bench on the 2-core development machine (AVX2, no GPU)"

# %%
# One 2048x2048 frame, milliseconds (``benchmarks/filters.py``; lower is better, log scale).
# stencilpipe and OpenCV on 2 threads, scipy on 1.

filters = ["3x3 mean", "5x5 gaussian", "3x3 sobel", "3x3 median"]
table = {  # filter -> (stencilpipe, OpenCV, scipy) in ms, uint8 and float32
    "uint8": [(1.49, 1.18, 46.6), (3.01, 1.03, 48.8), (1.18, 0.98, 44.3), (0.54, 0.59, 517)],
    "float32": [(1.88, 2.67, 75.4), (2.29, 2.96, 79.4), (1.58, 2.86, 74.4), (2.01, 2.68, 514)],
}
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained", sharey=True)
for ax, (dtype, rows) in zip(axes, table.items()):
    positions = np.arange(len(filters))
    for offset, (tool, column) in zip(
        (-0.27, 0, 0.27), enumerate(("stencilpipe", "OpenCV", "scipy"))
    ):
        ax.bar(positions + offset, [row[tool] for row in rows], width=0.27, label=column)
    ax.set_xticks(positions, filters)
    ax.set_yscale("log")
    ax.set_title(f"{dtype}, one 2048x2048 frame")
axes[0].set_ylabel("ms (log scale)")
axes[0].legend()
fig.suptitle(README_MACHINE, fontsize=9)
plt.show()

# %%
# The chain gaussian 5x5 -> mean 3x3 -> sobel, fused strip by strip or run stage after stage,
# against OpenCV's three calls per frame (``benchmarks/filters.py``).

cases = ["one uint8 frame", "16 uint8 frames", "one float32 frame", "16 float32 frames"]
chain_ms = {
    "fused": [6.10, 94, 5.39, 95],
    "fuse=False": [8.77, 98, 10.04, 133],
    "OpenCV": [5.89, 54.2, 13.0, 157],
}
fig, ax = plt.subplots(figsize=(8, 3.4), layout="constrained")
for offset, (label, values) in zip((-0.27, 0, 0.27), chain_ms.items()):
    ax.bar(np.arange(len(cases)) + offset, values, width=0.27, label=label)
ax.set_xticks(np.arange(len(cases)), cases)
ax.set_yscale("log")
ax.set_ylabel("ms (log scale)")
ax.legend()
ax.set_title(f"a three-stage chain, 2048x2048 frames\n{README_MACHINE}", fontsize=9)
plt.show()

# %%
# Measured now: a 3x3 mean of one 1024x1024 uint8 frame, best of 5, against a copy of the
# frame and scipy (small and quick, so noisier than ``make bench``).

frame = np.random.default_rng(3).integers(0, 256, (1024, 1024), dtype=np.uint8)
out = np.empty_like(frame)
mean = sp.library.mean(3)
mean(frame, out=out)  # compile (or load from the disk cache) before timing


def best_ms(call) -> float:
    """The fastest of 5 runs of ``call``, in milliseconds."""
    return 1000 * min(timeit.repeat(call, number=1, repeat=5))


measured = {
    "np.copyto": best_ms(lambda: np.copyto(out, frame)),
    "stencilpipe\nlibrary.mean(3)": best_ms(lambda: mean(frame, out=out)),
    "scipy\nuniform_filter": best_ms(lambda: ndi.uniform_filter(frame, 3, output=out)),
}
for name, ms in measured.items():
    print(f"{name.replace(chr(10), ' '):32} {ms:8.3f} ms")

machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
fig, ax = plt.subplots(figsize=(6, 3.2), layout="constrained")
bars = ax.bar(list(measured), list(measured.values()), color=["grey", "C0", "C2"])
ax.bar_label(bars, fmt="%.2f ms")
ax.set_yscale("log")
ax.set_ylabel("ms (log scale)")
ax.set_title(f"3x3 mean, 1024x1024 uint8, measured at build time\n{machine}", fontsize=9)
plt.show()
