"""Repeating one binary erosion or dilation: a number of times, or until nothing changes.

Each step is ndfilters' minimum (erosion) or maximum (dilation) filter over the
structure, on 0/1 values held as uint8, with ``constant`` boundary ``border_value``;
where a mask is False the value is kept. On Dask, several steps run on each
block after one overlap of their summed halos (as many as the chunks allow),
so the result is the same for any chunking.
"""

from __future__ import annotations

import functools
from typing import Any

import dask.array as da
import numpy as np

from ..ndfilters._order import maximum_filter, minimum_filter
from ..stencils.dask_apply import is_dask_array, map_stencil_blocks
from ..stencils.threads import single_threaded

__all__ = ["Step", "iterate"]


class Step:
    """One erosion (``minimum``) or dilation over ``structure`` (an expanded footprint whose
    True places are read, shifted by ``origins``), outside the array ``border``."""

    def __init__(self, structure: np.ndarray, origins: list[int], border: int, minimum: bool):
        self.structure = structure
        self.origins = origins
        self.border = border
        self.minimum = minimum

    @property
    def halo(self) -> list[tuple[int, int]]:
        """(before, after) per axis that one step reads."""
        places = np.argwhere(self.structure)
        centre = np.array([n // 2 + o for n, o in zip(self.structure.shape, self.origins)])
        if not len(places):
            return [(0, 0)] * self.structure.ndim
        low, high = places.min(0) - centre, places.max(0) - centre
        return [(max(0, -int(lo)), max(0, int(hi))) for lo, hi in zip(low, high)]

    def __call__(self, values: Any) -> Any:
        if not self.structure.any():  # an empty AND is true, an empty OR false
            return (values * 0 + 1) if self.minimum else values * 0
        function = minimum_filter if self.minimum else maximum_filter
        return function(
            values, footprint=self.structure, mode="constant", cval=self.border, origin=self.origins
        )


def _repeat(step: Step, count: int, values: Any, mask: Any = None) -> Any:
    """``step`` ``count`` times on a NumPy/CuPy array (``count < 1``: until nothing changes)."""
    done = 0
    while count < 1 or done < count:
        new = step(values)
        if mask is not None:
            new = np.where(mask, new, values)
        done += 1
        if count < 1 and not bool((new != values).any()):
            return new
        values = new
    return values


def _block(step: Step, count: int, *blocks: Any) -> Any:
    with single_threaded():
        return _repeat(step, count, *blocks)


def _steps_per_overlap(step: Step, chunks: tuple[tuple[int, ...], ...]) -> int:
    """How many steps one overlap serves without growing the chunks (0: no axis is cut)."""
    fits = [
        min(sizes) // max(halo)
        for sizes, halo in zip(chunks, step.halo)
        if len(sizes) > 1 and max(halo) > 0
    ]
    return max(1, min(fits)) if fits else 0


def _dask(step: Step, count: int, values: da.Array, mask: Any) -> da.Array:
    arrays = [values] if mask is None else [values, da.asarray(mask)]

    def steps(n: int, current: da.Array) -> da.Array:
        # n < 1 only when no axis is cut: blocks are whole along the filtered axes
        halos = [(max(n, 1) * before, max(n, 1) * after) for before, after in step.halo]
        return map_stencil_blocks(
            functools.partial(_block, step, n),
            [current, *arrays[1:]],
            halos,
            wrap=False,
            dtype=np.dtype(np.uint8),
            name="ndmorph",
        )

    group = _steps_per_overlap(step, values.chunks)
    if group == 0:
        return steps(count, values)
    if count >= 1:
        done = 0
        while done < count:
            n = min(group, count - done)
            values, done = steps(n, values), done + n
        return values
    while True:  # until nothing changes: each round is computed to know
        new = steps(group, values).persist()
        if not bool((new != values).any().compute()):
            return new
        values = new


def iterate(step: Step, count: int, values: Any, mask: Any) -> Any:
    """``step`` ``count`` times (``count < 1``: until nothing changes) on uint8 0/1 ``values``
    of any array type, keeping the values where ``mask`` (None: everywhere) is False."""
    if is_dask_array(values):
        return _dask(step, count, values, mask)
    return _repeat(step, count, values, mask)
