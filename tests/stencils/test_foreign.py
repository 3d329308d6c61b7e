"""Arrays of other libraries through DLPack: PyTorch tensors in, PyTorch tensors out."""

import numpy as np
import pytest
from kernels import diff, smooth

import stencilpipe as sp

torch = pytest.importorskip("torch", reason="PyTorch is optional (not in the test extra): pip install torch to run these")


def test_a_tensor_in_gives_a_tensor_out_equal_to_the_numpy_result():
    tensor = torch.randint(0, 255, (3, 20, 30), dtype=torch.uint8)
    result = smooth(tensor)
    assert isinstance(result, torch.Tensor) and result.dtype == torch.uint8
    np.testing.assert_array_equal(result.numpy(), smooth(tensor.numpy()))


def test_out_tensor_is_written_in_place_and_returned():
    tensor = torch.randn(2, 16, 17, dtype=torch.float64)
    out = torch.zeros_like(tensor)
    assert sp.library.gaussian(1.0)(tensor, out=out) is out
    np.testing.assert_array_equal(out.numpy(), sp.library.gaussian(1.0)(tensor.numpy()))


def test_tensors_mix_with_numpy_arrays():
    a = torch.arange(20 * 21, dtype=torch.int32).reshape(20, 21)
    b = np.ones((20, 21), np.int32)
    result = diff(a, b)
    assert isinstance(result, torch.Tensor)
    np.testing.assert_array_equal(result.numpy(), diff(a.numpy(), b))
