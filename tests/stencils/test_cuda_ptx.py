"""The library's CUDA kernels compile for a real GPU, on machines without one.

The CUDA simulator runs kernels as Python, so it cannot see what NVVM refuses: a NumPy
function with no CUDA lowering (``np.rint`` in the integer store did exactly that, found on
the first real GPU). Here each kernel goes through numba-cuda's whole compiler to PTX for
compute capability 9.0 (Hopper), with NVVM from the cuda-toolkit wheels of the test extra.
Only the question a compile asks the device (its compute capability) is answered without
one. Whether the PTX then computes the right values is ``test_cuda_device.py``'s job.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numba
import numpy as np
import pytest

import stencilpipe as sp
from stencilpipe.stencils.dtypes import result_dtype
from stencilpipe.stencils.gufunc import fill_values

if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    pytest.skip("the CUDA simulator compiles nothing to PTX", allow_module_level=True)
cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")

HOPPER = (9, 0)


@pytest.fixture(scope="module", autouse=True)
def nvvm_without_a_device():
    """Device-function compiles ask the current device for its compute capability."""
    from numba.cuda import dispatcher

    try:
        cuda.compile_ptx(lambda a: None, (numba.float32[:],), cc=HOPPER)
    except Exception as exc:  # noqa: BLE001  # whatever stops NVVM from loading
        pytest.skip(f"NVVM is not usable here: {exc}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            dispatcher, "get_current_device", lambda: SimpleNamespace(compute_capability=HOPPER)
        )
        yield


def ptx(stencil, dtype, mode: str) -> list[str]:
    """PTX of every kernel ``stencil`` launches on a ``dtype`` input under ``mode``."""
    in_dtypes = (np.dtype(dtype),)
    out_dtype = result_dtype(list(in_dtypes), stencil.dtype)
    passes = (stencil.passes or {}).get("constant") if mode == "constant" else None
    if passes:  # as cuda_apply runs them: each pass on the previous one's output
        codes, current = [], in_dtypes[0]
        for step in passes:
            codes += ptx(step, current, mode)
            current = result_dtype([current], step.dtype)
        return codes
    kernel = stencil.compiled(in_dtypes, out_dtype, mode, target="cuda")
    arrays = [numba.types.Array(numba.from_dtype(d), stencil.ndim + 1, "A") for d in in_dtypes]
    out = numba.types.Array(numba.from_dtype(out_dtype), stencil.ndim + 1, "A")
    cvals = [numba.typeof(value) for value in fill_values(0, list(in_dtypes), stencil.name)]
    args = (*arrays, out, *cvals, numba.typeof(kernel.mode))
    code, _ = cuda.compile_ptx(kernel.apply.py_func, args, cc=HOPPER)
    return [code]


library = sp.library
FILTERS = {
    "mean 3": library.mean(3),
    "mean 5x3": library.mean((5, 3)),
    "gaussian": library.gaussian(1.0),
    "sobel": library.sobel(0),
    "laplace": library.laplace(),
    "minimum": library.minimum(3),
    "maximum 3x5": library.maximum((3, 5)),
    "median 3": library.median(3),
    "median 5": library.median(5),
}
CASES = [(name, dtype, "reflect") for name in FILTERS for dtype in (np.uint8, np.float32)]
CASES += [("mean 3", np.uint16, mode) for mode in ("constant", "wrap", "nearest", "mirror")]
CASES += [("gaussian", np.int16, "reflect"), ("sobel", np.uint16, "constant")]


@pytest.mark.parametrize(("name", "dtype", "mode"), CASES)
def test_library_kernels_compile_to_ptx(name, dtype, mode):
    for code in ptx(FILTERS[name], dtype, mode):
        assert ".entry" in code and f".target sm_{HOPPER[0]}{HOPPER[1]}" in code
