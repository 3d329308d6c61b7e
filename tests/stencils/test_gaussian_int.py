"""The uint8 gaussian in float32 (stencils/gauss_int.py) rounds exactly as its float64 definition.

The oracle is the definition itself: scipy.ndimage.gaussian_filter of the frame as float64,
rounded half to even (np.rint) and saturated. The frames include those the float32 shortcut
could get wrong: constant frames, extremes, frames built of patches whose result lies
within the error bound of a rounding boundary, and exact ties (dyadic weights).
"""

import os
import pickle
import platform
import re
import subprocess
import sys

import dask
import dask.array as da
import numpy as np
import pytest
from scipy import ndimage as ndi

import stencilpipe as sp
from stencilpipe.stencils import fused
from stencilpipe.stencils.gauss_int import (
    EXACT_COLUMNS_ABOVE,
    GaussianPass,
    _clamps,
    _float32_range,
    error_bound,
)

MODES = ["reflect", "mirror", "nearest"]
#: (sigma, truncate): 5x5, 9x9, and 5x7 (radii int(2.2 * sigma + 0.5): 2 and 3).
SIGMAS = [(1.0, 2.0), (1.0, 4.0), ((0.7, 1.5), 2.2)]
x86 = pytest.mark.skipif(
    platform.machine() not in ("x86_64", "AMD64"), reason="checks x86 instructions"
)


def definition(frames, sigma, truncate, mode, dtype=np.uint8):
    """scipy's float64 gaussian of each frame, rounded half to even and saturated to ``dtype``."""
    frames = np.asarray(frames, np.float64).reshape(-1, *np.shape(frames)[-2:])
    exact = np.stack([ndi.gaussian_filter(f, sigma, truncate=truncate, mode=mode) for f in frames])
    info = np.iinfo(dtype)
    return np.clip(np.rint(exact), info.min, info.max).astype(dtype).reshape(frames.shape)


def check(frames, sigma=1.0, truncate=2.0, mode="reflect"):
    frames = frames.reshape(-1, *frames.shape[-2:])
    got = sp.library.gaussian(sigma, truncate=truncate, boundary=mode)(frames)
    np.testing.assert_array_equal(got, definition(frames, sigma, truncate, mode))


def near_tie_frame(rng, sigma=1.0, truncate=2.0, tiles=16):
    """A frame of 5x5 patches laid side by side, each one whose centre's float64 result lies
    within 2e-4 of a rounding boundary (the float32 result may round either way)."""
    pool = rng.integers(0, 256, (1024, 1024)).astype(np.uint8)
    exact = ndi.gaussian_filter(pool / 1.0, sigma, truncate=truncate)
    distance = np.abs(exact - np.floor(exact) - 0.5)
    rows, cols = np.nonzero(distance[2:-2, 2:-2] < 2e-4)
    picks = rng.permutation(len(rows))[: tiles * tiles]
    patches = [pool[r : r + 5, c : c + 5] for r, c in zip(rows[picks], cols[picks])]
    grid = np.array(patches).reshape(tiles, tiles, 5, 5)
    return grid.transpose(0, 2, 1, 3).reshape(5 * tiles, 5 * tiles)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sigma, truncate", SIGMAS)
def test_random_frames_round_as_the_float64_definition(mode, sigma, truncate):
    rng = np.random.default_rng(0)
    check(rng.integers(0, 256, (3, 67, 129)).astype(np.uint8), sigma, truncate, mode)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (3, 2), (2, 9), (6, 5)])
def test_frames_smaller_than_the_window(shape):
    rng = np.random.default_rng(1)
    for mode in MODES:
        check(rng.integers(0, 256, shape).astype(np.uint8), 1.0, 4.0, mode)


def test_constant_frames_of_every_value_and_extremes():
    values = np.arange(256, dtype=np.uint8)[:, None, None]
    check(np.broadcast_to(values, (256, 9, 11)).copy())
    checker = (np.indices((40, 40)).sum(0) % 2 * 255).astype(np.uint8)
    impulses = np.zeros((40, 40), np.uint8)
    impulses[::7, ::5] = 255
    for mode in MODES:
        check(np.stack([checker, 255 - checker, impulses, 255 - impulses]), 1.0, 2.0, mode)


def test_frames_built_to_sit_on_rounding_boundaries():
    """Every 25th point lies within 2e-4 of k + 1/2: inside the error bound, so the float32
    results there are recomputed in float64; some of them round the other way in float32."""
    rng = np.random.default_rng(2)
    frame = near_tie_frame(rng)
    check(frame)
    weights = ndi.gaussian_filter1d(np.eye(5)[2], 1.0, truncate=2.0).astype(np.float32)
    in_float32 = np.float32(0)
    for k, w in enumerate(weights):  # the float32 separable sum, as numpy computes it
        in_float32 = in_float32 + w * np.roll(frame.astype(np.float32), 2 - k, 0)
    across = np.float32(0)
    for k, w in enumerate(weights):
        across = across + w * np.roll(in_float32, 2 - k, 1)
    (want,) = definition(frame, 1.0, 2.0, "reflect")
    assert np.count_nonzero(np.rint(across[2:-2, 2:-2]) != want[2:-2, 2:-2]) > 0


@pytest.mark.parametrize("mode", MODES)
def test_exact_ties_round_half_to_even(mode):
    """Dyadic weights ([1, 2, 1] / 4 per axis) put a sixteenth of random points exactly on a tie."""
    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (2, 31, 45)).astype(np.uint8)
    step = GaussianPass((0.5, 0.25), (0.5, 0.25))
    uint8 = np.dtype(np.uint8)
    kernel = step.compiled((uint8,), uint8, mode)
    out = np.empty_like(frames)
    kernel(frames, out, 0, rows=frames.shape[0] * frames.shape[1])
    exact = ndi.correlate1d(frames / 1.0, [0.25, 0.5, 0.25], axis=1, mode=mode)
    exact = ndi.correlate1d(exact, [0.25, 0.5, 0.25], axis=2, mode=mode)
    assert np.mean(exact % 1 == 0.5) > 0.04
    np.testing.assert_array_equal(out, np.rint(exact).astype(np.uint8))


def test_the_bound_covers_the_float32_error():
    """E for a 5x5 gaussian on uint8, and the float32 result of numpy's float32 arithmetic
    (another order of the same operations) within it of the float64 one on random frames."""
    half = ndi.gaussian_filter1d(np.eye(5)[2], 1.0, truncate=2.0)[2:]
    bound = error_bound(half, half, 255)
    assert 1e-4 < bound < 3e-4
    frame = np.random.default_rng(4).integers(0, 256, (256, 256)).astype(np.uint8)
    full = np.concatenate([half[:0:-1], half])
    exact = ndi.correlate1d(ndi.correlate1d(frame / 1.0, full, 0), full, 1)
    single = ndi.correlate1d(frame.astype(np.float32), full.astype(np.float32), 0)
    single = ndi.correlate1d(single, full.astype(np.float32), 1)
    assert np.abs(single - exact).max() < bound


def test_integer_outputs_round_and_float_outputs_keep_the_fraction():
    frames = near_tie_frame(np.random.default_rng(5), tiles=8)
    exact = ndi.gaussian_filter(frames / 1.0, 1.0, truncate=2.0)
    gaussian = sp.library.gaussian(1.0, truncate=2.0)
    np.testing.assert_array_equal(
        gaussian.with_options(dtype=np.int16)(frames), np.rint(exact).astype(np.int16)
    )
    np.testing.assert_array_equal(gaussian.with_options(dtype=np.float64)(frames), exact)


def test_chunkings_strips_chains_and_pickles_agree():
    rng = np.random.default_rng(6)
    stack = np.stack([near_tie_frame(rng, tiles=10) for _ in range(3)])
    gaussian = sp.library.gaussian(1.0, truncate=2.0, boundary="mirror")
    want = definition(stack, 1.0, 2.0, "mirror")
    np.testing.assert_array_equal(gaussian(stack), want)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(gaussian))(stack), want)
    with dask.config.set(scheduler="sync"):
        lazy = gaussian(da.from_array(stack, chunks=(1, 17, 23)))
        np.testing.assert_array_equal(lazy.compute(), want)
    mean = sp.library.mean(3, boundary="mirror")
    saved = fused.STRIP_BYTES, fused.MIN_STRIP_ROWS
    fused.STRIP_BYTES, fused.MIN_STRIP_ROWS = 1, 3
    try:
        chained = sp.chain(gaussian, mean)(stack)
    finally:
        fused.STRIP_BYTES, fused.MIN_STRIP_ROWS = saved
    np.testing.assert_array_equal(chained, mean(want))


@pytest.mark.parametrize("mode", MODES)
def test_windows_of_more_rows_than_across_rows_read_a_ring_of_rows(mode):
    """sigma 3 reads 25 rows, copied into a ring as the rows go by: the definition's values
    on frames 2048 wide (rows that share cache sets) and 1000 wide, several frames in one
    call, and runs of rows that start and stop inside a frame, as threads split them."""
    rng = np.random.default_rng(11)
    for width in (2048, 1000):
        frames = rng.integers(0, 256, (3, 40, width), dtype=np.uint8)
        check(frames, sigma=3.0, truncate=4.0, mode=mode)
    halves = (tuple(sp.library._gaussian_weights(3.0, 4.0)[12:]),) * 2
    rows = GaussianPass(*halves).compiled((frames.dtype,), frames.dtype, mode)
    out = np.zeros_like(frames)
    for start, stop in [(0, 7), (7, 8), (8, 53), (53, 120)]:  # (3 frames x 40 rows) flat
        rows.run(frames, out, 0, start=start, stop=stop)
    np.testing.assert_array_equal(out, definition(frames, 3.0, 4.0, mode))


def test_wide_windows_sweep_and_recompute_whole_rows():
    """The definition's values where passes sweep a term at a time: 33 terms (sigma 8,
    truncate 2) in float32 both ways, a flagged row's float64 columns recomputed; 65
    (truncate 4), past EXACT_COLUMNS_ABOVE, with the float64 vertical pass for every row;
    and passes of different widths (a wide vertical one read from the ring of rows)."""
    assert 2 * 16 + 1 <= EXACT_COLUMNS_ABOVE < 2 * 32 + 1
    frame = np.random.default_rng(12).integers(0, 256, (2, 70, 300), dtype=np.uint8)
    for mode in MODES:
        check(frame, sigma=8.0, truncate=2.0, mode=mode)
        check(frame, sigma=8.0, truncate=4.0, mode=mode)
    check(frame, sigma=(8.0, 1.0), truncate=4.0, mode="mirror")
    check(frame, sigma=(1.0, 8.0), truncate=4.0, mode="nearest")


@pytest.mark.parametrize("mode", MODES)
def test_results_past_the_output_range_saturate(mode):
    """Weights that sum past 1, or below 0, take results out of the output's range: those
    are clamped as the definition saturates (uint8 and int8 outputs), and a gaussian into
    its own dtype, whose results cannot leave it, skips the clamp."""
    rng = np.random.default_rng(13)
    frames = rng.integers(0, 256, (2, 33, 47)).astype(np.uint8)
    uint8 = np.dtype(np.uint8)
    for half in [(0.6, 0.3), (1.5, -0.25)]:
        full = np.array([half[1], half[0], half[1]])
        exact = ndi.correlate1d(ndi.correlate1d(frames / 1.0, full, 1, mode=mode), full, 2, mode=mode)
        assert exact.max() > 255 and (half[1] > 0 or exact.min() < 0)
        for out_dtype in (np.uint8, np.int8):
            kernel = GaussianPass(half, half).compiled((uint8,), np.dtype(out_dtype), mode)
            out = np.empty(frames.shape, out_dtype)
            kernel(frames, out, 0, rows=frames.shape[0] * frames.shape[1])
            info = np.iinfo(out_dtype)
            np.testing.assert_array_equal(out, np.clip(np.rint(exact), info.min, info.max))
    gaussian = sp.library.gaussian(1.0, truncate=2.0, boundary=mode)
    halves = (tuple(sp.library._gaussian_weights(1.0, 2.0)[2:]),) * 2
    weights = [np.array(h, np.float32) for h in halves]
    bound = error_bound(*map(np.array, halves), 255)
    assert not _clamps(*weights, 255, bound, _float32_range(uint8))
    assert _clamps(*weights, 255, bound, _float32_range(np.dtype(np.int8)))
    np.testing.assert_array_equal(gaussian(frames), definition(frames, 1.0, 2.0, mode))


FUSED_ASM = """
import numpy as np
import stencilpipe as sp
from stencilpipe.stencils import gauss_int
# 5 terms a pass, written out; 33, summed a sweep per term; 65, the vertical pass in float64
for sigma, truncate in ((1.0, 2.0), (8.0, 2.0), (8.0, 4.0)):
    sp.library.gaussian(sigma, truncate=truncate)(np.zeros((2, 300, 300), np.uint8))
for radius in (2, 16, 32):
    loops = gauss_int._loops(radius, radius, False)
    for name in ("separable_rows", "exact_point", "exact_columns", "exact_from_columns"):
        print(f"@@{radius} {name}")
        print("\\n".join(getattr(loops, name).inspect_asm().values()))
"""


@x86
def test_float32_sums_fuse_and_float64_ones_keep_scipys_order(tmp_path):
    """The float32 loop fuses products into sums (packed single FMAs); the float64
    recomputation it calls, which must sum in scipy's order, has no fused multiply-add.
    A fresh process with an empty cache: Numba shows no assembly for cached code."""
    env = {**os.environ, "STENCILPIPE_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", FUSED_ASM], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    parts = dict(part.split("\n", 1) for part in done.stdout.split("@@")[1:])
    assert len(parts) == 12
    # what each calls: a written-out pass recomputes point by point (its whole-row branch,
    # constant False, is pruned), a wide one by rows too, and one wider than
    # EXACT_COLUMNS_ABOVE by rows only: its float64 columns are every row's vertical pass
    calls = {
        2: ["exact_point"],
        16: ["exact_point", "exact_columns", "exact_from_columns"],
        32: ["exact_columns", "exact_from_columns"],
    }
    assert not parts["32 exact_point"].strip()  # never called: not compiled
    for radius, names in calls.items():
        assert re.search(r"\bvfmadd\d+ps\b", parts[f"{radius} separable_rows"]), radius
        for name in names:
            code = parts[f"{radius} {name}"]
            assert re.search(r"\bv?(mul|add)sd\b", code), (radius, name)  # float64 code
            assert not re.search(r"\bvf(n?m(add|sub)\w*)(sd|pd)\b", code), (radius, name)
