"""Rewrite a kernel into target-neutral point functions.

The kernel ``x[-1, 0] + x[0, 1]`` becomes two functions of the array(s), the
scalars and the centre index ``(i0, i1, ...)``:

* ``_sp_interior``: ``x[i0 - 1, i1]`` read directly, for points whose whole
  neighbourhood lies inside the array;
  It is decorated ``inlined``: the target must inline it into the row loop
  whatever its size, or the row loop cannot vectorise;
* ``_sp_border``: reads through ``_sp_load_x``, which folds indices back into
  the array (or returns ``cval``) according to the boundary mode, an argument
  (its code, :data:`.boundary.MODE_CODES`): one module serves every mode.

Every read is widened (:mod:`.dtypes`), unless the kernel only selects among
the values it reads (min, max, comparisons: a median or a dilation): nothing can
overflow then, and narrow reads vectorise with 4-8x more SIMD lanes (uint8:
32 per AVX2 vector instead of 4). The output is Python source that the
CPU and CUDA generators both decorate with their own ``device`` decorator, so
the two targets share everything but the loop nest.
"""

from __future__ import annotations

import ast
import copy
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .analysis import KernelInfo, index_interval
from .compile_lock import compile_lock
from .dtypes import converted_accumulator, integer_accumulator, is_conversion, wide_type_name
from .store import store_function
from .unroll import unroll_constant_loops

__all__ = [
    "PointSource",
    "assemble_module",
    "index_names",
    "point_functions",
    "resolve_free_names",
]

#: Largest global/closure array written into generated source (bigger ones are passed by object).
_MAX_INLINE_ARRAY = 1 << 16


def index_names(ndim: int, prefix: str = "_sp_i") -> list[str]:
    """Names of the centre-index variables, ``_sp_i0, _sp_i1, ...``."""
    return [f"{prefix}{d}" for d in range(ndim)]


@dataclass
class PointSource:
    """Generated source and the map from its lines back to the kernel's lines."""

    source: str
    line_map: dict[int, int] = field(default_factory=dict)


class _AccessRewriter(ast.NodeTransformer):
    """Replace ``x[a, b]`` by a read at the centre plus ``(a, b)``."""

    def __init__(self, info: KernelInfo, wide: dict[str, str], border: bool):
        self.info = info
        self.wide = wide
        self.border = border
        self.centre = index_names(info.ndim)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.value, ast.Name) and node.value.id in self.info.array_params):
            return node
        array = node.value.id
        indices = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        shifted: list[ast.expr] = [
            ast.BinOp(left=ast.Name(id=c, ctx=ast.Load()), op=ast.Add(), right=index)
            for c, index in zip(self.centre, indices)
        ]
        if self.border:
            call = ast.Call(
                func=ast.Name(id=f"_sp_load_{array}", ctx=ast.Load()),
                args=[
                    ast.Name(id=array, ctx=ast.Load()),
                    *shifted,
                    ast.Name(id=f"_sp_cval_{array}", ctx=ast.Load()),
                    ast.Name(id="_sp_mode", ctx=ast.Load()),
                ],
                keywords=[],
            )
            return ast.copy_location(call, node)
        read = ast.Subscript(
            value=ast.Name(id=array, ctx=ast.Load()),
            slice=ast.Tuple(elts=shifted, ctx=ast.Load()),
            ctx=ast.Load(),
        )
        widen = ast.Call(
            func=ast.Attribute(
                value=ast.Name(id="_sp_np", ctx=ast.Load()), attr=self.wide[array], ctx=ast.Load()
            ),
            args=[read],
            keywords=[],
        )
        return ast.copy_location(widen, node)


def _statement_line_map(
    transformed: list[ast.stmt], generated_src: str, offset: int
) -> dict[int, int]:
    """Map generated line numbers to kernel-relative line numbers, statement by statement.

    ``transformed`` statements still carry the kernel's line numbers; parsing
    the generated source back gives the same statements in the same order.
    """
    with compile_lock:  # ast.parse is not thread-safe (see .compile_lock)
        generated = ast.parse(generated_src).body[0]
    assert isinstance(generated, ast.FunctionDef)
    ours = [n for s in generated.body for n in ast.walk(s) if isinstance(n, ast.stmt)]
    theirs = [n for s in transformed for n in ast.walk(s) if isinstance(n, ast.stmt)]
    return {g.lineno + offset: t.lineno for g, t in zip(ours, theirs)}


class _HoistReads(ast.NodeTransformer):
    """Replace each read at a constant offset by a local, read once at the top.

    LLVM vectorises ``best = min(best, x[i - 1, j])`` only when the read is a local
    of its own (measured: a 3x3 uint8 minimum took 15 ms with reads inline, 0.9 ms
    hoisted); a read used twice is also read once. In the interior every constant
    offset lies inside the array, so reading it unconditionally is safe.
    """

    def __init__(self, arrays: tuple[str, ...]):
        self.arrays = arrays
        self.reads: dict[tuple[str, tuple[int, ...]], ast.Assign] = {}

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.value, ast.Name) and node.value.id in self.arrays):
            return node
        indices = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        bounds = [index_interval(index, {}, {}) for index in indices]
        if any(b is None or b[0] != b[1] for b in bounds):
            return node
        key = (node.value.id, tuple(b[0] for b in bounds))  # type: ignore[index]
        if key not in self.reads:
            local = ast.Name(id=f"_sp_r{len(self.reads)}", ctx=ast.Store())
            read = ast.Assign(targets=[local], value=copy.deepcopy(node))
            self.reads[key] = ast.copy_location(read, node)
        name = self.reads[key].targets[0].id  # type: ignore[attr-defined]
        return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node)


class _Narrow(ast.NodeTransformer):
    """Keep integer arithmetic in the accumulator ``type_name`` (see
    :func:`~.dtypes.integer_accumulator`, which proved every value fits it).

    Numba widens ``int16 + int16`` to ``int64``; a cast of each result back to the
    accumulator lets LLVM compute in it (``trunc(add(sext a, sext b))`` is an
    ``int16`` add), and a cast of each assigned constant keeps locals in it.
    """

    def __init__(self, type_name: str):
        self.type_name = type_name

    def cast(self, node: ast.expr) -> ast.expr:
        to = ast.Attribute(value=ast.Name(id="_sp_np", ctx=ast.Load()), attr=self.type_name)
        return ast.copy_location(ast.Call(func=to, args=[node], keywords=[]), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        return self.cast(self.generic_visit(node))  # type: ignore[arg-type]

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.operand, ast.Constant):  # a literal such as -1
            return node
        return self.cast(self.generic_visit(node))  # type: ignore[arg-type]

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        return node  # offsets stay as written

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        assert isinstance(node.target, ast.Name)  # kernels assign to names only
        read = ast.Name(id=node.target.id, ctx=ast.Load())
        total = self.visit(ast.copy_location(ast.BinOp(read, node.op, node.value), node))
        return ast.copy_location(ast.Assign(targets=[node.target], value=total), node)

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        self.generic_visit(node)
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        for k, value in enumerate(values):
            if isinstance(value, ast.Constant):
                values[k] = self.cast(value)
        if not isinstance(node.value, ast.Tuple):
            node.value = values[0]
        return node


class _MergeConversions(ast.NodeTransformer):
    """``float(a) + float(b)`` -> ``float(a + b)`` (and ``-``), inside out: one conversion
    of an integer sum where there were two and a float addition (AVX2 converts int32 to
    double four lanes at a time, int64 one by one). Exact where
    :func:`~.dtypes.converted_accumulator` then proves the sums fit an accumulator: both
    sides are exact integers, and so is their double sum below 2**53."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        left, right = node.left, node.right
        if isinstance(node.op, (ast.Add, ast.Sub)) and is_conversion(left) and is_conversion(right):
            total = ast.copy_location(ast.BinOp(left.args[0], node.op, right.args[0]), node)
            return ast.copy_location(ast.Call(func=left.func, args=[total], keywords=[]), node)
        return node


class _NarrowConversions(ast.NodeTransformer):
    """:class:`_Narrow` the arguments of the conversions (``float(...)``) only."""

    def __init__(self, type_name: str):
        self.narrow = _Narrow(type_name)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if is_conversion(node):
            node.args = [self.narrow.visit(node.args[0])]
            return node
        return self.generic_visit(node)


def _narrowed(body: list[ast.stmt], arrays: dict[str, np.dtype]) -> tuple[list, np.dtype | None]:
    """``body`` computing in the accumulator range analysis proves exact, and that
    accumulator (None: ``body`` as it is, computing wide): a body of integer arithmetic
    (:func:`~.dtypes.integer_accumulator`), or one whose converted reads add in it
    (:func:`~.dtypes.converted_accumulator`)."""
    narrow = integer_accumulator(body, arrays)
    if narrow is not None:
        return [_Narrow(narrow.name).visit(s) for s in body], narrow
    merged = [_MergeConversions().visit(copy.deepcopy(s)) for s in body]
    narrow = converted_accumulator(merged, arrays)
    if narrow is not None:
        return [_NarrowConversions(narrow.name).visit(s) for s in merged], narrow
    return body, None


def _hoist_reads(body: list[ast.stmt], arrays: tuple[str, ...]) -> list[ast.stmt]:
    hoist = _HoistReads(arrays)
    rest = [hoist.visit(copy.deepcopy(s)) for s in body]
    return [*hoist.reads.values(), *rest]


def _point_function(
    info: KernelInfo,
    body: list[ast.stmt],
    name: str,
    params: list[str],
    wide: dict[str, str],
    border: bool,
    offset: int,
) -> PointSource:
    if not border:
        body = _hoist_reads(body, info.array_params)
    body = [_AccessRewriter(info, wide, border).visit(copy.deepcopy(s)) for s in body]
    fn = ast.FunctionDef(
        name=name,
        args=ast.arguments(
            posonlyargs=[],
            args=[ast.arg(arg=p) for p in params],
            kwonlyargs=[],
            kw_defaults=[],
            defaults=[],
        ),
        body=body,
        decorator_list=[ast.Name(id="inlined" if not border else "device", ctx=ast.Load())],
        returns=None,
        **_TYPE_PARAMS,
    )
    ast.fix_missing_locations(fn)
    source = ast.unparse(fn)
    return PointSource(source, _statement_line_map(body, source, offset))


#: Python 3.12's function nodes have ``type_params``, which its unparser reads; older ones none.
_TYPE_PARAMS: dict[str, Any] = {"type_params": []} if sys.version_info >= (3, 12) else {}


def _load_function(array: str, ndim: int, wide: str) -> str:
    """``_sp_load_<array>``: the read at ``(j0, ...)`` folded by the mode of code
    ``_sp_mode``, or ``cval`` (see :func:`.boundary.fold`)."""
    js = index_names(ndim, "_sp_j")
    ks = index_names(ndim, "_sp_k")
    args = ", ".join([array, *js, "_sp_cval", "_sp_mode"])
    lines = ["@device", f"def _sp_load_{array}({args}):"]
    lines += [
        f"    {k} = _sp_fold({j}, {array}.shape[{d}], _sp_mode)"
        for d, (j, k) in enumerate(zip(js, ks))
    ]
    lines += [
        f"    if {' or '.join(f'{k} < 0' for k in ks)}:",
        f"        return _sp_np.{wide}(_sp_cval)",
        f"    return _sp_np.{wide}({array}[{', '.join(ks)}])",
    ]
    return "\n".join(lines)


def point_functions(
    info: KernelInfo,
    env: dict[str, Any],
    in_dtypes: tuple[np.dtype, ...],
    first_line: int,
) -> PointSource:
    """Source of the interior, load and border functions for one specialisation.

    Parameters
    ----------
    info : KernelInfo
        The analysed kernel.
    env : dict
        The kernel's globals and closure values (for constant loop bounds).
    in_dtypes : tuple of numpy.dtype
        One per array parameter.
    first_line : int
        Line number the returned source will start at in its module (for the line map).
    """
    body = unroll_constant_loops(info.body, env)
    if selects_only(body, info.array_params):
        wide = {a: d.name for a, d in zip(info.array_params, in_dtypes)}
    else:
        body, narrow = _narrowed(body, dict(zip(info.array_params, in_dtypes)))
        wide = {
            a: narrow.name if narrow is not None else wide_type_name(d)
            for a, d in zip(info.array_params, in_dtypes)
        }
    centre = index_names(info.ndim)
    scalars = list(info.scalar_params)
    arrays = list(info.array_params)
    cvals = [f"_sp_cval_{a}" for a in arrays]
    chunks: list[str] = []
    line_map: dict[int, int] = {}

    def add(text: str, mapped: dict[int, int] | None = None) -> None:
        if mapped:
            line_map.update(mapped)
        chunks.append(text)

    def next_line() -> int:
        return first_line + sum(c.count("\n") + 2 for c in chunks)

    interior = _point_function(
        info, body, "_sp_interior", arrays + scalars + centre, wide, False, next_line() - 1
    )
    add(interior.source, interior.line_map)
    for array in arrays:
        add(_load_function(array, info.ndim, wide[array]))
    border = _point_function(
        info,
        body,
        "_sp_border",
        [*arrays, *scalars, *cvals, "_sp_mode", *centre],
        wide,
        True,
        next_line() - 1,
    )
    add(border.source, border.line_map)
    return PointSource("\n\n".join(chunks) + "\n", line_map)


#: Expressions that pass values on without computing new ones (see :func:`selects_only`).
_SELECTING = (
    ast.Name,
    ast.Constant,
    ast.Tuple,
    ast.Compare,
    ast.BoolOp,
    ast.IfExp,
    ast.Load,
    ast.Store,
    ast.cmpop,
    ast.boolop,
    ast.Assign,
    ast.Return,
    ast.If,
)


def selects_only(body: list[ast.stmt], arrays: tuple[str, ...]) -> bool:
    """True when ``body`` (loops unrolled) only reads, compares and picks values.

    Reads of ``arrays``, ``min``/``max`` calls, comparisons, conditionals and
    assignments; no arithmetic (``-x[0]`` on uint8 would wrap), no other call.
    Such a kernel's result is one of the values it read (or a constant), so its
    reads need no widening.
    """

    def selecting(node: ast.AST) -> bool:
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Name) and node.value.id in arrays
        if isinstance(node, ast.Call):
            calls_min_max = isinstance(node.func, ast.Name) and node.func.id in ("min", "max")
            return calls_min_max and not node.keywords and all(map(selecting, node.args))
        return isinstance(node, _SELECTING) and all(
            selecting(child) for child in ast.iter_child_nodes(node)
        )

    return all(selecting(statement) for statement in body)


def source_literal(value: Any) -> str | None:
    """Source that rebuilds ``value``, or None when it cannot be written as source."""
    # NumPy scalars first: np.float64 is a float, and its repr (np.float64(5.0)) names np.
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return f"_sp_np.{value.dtype.name}({value.item()!r})"
    if isinstance(value, (bool, int, float, complex)):
        return repr(value)
    if (
        isinstance(value, np.ndarray)
        and value.dtype.kind in "biuf"
        and value.size <= _MAX_INLINE_ARRAY
    ):
        return f"_sp_np.array({value.tolist()!r}, dtype=_sp_np.{value.dtype.name})"
    # NumPy's own functions (np.max, np.std: generic_filter's usual functions) by name, so
    # that a module calling one is cached on disk like any other.
    name = getattr(value, "__name__", None)
    if isinstance(name, str) and getattr(np, name, None) is value:
        return f"_sp_np.{name}"
    return None


def resolve_free_names(info: KernelInfo, env: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Turn the kernel's free names into module source (imports, literals) or objects.

    Returns
    -------
    prelude : str
        Source lines defining each name that can be written as source.
    injected : dict
        Objects that cannot (large arrays, functions but NumPy's): they must be placed
        in the module's namespace, and the module cannot be cached on disk.
    """
    lines: list[str] = []
    injected: dict[str, Any] = {}
    for name in sorted(info.free_names):
        if name not in env:
            continue  # Numba reports the undefined name with its line.
        value = env[name]
        if isinstance(value, types.ModuleType):
            module = value.__name__
            lines.append(f"import {module} as {name}")
            continue
        literal = source_literal(value)
        if literal is None:
            injected[name] = value
        else:
            lines.append(f"{name} = {literal}")
    return "\n".join(lines), injected


def assemble_module(
    header: str,
    driver: str,
    info: KernelInfo,
    env: dict[str, Any],
    in_dtypes: tuple[np.dtype, ...],
    out_dtype: np.dtype,
    prelude: str,
) -> PointSource:
    """A target's module: its ``header`` (which defines ``device`` and ``inlined``), the fold
    function, the kernel's free names, the point functions, the store, and the target's
    ``driver`` (the loop nest or grid kernel named ``apply``)."""
    head = header + "_sp_fold = device(_sp_boundary.fold)\n" + prelude + "\n\n"
    points = point_functions(info, env, in_dtypes, head.count("\n") + 1)
    text = head + points.source + "\n\n" + store_function(out_dtype) + "\n\n" + driver
    return PointSource(text, points.line_map)
