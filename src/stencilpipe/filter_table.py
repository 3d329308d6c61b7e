"""The built-in filters as ``stencilpipe filters`` lists them, without importing them.

Importing the filters imports NumPy, Numba and Dask (a second or more); this table lets the
command answer at once. ``tests/test_cli.py`` checks that it equals what the registries
say (:func:`stencilpipe.cli.filter_entries`); after changing a filter, rewrite it with
``python -m stencilpipe.filter_table``.
"""

# ruff: noqa: E501 - a generated table: signatures and summaries stay one line each

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

__all__ = ["FILTERS", "Filter"]


class Filter(NamedTuple):
    """One built-in filter: its stage name, call signature, parameters and summary line."""

    name: str
    signature: str
    parameters: tuple[str, ...]
    summary: str


FILTERS: tuple[Filter, ...] = (
    Filter(
        "mean",
        "(size: int | Sequence[int] = 3, *, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("size", "ndim"),
        "Mean over a ``size`` window (scipy.ndimage.uniform_filter).",
    ),
    Filter(
        "gaussian",
        "(sigma: float | Sequence[float], truncate: float = 4.0, *, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("sigma", "truncate", "ndim"),
        "Gaussian smoothing (scipy.ndimage.gaussian_filter), same weights and radius.",
    ),
    Filter(
        "sobel",
        "(axis: int = -1, *, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("axis", "ndim"),
        "Sobel derivative along ``axis`` (scipy.ndimage.sobel): [-1, 0, 1] there, [1, 2, 1] across.",
    ),
    Filter(
        "laplace",
        "(*, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("ndim",),
        "Discrete Laplacian (scipy.ndimage.laplace): the sum over axes of [1, -2, 1].",
    ),
    Filter(
        "minimum",
        "(size: int | Sequence[int] = 3, *, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("size", "ndim"),
        "Minimum over a ``size`` window (scipy.ndimage.minimum_filter).",
    ),
    Filter(
        "maximum",
        "(size: int | Sequence[int] = 3, *, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("size", "ndim"),
        "Maximum over a ``size`` window (scipy.ndimage.maximum_filter).",
    ),
    Filter(
        "median",
        "(size: int | Sequence[int] = 3, *, ndim: int = 2, boundary, cval, dtype) -> Stencil",
        ("size", "ndim"),
        "Median over a ``size`` window (scipy.ndimage.median_filter; upper median for even counts).",
    ),
    Filter(
        "binary_erosion",
        "(structure: Element = None, iterations: int = 1, border_value: int = 0, origin: Origin = 0, *, ndim: int = 2) -> tuple[Stencil, ...]",
        ("structure", "iterations", "border_value", "origin", "ndim"),
        "Binary erosion (scipy.ndimage.binary_erosion) of each frame; uint8 0/1 out.",
    ),
    Filter(
        "binary_dilation",
        "(structure: Element = None, iterations: int = 1, border_value: int = 0, origin: Origin = 0, *, ndim: int = 2) -> tuple[Stencil, ...]",
        ("structure", "iterations", "border_value", "origin", "ndim"),
        "Binary dilation (scipy.ndimage.binary_dilation) of each frame; uint8 0/1 out.",
    ),
    Filter(
        "binary_opening",
        "(structure: Element = None, iterations: int = 1, border_value: int = 0, origin: Origin = 0, *, ndim: int = 2) -> tuple[Stencil, ...]",
        ("structure", "iterations", "border_value", "origin", "ndim"),
        "Binary opening (scipy.ndimage.binary_opening): erosions, then dilations.",
    ),
    Filter(
        "binary_closing",
        "(structure: Element = None, iterations: int = 1, border_value: int = 0, origin: Origin = 0, *, ndim: int = 2) -> tuple[Stencil, ...]",
        ("structure", "iterations", "border_value", "origin", "ndim"),
        "Binary closing (scipy.ndimage.binary_closing): dilations, then erosions.",
    ),
    Filter(
        "grey_erosion",
        "(size: int | Sequence[int] | None = None, footprint: Element = None, origin: Origin = 0, *, ndim: int = 2, boundary, cval, dtype) -> tuple[Stencil, ...]",
        ("size", "footprint", "origin", "ndim"),
        "Greyscale erosion (scipy.ndimage.grey_erosion) of each frame over a flat element.",
    ),
    Filter(
        "grey_dilation",
        "(size: int | Sequence[int] | None = None, footprint: Element = None, origin: Origin = 0, *, ndim: int = 2, boundary, cval, dtype) -> tuple[Stencil, ...]",
        ("size", "footprint", "origin", "ndim"),
        "Greyscale dilation (scipy.ndimage.grey_dilation) of each frame over a flat element.",
    ),
    Filter(
        "grey_opening",
        "(size: int | Sequence[int] | None = None, footprint: Element = None, origin: Origin = 0, *, ndim: int = 2, boundary, cval, dtype) -> tuple[Stencil, ...]",
        ("size", "footprint", "origin", "ndim"),
        "Greyscale opening (scipy.ndimage.grey_opening): erosion, then dilation.",
    ),
    Filter(
        "grey_closing",
        "(size: int | Sequence[int] | None = None, footprint: Element = None, origin: Origin = 0, *, ndim: int = 2, boundary, cval, dtype) -> tuple[Stencil, ...]",
        ("size", "footprint", "origin", "ndim"),
        "Greyscale closing (scipy.ndimage.grey_closing): dilation, then erosion.",
    ),
)


def _literal(entry: Filter) -> str:
    quoted = [json.dumps(p, ensure_ascii=False) for p in entry.parameters]
    parameters = f"({', '.join(quoted)}{',' if len(quoted) == 1 else ''})"
    fields = [json.dumps(entry.name), json.dumps(entry.signature, ensure_ascii=False),
              parameters, json.dumps(entry.summary, ensure_ascii=False)]  # fmt: skip
    return "    Filter(\n" + "".join(f"        {field},\n" for field in fields) + "    ),\n"


def _rewrite() -> None:
    """Write the registries' filters into this file's table."""
    from stencilpipe.cli import filter_entries

    path = Path(__file__)
    text = path.read_text()
    start = text.index("FILTERS: tuple[Filter, ...] = (")
    end = text.index("\n\n\n", start)
    table = "FILTERS: tuple[Filter, ...] = (\n" + "".join(map(_literal, filter_entries())) + ")"
    path.write_text(text[:start] + table + text[end:])


if __name__ == "__main__":
    _rewrite()
