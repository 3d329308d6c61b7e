"""Loop unrolling: constant loops become straight-line code, within a budget of statements
that counts nested loops as unrolled (a median by counting, candidates x window, took
NVVM 115 s for a 9x9 window when only each level was checked). Oracle: the statements
counted by walking the result, and scipy's median for the values."""

import ast

import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.stencils.unroll import BUDGET, unroll_constant_loops


def statements(body) -> int:
    return sum(isinstance(n, ast.stmt) for s in body for n in ast.walk(s))


def loops(body) -> int:
    return sum(isinstance(n, ast.For) for s in body for n in ast.walk(s))


@sp.stencil
def box(x):
    total = 0
    for i in range(-1, 2):
        for j in range(-1, 2):
            total += x[i, j]
    return total


def test_small_constant_loops_unroll_completely():
    body = unroll_constant_loops(box.info.body, {})
    assert loops(body) == 0
    reads = [n for s in body for n in ast.walk(s) if isinstance(n, ast.Subscript)]
    offsets = {ast.unparse(r.slice) for r in reads}
    assert offsets == {f"({i}, {j})" for i in (-1, 0, 1) for j in (-1, 0, 1)}


@pytest.mark.parametrize("size", [9, 15])
def test_nested_window_loops_stay_within_the_budget(size):
    median = sp.library.median(size)  # a per-point kernel: candidates x window, by counting
    body = unroll_constant_loops(median.info.body, {})
    assert statements(body) <= BUDGET + 2 * size  # the loop variables' final assignments
    assert loops(body) > 0


def test_a_kernel_left_with_loops_computes_the_same():
    x = np.random.default_rng(0).integers(0, 256, (40, 37), dtype=np.uint8)
    got = sp.ndfilters.median_filter(x, 9, mode="wrap")  # the per-point kernel
    np.testing.assert_array_equal(got, ndi.median_filter(x, 9, mode="wrap"))
