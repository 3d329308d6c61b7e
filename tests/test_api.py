"""The DESIGN.md example, word for word: read lazily, smooth, write mirroring the input names."""

import dask
import numpy as np
from PIL import Image

import stencilpipe as sp


@sp.stencil
def smooth(x):
    return (x[-1, -1] + x[-1, 0] + x[-1, 1] +
            x[ 0, -1] + x[ 0, 0] + x[ 0, 1] +
            x[ 1, -1] + x[ 1, 0] + x[ 1, 1]) // 9  # fmt: skip


def test_imread_smooth_imsave_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    (tmp_path / "in").mkdir()
    frames = {}
    for index in (1, 2, 10):  # natural order: frame_2 before frame_10
        frames[f"frame_{index}"] = rng.integers(0, 256, (30, 41), dtype=np.uint8)
        Image.fromarray(frames[f"frame_{index}"]).save(tmp_path / "in" / f"frame_{index}.png")

    x = sp.imread(str(tmp_path / "in" / "*.png"))
    y = smooth(x)
    assert x.shape == (3, 30, 41) and y.dtype == np.uint8
    with dask.config.set(scheduler="threads"):
        report = sp.imsave(y, str(tmp_path / "out" / "*.png"))
    assert report.frames_written == 3
    for name, frame in frames.items():
        written = np.asarray(Image.open(tmp_path / "out" / f"{name}.png"))
        np.testing.assert_array_equal(written, smooth(frame))
    assert sorted(p.name for p in (tmp_path / "in").iterdir()) == sorted(f"{n}.png" for n in frames)
