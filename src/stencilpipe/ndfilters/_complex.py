"""Complex input and weights, as scipy computes them: real filters of the real and imaginary parts.

scipy's correlate and convolve (N-D and 1-D) and uniform filters take complex input,
and so do the filters built on them (gaussian, sobel, prewitt, laplace,
gaussian_laplace, gaussian_gradient_magnitude): each part is filtered on its own,
with the matching part of ``cval``, into the real type of the complex output
(float32 for complex64), and complex weights combine four real filters (scipy's
``_complex_via_real_components``). Order statistics and generic filters refuse
complex input, as scipy does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np

from ..stencils.dask_apply import is_dask_array
from ._apply import finish
from ._casting import Dtypes, complex_output

__all__ = ["is_complex", "via_parts"]


def is_complex(value: Any) -> bool:
    """Whether an array (or weights, or a dtype's holder) is complex."""
    return np.dtype(getattr(value, "dtype", np.result_type(value))).kind == "c"


def _combine(real: Any, imag: Any, dtype: np.dtype) -> Any:
    if is_dask_array(real) or is_dask_array(imag):
        return da.map_blocks(_combine, real, imag, dtype, dtype=dtype)
    result = np.empty_like(real, dtype=dtype)  # CuPy's for CuPy parts
    result.real = real
    result.imag = imag
    return result


def via_parts(
    part: Callable[[Any, Any, np.dtype, Any], Any],
    array: Any,
    weights: Any,
    output: Any,
    cval: Any,
) -> Any:
    """scipy's complex filter from real ones: ``part(values, weights, dtype, cval)`` filters
    real ``values`` with real ``weights`` (None: the filter has its own) into ``dtype``.

    Returns the complex result, written into ``output`` when it is an array.
    """
    dtype = complex_output(array.dtype, output)
    real = np.empty((), dtype).real.dtype
    if is_complex(array) and weights is not None and is_complex(weights):
        first = part(array.real, weights.real, real, np.real(cval))
        second = part(array.imag, weights.imag, array.imag.dtype, np.imag(cval))
        re = (first - second).astype(real)
        first = part(array.real, weights.imag, real, np.real(cval))
        second = part(array.imag, weights.real, array.imag.dtype, np.imag(cval))
        im = (first + second).astype(real)
    elif is_complex(array):
        re = part(array.real, weights, real, np.real(cval))
        im = part(array.imag, weights, real, np.imag(cval))
    else:
        if np.iscomplexobj(cval):
            raise ValueError("Cannot provide a complex-valued cval when the input is real.")
        re = part(array, weights.real, real, cval)
        im = part(array, weights.imag, real, cval)
    return finish(_combine(re, im, dtype), Dtypes(dtype, dtype, dtype), output)
