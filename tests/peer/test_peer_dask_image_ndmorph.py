"""The cases of dask-image's tests/test_dask_image/test_ndmorph (test_ndmorph, test__utils,
test_cupy_ndmorph), run against stencilpipe.ndmorph with dask_image.ndmorph and
scipy.ndimage as oracles.

The cases (parameters, shapes, chunks) are dask-image's; the tests are written here.
dask-image's private helpers (test__utils) are reached through the public functions.
Where dask-image refuses what scipy accepts (``iterations=0``: until nothing changes;
``brute_force=True``) stencilpipe follows scipy: those cases are xfails in conftest.py.
"""

from __future__ import annotations

import dask.array as da
import dask_image.ndmorph as dim
import numpy as np
import pytest
import scipy.ndimage as ndi

import stencilpipe.ndmorph as ndm

FUNCTIONS = ["binary_closing", "binary_dilation", "binary_erosion", "binary_opening"]

IMAGE = np.array(
    [
        [0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0],
        [0, 0, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1],
        [1, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0, 1],
        [1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 0, 0],
        [0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0],
        [0, 1, 0, 1, 0, 0, 1, 0, 1, 0, 1, 1],
        [0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0, 0],
        [1, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0],
        [0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0, 0],
    ],
    dtype=bool,
)
MASK = np.zeros_like(IMAGE)
MASK[3:7, 3:9] = True
SQUARE = np.ones([3, 3], dtype=bool)


def _image():
    return da.from_array(IMAGE, chunks=(5, 6))


def _line(length=2):
    return da.arange(length, dtype=bool, chunks=(2,))


def raised(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001  (the type is what is compared)
        return type(exc)
    return None


def assert_matches(ours, dask_image_result, scipy_result):
    assert isinstance(ours, da.Array) and ours.dtype == bool
    computed = ours.compute()
    np.testing.assert_array_equal(computed, scipy_result)
    np.testing.assert_array_equal(computed, dask_image_result.compute())


# -- test_ndmorph: errors -------------------------------------------------------------------

ERRORS = {
    "structure_rank": dict(image=da.ones([1, 2], dtype=bool, chunks=(1, 2)), structure=_line()),
    "structure_scalar": dict(image=_line(), structure=2.0),
    "origin_float": dict(
        image=da.ones([2], dtype=bool, chunks=(2,)), structure=_line(), origin=0.0
    ),
    "iterations_float": dict(image=_line(), structure=_line(), iterations=1.0),
    "mask_shape": dict(image=_line(), structure=_line(), mask=_line()[None]),
    "border_float": dict(image=_line(), structure=_line(), mask=_line(), border_value=2.0),
    # test__utils, through the public functions:
    "mask_short": dict(image=_line(), mask=da.arange(1, dtype=bool, chunks=(2,))),
    "mask_scalar": dict(image=_line(), mask=2.0),
    "border_float_0": dict(image=_line(), border_value=0.0),
    "border_float_1": dict(image=_line(), border_value=1.0),
}
SCIPY_ACCEPTS = {
    "iterations_zero": (
        dict(image=_line(), structure=_line(), iterations=0),
        "dask-image raises NotImplementedError for iterations < 1; stencilpipe does what "
        "scipy does (repeat until nothing changes)",
    ),
    "brute_force_true": (
        dict(image=_line(), structure=_line(), mask=_line(), brute_force=True),
        "dask-image raises NotImplementedError for brute_force=True; scipy and stencilpipe "
        "accept it (the values do not depend on it)",
    ),
    "brute_force_int": (
        dict(image=_line(), brute_force=1),
        "dask-image raises TypeError for a non-bool brute_force; scipy accepts any truth "
        "value (its test_binary_closing_noninteger_brute_force_passes_when_true), as does "
        "stencilpipe",
    ),
}
ERROR_CASES = [*ERRORS] + [
    pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=reason))
    for case, (_, reason) in SCIPY_ACCEPTS.items()
]


@pytest.mark.parametrize("funcname", FUNCTIONS)
@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_are_dask_images(funcname, case):
    kwargs = dict(ERRORS[case] if case in ERRORS else SCIPY_ACCEPTS[case][0])
    image = kwargs.pop("image")
    expected = raised(lambda: getattr(dim, funcname)(image, **kwargs))
    assert expected is not None
    with pytest.raises(expected):
        getattr(ndm, funcname)(image, **kwargs)


# -- test_ndmorph: values --------------------------------------------------------------------

CASES = [
    dict(structure=None, origin=0),
    dict(structure=SQUARE, origin=0),
    dict(structure=SQUARE, origin=1),
    dict(structure=SQUARE, origin=-1),
    # test_binary_ops_iter
    dict(structure=SQUARE, iterations=3, origin=0),
    dict(structure=SQUARE, iterations=3, origin=1),
    # test_binary_ops_expanded
    dict(structure=SQUARE, iterations=1, mask=None, border_value=1, origin=0, brute_force=False),
    dict(structure=SQUARE, iterations=1, mask=MASK, border_value=0, origin=0, brute_force=False),
    dict(structure=SQUARE, iterations=3, mask=MASK, border_value=0, origin=0, brute_force=False),
]


@pytest.mark.parametrize("funcname", FUNCTIONS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_binary_ops(funcname, case):
    kwargs = dict(CASES[case])
    if kwargs.get("mask") is not None:
        lazy = dict(kwargs, mask=da.from_array(kwargs["mask"], chunks=(5, 6)))
    else:
        lazy = kwargs
    assert_matches(
        getattr(ndm, funcname)(_image(), **lazy),
        getattr(dim, funcname)(_image(), **lazy),
        getattr(ndi, funcname)(IMAGE, **kwargs),
    )


# -- test_cupy_ndmorph -----------------------------------------------------------------------


@pytest.mark.parametrize("funcname", FUNCTIONS)
def test_cupy_ndmorph(funcname):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    if cupy.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device")
    s = (10, 10)
    array = da.from_array(cupy.arange(int(np.prod(s)), dtype=cupy.float32).reshape(s), chunks=5)
    result = getattr(ndm, funcname)(array)
    assert result.dtype == bool
    assert isinstance(result._meta, cupy.ndarray)
    computed = result.compute()
    assert computed.dtype == bool and isinstance(computed, cupy.ndarray)
    expected = getattr(ndi, funcname)(np.arange(100, dtype=np.float32).reshape(s))
    np.testing.assert_array_equal(cupy.asnumpy(computed), expected)
