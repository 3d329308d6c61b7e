"""Dtype rules: what a kernel computes in, and how its result is stored.

Kernels compute in wide arithmetic whatever the input: every element read is
widened to ``int64`` (integers of up to 32 bits) or ``float64`` (floats, and
64-bit integers, whose sums int64 could not hold: exact up to 2**53, rounded
beyond), so ``x[0, 0] + x[0, 1]`` cannot wrap and float32 kernels give the same
result as the plain Python kernel would. The result is narrowed once, at the
store: integer outputs are rounded to nearest (float results) and saturated to
the output dtype's range (:mod:`.store`); float outputs are cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError

__all__ = ["SUPPORTED", "check_dtype", "wide_type_name", "result_dtype"]

SUPPORTED = tuple(
    np.dtype(t)
    for t in (
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "int8",
        "int16",
        "int32",
        "int64",
        "float32",
        "float64",
    )
)


def check_dtype(dtype: Any, what: str) -> np.dtype:
    """Return ``np.dtype(dtype)`` if kernels can read and write it."""
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED:
        raise KernelError(
            f"{what} has dtype {dtype}, which stencils do not support; "
            f"supported: {', '.join(str(d) for d in SUPPORTED)} (convert with .astype)"
        )
    return dtype


def wide_type_name(dtype: np.dtype) -> str:
    """The NumPy scalar type that elements of ``dtype`` are widened to when read."""
    return "float64" if dtype.kind == "f" or dtype.itemsize == 8 else "int64"


def result_dtype(input_dtypes: list[np.dtype], requested: Any = None) -> np.dtype:
    """Output dtype: ``requested`` if given, else the common type of the array inputs."""
    if requested is not None:
        return check_dtype(requested, "the requested output")
    return check_dtype(np.result_type(*input_dtypes), "the combined inputs")
