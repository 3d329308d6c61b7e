"""Order keys: integers that sort as a dtype's values do, for loops that compare a lot.

A float's key is its bits as a signed integer with the magnitude bits flipped when the
sign is set, so integer order is the floats' order: ``-inf < -1 < -0.0 < 0.0 < 1 < inf``,
and every NaN (either sign, any payload) is one key above ``inf``, where ``np.sort``
puts NaN. An integer's key is the integer, widened. Every key lies strictly between
the key type's smallest and largest values, which are left free for sentinels
(:func:`key_bounds`).

:func:`order_key` and :func:`from_order_key` are plain Python; Numba compiles them
(``overload``) into the loops that use them, as :mod:`.store`'s helpers.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

__all__ = ["from_order_key", "key_bounds", "key_dtype", "order_key"]

#: The integer type of the same width as each float type, whose bits its keys are.
_BITS = {4: np.int32, 8: np.int64}


def key_dtype(dtype: np.dtype) -> np.dtype | None:
    """The key type of ``dtype``'s values: int32 for float32 and integers of up to 16 bits,
    int64 for float64 and 32-bit integers; None for the others (int64 and uint64 leave no
    room for sentinels, and no other dtype has an order loops need)."""
    if dtype.kind == "f" and dtype.itemsize in _BITS:
        return np.dtype(_BITS[dtype.itemsize])
    if dtype.kind in "iu" and dtype.itemsize <= 4:
        return np.dtype(np.int32 if dtype.itemsize <= 2 else np.int64)
    return None


def key_bounds(key: np.dtype) -> tuple[int, int]:
    """The smallest and largest values of key type ``key``: below and above every key."""
    info = np.iinfo(key)
    return int(info.min), int(info.max)


def _flip(bits: int, width: int) -> int:
    """``bits`` (signed, ``width`` bits) with the magnitude bits flipped where negative: its
    own inverse."""
    return bits ^ ((1 << (width - 1)) - 1) if bits < 0 else bits


def order_key(value, key):
    """The key of ``value`` (a NumPy scalar) in the key type ``key`` stands for (a type or a
    value of it); a float key type keeps the value (no ordering of its own)."""
    kind = key if isinstance(key, type) else type(key)
    if isinstance(value, np.floating) and not issubclass(kind, np.floating):
        if np.isnan(value):
            value = value.dtype.type(np.nan)
        bits = np.array(value).view(_BITS[value.itemsize])[()]
        return kind(_flip(int(bits), 8 * value.itemsize))
    return kind(value)


def from_order_key(key, value):
    """The value of type ``value`` stands for (a type or a value of it) whose key is ``key``."""
    kind = value if isinstance(value, type) else type(value)
    dtype = np.dtype(kind)
    if dtype.kind == "f" and not isinstance(key, np.floating):
        bits = _BITS[dtype.itemsize](_flip(int(key), 8 * dtype.itemsize))
        return np.array(bits).view(dtype)[()]
    return kind(key)


def _scalar(numba_type: types.Type) -> types.Type:
    """The Numba scalar type a type argument (a class or a value) stands for."""
    return numba_type.instance_type if isinstance(numba_type, types.NumberClass) else numba_type


@overload(order_key, target="generic")
def _order_key(value, key):
    kind = as_dtype(_scalar(key)).type
    if not isinstance(value, types.Float) or isinstance(_scalar(key), types.Float):
        return lambda value, key: kind(value)
    width = value.bitwidth
    bits, real = _BITS[width // 8], as_dtype(value).type
    shift, mask = bits(width - 1), bits((1 << (width - 1)) - 1)
    nan_key = kind(_flip(int(np.array(np.nan, f"f{width // 8}").view(bits)[()]), width))

    def impl(value, key):
        if value != value:
            return nan_key
        b = real(value).view(bits)
        return kind(b ^ ((b >> shift) & mask))

    return impl


@overload(from_order_key, target="generic")
def _from_order_key(key, value):
    out = _scalar(value)
    kind = as_dtype(out).type
    if not isinstance(out, types.Float) or isinstance(key, types.Float):
        return lambda key, value: kind(key)
    width = out.bitwidth
    bits = _BITS[width // 8]
    shift, mask = bits(width - 1), bits((1 << (width - 1)) - 1)

    def impl(key, value):
        b = bits(key ^ ((key >> shift) & mask))
        return b.view(kind)

    return impl
