"""Read a kernel's source and work out what it touches: its arrays, offsets and halo.

A kernel is a plain ``def`` whose leading parameters are arrays indexed with
*relative* offsets (``x[-1, 0]``) and whose trailing parameters are scalars.
Offsets are constants, or expressions of loop variables over ``range`` with
constant bounds, or anything inside a declared ``neighborhood``. This module
only reads; code generation lives in :mod:`.codegen_cpu`.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import KernelError
from .compile_lock import compile_lock

__all__ = ["KernelInfo", "analyse_kernel", "kernel_env", "index_interval", "range_arguments"]

Interval = tuple[int, int]


@dataclass(frozen=True)
class KernelInfo:
    """What analysis found in a kernel.

    Attributes
    ----------
    name, filename, lineno
        Where the kernel was written (for error messages).
    array_params, scalar_params
        Parameter names, arrays first.
    scalar_defaults
        Default values of the scalar parameters that have one.
    ndim
        Number of core dimensions (indices per array access).
    halo
        ``((before, after), ...)`` per core dimension.
    body
        The kernel's statements (parsed, unmodified).
    free_names
        Names the body reads that are neither parameters nor locals.
    """

    name: str
    filename: str
    lineno: int
    array_params: tuple[str, ...]
    scalar_params: tuple[str, ...]
    scalar_defaults: dict[str, Any]
    ndim: int
    halo: tuple[Interval, ...]
    body: tuple[ast.stmt, ...]
    free_names: frozenset[str]

    def where(self, node: ast.AST | None = None) -> str:
        """``file:line`` of the kernel, or of ``node`` inside it."""
        return _where(self.filename, self.lineno, node)


def _where(filename: str, first_line: int, node: ast.AST | None) -> str:
    line = first_line + (getattr(node, "lineno", 1) - 1 if node is not None else 0)
    return f"{filename}:{line}"


def _parse(func: Callable[..., Any]) -> ast.FunctionDef:
    name = getattr(func, "__name__", repr(func))
    try:
        source = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError) as exc:
        raise KernelError(
            f"kernel {name!r}: its source cannot be read ({exc}); define it with `def` "
            "in a file or notebook cell, not with exec or in an interactive prompt"
        ) from None
    with compile_lock:  # ast.parse is not thread-safe (see .compile_lock)
        tree = ast.parse(source)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef):
        raise KernelError(f"kernel {name!r}: a stencil must be a plain `def` function")
    return node


def index_interval(
    node: ast.expr, loops: dict[str, Interval], env: dict[str, Any]
) -> Interval | None:
    """Smallest and largest value an index expression can take, or None if unknown.

    ``loops`` maps loop variables to their ranges; ``env`` holds the kernel's
    global and closure values, so ``r`` in ``range(-r, r + 1)`` is known.
    """
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return (node.value, node.value)
    if isinstance(node, ast.Name):
        if node.id in loops:
            return loops[node.id]
        value: Any = env.get(node.id)
        if isinstance(value, int) and not isinstance(value, bool):
            return (value, value)
        if (
            hasattr(value, "dtype")
            and getattr(value, "shape", None) == ()
            and value.dtype.kind in "iu"
        ):
            return (int(value), int(value))
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = index_interval(node.operand, loops, env)
        if inner is None:
            return None
        return (-inner[1], -inner[0]) if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        left = index_interval(node.left, loops, env)
        right = index_interval(node.right, loops, env)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Add):
            return (left[0] + right[0], left[1] + right[1])
        if isinstance(node.op, ast.Sub):
            return (left[0] - right[1], left[1] - right[0])
        products = [a * b for a in left for b in right]
        return (min(products), max(products))
    return None


def range_arguments(node: ast.For) -> list[ast.expr] | None:
    """The arguments of ``for name in range(...)``, or None for any other loop."""
    call = node.iter
    if (
        isinstance(node.target, ast.Name)
        and isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "range"
        and not call.keywords
        and 1 <= len(call.args) <= 3
    ):
        return call.args
    return None


def _range_interval(
    node: ast.For, loops: dict[str, Interval], env: dict[str, Any]
) -> Interval | None:
    """The values a ``for v in range(...)`` loop variable takes, if its bounds are known."""
    arguments = range_arguments(node)
    if arguments is None:
        return None
    bounds = [index_interval(arg, loops, env) for arg in arguments]
    if any(b is None for b in bounds):
        return None
    if len(bounds) == 1:
        bounds.insert(0, (0, 0))
    (start_lo, start_hi), (stop_lo, stop_hi) = bounds[0], bounds[1]  # type: ignore[misc]
    step = bounds[2] if len(bounds) == 3 else (1, 1)
    if step != (1, 1):
        # Any step: the values still lie between start and stop.
        return (min(start_lo, stop_lo), max(start_hi, stop_hi))
    return (start_lo, stop_hi - 1)


class _Scanner(ast.NodeVisitor):
    """Walks the body once, collecting array accesses and checking how arrays are used."""

    def __init__(self, func_name: str, params: list[str], env: dict[str, Any], where):
        self.func_name = func_name
        self.params = params
        self.env = env
        self.where = where
        self.loops: dict[str, Interval] = {}
        self.accesses: dict[str, list[tuple[ast.Subscript, list[Interval | None]]]] = {}
        self.stored: set[str] = set()
        self.loaded: set[str] = set()
        self.has_return = False

    def fail(self, node: ast.AST, what: str, fix: str) -> KernelError:
        return KernelError(f"kernel {self.func_name!r} ({self.where(node)}): {what}; {fix}")

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        interval = _range_interval(node, self.loops, self.env)
        name = node.target.id if isinstance(node.target, ast.Name) else None
        saved = self.loops.get(name) if name else None
        if name is not None and interval is not None:
            self.loops[name] = interval
        for stmt in node.body + node.orelse:
            self.visit(stmt)
        if name is not None:
            if saved is None:
                self.loops.pop(name, None)
            else:
                self.loops[name] = saved

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is None:
            raise self.fail(node, "`return` without a value", "return the new value of the element")
        self.has_return = True
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        target = node.value
        if not (isinstance(target, ast.Name) and target.id in self.params):
            self.generic_visit(node)
            return
        if not isinstance(node.ctx, ast.Load):
            raise self.fail(
                node, f"it writes to its input `{target.id}`", "return the new value instead"
            )
        indices = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        for index in indices:
            if isinstance(index, (ast.Slice, ast.Starred)):
                raise self.fail(
                    node,
                    f"`{ast.unparse(node)}` takes a slice",
                    "index single elements by relative offset, e.g. x[-1, 0]",
                )
            self.visit(index)
        intervals = [index_interval(index, self.loops, self.env) for index in indices]
        self.accesses.setdefault(target.id, []).append((node, intervals))

    def visit_Name(self, node: ast.Name) -> None:
        (self.stored if isinstance(node.ctx, ast.Store) else self.loaded).add(node.id)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        raise self.fail(node, "it contains a lambda", "write the expression inline")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        raise self.fail(node, "it defines a nested function", "move the helper out of the kernel")


def kernel_env(func: Callable[..., Any]) -> dict[str, Any]:
    """The values of the names a kernel can see: its module's globals and its closure."""
    env = dict(getattr(func, "__globals__", {}))
    closure = inspect.getclosurevars(func)
    env.update(closure.nonlocals)
    return env


def _split_params(func_name: str, fn: ast.FunctionDef, where) -> list[str]:
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
        raise KernelError(
            f"kernel {func_name!r} ({where(fn)}): *args, **kwargs, keyword-only and "
            "positional-only parameters are not supported; list the arrays, then the scalars"
        )
    return [a.arg for a in args.args]


def _bare_array_uses(body: list[ast.stmt], arrays: set[str]) -> ast.Name | None:
    """The first place an array parameter is used other than by ``x[...]``."""
    indexed: set[int] = set()
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            indexed.add(id(node.value))
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, ast.Name) and node.id in arrays and id(node) not in indexed:
            return node
    return None


def analyse_kernel(
    func: Callable[..., Any],
    neighborhood: tuple[Interval, ...] | None = None,
) -> KernelInfo:
    """Parse ``func`` and infer its arrays, scalars, dimensionality and halo.

    Parameters
    ----------
    func : callable
        The kernel, a plain ``def``.
    neighborhood : tuple of (int, int), optional
        Declared index range per dimension, as in ``numba.stencil``; needed
        only when offsets are not constant or loops over ``range`` with
        constant bounds.

    Returns
    -------
    KernelInfo

    Raises
    ------
    KernelError
        With the kernel's name, the line and what to change.
    """
    fn = _parse(func)
    name = fn.name
    filename = inspect.getsourcefile(func) or "<unknown>"
    first_line = inspect.getsourcelines(func)[1]

    # The parsed tree starts at the decorators; line 1 of the tree is first_line.
    def where(node: ast.AST | None = None) -> str:
        return _where(filename, first_line, node)

    params = _split_params(name, fn, where)
    env = kernel_env(func)
    scanner = _Scanner(name, params, env, where)
    for stmt in fn.body:
        scanner.visit(stmt)
    if not scanner.has_return:
        raise KernelError(
            f"kernel {name!r} ({where(fn)}): it never returns a value; "
            "a stencil returns the new value of one element, e.g. `return x[0, -1] + x[0, 1]`"
        )
    arrays = [p for p in params if p in scanner.accesses]
    if not arrays:
        raise KernelError(
            f"kernel {name!r} ({where(fn)}): none of its parameters is indexed; "
            "index the input by relative offsets, e.g. `x[-1, 0]`"
        )
    first_scalar = next((i for i, p in enumerate(params) if p not in scanner.accesses), len(params))
    if any(p in scanner.accesses for p in params[first_scalar:]):
        raise KernelError(
            f"kernel {name!r} ({where(fn)}): array parameters must come before scalar ones "
            f"(got {', '.join(params)}); reorder the parameters"
        )
    misuse = _bare_array_uses(fn.body, set(arrays))
    if misuse is not None:
        raise KernelError(
            f"kernel {name!r} ({where(misuse)}): the array `{misuse.id}` is used other than by "
            f"relative indexing; a stencil reads single elements such as `{misuse.id}[0, 0]`"
        )

    ndims = {len(iv) for uses in scanner.accesses.values() for _, iv in uses}
    if len(ndims) != 1:
        node = scanner.accesses[arrays[0]][0][0]
        raise KernelError(
            f"kernel {name!r} ({where(node)}): arrays are indexed with different numbers of "
            f"indices ({sorted(ndims)}); use one index per dimension everywhere"
        )
    ndim = ndims.pop()
    if neighborhood is not None:
        neighborhood = tuple((int(lo), int(hi)) for lo, hi in neighborhood)
        if len(neighborhood) != ndim or any(lo > hi for lo, hi in neighborhood):
            raise KernelError(
                f"kernel {name!r}: neighborhood={neighborhood!r} must give (low, high) with "
                f"low <= high for each of its {ndim} dimensions"
            )
    lows = [0] * ndim
    highs = [0] * ndim
    for uses in scanner.accesses.values():
        for node, intervals in uses:
            for d, interval in enumerate(intervals):
                if interval is None:
                    if neighborhood is None:
                        index = ast.unparse(node.slice)
                        raise KernelError(
                            f"kernel {name!r} ({where(node)}): the offset in "
                            f"`{ast.unparse(node)}` is not a constant, so the halo cannot be "
                            f"inferred; use constant offsets, loop over `range` with constant "
                            f"bounds, or declare neighborhood=((low, high), ...) on @stencil "
                            f"(index was `{index}`)"
                        )
                    continue
                lows[d] = min(lows[d], interval[0])
                highs[d] = max(highs[d], interval[1])
    if neighborhood is not None:
        lows = [min(lo, n[0]) for lo, n in zip(lows, neighborhood)]
        highs = [max(hi, n[1]) for hi, n in zip(highs, neighborhood)]
    halo = tuple((max(0, -lo), max(0, hi)) for lo, hi in zip(lows, highs))

    scalars = params[first_scalar:]
    sig = inspect.signature(func)
    defaults = {
        p: sig.parameters[p].default
        for p in scalars
        if sig.parameters[p].default is not inspect.Parameter.empty
    }
    free = scanner.loaded - scanner.stored - set(params) - set(dir(builtins))
    return KernelInfo(
        name=name,
        filename=filename,
        lineno=first_line,
        array_params=tuple(arrays),
        scalar_params=tuple(scalars),
        scalar_defaults=defaults,
        ndim=ndim,
        halo=halo,
        body=tuple(fn.body),
        free_names=frozenset(free),
    )
