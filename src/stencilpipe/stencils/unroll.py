"""Unroll loops over constant ranges, so each read has a constant offset.

``for i in range(-1, 2): total += x[i, 0]`` becomes three statements reading
``x[-1, 0]``, ``x[0, 0]`` and ``x[1, 0]``. Constant offsets let LLVM keep
neighbouring reads in registers and vectorise the row loop; a loop left in
the kernel blocks that (measured: a 5x5 float32 gaussian took 65 ms as a
loop nest, against a few ms unrolled). Loops that ``break``/``continue``,
assign their variable, have an ``else`` or exceed the budget stay loops.
"""

from __future__ import annotations

import ast
import copy
from typing import Any

from .analysis import index_interval, range_arguments

__all__ = ["unroll_constant_loops"]

#: Most statements unrolling may produce for one kernel.
BUDGET = 256


class _Substitute(ast.NodeTransformer):
    def __init__(self, name: str, value: int):
        self.name = name
        self.value = value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(ast.Constant(self.value), node)
        return node


def _constant_range(node: ast.For, env: dict[str, Any]) -> range | None:
    arguments = range_arguments(node)
    if arguments is None or node.orelse:
        return None
    bounds = [index_interval(arg, {}, env) for arg in arguments]
    if any(b is None or b[0] != b[1] for b in bounds):
        return None
    return range(*(b[0] for b in bounds))  # type: ignore[index]


def _unrollable(node: ast.For) -> bool:
    name = node.target.id  # type: ignore[attr-defined]
    for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
        if isinstance(inner, (ast.Break, ast.Continue)):
            return False
        if isinstance(inner, ast.Name) and inner.id == name and not isinstance(inner.ctx, ast.Load):
            return False
    return True


def _unrolled_size(statements: list[ast.stmt], env: dict[str, Any]) -> int:
    """Statements that unrolling every constant loop in ``statements`` would produce."""
    size = 0
    for statement in statements:
        if isinstance(statement, ast.For):
            values = _constant_range(statement, env)
            if values is not None and _unrollable(statement):
                size += len(values) * _unrolled_size(statement.body, env) + 1
                continue
        size += 1
        for field in ("body", "orelse"):
            block = getattr(statement, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                size += _unrolled_size(block, env)
    return size


def _unroll_block(
    statements: list[ast.stmt], env: dict[str, Any], budget: list[int]
) -> list[ast.stmt]:
    result: list[ast.stmt] = []
    for statement in statements:
        if isinstance(statement, ast.For):
            values = _constant_range(statement, env)
            # Nested loops count unrolled: a window's loops inside a window's loops (a
            # median by counting) would otherwise slip through, one level at a time.
            cost = (len(values) if values is not None else 0) * _unrolled_size(statement.body, env)
            if values is not None and _unrollable(statement) and cost <= budget[0]:
                budget[0] -= cost
                name = statement.target.id  # type: ignore[attr-defined]
                for value in values:
                    body = [
                        _Substitute(name, value).visit(copy.deepcopy(s)) for s in statement.body
                    ]
                    result.extend(_unroll_block(body, env, budget))
                if len(values):
                    # Python leaves the loop variable at its last value; so do we.
                    last = ast.Assign(
                        targets=[ast.Name(name, ast.Store())], value=ast.Constant(values[-1])
                    )
                    result.append(ast.copy_location(last, statement))
                continue
        for field in ("body", "orelse"):
            block = getattr(statement, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(statement, field, _unroll_block(block, env, budget))
        result.append(statement)
    return result


def unroll_constant_loops(body: tuple[ast.stmt, ...], env: dict[str, Any]) -> list[ast.stmt]:
    """A copy of ``body`` with loops over constant ranges unrolled (within :data:`BUDGET`).

    Unrolled statements keep the line numbers of the statements they copy.
    """
    return _unroll_block([copy.deepcopy(s) for s in body], env, [BUDGET])
