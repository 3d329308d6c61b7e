"""A run on local TIFFs imports only what it uses: no fsspec (nor its asyncio), no Pillow."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import tifffile

RUN = """
import sys
from stencilpipe.cli import main
try:
    main(["run", sys.argv[1], "--quiet"])
except SystemExit as end:
    assert not end.code, end.code
print(" ".join(sorted({"fsspec", "PIL", "asyncio"} & set(sys.modules))) or "-")
"""


def test_a_run_on_local_tiffs_imports_neither_fsspec_nor_pillow(tmp_path):
    frames = np.random.default_rng(0).integers(0, 256, (3, 16, 20), dtype=np.uint8)
    (tmp_path / "in").mkdir()
    for i, frame in enumerate(frames):
        tifffile.imwrite(tmp_path / "in" / f"f{i}.tif", frame)
    config = tmp_path / "run.yaml"
    config.write_text("input: in\noutput: out/\nstages:\n  - mean: {size: 3}\n")
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(config)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split()[-1] == "-", done.stdout
    from scipy import ndimage

    for i, frame in enumerate(frames):  # and the run wrote what it should
        mean = ndimage.uniform_filter(frame.astype(np.float64), 3, mode="reflect")
        expected = np.rint(mean).astype(np.uint8)  # a mean of 9 is never half-way
        np.testing.assert_array_equal(tifffile.imread(tmp_path / "out" / f"f{i}.tif"), expected)
