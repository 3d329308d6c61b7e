"""Dtype rules: what a kernel computes in, and how its result is stored.

Kernels compute in wide arithmetic whatever the input: every element read is
widened to ``int64`` (integers of up to 32 bits) or ``float64`` (floats, and
64-bit integers, whose sums int64 could not hold: exact up to 2**53, rounded
beyond), so ``x[0, 0] + x[0, 1]`` cannot wrap and float32 kernels give the same
result as the plain Python kernel would. The result is narrowed once, at the
store: integer outputs are rounded to nearest (float results) and saturated to
the output dtype's range (:mod:`.store`); float outputs are cast.

Where range analysis proves it exact, integer kernels compute narrower
(:func:`integer_accumulator`): a kernel of integer arithmetic on 8- or 16-bit
inputs whose every intermediate value fits ``int16`` (or ``int32``) computes in
that type, with 2-4x the SIMD lanes of ``int64`` and the same result. A float
kernel of converted reads (``float(x[-1]) + float(x[1])``, as scipy's correlations sum
the pairs of 8- and 16-bit data) adds them in that type and converts each sum once
(:func:`converted_accumulator`).
"""

from __future__ import annotations

import ast
from typing import Any, TypeGuard

import numpy as np

from ..errors import KernelError

__all__ = [
    "SUPPORTED",
    "check_dtype",
    "converted_accumulator",
    "exact_reciprocal",
    "integer_accumulator",
    "result_dtype",
    "wide_type_name",
]

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


def exact_reciprocal(divisor: int, bound: int) -> tuple[int, int]:
    """``(m, s)`` with ``(n * m) >> s == n // divisor`` for every ``0 <= n <= bound``.

    Granlund and Montgomery (1994), theorem 4.2: with ``N`` the bits of ``bound``,
    ``l = ceil(log2(divisor))`` and ``m = ceil(2**(N + l) / divisor)``, ``m * divisor``
    exceeds ``2**(N + l)`` by less than ``2**l``, which makes the quotient exact. Where
    ``m`` fits 32 bits (the caller checks), ``n * m`` is one packed 32x32->64-bit
    multiplication (LLVM does not vectorise a division by a 32-bit constant).
    """
    shift = bound.bit_length() + (divisor - 1).bit_length()
    return -(-(1 << shift) // divisor), shift


def wide_type_name(dtype: np.dtype) -> str:
    """The NumPy scalar type that elements of ``dtype`` are widened to when read."""
    return "float64" if dtype.kind == "f" or dtype.itemsize == 8 else "int64"


def result_dtype(input_dtypes: list[np.dtype], requested: Any = None) -> np.dtype:
    """Output dtype: ``requested`` if given, else the common type of the array inputs."""
    if requested is not None:
        return check_dtype(requested, "the requested output")
    return check_dtype(np.result_type(*input_dtypes), "the combined inputs")


#: Accumulators range analysis may choose, narrowest first.
ACCUMULATORS = tuple(np.dtype(t) for t in ("int16", "int32"))


class _Unknown(Exception):
    """The body does something range analysis does not follow."""


def array_read(node: ast.AST, arrays: dict[str, np.dtype]) -> str | None:
    """The name of the array of ``arrays`` whose element ``node`` reads (``x[...]``), or None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id in arrays
    ):
        return node.value.id
    return None


class _Ranges:
    """Interval of every value a straight-line integer kernel body computes."""

    def __init__(self, arrays: dict[str, np.dtype]):
        self.arrays = arrays
        self.locals: dict[str, tuple[int, int]] = {}
        self.lo, self.hi = 0, 0

    def seen(self, lo: int, hi: int) -> tuple[int, int]:
        self.lo, self.hi = min(self.lo, lo), max(self.hi, hi)
        return lo, hi

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Return) and node.value is not None:
            self.value(node.value)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            read = ast.Name(id=node.target.id, ctx=ast.Load())
            total = self.value(ast.BinOp(left=read, op=node.op, right=node.value))
            self.locals[node.target.id] = total
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                self.locals[target.id] = self.value(value)
            elif (
                isinstance(target, ast.Tuple)
                and isinstance(value, ast.Tuple)
                and len(target.elts) == len(value.elts)
                and all(isinstance(t, ast.Name) for t in target.elts)
            ):
                values = [self.value(v) for v in value.elts]
                names = [t.id for t in target.elts if isinstance(t, ast.Name)]
                self.locals.update(zip(names, values))
            else:
                raise _Unknown
        else:
            raise _Unknown

    def value(self, node: ast.expr) -> tuple[int, int]:
        return self.seen(*self._value(node))

    def _value(self, node: ast.expr) -> tuple[int, int]:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value, node.value
        if isinstance(node, ast.Name) and node.id in self.locals:
            return self.locals[node.id]
        if (array := array_read(node, self.arrays)) is not None:
            info = np.iinfo(self.arrays[array])
            return int(info.min), int(info.max)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            lo, hi = self.value(node.operand)
            return (lo, hi) if isinstance(node.op, ast.UAdd) else (-hi, -lo)
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max")
            and len(node.args) >= 2
            and not node.keywords
        ):
            bounds = [self.value(a) for a in node.args]
            pick = min if node.func.id == "min" else max
            return pick(b[0] for b in bounds), pick(b[1] for b in bounds)
        raise _Unknown

    def _binary(self, node: ast.BinOp) -> tuple[int, int]:
        (a, b), (c, d) = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.Add):
            return a + c, b + d
        if isinstance(node.op, ast.Sub):
            return a - d, b - c
        if isinstance(node.op, ast.Mult):
            products = (a * c, a * d, b * c, b * d)
            return min(products), max(products)
        if c == d and c > 0 and isinstance(node.op, ast.FloorDiv):
            return a // c, b // c
        if c == d and c > 0 and isinstance(node.op, ast.Mod):
            return 0, c - 1
        raise _Unknown


def is_conversion(node: ast.AST) -> TypeGuard[ast.Call]:
    """Whether ``node`` is ``float(value)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "float"
        and len(node.args) == 1
        and not node.keywords
    )


def converted_accumulator(body: list[ast.stmt], arrays: dict[str, np.dtype]) -> np.dtype | None:
    """``int32`` where it holds every value computed inside the conversions
    (``float(...)``) of ``body``, every read of ``arrays`` (8- or 16-bit integers) lies
    inside one, and each conversion's argument is integer arithmetic on reads and integer
    constants (as :func:`integer_accumulator` follows): the arithmetic there is then exact
    in ``int32``, and each converted value what ``int64`` gives. None otherwise.

    Not ``int16`` for 8-bit sums: LLVM then vectorises 16 lanes wide and the doubles
    spill (2048x2048 uint8, gaussian sigma 8 across rows, 1 thread: int32 44 ms, int16 55).
    """
    if not arrays or any(d.kind not in "iu" or d.itemsize > 2 for d in arrays.values()):
        return None
    conversions = [node for s in body for node in ast.walk(s) if is_conversion(node)]
    inside = {id(node) for c in conversions for node in ast.walk(c.args[0])}
    reads = [node for s in body for node in ast.walk(s) if array_read(node, arrays) is not None]
    if not conversions or any(id(read) not in inside for read in reads):
        return None
    ranges = _Ranges(arrays)
    try:
        for conversion in conversions:
            ranges.value(conversion.args[0])
    except _Unknown:
        return None
    int32 = np.dtype(np.int32)
    return int32 if np.iinfo(int32).min <= ranges.lo and ranges.hi <= np.iinfo(int32).max else None


def integer_accumulator(body: list[ast.stmt], arrays: dict[str, np.dtype]) -> np.dtype | None:
    """The narrowest of :data:`ACCUMULATORS` that holds every value ``body`` computes.

    ``body`` (loops unrolled) must be straight-line integer arithmetic (``+ - *``,
    ``//`` and ``%`` by a positive constant, ``min``/``max``) on reads of ``arrays``
    (name -> dtype, 8- or 16-bit integers), integer constants and its own locals: then
    every intermediate value lies in an interval computed from the inputs' ranges, and
    an accumulator that holds them all computes exactly what ``int64`` would. None when
    the body does anything else, or needs more than ``int32``.
    """
    if not arrays or any(d.kind not in "iu" or d.itemsize > 2 for d in arrays.values()):
        return None
    ranges = _Ranges(arrays)
    try:
        for statement in body:
            ranges.statement(statement)
    except _Unknown:
        return None
    return next(
        (t for t in ACCUMULATORS if np.iinfo(t).min <= ranges.lo and ranges.hi <= np.iinfo(t).max),
        None,
    )
