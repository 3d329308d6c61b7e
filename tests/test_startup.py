"""What a command imports beyond its work: a small run on threads of its own process imports
no part of Dask's distributed scheduler (its import alone costs a quarter of a second), and
a run of TIFF files in and out does not import zarr (a tenth of a second).

The oracle is ``sys.modules`` of the command's process at its exit.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import tifffile

#: Runs the command, then prints which of the heavy packages it imported.
PROBE = """
import json, sys
from stencilpipe.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, **{name: name in sys.modules for name in ("distributed", "zarr")}}))
"""


def test_a_small_run_imports_no_distributed(tmp_path):
    (tmp_path / "in").mkdir()
    for i in range(3):
        tifffile.imwrite(tmp_path / "in" / f"f{i}.tif", np.full((16, 20), i, np.uint8))
    args = ["apply", "mean:size=3", "in", "out", "--quiet"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=tmp_path, capture_output=True, text=True
    )
    imported = json.loads(done.stdout.splitlines()[-1])
    assert imported == {"code": 0, "distributed": False, "zarr": False}, done
    assert sorted(p.name for p in (tmp_path / "out").glob("*.tif")) == [
        "f0.tif",
        "f1.tif",
        "f2.tif",
    ]
