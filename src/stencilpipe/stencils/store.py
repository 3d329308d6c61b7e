"""The store: narrowing a kernel's wide result to the output dtype, shared by all targets.

Integer outputs saturate: a float result is rounded to nearest (half to even) and
clipped to the output's range, compared against the range's exact float bounds
(``2**63`` itself is the first float above int64's largest value, which has no
float); an integer result is clipped without going through float, so 64-bit
values stay exact. Float outputs are cast.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

__all__ = ["round_if_float", "saturate", "store_as", "store_function"]


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
    to : type
        A NumPy integer type (``np.uint8``, ...).
    """
    info = np.iinfo(to)
    if isinstance(value, (float, np.floating)):
        value = float(np.rint(value))
    return to(min(max(int(value), int(info.min)), int(info.max)))


@overload(saturate, target="generic")
def _saturate(value, to):
    out = to.instance_type
    info = np.iinfo(out.name)
    lo, hi = int(info.min), int(info.max)
    if isinstance(value, types.Float):
        top, bottom = float(hi + 1), float(lo)  # both exact: powers of two (or 0)

        def from_float(value, to):
            rounded = round_if_float(value)  # not np.rint: the CUDA target has no lowering of it
            if rounded >= top:
                return to(hi)
            if rounded < bottom:
                return to(lo)
            return to(rounded)

        return from_float
    if isinstance(value, types.Boolean):
        return lambda value, to: to(value)
    if not isinstance(value, types.Integer):
        return None
    if value.signed == out.signed and out.bitwidth >= value.bitwidth:
        return lambda value, to: to(value)
    if value.signed:
        if out.bitwidth == 64:  # uint64 holds every non-negative int64
            return lambda value, to: to(0) if value < 0 else to(value)
        # The bounds fit in int64, and so does the value.
        return lambda value, to: to(min(max(np.int64(value), lo), hi))
    top_unsigned = np.uint64(hi)
    return lambda value, to: to(hi) if np.uint64(value) > top_unsigned else to(value)


def store_as(value, to):
    """``value`` stored as NumPy type ``to``: saturated (:func:`saturate`) for an integer
    type, cast for a float or bool one."""
    if np.dtype(to).kind in "iu":
        return saturate(value, to)
    return to(value)


@overload(store_as, target="generic")
def _store_as(value, to):
    if isinstance(to.instance_type, types.Integer):
        return lambda value, to: saturate(value, to)
    return lambda value, to: to(value)


def store_function(out_dtype: np.dtype) -> str:
    """Source of ``_sp_store(v)``, which turns a wide result into ``out_dtype``."""
    if out_dtype.kind == "f":
        return f"@device\ndef _sp_store(v):\n    return _sp_np.{out_dtype.name}(v)\n"
    return (
        "from stencilpipe.stencils.store import saturate as _sp_saturate\n\n\n"
        f"@device\ndef _sp_store(v):\n    return _sp_saturate(v, _sp_np.{out_dtype.name})\n"
    )
