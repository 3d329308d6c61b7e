"""Arrays of other libraries (PyTorch, JAX, ...) through DLPack: in as views, out as their own type.

A tensor in host memory becomes a NumPy view, one on a GPU a CuPy view; the
stencil runs on that, and the result goes back through DLPack into the
caller's library (found with array-api-compat). No data is copied either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .cuda_apply import is_device_array
from .dask_apply import is_dask_array

__all__ = ["is_foreign", "to_native", "like"]

_DLPACK_CPU = 1


def is_foreign(value: Any) -> bool:
    """True for an array that only DLPack can bring in (not NumPy, Dask, CuPy or Numba)."""
    if isinstance(value, np.ndarray) or is_dask_array(value) or not hasattr(value, "__dlpack__"):
        return False
    library = type(value).__module__.partition(".")[0]
    return not (library in ("cupy", "numba") and is_device_array(value))


def to_native(value: Any) -> Any:
    """A NumPy (host) or CuPy (device) view of a DLPack array; other values unchanged."""
    if not is_foreign(value):
        return value
    device_type = value.__dlpack_device__()[0]
    if device_type == _DLPACK_CPU:
        return np.from_dlpack(value)
    import cupy

    return cupy.from_dlpack(value)


def like(result: Any, template: Any) -> Any:
    """``result`` as an array of ``template``'s library (through DLPack, no copy)."""
    from array_api_compat import array_namespace

    return array_namespace(template).from_dlpack(result)
