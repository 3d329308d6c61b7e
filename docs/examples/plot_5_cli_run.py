"""
A run from the command line
===========================

``stencilpipe apply STAGES INPUT OUTPUT`` reads a folder of frames, runs the stages with
Dask (on threads in the process for a run as small as this one, on an embedded cluster for a
larger one, or on ``--address``'s scheduler) and writes each result atomically, with a
provenance record so that a rerun keeps what is still right. Here it runs as a subprocess, as
in a shell.
"""

import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import tifffile
from skimage import data

import stencilpipe as sp

folder = Path(tempfile.mkdtemp())
rng = np.random.default_rng(2)
frames = np.stack([data.camera()[::2, ::2]] * 4)
frames = np.clip(frames + rng.normal(0, 25, frames.shape), 0, 255).astype(np.uint8)
sp.imsave(frames, folder / "in" / "frame_{:03d}.png")


def stencilpipe(*args: str) -> str:
    """Run the ``stencilpipe`` command; return what it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "stencilpipe", *args],
        capture_output=True,
        text=True,
        check=True,
        cwd=folder,
    )
    return done.stdout


print(stencilpipe("apply", "median:size=3,gaussian:sigma=1", "in/", "out/", "--no-dashboard"))

# %%
# A second run finds every output up to date (its provenance record matches and its bytes
# verify) and computes nothing; ``--json`` prints one JSON object for scripts.

print(stencilpipe("apply", "median:size=3,gaussian:sigma=1", "in/", "out/", "--json"))

# %%
# The outputs are TIFFs named after the inputs.

written = sorted((folder / "out").glob("*.tif"))
print([path.name for path in written])
fig, axes = plt.subplots(1, 2, figsize=(7, 3.6), layout="constrained")
for ax, image, title in zip(
    axes, (frames[0], tifffile.imread(written[0])), ("in/frame_000.png", written[0].name)
):
    ax.imshow(image, cmap="gray", vmin=0, vmax=255)
    ax.set_title(title)
    ax.set_axis_off()
plt.show()
