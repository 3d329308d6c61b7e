"""The store: narrowing a kernel's wide result to the output dtype, shared by all targets."""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from .dtypes import store_bounds

__all__ = ["round_if_float", "store_function"]


def round_if_float(value):
    """Round a float to the nearest integer value (half to even); leave integers alone."""
    return np.rint(value) if isinstance(value, (float, np.floating)) else value


@overload(round_if_float, target="generic")
def _round_if_float(value):
    if isinstance(value, types.Float):
        return lambda value: np.rint(value)
    return lambda value: value


def store_function(out_dtype: np.dtype) -> str:
    """Source of ``_sp_store(v)``, which turns a wide result into ``out_dtype``."""
    bounds = store_bounds(out_dtype)
    if bounds is None:
        body = f"_sp_np.{out_dtype.name}(v)"
    else:
        lo, hi = bounds
        body = f"_sp_np.{out_dtype.name}(min(max(_sp_round(v), {lo}), {hi}))"
    return f"@device\ndef _sp_store(v):\n    return {body}\n"
