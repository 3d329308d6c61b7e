"""The cases of dask-image's tests/test_dask_image/test_ndfilters (test__conv, test__order,
test__gaussian, test__edge, test__diff, test__smooth, test__generic, test__threshold), run
against stencilpipe.ndfilters with dask_image.ndfilters and scipy.ndimage as oracles.

The cases (parameters, shapes, chunks) are dask-image's; the tests are written here. Where
dask-image and scipy disagree, scipy on the whole array is the reference (dask-image's
``wrap`` on chunked arrays wraps each edge chunk within itself).
"""

from __future__ import annotations

import dask.array as da
import dask_image.ndfilters as dif
import numpy as np
import pytest
import scipy.ndimage as ndi

import stencilpipe.ndfilters as ndf

DISK = (np.mgrid[-2:3, -2:3] ** 2).sum(axis=0) < 2.5**2


@pytest.fixture(scope="module")
def stack():
    """dask-image's input: arange(140.) as 10x14 in 5x7 chunks."""
    a = np.arange(140.0).reshape(10, 14)
    return a, da.from_array(a, chunks=(5, 7))


def raised(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001  (the type is what is compared)
        return type(exc)
    return None


def assert_matches(ours, dask_image_result, scipy_result):
    assert isinstance(ours, da.Array)
    assert all(type(s) is int for s in ours.shape)
    computed = ours.compute()
    np.testing.assert_allclose(computed, scipy_result, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(computed, dask_image_result.compute(), rtol=1e-6, atol=1e-9)


# -- test__conv ------------------------------------------------------------------------------

CONV_ERRORS = [
    (np.ones((1,)), 0),
    (np.ones((1, 0)), 0),
    (np.ones((1, 1)), (0,)),
    (np.ones((1, 1)), [(0,)]),
    (np.ones((1, 1)), 1),
    (np.ones((1, 1)), 0.0),
    (np.ones((1, 1)), (0.0, 0.0)),
    (np.ones((1, 1)), 1 + 0j),
    (np.ones((1, 1)), (0j, 1 + 0j)),
]


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize(("weights", "origin"), CONV_ERRORS)
def test_convolution_errors_are_dask_images(stack, name, weights, origin):
    _, d = stack
    expected = raised(lambda: getattr(dif, name)(d, weights, origin=origin))
    assert expected is not None
    with pytest.raises(expected):
        getattr(ndf, name)(d, weights, origin=origin)


CONV_CASES = [
    (np.ones((1, 1)), 0),
    (np.ones((2, 2)), 0),
    (np.ones((2, 3)), 0),
    (np.ones((2, 3)), (0, 1)),
    (np.ones((2, 3)), (0, -1)),
    (DISK, 0),
    (DISK, (1, 2)),
    (DISK, (-1, -2)),
    (np.ones((5, 5)), 0),
    (np.ones((7, 7)), 0),
    (np.ones((8, 8)), 0),
    (np.ones((10, 10)), 0),
    (np.ones((5, 5)), 2),
    (np.ones((5, 5)), -2),
]


@pytest.mark.parametrize("name", ["convolve", "correlate"])
@pytest.mark.parametrize(("weights", "origin"), CONV_CASES)
def test_convolutions_compare(stack, name, weights, origin):
    a, d = stack
    assert_matches(
        getattr(ndf, name)(d, weights, origin=origin),
        getattr(dif, name)(d, weights, origin=origin),
        getattr(ndi, name)(a, weights, origin=origin),
    )


@pytest.mark.parametrize("name", ["convolve", "correlate", "uniform_filter", "median_filter"])
def test_results_stack_and_concatenate_like_numpy(name):
    rng = np.random.default_rng(0)
    d = da.from_array(rng.random((3, 12, 14)), chunks=(3, 6, 7))
    args = {"convolve": (np.ones((1, 1)),), "correlate": (np.ones((1, 1)),)}.get(name, (1,))
    frames = [getattr(ndf, name)(d[i], *args) for i in range(len(d))]
    np.testing.assert_array_equal(da.stack(frames).compute(), np.stack(frames))
    np.testing.assert_array_equal(da.concatenate([f[None] for f in frames]).compute(), d.compute())


# -- test__order -----------------------------------------------------------------------------

ORDER = [
    ("minimum_filter", {}),
    ("median_filter", {}),
    ("maximum_filter", {}),
    ("rank_filter", {"rank": 0}),
    ("percentile_filter", {"percentile": 0}),
]
ORDER_ERRORS = [
    (None, None, 0),
    (1.0, None, 0),
    ((1,), None, 0),
    ([(1,)], None, 0),
    (1, np.ones((1,)), 0),
    (None, np.ones((1,)), 0),
    (None, np.ones((1, 0)), 0),
    (1, None, (0,)),
    (1, None, [(0,)]),
    (1, None, 1),
    (1, None, 0.0),
    (1, None, (0.0, 0.0)),
    (1, None, 1 + 0j),
    (1, None, (0j, 1 + 0j)),
]


@pytest.mark.filterwarnings("ignore:ignoring size")
@pytest.mark.parametrize(("name", "extra"), ORDER)
@pytest.mark.parametrize(("size", "footprint", "origin"), ORDER_ERRORS)
def test_order_filter_errors_are_dask_images(stack, name, extra, size, footprint, origin):
    _, d = stack
    kwargs = {"size": size, "footprint": footprint, "origin": origin, **extra}
    expected = raised(lambda: getattr(dif, name)(d, **kwargs))
    assert expected is not None
    with pytest.raises(expected):
        getattr(ndf, name)(d, **kwargs)


@pytest.mark.parametrize(("name", "extra"), ORDER)
@pytest.mark.parametrize(
    ("size", "footprint"), [(1, None), ((1, 1), None), (None, np.ones((1, 1)))]
)
def test_order_filter_identity(stack, name, extra, size, footprint):
    a, d = stack
    result = getattr(ndf, name)(d, size=size, footprint=footprint, **extra)
    np.testing.assert_array_equal(result.compute(), a)


ORDER_COMPARE = [
    ("minimum_filter", {}),
    ("median_filter", {}),
    ("maximum_filter", {}),
    ("rank_filter", {"rank": 1}),
    ("percentile_filter", {"percentile": 10}),
]
ORDER_CASES = [
    (2, None, 0),
    (None, np.ones((2, 3)), 0),
    (None, np.ones((2, 3)), (0, 1)),
    (None, np.ones((2, 3)), (0, -1)),
    (None, DISK, 0),
    (None, DISK, (1, 2)),
    (None, DISK, (-1, -2)),
    (5, None, 0),
    (7, None, 0),
    (8, None, 0),
    (10, None, 0),
    (5, None, 2),
    (5, None, -2),
]


@pytest.mark.parametrize(("name", "extra"), ORDER_COMPARE)
@pytest.mark.parametrize(("size", "footprint", "origin"), ORDER_CASES)
def test_order_filters_compare(stack, name, extra, size, footprint, origin):
    a, d = stack
    kwargs = {"size": size, "footprint": footprint, "origin": origin, **extra}
    assert_matches(
        getattr(ndf, name)(d, **kwargs),
        getattr(dif, name)(d, **kwargs),
        getattr(ndi, name)(a, **kwargs),
    )


# -- test__gaussian --------------------------------------------------------------------------

GAUSSIANS = ["gaussian_filter", "gaussian_gradient_magnitude", "gaussian_laplace"]


@pytest.mark.parametrize("name", GAUSSIANS)
@pytest.mark.parametrize(
    ("sigma", "truncate"), [([[1.0]], 4.0), ([1.0], 4.0), (1.0 + 0.0j, 4.0), (1.0, 4.0 + 0.0j)]
)
def test_gaussian_errors_are_dask_images(stack, name, sigma, truncate):
    _, d = stack
    expected = raised(lambda: getattr(dif, name)(d, sigma, truncate=truncate))
    assert expected is not None
    with pytest.raises(expected):
        getattr(ndf, name)(d, sigma, truncate=truncate)


@pytest.mark.parametrize("order", [0, 1, 2, 3])
@pytest.mark.parametrize(("sigma", "truncate"), [(0.0, 0.0), (0.0, 1.0), (0.0, 4.0), (1.0, 0.0)])
def test_gaussian_identity(stack, order, sigma, truncate):
    a, d = stack
    if order % 2 and sigma and not truncate:
        pytest.skip("scipy zeros odd derivatives with truncate=0 (scipy#7364), as dask-image")
    result = ndf.gaussian_filter(d, sigma, order, truncate=truncate)
    np.testing.assert_array_equal(result.compute(), a)
    np.testing.assert_array_equal(
        result.compute(), ndi.gaussian_filter(a, sigma, order, truncate=truncate)
    )


@pytest.mark.parametrize("name", GAUSSIANS)
@pytest.mark.parametrize(
    ("sigma", "truncate"), [(1.0, 2.0), (1.0, 4.0), (2.0, 2.0), (2.0, 4.0), ((1.0, 2.0), 4.0)]
)
def test_gaussian_filters_compare(name, sigma, truncate):
    a = np.arange(100.0 * 110).reshape(100, 110)
    d = da.from_array(a, chunks=(50, 55))
    assert_matches(
        getattr(ndf, name)(d, sigma, truncate=truncate),
        getattr(dif, name)(d, sigma, truncate=truncate),
        getattr(ndi, name)(a, sigma, truncate=truncate),
    )


@pytest.mark.parametrize("order", [0, 1, 2, 3, (0, 1), (2, 3)])
@pytest.mark.parametrize(
    ("sigma", "truncate"),
    [
        (0.0, 0.0),
        (1.0, 0.0),
        (0.0, 1.0),
        (1.0, 2.0),
        (1.0, 4.0),
        (2.0, 2.0),
        (2.0, 4.0),
        ((1.0, 2.0), 4.0),
    ],
)
def test_gaussian_derivatives_compare(order, sigma, truncate):
    a = np.arange(100.0 * 110).reshape(100, 110)
    d = da.from_array(a, chunks=(50, 55))
    assert_matches(
        ndf.gaussian_filter(d, sigma, order, truncate=truncate),
        dif.gaussian_filter(d, sigma, order, truncate=truncate),
        ndi.gaussian_filter(a, sigma, order, truncate=truncate),
    )


# -- test__edge, test__diff, test__smooth ------------------------------------------------------


@pytest.mark.parametrize("name", ["sobel", "prewitt"])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
def test_edge_filters_compare(stack, name, axis):
    a, d = stack
    assert_matches(
        getattr(ndf, name)(d, axis), getattr(dif, name)(d, axis), getattr(ndi, name)(a, axis)
    )


@pytest.mark.parametrize("name", ["sobel", "prewitt"])
@pytest.mark.parametrize("axis", [2, -3, 0.5])
def test_edge_filter_bad_axis_errors_are_dask_images(stack, name, axis):
    _, d = stack
    expected = raised(lambda: getattr(dif, name)(d, axis))
    assert expected is not None
    with pytest.raises(expected):
        getattr(ndf, name)(d, axis)


def test_laplace_compare(stack):
    a, d = stack
    assert_matches(ndf.laplace(d), dif.laplace(d), ndi.laplace(a))


@pytest.mark.parametrize(
    ("size", "origin"), [(1, 0), (2, 0), (3, 0), (3, 1), (3, -1), ((2, 5), (0, 2))]
)
def test_uniform_filter_compare(stack, size, origin):
    a, d = stack
    assert_matches(
        ndf.uniform_filter(d, size, origin=origin),
        dif.uniform_filter(d, size, origin=origin),
        ndi.uniform_filter(a, size, origin=origin),
    )


# -- test__generic, test__threshold -----------------------------------------------------------


def first_value(values):
    return values[0]


@pytest.mark.parametrize(
    ("size", "footprint", "origin"),
    [(1, None, 0), (2, None, 0), (None, np.ones((2, 3)), (0, 1)), (None, DISK, 0), (5, None, -2)],
)
def test_generic_filter_compare(stack, size, footprint, origin):
    a, d = stack
    kwargs = {"size": size, "footprint": footprint, "origin": origin}
    assert_matches(
        ndf.generic_filter(d, first_value, **kwargs),
        dif.generic_filter(d, first_value, **kwargs),
        ndi.generic_filter(a, first_value, **kwargs),
    )


@pytest.mark.parametrize("method", ["gaussian", "mean", "median", "generic"])
@pytest.mark.parametrize("block_size", [3, (3, 5)])
@pytest.mark.parametrize("offset", [0, 2.5])
def test_threshold_local_compare(stack, method, block_size, offset):
    _, d = stack
    param = np.max if method == "generic" else None
    ours = ndf.threshold_local(d, block_size, method, offset, param=param)
    theirs = dif.threshold_local(d, block_size, method, offset, param=param)
    np.testing.assert_allclose(ours.compute(), theirs.compute(), rtol=1e-6)


@pytest.mark.parametrize("name", ["gaussian_filter", "sobel"])
def test_wrap_on_chunks_is_scipys_not_dask_images(stack, name):
    """dask-image's edge chunks wrap within themselves; the whole array wraps here."""
    a, d = stack
    args = {"convolve": (DISK,), "gaussian_filter": (1.5,), "median_filter": (3,)}.get(name, ())
    ours = getattr(ndf, name)(d, *args, mode="wrap").compute()
    np.testing.assert_allclose(ours, getattr(ndi, name)(a, *args, mode="wrap"), rtol=1e-6)
    theirs = getattr(dif, name)(d, *args, mode="wrap").compute()
    assert not np.allclose(theirs, ours)
