"""Integer kernels: narrow arithmetic where it is exact, and loops that LLVM vectorises."""

import platform
import re

import numpy as np
import pytest

import stencilpipe as sp
from oracle import kernel_by_loop

x86 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="checks x86 instructions"
)


def packed(stencil: sp.Stencil, dtype, mnemonic: str) -> bool:
    """Whether the CPU code of ``stencil`` on ``dtype`` uses SIMD instruction ``mnemonic``
    (its SSE or AVX form) on vector registers. The kernel compiles in this process (a
    fresh cache directory), since Numba cannot show the assembly of cached code."""
    stencil(np.zeros((4, 40), dtype))
    kernel = stencil.compiled((np.dtype(dtype),), np.dtype(dtype), stencil.boundary)
    assembly = "\n".join(kernel.apply.inspect_asm().values())
    return re.search(rf"\bv?{mnemonic}\s+[^\n]*%[xyz]mm", assembly) is not None


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("STENCILPIPE_CACHE_DIR", str(tmp_path))


@x86
def test_a_running_minimum_vectorises(fresh_cache):
    """``best = min(best, x[...])`` (the library's minimum) runs on packed bytes: every
    read is a local of its own (LLVM left the loop scalar when reads were inline)."""

    @sp.stencil
    def running_min_test(x):
        best = x[-1, -1]
        for i in range(-1, 2):
            for j in range(-1, 2):
                best = min(best, x[i, j])
        return best

    assert packed(running_min_test, np.uint8, "pminub")
    frame = np.random.default_rng(1).integers(0, 256, (2, 19, 23), dtype=np.uint8)
    want = kernel_by_loop(running_min_test.func, [frame], (), halo=((1, 1), (1, 1)))
    np.testing.assert_array_equal(running_min_test(frame), want)
