"""Integer kernels: narrow arithmetic where it is exact, and loops that LLVM vectorises."""

import copy
import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage as ndi

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
    return uses(kernel, mnemonic)


def uses(kernel, mnemonic: str) -> bool:
    """Whether compiled ``kernel`` uses SIMD instruction ``mnemonic`` on vector registers."""
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


@sp.stencil
def wide_weights(x):
    return 200 * x[0, -1] + 200 * x[0, 1] - x[0, 0] // 3


@sp.stencil
def product(x):
    return x[0, -1] * x[0, 1] * x[0, 0]


def accumulator(stencil: sp.Stencil, dtype):
    from stencilpipe.stencils.dtypes import integer_accumulator
    from stencilpipe.stencils.unroll import unroll_constant_loops

    body = unroll_constant_loops(stencil.info.body, {})
    return integer_accumulator(body, {a: np.dtype(dtype) for a in stencil.info.array_params})


def test_range_analysis_picks_the_narrowest_exact_accumulator():
    from kernels import lopsided, smooth, thresh, volume

    int16, int32 = np.dtype(np.int16), np.dtype(np.int32)
    assert accumulator(sp.library.sobel(0), np.uint8) == int16  # |sum| <= 4 * 255
    assert accumulator(sp.library.sobel(0), np.uint16) == int32
    assert accumulator(sp.library.laplace(), np.int8) == int16
    assert accumulator(smooth, np.uint8) == int16  # 9 * 255 = 2295
    assert accumulator(lopsided, np.int16) == int32
    assert accumulator(wide_weights, np.uint8) == int32  # 400 * 255 > 32767
    assert accumulator(product, np.uint8) == int32  # 255**3 = 16581375
    assert accumulator(product, np.uint16) is None  # 65535**3 needs int64
    assert accumulator(volume, np.uint8) is None  # * 0.5: a float
    assert accumulator(thresh, np.uint8) is None  # a scalar parameter, an if
    assert accumulator(sp.library.sobel(0), np.int32) is None  # 32-bit inputs stay int64


@sp.stencil
def converted_pairs(x):
    return (float(x[0, -1]) + float(x[0, 1])) * 0.25 + (float(x[-1, 0]) - float(x[1, 0])) * 0.5


@sp.stencil
def one_read_unconverted(x):
    return (float(x[0, -1]) + float(x[0, 1])) * 0.25 + x[0, 0] * 0.5


def converted(stencil: sp.Stencil, dtype):
    """The accumulator the compiler narrows ``stencil``'s body to on ``dtype`` input, or None."""
    from stencilpipe.stencils.rewrite import _narrowed

    body = copy.deepcopy(stencil.info.body)
    return _narrowed(body, {a: np.dtype(dtype) for a in stencil.info.array_params})[1]


def test_converted_reads_add_in_int32_where_range_analysis_proves_it():
    """``float(a) + float(b)`` of 8/16-bit reads becomes one conversion of an int32 sum
    (as scipy's correlations sum pairs); not for 32-bit inputs, nor a body that reads
    outside a conversion."""
    int32 = np.dtype(np.int32)
    for dtype in (np.uint8, np.int8, np.uint16, np.int16):
        assert converted(converted_pairs, dtype) == int32
        assert converted(one_read_unconverted, dtype) is None
    assert converted(converted_pairs, np.int32) is None
    assert converted(converted_pairs, np.float32) is None


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_converted_sums_equal_the_plain_loop_on_extreme_values(dtype):
    frames = extreme_frames(dtype)
    for mode in ("reflect", "constant"):
        want = kernel_by_loop(
            converted_pairs.func, [frames], halo=converted_pairs.halo, mode=mode, cval=3,
            out_dtype=np.float64,
        )  # fmt: skip
        got = converted_pairs(frames, out=np.empty(frames.shape), boundary=mode, cval=3)
        np.testing.assert_array_equal(got, want)


EXTREMES = {
    np.uint8: [0, 1, 254, 255],
    np.int8: [-128, -127, 0, 126, 127],
    np.uint16: [0, 1, 65534, 65535],
    np.int16: [-32768, -32767, 0, 32766, 32767],
}


def extreme_frames(dtype, seed=0) -> np.ndarray:
    """Frames of the dtype's extreme values in random arrangements, and a random frame."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    values = np.array(EXTREMES[dtype], dtype)
    picks = rng.choice(values, (5, 9, 11))
    picks[0] = info.max  # every window at the top
    picks[1] = info.min
    picks[2, ::2] = info.max  # alternating rows: sobel's extreme sums
    picks[2, 1::2] = info.min
    picks[3] = rng.integers(info.min, info.max, (9, 11), endpoint=True, dtype=dtype)
    return picks


@pytest.mark.parametrize("dtype", list(EXTREMES))
def test_narrow_accumulators_give_the_int64_results(dtype):
    """Kernels that compute in int16/int32 equal the plain Python loop (unbounded ints,
    then the documented saturation) on the values that reach the accumulators' limits."""
    from kernels import lopsided, smooth

    frames = extreme_frames(dtype)
    for stencil in (sp.library.sobel(0), sp.library.sobel(1), sp.library.laplace(), smooth,
                    lopsided, wide_weights, product):  # fmt: skip
        stencil = stencil.with_options()
        stencil.passes = None  # the 2-D kernel (sobel's constant mode is scipy's 1-D passes)
        for mode in ("reflect", "constant"):
            cval = int(np.iinfo(dtype).max)
            want = kernel_by_loop(stencil.func, [frames], halo=stencil.halo, mode=mode, cval=cval)
            np.testing.assert_array_equal(stencil(frames, boundary=mode, cval=cval), want)


@x86
def test_uint8_sobel_adds_packed_16_bit_words(fresh_cache):
    """The 3x3 sobel of uint8 computes in int16 (it computed in int64: 4x fewer lanes)."""

    @sp.stencil
    def sobel_words_test(x):
        return (x[1, -1] + 2 * x[1, 0] + x[1, 1]) - (x[-1, -1] + 2 * x[-1, 0] + x[-1, 1])

    assert packed(sobel_words_test, np.uint8, "paddw")


MEAN_PASSES_ASM = """
import numpy as np
import stencilpipe as sp
uint8 = np.dtype(np.uint8)
passes = sp.library.mean(3).strip_passes(uint8, uint8, "reflect", 0)
frame = np.zeros((1, 8, 40), uint8)
for step in passes:
    out = np.empty(frame.shape, step.out_dtype)
    step.kernel.run(frame, out, step.cval, start=0, stop=8)
    frame = out
print("\\n".join(passes[-1].kernel.apply.inspect_asm().values()))
"""


@x86
def test_uint8_mean_divides_by_a_packed_high_multiplication(tmp_path):
    """The 3x3 uint8 mean's last pass divides its biased uint16 sums by 9 as
    ``(n * 7282) >> 16`` on 16-bit lanes (pmulhuw); the sum was widened to 32 bits
    before the multiplication, which took twice the vectors. A fresh process with an
    empty cache: this process may hold the library's kernels loaded from the cache,
    whose assembly Numba cannot show."""
    env = {**os.environ, "STENCILPIPE_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", MEAN_PASSES_ASM], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert re.search(r"\bv?pmulhuw\s+[^\n]*%[xyz]mm", done.stdout) is not None


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_integer_means_round_exactly_like_float64(dtype):
    """Odd-count means of unsigned inputs sum in uint16 (uint32) passes and divide by a
    multiplication: the result is scipy's float64 mean rounded (half to even), at the
    dtype's extremes, and the 2-D float64 kernel's (what the GPU runs)."""
    top = int(np.iinfo(dtype).max)
    frames = extreme_frames(dtype, seed=2)
    frames[4] = top - 1  # sums just below the multiples of the count
    frames[4, ::3, ::2] = top
    for size in (3, (3, 5), (1, 7), 9):
        mean = sp.library.mean(size)
        # uint16 sums in uint32 only where float32 would not round exactly (count >= 64)
        integer = dtype == np.uint8 or np.prod(np.broadcast_to(size, 2)) >= 64
        assert (mean.passes[np.dtype(dtype)][0].dtype.kind == "u") == integer
        got = mean(frames)
        want = np.stack([ndi.uniform_filter(f.astype(np.float64), size) for f in frames])
        np.testing.assert_array_equal(got, np.rint(want).astype(dtype))
        full = mean.with_options()
        full.passes = None
        np.testing.assert_array_equal(got, full(frames))


@pytest.mark.parametrize("divisor", [1, 3, 5, 9, 15, 25, 49, 81, 121, 225, 961])
def test_the_reciprocal_divides_exactly_over_the_whole_range(divisor):
    """dtypes.exact_reciprocal: (n * m) >> s == n // divisor for every n the mean can sum
    (uint8 and 3x3 or 15x15 windows) and near the largest bound it is used for."""
    from stencilpipe.stencils.dtypes import exact_reciprocal

    for bound in (255 * divisor + divisor // 2, 65535 * divisor + divisor // 2):
        multiplier, shift = exact_reciprocal(divisor, bound)
        assert multiplier < 2**32 and bound < 2**32
        n = np.arange(max(0, bound - 2_000_000), bound + 1, dtype=np.uint64)
        np.testing.assert_array_equal((n * np.uint64(multiplier)) >> np.uint64(shift), n // divisor)


@x86  # scipy's C loop has no fused multiply-adds on x86-64 (it may elsewhere)
@pytest.mark.parametrize("mode", ["reflect", "nearest"])
def test_gaussian_passes_give_scipys_float64_bit_for_bit(mode):
    """The separable gaussian sums as scipy's correlate1d does (centre, then the pairs
    ``w * (x[-o] + x[o])`` from the outside in), so float64 results are scipy's, and
    integer results are scipy's float64 rounded, exactly."""
    rng = np.random.default_rng(9)
    pixels = rng.integers(0, 256, (2, 37, 41)).astype(np.uint8)
    for sigma, truncate in [(1.0, 2.0), ((0.7, 1.5), 4.0)]:
        gaussian = sp.library.gaussian(sigma, truncate=truncate, boundary=mode)
        want = np.stack(
            [ndi.gaussian_filter(f, sigma, truncate=truncate, mode=mode) for f in pixels / 1.0]
        )
        np.testing.assert_array_equal(gaussian(pixels / 1.0), want)
        np.testing.assert_array_equal(gaussian(pixels), np.rint(want).astype(np.uint8))


UINT16_ASM = """
import numpy as np
import stencilpipe as sp
from stencilpipe.stencils.windows import window_loops
uint16 = np.dtype(np.uint16)
lib = sp.library
for name, stencil in [("sobel", lib.sobel(0)), ("laplace", lib.laplace()),
                      ("minimum", lib.minimum(3)), ("maximum", lib.maximum(3))]:
    stencil(np.zeros((4, 40), uint16))
    kernel = stencil.compiled((uint16,), uint16, stencil.boundary)
    print("@@kernel", name)
    print("\\n".join(kernel.apply.inspect_asm().values()))
lib.median(3)(np.zeros((4, 40), uint16))  # the CPU's 3x3 median: a window loop
print("@@kernel median")
print("\\n".join(window_loops().median_box3.inspect_asm().values()))
"""


@x86
def test_uint16_kernels_run_on_packed_words_and_doublewords(tmp_path):
    """On uint16, sobel and laplace add 32-bit lanes (their int32 accumulator; int64
    would halve the lanes), and the 3x3 minimum, maximum and median compare 16-bit
    lanes, never a widened type. A fresh process with an empty cache (see above)."""
    env = {**os.environ, "STENCILPIPE_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", UINT16_ASM], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    parts = done.stdout.split("@@kernel ")[1:]
    assembly = dict(part.split("\n", 1) for part in parts)
    assert len(assembly) == 5

    def has(name: str, mnemonic: str) -> bool:
        return re.search(rf"\bv?{mnemonic}\s+[^\n]*%[xyz]mm", assembly[name]) is not None

    for name in ("sobel", "laplace"):
        assert has(name, "paddd") and not has(name, "paddq"), name
    for name, mnemonics in [("minimum", ["pminuw"]), ("maximum", ["pmaxuw"]),
                            ("median", ["pminuw", "pmaxuw"])]:  # fmt: skip
        assert all(has(name, m) for m in mnemonics), name
        assert not has(name, "pminud") and not has(name, "pmaxud"), name
