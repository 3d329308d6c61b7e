"""The library's float mean and gaussian across rows that share cache sets run their pass
across rows over a ring of rows (``library._ring_of_rows``): the same doubles as the
kernel written out, which an ``np.pad`` oracle of the documented order checks.

The rows' widths decide: 1024 float32 or 512 float64 elements are 4 KiB, so their rows
share cache sets; 1000 elements do not.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import stencilpipe as sp
from stencilpipe.library import _divided_by, _gaussian_weights
from stencils.asked import kernels_asked

#: The module, not the ``stencil`` decorator that ``stencilpipe.stencils`` exports.
stencil_module = importlib.import_module("stencilpipe.stencils.stencil")

#: scipy's folding modes as ``np.pad`` names them.
NP_PAD = {"reflect": "symmetric", "mirror": "reflect", "nearest": "edge"}


def separable_oracle(x: np.ndarray, weights: list[np.ndarray], mode: str, count=None):
    """The library's separable passes as ``np.pad`` and a loop: per core axis, in float64,
    ``0.0 + w[0] * centre``, then ``w[k] * (x[-k] + x[k])`` from the outermost pair in;
    the last pass multiplied or divided by ``count`` (a mean) as ``_divided_by`` writes
    it; stored in the input's dtype."""
    values = x.astype(np.float64)
    for axis, w in enumerate(weights, start=1):
        r, n = len(w) // 2, values.shape[axis]
        pad = [(0, 0)] * values.ndim
        pad[axis] = (r, r)
        padded = np.pad(values, pad, mode=NP_PAD[mode])

        def term(k, padded=padded, r=r, n=n, axis=axis):
            return np.take(padded, np.arange(r + k, r + k + n), axis=axis)

        total = 0.0 + w[r] * term(0)
        for k in range(r, 0, -1):
            total = total + w[r - k] * (term(-k) + term(k))
        values = total
    if count is not None:
        scale = _divided_by(count)
        values = values * (1 / count) if scale.startswith(" *") else values / count
    return values.astype(x.dtype)


def mean_weights(size):
    return [np.ones(s) for s in size]


CASES = {
    "mean31": (lambda: sp.library.mean(31), lambda: (mean_weights((31, 31)), 961)),
    "mean13x5": (lambda: sp.library.mean((13, 5)), lambda: (mean_weights((13, 5)), 65)),
    "gaussian4": (
        lambda: sp.library.gaussian(4.0),
        lambda: ([_gaussian_weights(4.0, 4.0)] * 2, None),
    ),
}


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.tobytes() == b.tobytes()


def written_out(monkeypatch, call):
    """``call()`` with no rows sharing cache sets: the kernels written out."""
    with monkeypatch.context() as patch:
        patch.setattr(stencil_module, "rows_share_sets", lambda shape, dtype: False)
        return call()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype, width", [("float32", 1024), ("float64", 512), ("float32", 1000)])
@pytest.mark.parametrize("mode", sorted(NP_PAD))
def test_a_pass_across_shared_rows_runs_the_ring(monkeypatch, case, dtype, width, mode):
    """The oracle's values bit for bit; on shared rows the pass across them never asks
    for its kernel written out, on others it does; with rows that share sets or not, the
    same values."""
    make, oracle = CASES[case]
    x = (np.random.default_rng(5).standard_normal((2, 40, width)) * 1e3).astype(dtype)
    # Windows of negative zeros: the ring sums them to -0.0, the kernel written out to
    # 0.0, and the last pass makes both 0.0.
    x[0, :20] = -0.0
    made = make().with_options(boundary=mode)
    across = made.passes[None][0]
    with kernels_asked(across) as asked:
        got = made(x)
    assert bool(asked) == (width == 1000)
    weights, count = oracle()
    assert same_bits(got, separable_oracle(x, weights, mode, count))
    assert same_bits(got, written_out(monkeypatch, lambda: made(x)))


@pytest.mark.parametrize("mode", ["constant", "wrap"])
def test_modes_without_passes_keep_the_whole_kernel(monkeypatch, mode):
    """Under constant and wrap the library runs its whole 2-D kernel, ring or no ring:
    its order of sums, not the passes'."""
    x = np.random.default_rng(6).standard_normal((1, 30, 1024)).astype(np.float32)
    made = sp.library.mean(15).with_options(boundary=mode)
    with kernels_asked(made.passes[None][0]) as asked:
        got = made(x)
    assert asked == []
    assert same_bits(got, written_out(monkeypatch, lambda: made(x)))
    pad = ((0, 0), (7, 7), (7, 7))
    padded = np.pad(x.astype(np.float64), pad, **({"mode": "wrap"} if mode == "wrap" else {}))
    total = np.zeros(x.shape)
    for i in range(15):
        for j in range(15):
            total = total + padded[:, i : i + 30, j : j + 1024]
    assert same_bits(got, (total * (1 / 225)).astype(np.float32))


def test_a_volume_runs_a_ring_per_axis_across_rows(monkeypatch):
    """A 3-D mean of 13 along each axis: the passes along axes 0 and 1 run rings (their
    kernels written out never asked for), the last one its kernel; the oracle's values."""
    x = np.random.default_rng(8).standard_normal((1, 14, 15, 1024)).astype(np.float32)
    made = sp.library.mean(13, ndim=3, boundary="mirror")
    first, second, last = made.passes[None]
    with kernels_asked(first) as a0, kernels_asked(second) as a1, kernels_asked(last) as a2:
        got = made(x)
    assert a0 == [] and a1 == [] and a2 != []
    assert same_bits(got, separable_oracle(x, mean_weights((13, 13, 13)), "mirror", 13**3))
    assert same_bits(got, written_out(monkeypatch, lambda: made(x)))


def test_a_dask_array_of_either_kind_of_chunk_gives_the_same_values():
    """Chunks whole rows 2048 wide (sharing sets) and 1000 wide (not) of one stack."""
    da = pytest.importorskip("dask.array")
    x = np.random.default_rng(9).standard_normal((2, 50, 2048)).astype(np.float32)
    made = sp.library.gaussian(3.0, boundary="nearest")
    whole = made(x)
    for chunks in [(1, 25, 2048), (1, 50, 1000)]:
        assert same_bits(made(da.from_array(x, chunks=chunks)).compute(), whole)


def test_small_or_asymmetric_passes_have_no_ring():
    """Passes of up to ACROSS_ROWS rows, and passes along rows, keep one kernel."""
    assert sp.library.mean(11).passes[None][0].passes is None
    assert sp.library.mean(31).passes[None][1].passes is None
    assert sp.library.mean(31).passes[None][0].passes is not None
    assert sp.library.mean(14).passes[None][0].passes is None  # an even window's offsets


def test_a_fused_chain_runs_the_ring_and_equals_its_stages_one_by_one(monkeypatch):
    """A chain's stages take the ring as their own calls do (the chain tells them the
    frames' shape): the stages one by one, bit for bit, with rows sharing sets or not."""
    x = np.random.default_rng(10).standard_normal((2, 40, 1024)).astype(np.float32)
    smooth, box = sp.library.gaussian(3.0), sp.library.mean(15)
    chain = sp.chain(smooth, sp.library.sobel(0), box)
    with kernels_asked(smooth.passes[None][0]) as a0, kernels_asked(box.passes[None][0]) as a1:
        got = chain(x)
    assert a0 == [] and a1 == []
    assert same_bits(got, box(sp.library.sobel(0)(smooth(x))))
    assert same_bits(got, written_out(monkeypatch, lambda: chain(x)))
