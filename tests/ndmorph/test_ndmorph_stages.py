"""Morphology stages (stencilpipe.ndmorph.STAGES) against scipy.ndimage, as a chain and as a
`stencilpipe apply` run."""

from __future__ import annotations

import subprocess
import sys

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
import tifffile

from stencilpipe import chain
from stencilpipe.ndmorph import STAGES

RNG = np.random.default_rng(3)
FRAMES = RNG.integers(0, 256, (2, 9, 11)).astype(np.uint8)
HOOK = [[1, 1, 0], [0, 0, 1]]


def frames_of(function, stack, **kwargs):
    return np.stack([function(frame, **kwargs) for frame in stack])


@pytest.mark.parametrize("name", [n for n in STAGES if n.startswith("binary_")])
@pytest.mark.parametrize(
    "params",
    [{}, {"structure": HOOK, "iterations": 2, "border_value": 1, "origin": [0, 1]}],
)
def test_binary_stages_are_scipys_per_frame(name, params):
    stack = FRAMES > 100
    expected = frames_of(getattr(ndi, name), stack, **params).astype(np.uint8)
    run = chain(*STAGES[name](**params), fuse=False)
    np.testing.assert_array_equal(run(FRAMES * (FRAMES > 100)), expected)
    lazy = run(da.from_array(FRAMES * stack, chunks=(1, 4, 5)))
    np.testing.assert_array_equal(lazy.compute(), expected)


@pytest.mark.parametrize("name", [n for n in STAGES if n.startswith("grey_")])
@pytest.mark.parametrize(
    ("params", "mode"),
    [({"size": 3}, "reflect"), ({"size": [2, 3], "origin": [0, -1]}, "nearest"),
     ({"footprint": HOOK}, "mirror"), ({"footprint": HOOK, "origin": [0, 1]}, "constant")],
)  # fmt: skip
def test_grey_stages_are_scipys_per_frame(name, params, mode):
    expected = frames_of(getattr(ndi, name), FRAMES, mode=mode, cval=7, **params)
    run = chain(*STAGES[name](boundary=mode, cval=7, **params), fuse=False)
    np.testing.assert_array_equal(run(FRAMES), expected)


def test_bad_stage_parameters_are_value_errors():
    with pytest.raises(ValueError, match="iterations"):
        STAGES["binary_erosion"](iterations=0)
    with pytest.raises(ValueError, match="size or footprint"):
        STAGES["grey_opening"]()
    with pytest.raises(ValueError, match="axes"):
        STAGES["binary_dilation"](structure=[1, 1])


def test_stencilpipe_apply_runs_a_morphology_stage(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for index, frame in enumerate(FRAMES):
        tifffile.imwrite(folder / f"f{index}.tif", frame)
    result = subprocess.run(
        [sys.executable, "-m", "stencilpipe", "apply", "grey_opening:size=3,binary_erosion",
         "in/*.tif", "out/", "--workers", "1"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    for index, frame in enumerate(FRAMES):
        expected = ndi.binary_erosion(ndi.grey_opening(frame, size=3)).astype(np.uint8)
        np.testing.assert_array_equal(tifffile.imread(tmp_path / "out" / f"f{index}.tif"), expected)
