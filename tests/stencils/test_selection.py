"""Kernels that only select among the values they read run in the input's own dtype.

Their results must not change: checked against the np.pad + Python-loop oracle (exact
integers, no overflow) for the extreme values of each dtype, and the generated source
is checked for the reads it makes.
"""

import re

import numpy as np
import pytest
from test_against_oracle import check, random_array

import stencilpipe as sp
from oracle import MODES


@sp.stencil
def pick(x):
    if x[0, -1] > x[0, 1] and x[-1, 0] != 3:
        return x[0, -1]
    return max(x[-1, 0], min(x[1, 0], x[0, 0])) if x[0, 0] < 7 else x[1, 1]


@sp.stencil
def negate_then_pick(x):
    return min(-x[0, 0], x[0, 1])  # arithmetic: -x[0, 0] must not wrap in uint8


def reads(stencil, dtype):
    """The types the generated interior reads ``x`` as."""
    return set(re.findall(r"_sp_np\.(\w+)\(x\[", stencil.generated_source(dtype)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_a_selecting_kernel_reads_narrow_and_equals_the_oracle(mode, dtype):
    assert reads(pick, dtype) == {np.dtype(dtype).name}
    check(pick, [random_array((23, 19), dtype, seed=3)], mode=mode, cval=5)


@pytest.mark.parametrize("mode", ["reflect", "constant"])
def test_a_kernel_with_arithmetic_is_widened(mode):
    assert reads(negate_then_pick, np.uint8) == {"int16"}  # range analysis: -x fits int16
    check(negate_then_pick, [random_array((9, 11), np.uint8, seed=4)], mode=mode, cval=200)


def test_the_library_median_and_extrema_read_narrow():
    for stencil in (sp.library.median(3), sp.library.minimum(3), sp.library.maximum((2, 5))):
        assert reads(stencil, np.uint8) == {"uint8"}
    assert reads(sp.library.mean(3), np.uint8) == {"int64"}
