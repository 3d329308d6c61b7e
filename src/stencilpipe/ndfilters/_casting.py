"""scipy.ndimage's dtype rules: what a filter reads, what it returns, how a double is stored.

scipy computes every filter in double and stores each result with a C cast
(``(npy_uint8)value``), which truncates toward zero and, for values out of the
output's range, does what x86-64 does: narrow integers (8, 16 and 32 bits)
go through a 32-bit conversion (out of range or NaN: ``INT32_MIN``) and keep
the low bits, so ``-5.0`` stored as uint8 is 251; uint32 goes through a 64-bit
conversion; int64 out of range or NaN is ``INT64_MIN``; uint64 converts values
from ``2**63`` up on their own path. :func:`store_lines` writes that cast as
kernel source, so the store of stencilpipe's compiler (round and saturate)
receives a value already in range and leaves it alone.

Inputs are read as scipy reads them (big-endian converted), plus what scipy
refuses but can be defined without doubt: bool is read as 0/1 and float16 is
computed in float32 and returned as float16. Complex inputs are filtered in
their parts (:mod:`._complex`).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..stencils.dtypes import SUPPORTED

__all__ = ["Dtypes", "complex_output", "resolve_dtypes", "store_lines", "as_compute_input"]

_INT32_MIN = -(2**31)
_INT64_MIN = -(2**63)


class Dtypes:
    """The dtypes of one filter call.

    Attributes
    ----------
    compute : numpy.dtype
        The dtype the input is read as (bool as uint8, float16 as float32).
    store : numpy.dtype
        The dtype every pass stores: scipy's output dtype, float32 for float16 (bool
        is stored as uint8 holding scipy's byte, nonzero for True: see :attr:`kernel_store`).
    output : numpy.dtype
        The dtype returned.
    """

    def __init__(self, compute: np.dtype, store: np.dtype, output: np.dtype):
        self.compute = compute
        self.store = store
        self.output = output

    @property
    def kernel_store(self) -> np.dtype:
        """The dtype the compiled kernels write."""
        return np.dtype(np.uint8) if self.store.kind == "b" else self.store


def _readable(dtype: np.dtype, what: str, name: str) -> np.dtype:
    """The native dtype a filter computes ``dtype`` values in, or a TypeError."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return np.dtype(np.uint8) if what == "input" else dtype
    if dtype.kind == "f" and dtype.itemsize == 2:
        return np.dtype(np.float32)
    native = dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype
    if native in SUPPORTED:
        return native
    raise TypeError(
        f"{name}: {what} dtype {dtype} is not supported; use bool, an integer type, "
        "float16, float32 or float64 (convert with .astype)"
    )


def complex_output(input_dtype: np.dtype, output: Any) -> np.dtype:
    """The dtype of a complex result (scipy's ``_get_output(..., complex_output=True)``)."""
    if output is None:
        return np.promote_types(input_dtype, np.complex64)
    if isinstance(output, (type, np.dtype)):
        wanted = np.dtype(output)
        if wanted.kind != "c":
            warnings.warn("promoting specified output dtype to complex", stacklevel=4)
            wanted = np.promote_types(wanted, np.complex64)
        return wanted
    wanted = np.dtype(output) if isinstance(output, str) else np.dtype(output.dtype)
    if wanted.kind != "c":
        raise RuntimeError("output must have complex dtype")
    return wanted


def resolve_dtypes(input_dtype: np.dtype, output: Any, name: str) -> Dtypes:
    """The dtypes of a call of filter ``name`` on ``input_dtype`` with scipy's ``output=``.

    ``output`` is None (the input's dtype), a dtype (or type, or string), or an
    array (its dtype). A complex input is filtered in its parts (:mod:`._complex`): all
    three dtypes are then the complex result's.
    """
    if np.dtype(input_dtype).kind == "c":
        wanted = complex_output(input_dtype, output)
        return Dtypes(wanted, wanted, wanted)
    compute = _readable(input_dtype, "input", name)
    if output is None:
        wanted = np.dtype(input_dtype)
    elif isinstance(output, str):
        wanted = np.dtype(output)
        if not issubclass(wanted.type, np.number):
            raise RuntimeError("output must have numeric dtype")
    elif isinstance(output, (type, np.dtype)):
        wanted = np.dtype(output)
    else:
        wanted = np.dtype(output.dtype)
    store = _readable(wanted, "output", name)
    return Dtypes(compute, store, wanted.newbyteorder("=") if wanted.byteorder == ">" else wanted)


def as_compute_input(array: Any, dtypes: Dtypes) -> Any:
    """``array`` converted to the dtype the kernels read (a no-op when it already is)."""
    return array if array.dtype == dtypes.compute else array.astype(dtypes.compute)


def _int64_lines(value: str, target: str) -> list[str]:
    """``target = (int64)value`` as x86-64 converts: truncation, INT64_MIN when out of range."""
    return [
        f"    if {value} >= -9223372036854775808.0 and {value} < 9223372036854775808.0:",
        f"        {target} = np.int64({value})",
        "    else:",
        f"        {target} = np.int64({_INT64_MIN})",
    ]


def store_lines(value: str, store: np.dtype) -> list[str]:
    """Kernel source (4-space indented) that returns float64 ``value`` as C stores it in ``store``.

    The returned value is within ``store``'s range, so the compiler's saturating
    store keeps it as it is.
    """
    store = np.dtype(store)
    if store.kind == "f":
        return [f"    return {value}"]
    if store.itemsize <= 2 or store == np.int32:
        # Through int32, not int64: AVX2 converts 4 doubles to int32 in one instruction,
        # and to int64 one by one (a 3-wide uint8 mean, 2048x2048, 1 thread: 6.0 -> 3.7 ms).
        lines = [
            f"    if {value} > -2147483649.0 and {value} < 2147483648.0:",
            f"        v = np.int32({value})",
            "    else:",
            f"        v = np.int32({_INT32_MIN})",
        ]
        # Truncated to the store's width (two's complement wrap-around, as C's cast). scipy's
        # bool output is an unsigned char: a pass stores the byte (-1.0 is 255), and the
        # next pass reads that byte as a number; nonzero is True at the end.
        kind = "uint" if store.kind in "ub" else "int"
        return lines + [f"    return np.{kind}{8 * store.itemsize}(v)"]
    if store == np.uint32:
        return _int64_lines(value, "v") + ["    return v & 4294967295"]
    if store == np.int64:
        return _int64_lines(value, "v") + ["    return v"]
    # uint64: values from 2**63 up convert on their own, the others as int64 and wrap.
    return [
        f"    if {value} >= 9223372036854775808.0:",
        f"        high = {value} - 9223372036854775808.0",
        "        if high < 9223372036854775808.0:",
        "            return np.uint64(np.int64(high)) ^ np.uint64(9223372036854775808)",
        "        return np.uint64(0)",
        *_int64_lines(value, "v"),
        "    return np.uint64(v)",
    ]
