"""correlate, convolve (N-D and 1-D) and uniform filters against scipy.ndimage."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import scipy.ndimage as ndi
from ndf_oracle import ALIASES, DTYPES, MODES, assert_dask_same, assert_same, sample

import stencilpipe.ndfilters as ndf
from stencilpipe.stencils.stencil import SMALL_CALL

WEIGHTS_2D = np.array([[0.5, -1.25, 2.0, 0.0], [1.5, 3.0, -0.75, 0.25], [0.0, 1.0, 0.5, -2.0]])
WEIGHTS_3D = np.arange(1.0, 13.0).reshape(2, 2, 3) / 7 - 0.5


@pytest.mark.parametrize("mode", MODES + ALIASES)
@pytest.mark.parametrize("dtype", ["uint8", "float64"])
def test_correlate_and_convolve_every_mode(mode, dtype):
    x = sample(dtype)
    for ours, theirs in [(ndf.correlate, ndi.correlate), (ndf.convolve, ndi.convolve)]:
        expected = theirs(x, WEIGHTS_2D, mode=mode, cval=7)
        assert_same(ours(x, WEIGHTS_2D, mode=mode, cval=7), expected)


@pytest.mark.parametrize("dtype", DTYPES + ("int8", "int64", "uint64"))
@pytest.mark.parametrize("ndim", [2, 3])
def test_correlate_every_dtype_and_ndim(dtype, ndim):
    x = sample(dtype, ndim)
    weights = WEIGHTS_2D if ndim == 2 else WEIGHTS_3D
    assert_same(ndf.correlate(x, weights), ndi.correlate(x, weights))


@pytest.mark.parametrize("origin", [1, -1, (0, 1), (-1, 1)])
def test_origin(origin):
    x = sample("int32")
    for ours, theirs in [(ndf.correlate, ndi.correlate), (ndf.convolve, ndi.convolve)]:
        assert_same(ours(x, WEIGHTS_2D, origin=origin), theirs(x, WEIGHTS_2D, origin=origin))


def test_invalid_origin_is_refused_as_scipy_refuses():
    with pytest.raises(ValueError, match="origin"):
        ndf.correlate(sample("uint8"), WEIGHTS_2D, origin=2)
    with pytest.raises(ValueError, match="origin"):
        ndf.correlate1d(sample("uint8"), [1, 2, 3], origin=-2)


def test_axes_filter_only_those_axes():
    x = sample("float32", 3)
    for axes in [(0, 2), (-1, 1)]:
        expected = ndi.correlate(x, WEIGHTS_2D, axes=axes, mode="wrap")
        assert_same(ndf.correlate(x, WEIGHTS_2D, axes=axes, mode="wrap"), expected)


@pytest.mark.parametrize(
    ("dtype", "output"),
    [
        ("float64", np.uint8),
        ("float64", "int8"),
        ("float64", np.uint16),
        ("float32", np.int16),
        ("float64", np.int32),
        ("float64", np.uint32),
        ("float64", np.int64),
        ("float64", np.uint64),
        ("uint8", np.float32),
        ("int32", np.uint8),
        ("float64", bool),
    ],
)
def test_output_dtype_is_stored_as_scipy_casts(dtype, output):
    """Negative and out-of-range results wrap as scipy's C cast wraps them."""
    x = sample(dtype) * 3
    expected = ndi.correlate(x, WEIGHTS_2D, output=output, mode="nearest")
    assert_same(ndf.correlate(x, WEIGHTS_2D, output=output, mode="nearest"), expected)


@pytest.mark.parametrize(
    "dtype", ["uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "uint64"]
)
def test_store_of_extreme_doubles_matches_scipy(dtype):
    """Every branch of the C cast: truncation, wrap-around, out of range, infinities, NaN."""
    values = np.array(
        [
            -1e30,
            -3e9,
            -2147483649.0,
            -2147483648.7,
            -70000.5,
            -300.7,
            -129.5,
            -5.5,
            -0.7,
            0.7,
            127.9,
            255.9,
            256.2,
            40000.7,
            65536.5,
            2147483647.9,
            2147483648.0,
            4294967296.5,
            9.3e18,
            2e19,
            np.inf,
            -np.inf,
            np.nan,
        ]
    )
    expected = ndi.correlate1d(values, [1.0], output=dtype)
    assert_same(ndf.correlate1d(values, [1.0], output=dtype), expected)


def test_output_array_is_filled_and_returned():
    x = sample("float64")
    out = np.zeros(x.shape, np.int16)
    assert ndf.correlate(x, WEIGHTS_2D, output=out) is out
    assert_same(out, ndi.correlate(x, WEIGHTS_2D, output=np.int16))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, **o: ndf.correlate(x, WEIGHTS_2D, **o),
        lambda x, **o: ndf.uniform_filter(x, 5, **o),  # two passes
        lambda x, **o: ndf.prewitt(x, 0, **o),  # two passes, the last along rows
        lambda x, **o: ndf.rank_filter(x, 4, 3, mode="nearest", **o),
        lambda x, **o: ndf.minimum_filter(x, (3, 5), **o),
    ],
    ids=["correlate", "uniform", "prewitt", "rank", "minimum"],
)
def test_the_last_pass_writes_into_the_output_array_and_aliases_are_safe(call):
    """An output array of the filter's dtype receives the last pass itself: no array the
    size of the result is made aside (traced by tracemalloc, which sees NumPy's), and the
    results are the same into the input itself, into a strided view (copied into, as
    before) and as a fresh array."""
    import tracemalloc

    x = np.random.default_rng(3).integers(0, 256, (1024, 1024)).astype(np.uint8)
    expected = call(x)
    out = np.zeros_like(x)
    call(x, output=out)  # the spares exist from here on
    tracemalloc.start()
    try:
        assert call(x, output=out) is out
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes // 2, peak
    np.testing.assert_array_equal(out, expected)
    inplace = x.copy()
    assert call(inplace, output=inplace) is inplace
    np.testing.assert_array_equal(inplace, expected)
    wide = np.zeros((1024, 2048), np.uint8)
    assert call(x, output=wide[:, ::2]).base is wide
    np.testing.assert_array_equal(wide[:, ::2], expected)
    assert not wide[:, 1::2].any()


def test_cval_outside_the_input_dtype_is_read_as_a_double():
    x = sample("uint8")
    for cval in (-1.5, 300.25, np.nan):
        expected = ndi.correlate(x, WEIGHTS_2D, mode="constant", cval=cval, output=np.float64)
        actual = ndf.correlate(x, WEIGHTS_2D, mode="constant", cval=cval, output=np.float64)
        assert_same(actual, expected)


def test_bool_float16_and_big_endian_inputs():
    b = sample("bool")
    assert_same(ndf.correlate(b, WEIGHTS_2D), ndi.correlate(b, WEIGHTS_2D))
    big = sample("float64").astype(">f8")
    assert_same(ndf.correlate(big, WEIGHTS_2D), ndi.correlate(big, WEIGHTS_2D))
    half = sample("float64").astype(np.float16)
    result = ndf.correlate(half, WEIGHTS_2D)
    assert result.dtype == np.float16
    expected = ndi.correlate(half.astype(np.float32), WEIGHTS_2D).astype(np.float16)
    np.testing.assert_array_equal(result, expected)


def test_unsupported_dtypes_raise_type_error():
    with pytest.raises(TypeError, match="(?i)complex"):  # scipy's order filters refuse it too
        ndf.median_filter(np.ones((3, 3), np.complex128), 3)
    with pytest.raises(TypeError, match="datetime64|<M8"):
        ndf.correlate1d(np.arange(4).astype("datetime64[s]"), [1.0])


def test_weights_all_below_epsilon_give_zeros():
    x = sample("float64")
    weights = np.full((3, 3), 1e-17)
    assert_same(ndf.correlate(x, weights), ndi.correlate(x, weights))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "weights", [[1.0, 2.0, 1.0], [-1.0, 0.0, 1.0], [0.5, 1.5, -2.0, 0.25], [3.0]]
)
def test_correlate1d_convolve1d(mode, weights):
    """Symmetric, antisymmetric, even and single weights, along each axis."""
    x = sample("int32", 3)
    for axis in (0, -1):
        for ours, theirs in [(ndf.correlate1d, ndi.correlate1d), (ndf.convolve1d, ndi.convolve1d)]:
            expected = theirs(x, weights, axis=axis, mode=mode, cval=-3)
            assert_same(ours(x, weights, axis=axis, mode=mode, cval=-3), expected)


@pytest.mark.parametrize("weights", [[1.0, 0.5, 1.0], [-1.0, 0.0, 1.0]])
def test_correlate1d_pairs_of_large_int64_round_before_they_add_as_scipys(weights):
    """scipy converts each value to a double, then adds a pair: above 2**53 that differs
    from converting the exact integer sum. A call big enough for the kernel written out."""
    shape = (SMALL_CALL // 1024, 1024)
    x = np.random.default_rng(7).integers(2**60, 2**62, shape, dtype=np.int64)
    for axis in (0, 1):
        expected = ndi.correlate1d(x, weights, axis=axis, output=np.float64)
        exact = x.astype(object)
        assert not np.array_equal(expected[1:-1, 1:-1], _exact_pairs(exact, weights, axis))
        assert_same(ndf.correlate1d(x, weights, axis=axis, output=np.float64), expected)


def _exact_pairs(x: np.ndarray, weights: list[float], axis: int) -> np.ndarray:
    """Interior of a symmetric or antisymmetric 3-weight correlation with each pair summed
    as exact integers, then converted (what an int64 pair sum gives)."""
    x = np.moveaxis(x, axis, 0)
    sign = 1 if weights[0] == weights[2] else -1
    pairs = (x[2:] + sign * x[:-2]).astype(np.float64)
    centre = x[1:-1].astype(np.float64)
    inner = centre * weights[1]
    inner += pairs * weights[2]  # scipy's order: the centre, then the pairs
    inner = np.moveaxis(inner, 0, axis)
    return inner[:, 1:-1] if axis == 0 else inner[1:-1, :]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [2, 3])
def test_correlate1d_dtypes_with_origin(dtype, ndim):
    x = sample(dtype, ndim)
    expected = ndi.correlate1d(x, [0.25, -1.5, 2.0, 1.0], axis=1, origin=-1)
    assert_same(ndf.correlate1d(x, [0.25, -1.5, 2.0, 1.0], axis=1, origin=-1), expected)


def _exact_means(x: np.ndarray, size, mode: str, cval) -> np.ndarray:
    """Window means as exact rationals' numerators (sum) over np.pad, for tie checks."""
    pad_mode = {
        "reflect": "symmetric",
        "mirror": "reflect",
        "nearest": "edge",
        "wrap": "wrap",
        "constant": "constant",
    }[mode]
    sizes = np.broadcast_to(size, (x.ndim,))
    widths = [(s // 2, s - s // 2 - 1) for s in sizes]
    kwargs = {"constant_values": cval} if mode == "constant" else {}
    padded = np.pad(x.astype(np.int64), widths, mode=pad_mode, **kwargs)
    windows = np.lib.stride_tricks.sliding_window_view(padded, tuple(sizes))
    return windows.sum(axis=tuple(range(x.ndim, 2 * x.ndim))), int(np.prod(sizes))


@pytest.mark.parametrize("mode", MODES + ALIASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_filter_floats(mode, dtype):
    x = sample(dtype)
    assert_same(
        ndf.uniform_filter(x, (3, 4), mode=mode, cval=1.5),
        ndi.uniform_filter(x, (3, 4), mode=mode, cval=1.5),
    )
    assert_same(
        ndf.uniform_filter1d(x, 5, axis=0, mode=mode, origin=1),
        ndi.uniform_filter1d(x, 5, axis=0, mode=mode, origin=1),
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int32"])
def test_uniform_filter_integers_differ_only_on_truncation_ties(mode, dtype):
    """scipy's running sum drifts, so a mean that is exactly an integer can truncate to one
    less (or, for negative means, more); everywhere else the results are identical, and
    ours is the exact mean there. N-D filters are 1-D passes: off by at most one."""
    x = sample(dtype, 2)[0]
    ours = ndf.uniform_filter1d(x, 3, mode=mode, cval=2)
    theirs = ndi.uniform_filter1d(x, 3, mode=mode, cval=2)
    sums, count = _exact_means(x, 3, mode, 2)
    tie = sums % count == 0
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours[~tie], theirs[~tie])
    np.testing.assert_array_equal(ours[tie], (sums[tie] // count).astype(dtype))
    x = sample(dtype, 2)
    ours = ndf.uniform_filter(x, 3, mode=mode, cval=2).astype(np.int64)
    assert np.abs(ours - ndi.uniform_filter(x, 3, mode=mode, cval=2)).max() <= 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64"])
def test_long_uniform_filters_run_scipys_running_sum(mode, dtype):
    """Means longer than 3 run scipy's running sum (the stencil's CPU passes, wrap over a
    padded copy): integer results identical to scipy's, floats within rounding; windows
    longer than the array and shifted by origin too."""
    x = np.concatenate([sample(dtype, 3, seed=seed) for seed in range(3)], -1)
    for size, origin in [(15, 0), ((5, 4, 9), 1), ((6, 31, 4), -1)]:
        kwargs = {"mode": mode, "cval": 7, "origin": origin}
        ours, theirs = ndf.uniform_filter(x, size, **kwargs), ndi.uniform_filter(x, size, **kwargs)
        if x.dtype.kind == "f":
            assert_same(ours, theirs)
        else:
            np.testing.assert_array_equal(ours, theirs)
    x = sample(dtype, 3)
    expected = ndi.uniform_filter(x, 9, mode=mode, cval=7)
    lazy = ndf.uniform_filter(da.from_array(x, chunks=(2, 3, 4)), 9, mode=mode, cval=7)
    assert_same(lazy.compute(), expected)


def test_uniform_filter_size_one_and_3d_per_axis_modes():
    x = sample("float64", 3)
    assert_same(ndf.uniform_filter(x, 1), x)
    modes = ("wrap", "nearest", "constant")
    assert_same(
        ndf.uniform_filter(x, (2, 3, 4), mode=modes, cval=3, origin=(0, 1, -1)),
        ndi.uniform_filter(x, (2, 3, 4), mode=modes, cval=3, origin=(0, 1, -1)),
    )


@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap", "mirror"])
def test_dask_any_chunking_is_lazy_and_equals_numpy(mode):
    for ndim in (2, 3):
        x = sample("uint16", ndim)
        weights = WEIGHTS_2D if ndim == 2 else WEIGHTS_3D
        assert_dask_same(
            ndf.correlate,
            x,
            ndf.correlate(x, weights, mode=mode, cval=5),
            weights=weights,
            mode=mode,
            cval=5,
        )
        assert_dask_same(
            ndf.uniform_filter, x, ndf.uniform_filter(x, 4, mode=mode), size=4, mode=mode
        )
        assert_dask_same(
            ndf.correlate1d,
            x,
            ndf.correlate1d(x, [1, -2, 0.5], axis=0, mode=mode),
            weights=[1, -2, 0.5],
            axis=0,
            mode=mode,
        )


def test_dask_wrap_matches_scipy_where_dask_image_does_not():
    """dask-image wraps each edge chunk within itself; the whole array wraps here."""
    x = sample("float64")
    lazy = ndf.correlate(da.from_array(x, chunks=(3, 4)), WEIGHTS_2D, mode="wrap")
    assert_same(lazy.compute(), ndi.correlate(x, WEIGHTS_2D, mode="wrap"))


def test_bad_mode_is_one_clear_error():
    with pytest.raises(RuntimeError, match="boundary mode not supported: 'edge'"):
        ndf.correlate(sample("uint8"), WEIGHTS_2D, mode="edge")
    with pytest.raises(RuntimeError, match="sequence of modes"):
        ndf.correlate(sample("uint8"), WEIGHTS_2D, mode=["wrap", "reflect"])


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_long_means_along_the_last_axis_equal_scipys_bit_for_bit(dtype):
    """Means along the last axis longer than 15 (``window_kernels.running_mean_lines``:
    4 lines side by side, their changes unfolded inside, folded near the ends) sum each
    line from its start as scipy does: equal bit for bit, for a line count that leaves a
    partial group, windows longer than the line (nothing unfolded), every mode, origins,
    and outputs stored by a cast (float32) or as scipy stores a double (int16)."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((37, 301)) * 1000).astype(dtype)
    for mode in MODES:
        for size, origin in [(17, 0), (31, 3), (64, -5), (400, 0)]:
            for output in (None, np.float32, np.int16):
                kwargs = {"mode": mode, "cval": 2.5, "origin": origin, "output": output}
                np.testing.assert_array_equal(
                    ndf.uniform_filter1d(x, size, **kwargs),
                    ndi.uniform_filter1d(x, size, **kwargs),
                    err_msg=f"{mode} {size} {origin} {output}",
                )
