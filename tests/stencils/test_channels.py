"""Colour channels are never filtered across: scikit-image's ``channel_axis``, one rule for the
Python API (stencils, chains), Dask, the CLI and the GPU (the GPU in cuda_simulator_cases.py)."""

import os
import subprocess
import sys

import dask
import dask.array as da
import imageio.v3 as iio
import numpy as np
import pytest
import tifffile
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.errors import KernelError

RNG = np.random.default_rng(11)
RGB = RNG.integers(0, 256, (3, 17, 19, 3), dtype=np.uint8)  # (frames, y, x, c)
FLOAT_RGB = RNG.standard_normal((2, 13, 15, 3))


@pytest.fixture(autouse=True)
def synchronous_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


def mean_oracle(stack: np.ndarray) -> np.ndarray:
    """mean:size=3 of each frame and channel over (y, x): scipy on float64, rounded (uint8)."""
    out = np.empty_like(stack)
    for index in np.ndindex(stack.shape[0], stack.shape[-1]):
        frame = stack[index[0], ..., index[1]].astype(np.float64)
        out[index[0], ..., index[1]] = np.rint(ndi.uniform_filter(frame, 3))
    return out


def sobel_oracle(stack: np.ndarray, axis: int) -> np.ndarray:
    """sobel of each float frame and channel over (y, x)."""
    out = np.empty_like(stack)
    for index in np.ndindex(stack.shape[0], stack.shape[-1]):
        out[index[0], ..., index[1]] = ndi.sobel(stack[index[0], ..., index[1]], axis=axis)
    return out


@pytest.fixture(scope="module")
def colour_files(tmp_path_factory):
    """RGB PNGs written by imageio and RGB TIFFs written by tifffile, one frame per file."""
    folder = tmp_path_factory.mktemp("colour")
    (folder / "png").mkdir()
    (folder / "tif").mkdir()
    for index, frame in enumerate(RGB):
        iio.imwrite(folder / "png" / f"frame_{index}.png", frame)
        tifffile.imwrite(folder / "tif" / f"frame_{index}.tif", frame, photometric="rgb")
    return folder


@pytest.mark.parametrize("kind", ["png", "tif"])
def test_stacks_read_from_rgb_files_are_filtered_per_channel(colour_files, kind):
    stack = sp.imread(str(colour_files / kind))
    assert stack.shape == RGB.shape
    mean = sp.library.mean(3)
    np.testing.assert_array_equal(mean(stack).compute(), mean_oracle(RGB))
    # What is computed from the stack keeps its channel axis: a second stencil, a chain.
    twice = mean(mean(stack)).compute()
    np.testing.assert_array_equal(twice, mean_oracle(mean_oracle(RGB)))
    np.testing.assert_array_equal(sp.chain(mean, mean)(stack).compute(), twice)
    np.testing.assert_array_equal(mean(stack.rechunk((1, 5, 7, 2))).compute(), mean_oracle(RGB))


def test_a_stack_read_from_rgb_files_opts_out_with_channel_axis_none(colour_files):
    stack = sp.imread(str(colour_files / "png"))
    mean = sp.library.mean(3)
    np.testing.assert_array_equal(mean(stack, channel_axis=None).compute(), mean(RGB))
    # One channel taken out is a gray stack: filtered over (y, x) as it is.
    red = stack[..., 0]
    np.testing.assert_array_equal(mean(red).compute(), mean_oracle(RGB)[..., 0])


@pytest.mark.parametrize("make", [np.asarray, lambda a: da.from_array(a, chunks=(1, 6, 5, 2))])
def test_channel_axis_last_and_first(make):
    sobel = sp.library.sobel(0)
    want = sobel_oracle(FLOAT_RGB, 0)
    got = np.asarray(sobel(make(FLOAT_RGB), channel_axis=-1))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    first = np.ascontiguousarray(np.moveaxis(FLOAT_RGB, -1, 0))  # (c, frames, y, x)
    got = np.asarray(sobel(make(first), channel_axis=0))
    np.testing.assert_allclose(got, np.moveaxis(want, -1, 0), rtol=1e-12, atol=1e-12)


def test_channel_axis_with_out_and_chains():
    mean = sp.library.mean(3)
    out = np.zeros_like(RGB)
    assert mean(RGB, out=out, channel_axis=-1) is out
    np.testing.assert_array_equal(out, mean_oracle(RGB))
    for fuse in (True, False):
        both = sp.chain(mean, mean, fuse=fuse)
        np.testing.assert_array_equal(
            both(RGB, channel_axis=3), mean_oracle(mean_oracle(RGB)), err_msg=f"fuse={fuse}"
        )


def test_numpy_frames_without_channel_axis_are_images_three_wide():
    frame = RGB[0]  # (17, 19, 3): a 2-D kernel reads its last two axes, (19, 3)
    want = np.stack([mean_oracle(row[None, :, :, None])[0, :, :, 0] for row in frame])
    np.testing.assert_array_equal(sp.library.mean(3)(frame), want)


def test_bad_channel_axes_are_refused():
    mean = sp.library.mean(3)
    with pytest.raises(TypeError, match=r"mean: channel_axis must be an int or None, got 1\.0"):
        mean(RGB, channel_axis=1.0)
    with pytest.raises(KernelError, match=r"channel_axis=4 is out of range for an array of 4"):
        mean(RGB, channel_axis=4)
    with pytest.raises(KernelError, match=r"channel_axis=-1 leaves 1 of its 2 dimension\(s\)"):
        mean(RGB[0, 0], channel_axis=-1)


def test_the_cli_filters_rgb_files_per_channel(colour_files, tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "stencilpipe",
            "apply",
            "mean:size=3",
            "png/",
            str(tmp_path / "out"),
        ],
        cwd=colour_files,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert run.returncode == 0, run.stderr
    want = mean_oracle(RGB)
    for index in range(len(RGB)):
        np.testing.assert_array_equal(
            tifffile.imread(tmp_path / "out" / f"frame_{index}.tif"), want[index]
        )
