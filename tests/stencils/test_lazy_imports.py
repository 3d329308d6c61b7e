"""NumPy-only work does not import Dask (~1 s of a warm start, issue 17), and a Dask array
is still recognised once Dask is imported."""

import subprocess
import sys

import numpy as np
import scipy.ndimage as ndi

CHAIN_ON_NUMPY = """
import sys
import numpy as np
import stencilpipe as sp
frame = np.arange(64 * 48, dtype=np.uint16).reshape(64, 48)
sp.chain(sp.library.gaussian(sigma=1.0), sp.library.mean(size=3), sp.library.sobel())(frame)
print(sorted(m for m in sys.modules if m == "dask" or m.startswith("dask.")))
"""


def test_a_chain_on_numpy_imports_no_dask():
    done = subprocess.run([sys.executable, "-c", CHAIN_ON_NUMPY], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_dask_arrays_are_still_recognised():
    import dask.array as da

    import stencilpipe as sp

    frame = np.random.default_rng(0).random((40, 30))
    got = sp.library.mean(size=3)(da.from_array(frame, chunks=(10, 15)))
    assert isinstance(got, da.Array)
    np.testing.assert_allclose(got.compute(), ndi.uniform_filter(frame, 3, mode="reflect"))
