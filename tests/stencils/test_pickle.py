"""Plain ``pickle`` ships library filters and module-level stencils, so multiprocessing,
joblib and ProcessPoolExecutor users can use them (cloudpickle, Dask's, still works).

A module-level stencil pickles by reference, a copy of one with its options; a library
filter as its generated source, its options and its separable passes. Compiled code never
travels: the receiving process compiles, or loads it from the disk cache.
"""

from __future__ import annotations

import multiprocessing
import operator
import pickle
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import numpy as np
import pytest
from kernels import smooth
from scipy import ndimage as ndi

import stencilpipe as sp
from oracle import kernel_by_loop

HALO = ((1, 1), (1, 1))

# (stage, input dtype, oracle on a (frames, h, w) stack, exact)
CASES = {
    "library mean, float32 output": (
        sp.library.mean(3).with_options(dtype=np.float32),
        np.uint8,
        lambda x: ndi.uniform_filter(x.astype(np.float64), (1, 3, 3)),
        False,
    ),
    "library median, nearest": (
        sp.library.median(3, boundary="nearest"),
        np.uint8,
        lambda x: ndi.median_filter(x, (1, 3, 3), mode="nearest"),
        True,
    ),
    "library gaussian": (
        sp.library.gaussian(1.0),
        np.float64,
        lambda x: ndi.gaussian_filter(x, (0, 1.0, 1.0)),
        False,
    ),
    "module-level stencil": (
        smooth,
        np.uint8,
        lambda x: kernel_by_loop(smooth.func, [x], halo=HALO),
        True,
    ),
    "its copy with options": (
        smooth.with_options(boundary="constant", cval=5),
        np.uint8,
        lambda x: kernel_by_loop(smooth.func, [x], halo=HALO, mode="constant", cval=5),
        True,
    ),
    "a module-level function decorated": (
        sp.stencil(smooth.func, boundary="wrap", dtype=np.int16),
        np.uint8,
        lambda x: kernel_by_loop(smooth.func, [x], halo=HALO, mode="wrap", out_dtype=np.int16),
        True,
    ),
}


def _frames(dtype):
    return np.random.default_rng(5).integers(0, 200, (2, 10, 9)).astype(dtype)


def _check(got, want, exact):
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("case", CASES)
def test_a_plain_pickle_round_trip_keeps_the_stage(case):
    stage, dtype, oracle, exact = CASES[case]
    copy = pickle.loads(pickle.dumps(stage))
    assert (copy.name, copy.halo, copy.signature) == (stage.name, stage.halo, stage.signature)
    assert (copy.boundary, copy.cval, copy.dtype) == (stage.boundary, stage.cval, stage.dtype)
    assert (copy.passes or {}).keys() == (stage.passes or {}).keys()
    for mine, theirs in zip((copy.passes or {}).values(), (stage.passes or {}).values()):
        assert [(p.halo, p.dtype) for p in mine] == [(p.halo, p.dtype) for p in theirs]
    x = _frames(dtype)
    result = copy(x)
    assert result.dtype == stage(x).dtype
    _check(result, oracle(x), exact)


def test_a_module_level_stencil_unpickles_to_itself_and_a_filter_to_its_source():
    assert pickle.loads(pickle.dumps(smooth)) is smooth
    payload = pickle.dumps(sp.library.median(3))
    assert b"def median(x)" in payload and b"numba" not in payload


def test_a_process_pool_started_by_spawn_computes_every_stage():
    stages = list(CASES.values())
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=context) as pool:
        futures = [pool.submit(operator.call, stage, _frames(dtype)) for stage, dtype, *_ in stages]
        results = [future.result(timeout=120) for future in futures]
    for result, (_, dtype, oracle, exact) in zip(results, stages):
        _check(result, oracle(_frames(dtype)), exact)


def test_cloudpickle_still_ships_kernels_defined_in_a_function():
    offset = 3

    @sp.stencil
    def shifted(x):
        return x[0, 1] + offset

    copy = cloudpickle.loads(cloudpickle.dumps(shifted))
    x = _frames(np.int16)
    np.testing.assert_array_equal(copy(x), shifted(x))
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(shifted)  # a closure has no name to find it by in another process
