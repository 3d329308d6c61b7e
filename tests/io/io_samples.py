"""Helpers that make small real images with Pillow and tifffile (never with stencilpipe)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image

SHAPE = (32, 40)


def frame(i: int, dtype=np.uint8, shape=SHAPE) -> np.ndarray:
    """A deterministic, varied frame; frame ``i`` differs from frame ``i + 1``."""
    values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) * 7 + i * 13
    return (values % (np.iinfo(dtype).max + 1)).astype(dtype)


def write_pngs(folder: Path, names: list[str], dtype=np.uint8) -> list[np.ndarray]:
    """One Pillow PNG per name (in the order given); returns the frames."""
    folder.mkdir(parents=True, exist_ok=True)
    frames = [frame(i, dtype) for i in range(len(names))]
    for name, data in zip(names, frames, strict=True):
        Image.fromarray(data).save(folder / f"{name}.png")
    return frames


def files_in(folder: Path) -> list[str]:
    """The names in ``folder``, but for stencilpipe's state (lock, provenance records)."""
    return sorted(name for name in os.listdir(folder) if name != ".stencilpipe")
