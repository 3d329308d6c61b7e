"""scipy's ``correlate1d`` and ``correlate`` as passes whose weights are data: one compiled
loop per dtype.

Written out as a kernel (``t += 0.25 * x[-1]``), every distinct weights (each gaussian
sigma and derivative order, sobel's and prewitt's smoothing and difference, laplace's
second difference, each user's N-D weights) is a kernel of its own, one to four
seconds of compiling each: a script calling a handful of scipy's filters compiled for
tens of seconds on its first run. :class:`CorrelatePass` and :class:`CorrelateWindow`
run the same sums from the weights as arrays (:mod:`.correlate_kernels`), so one
compile per input and output dtype serves them all, as scipy's C loops do.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .boundary import MODE_CODES
from .modules import load_module
from .windows import BoxPass, _LinePass, _Rows, box_frames, box_reach, scipy_store

__all__ = ["CorrelatePass", "CorrelateWindow"]


@functools.cache
def _loops() -> ModuleType:
    """:mod:`.correlate_kernels`, loaded (and disk-cached) as a generated module."""
    source = (Path(__file__).parent / "correlate_kernels.py").read_text()
    return load_module("correlate", source)


@dataclass(frozen=True)
class CorrelatePass(_LinePass):
    """scipy's 1-D correlation with ``weights`` over ``before + 1 + after`` elements along
    core ``axis`` (:func:`.correlate_kernels.correlate`), stored as scipy stores a
    double, for outputs of :data:`.windows.SCIPY_STORES`.

    Attributes
    ----------
    axis : int
        The core axis of the window.
    before, after : int
        The window's reach before and after each element (an origin shifts them).
    ndim : int
        Core dimensions of the arrays it runs on.
    weights : tuple of float
        The weights, first to last.
    symmetry : int
        1 for symmetric, -1 for antisymmetric odd weights (scipy sums their pairs
        first), else 0.
    """

    axis: int
    before: int
    after: int
    ndim: int
    weights: tuple[float, ...]
    symmetry: int

    name = "correlate1d"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = _loops()
        options = (self.before, self.after, MODE_CODES[mode])
        weights = np.array(self.weights, np.float64)

        def across(*args: Any) -> None:
            loops.correlate(*args, weights, self.symmetry)

        def along(*args: Any) -> None:
            loops.correlate_lines(*args, weights, self.symmetry)

        return self._rows(across, along, options, scipy_store(out_dtype), out_dtype)


@dataclass(frozen=True)
class CorrelateWindow(BoxPass):
    """scipy's N-D correlation over 1 to 3 core axes
    (:func:`.correlate_kernels.correlate_window`), stored as scipy stores a double, for
    outputs of :data:`.windows.SCIPY_STORES`.

    Attributes
    ----------
    reach : tuple of (int, int)
        The reach before and after each element of the box that holds the terms, per
        core axis.
    points : tuple of int
        The terms' places in the box (flat, C order), in the order scipy adds them.
    weights : tuple of float
        The terms' weights.
    """

    reach: tuple[tuple[int, int], ...]
    points: tuple[int, ...]
    weights: tuple[float, ...]

    name = "correlate"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loops = _loops()
        ndim = len(self.reach)
        reach, kn = box_reach(self.reach)
        code = MODE_CODES[mode]
        points = np.array(self.points, np.intp)
        weights = np.array(self.weights, np.float64)
        stores = scipy_store(out_dtype)

        def call(x, out, cval, start, stop, to):
            xs, outs = box_frames(x, ndim), box_frames(out, ndim)
            loops.correlate_window(
                xs, outs, cval, start, stop, reach, kn, code, to, *stores, points, weights
            )

        return _Rows(call, out_dtype.type)
