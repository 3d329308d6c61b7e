"""The store: narrowing a kernel's wide result to the output dtype, shared by all targets.

Integer outputs saturate: a float result is rounded to nearest (half to even) and
clipped to the output's range, compared against the range's exact float bounds
(``2**63`` itself is the first float above int64's largest value, which has no
float); an integer result is clipped without going through float, so 64-bit
values stay exact. Float outputs are cast.

The output type ``to`` is a NumPy type (``np.uint8``) or a value of it (``np.uint8(0)``):
Numba types a value without calling into Python, a class in ~6 us a call, which the
window loops, called once per piece of rows on each thread, would pay every time.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

__all__ = ["cast", "round_if_float", "saturate", "store_as", "store_function"]


def _python_type(to):
    """The NumPy type ``to`` stands for: itself, or a value's type."""
    return to if isinstance(to, type) else type(to)


def _numba_type(to: types.Type) -> types.Type:
    """The Numba scalar type ``to`` (a NumPy type's or a value's Numba type) stands for."""
    return to.instance_type if isinstance(to, types.NumberClass) else to


def cast(value, to):
    """``value`` converted to the NumPy type ``to`` stands for (C's cast)."""
    return _python_type(to)(value)


@overload(cast, target="generic")
def _cast(value, to):
    kind = as_dtype(_numba_type(to)).type
    return lambda value, to: kind(value)


def round_if_float(value):
    """Round a float to the nearest integer value (half to even); leave integers alone."""
    return np.rint(value) if isinstance(value, (float, np.floating)) else value


@overload(round_if_float, target="generic")
def _round_if_float(value):
    if isinstance(value, types.Float):
        return lambda value: np.rint(value)
    return lambda value: value


def saturate(value, to):
    """``value`` stored as integer type ``to``: rounded if a float, clipped to ``to``'s range.

    Parameters
    ----------
    value : int, float or bool
        A kernel's wide result.
    to : type or scalar
        A NumPy integer type (``np.uint8``, ...), or a value of it.
    """
    kind = _python_type(to)
    info = np.iinfo(kind)
    if isinstance(value, (float, np.floating)):
        value = float(np.rint(value))
    return kind(min(max(int(value), int(info.min)), int(info.max)))


@overload(saturate, target="generic")
def _saturate(value, to):
    out = _numba_type(to)
    kind = as_dtype(out).type
    info = np.iinfo(out.name)
    lo, hi = int(info.min), int(info.max)
    if isinstance(value, types.Float):
        top, bottom = float(hi + 1), float(lo)  # both exact: powers of two (or 0)

        def from_float(value, to):
            rounded = round_if_float(value)  # not np.rint: the CUDA target has no lowering of it
            if rounded >= top:
                return kind(hi)
            if rounded < bottom:
                return kind(lo)
            return kind(rounded)

        return from_float
    if isinstance(value, types.Boolean):
        return lambda value, to: kind(value)
    if not isinstance(value, types.Integer):
        return None
    if value.signed == out.signed and out.bitwidth >= value.bitwidth:
        return lambda value, to: kind(value)
    if value.signed:
        if out.bitwidth == 64:  # uint64 holds every non-negative int64
            return lambda value, to: kind(0) if value < 0 else kind(value)
        # The bounds fit in int64, and so does the value.
        return lambda value, to: kind(min(max(np.int64(value), lo), hi))
    top_unsigned = np.uint64(hi)
    return lambda value, to: kind(hi) if np.uint64(value) > top_unsigned else kind(value)


def store_as(value, to):
    """``value`` stored as NumPy type ``to``: saturated (:func:`saturate`) for an integer
    type, cast for a float or bool one (``to`` a type or a value of it)."""
    if np.dtype(_python_type(to)).kind in "iu":
        return saturate(value, to)
    return cast(value, to)


@overload(store_as, target="generic")
def _store_as(value, to):
    if isinstance(_numba_type(to), types.Integer):
        return lambda value, to: saturate(value, to)
    return lambda value, to: cast(value, to)


def store_function(out_dtype: np.dtype) -> str:
    """Source of ``_sp_store(v)``, which turns a wide result into ``out_dtype``."""
    if out_dtype.kind == "f":
        return f"@device\ndef _sp_store(v):\n    return _sp_np.{out_dtype.name}(v)\n"
    return (
        "from stencilpipe.stencils.store import saturate as _sp_saturate\n\n\n"
        f"@device\ndef _sp_store(v):\n    return _sp_saturate(v, _sp_np.{out_dtype.name})\n"
    )
