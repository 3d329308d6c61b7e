"""Halo, dimensionality and signature inference; kernels refused with a useful message."""

import re

import numpy as np
import pytest
from kernels import declared_window, diff, lopsided, smooth, thresh, volume

import stencilpipe as sp


def test_halo_ndim_signature_of_the_seed_kernel():
    assert smooth.halo == ((1, 1), (1, 1))
    assert smooth.ndim == 2
    assert smooth.signature == "(n,m)->(n,m)"


def test_asymmetric_offsets_give_asymmetric_halos():
    assert lopsided.halo == ((0, 1), (2, 1))
    assert volume.halo == ((1, 1), (1, 1), (2, 1))
    assert volume.signature == "(n,m,k)->(n,m,k)"


def test_loops_over_constant_ranges_need_no_declared_neighborhood():
    radius = 2

    @sp.stencil
    def box(x):
        total = 0
        for i in range(-radius, radius + 1):
            for j in range(-1, 2):
                total += x[i + 1, j]
        return total

    assert box.halo == ((1, 3), (1, 1))


def test_declared_neighborhood_sets_the_halo():
    assert declared_window.halo == ((2, 2), (1, 1))


def test_array_and_scalar_parameters_are_told_apart():
    assert diff.info.array_params == ("a", "b") and diff.info.scalar_params == ()
    assert thresh.info.array_params == ("x",) and thresh.info.scalar_params == ("t",)


def test_decorator_with_options():
    @sp.stencil(boundary="constant", cval=5, dtype=np.float32)
    def f(x):
        return x[0, 1]

    assert (f.boundary, f.cval, f.dtype) == ("constant", 5, np.dtype(np.float32))
    assert f.__name__ == "f"


def _line_of(func, text):
    import inspect

    lines, first = inspect.getsourcelines(func)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_non_constant_offset_names_kernel_line_and_fix():
    def shifty(x, k):
        return x[k, 0]

    with pytest.raises(sp.KernelError) as info:
        sp.stencil(shifty)
    message = str(info.value)
    assert "'shifty'" in message and "neighborhood=" in message
    assert f"test_analysis.py:{_line_of(shifty, 'x[k, 0]')}" in message


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("def f(x):\n    return x[0:2, 0]\n", "slice"),
        ("def f(x):\n    x[0, 0] = 1\n    return x[0, 0]\n", "writes to its input"),
        ("def f(t, x):\n    return x[0, 0] + t\n", "must come before scalar"),
        ("def f(x):\n    y = x[0, 0]\n", "never returns"),
        ("def f(x):\n    return x[0, 0] + x.shape[0]\n", "used other than by relative indexing"),
        ("def f(x):\n    return x[0, 0] + x[0]\n", "different numbers of indices"),
        ("def f(x, y):\n    return x + y\n", "none of its parameters is indexed"),
        ("def f(*xs):\n    return xs[0][0]\n", "*args"),
    ],
)
def test_unsupported_kernels_are_refused_at_decoration(tmp_path, source, fragment):
    path = tmp_path / "user_kernel.py"
    path.write_text(source)
    namespace = {}
    exec(compile(source, str(path), "exec"), namespace)
    with pytest.raises(sp.KernelError, match=re.escape(fragment)) as info:
        sp.stencil(namespace["f"])
    assert "'f'" in str(info.value) and "user_kernel.py:" in str(info.value)


def test_kernel_that_does_not_type_check_fails_at_first_call_with_its_line():
    @sp.stencil
    def broken(x):
        label = "a"
        return x[0, 0] + label

    with pytest.raises(sp.KernelError) as info:
        broken(np.zeros((4, 4), np.uint8))
    message = str(info.value)
    assert "'broken'" in message and "uint8" in message
    assert f":{_line_of(broken.func, 'return x[0, 0] + label')}" in message
    assert "Traceback" not in message


def test_unknown_boundary_mode_is_refused():
    with pytest.raises(sp.BoundaryError, match="expected one of reflect"):
        smooth(np.zeros((3, 3)), boundary="periodic")


def test_cval_that_the_input_dtype_cannot_hold_is_refused():
    with pytest.raises(sp.BoundaryError, match="cval=-1"):
        smooth(np.zeros((3, 3), np.uint8), boundary="constant", cval=-1)


def test_wrong_number_of_arguments_and_bad_scalars():
    with pytest.raises(TypeError, match="takes 2 to 2 arguments"):
        thresh(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="must be a number"):
        thresh(np.zeros((3, 3)), np.zeros(3))


def test_mismatched_core_shapes_and_too_few_dims():
    with pytest.raises(sp.KernelError, match="core shape"):
        diff(np.zeros((3, 3)), np.zeros((3, 4)))
    with pytest.raises(sp.KernelError, match="has 1 dimension"):
        smooth(np.zeros(5))


def test_unsupported_dtype_is_refused_with_the_fix():
    with pytest.raises(sp.KernelError, match=r"complex128.*astype"):
        smooth(np.zeros((3, 3), complex))


SCALE = np.float64(2.5)  # a float subclass whose repr names np, which kernels need not import


def test_a_numpy_scalar_constant_is_written_into_the_generated_module():
    @sp.stencil
    def scaled(x):
        return x[0, -1] * SCALE

    frame = np.arange(12.0).reshape(3, 4)
    want = np.pad(frame, 1, mode="symmetric")[1:-1, :-2] * 2.5
    np.testing.assert_array_equal(scaled(frame), want)
