"""Colour channels: the one rule that decides which axis, if any, a stencil never filters across.

It follows scikit-image's ``channel_axis``. A call may name the axis itself
(``mean(3)(rgb, channel_axis=-1)``); ``channel_axis=None`` says there is none.
Left out, an array has one when it is a Dask stack read from RGB or RGBA files
(the reader marks it with :func:`mark_channels`, and every array computed from
it that keeps its number of dimensions and channels inherits the mark): then
the trailing axis holds the channels. Any other array, a NumPy ``(h, w, 3)``
frame included, has none: its last two axes are filtered as an image 3 wide.

The channel axis is a batch axis: it is moved out of the kernel's core
dimensions (just before them), the stencil runs on every channel separately,
and the axis is moved back. The Python API (stencils and chains), the Dask
path, the CLI and pipelines, and the GPU path all go through :func:`per_channel`.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import KernelError
from .cuda_apply import transposed
from .dask_apply import is_dask_array

__all__ = ["AUTO", "channel_axis_of", "mark_channels", "per_channel", "resolve_channel_axis"]


class _Auto:
    """The default of ``channel_axis=``: decided by :func:`resolve_channel_axis`."""

    def __repr__(self) -> str:
        return "AUTO"


#: ``channel_axis=AUTO`` (the default): a trailing channel axis where the reader marked one.
AUTO: Any = _Auto()

#: Dask graph layer names of stacks read from colour files -> (ndim, number of channels).
_MARKED: dict[str, tuple[int, int]] = {}


def mark_channels(array: Any) -> None:
    """Record that Dask ``array`` (as read from RGB/RGBA files) has a trailing channel axis.

    Parameters
    ----------
    array : dask.array.Array
        A stack ``(frames, y, x, c)`` as a reader returns it.
    """
    _MARKED[array.name] = (array.ndim, array.shape[-1])


def channel_axis_of(array: Any) -> int | None:
    """``-1`` for a Dask array computed from a marked colour stack (same ndim and channel
    count: indexing a channel or stacking frames into more axes drops the mark), else None."""
    if not is_dask_array(array):
        return None
    for name in array.dask.layers:
        if _MARKED.get(name) == (array.ndim, array.shape[-1]):
            return -1
    return None


def resolve_channel_axis(arrays: Sequence[Any], channel_axis: Any, name: str) -> int | None:
    """The channel axis of a call: ``channel_axis`` as given, or found (see module docs).

    Parameters
    ----------
    arrays : sequence of arrays
        The call's array arguments.
    channel_axis : int, None or AUTO
    name : str
        The stencil or chain, for messages.

    Returns
    -------
    int or None
        The axis (negative counts from the end of each array), or None.
    """
    if channel_axis is AUTO:
        found = {channel_axis_of(a) for a in arrays} - {None}
        return found.pop() if found else None
    if channel_axis is None:
        return None
    if isinstance(channel_axis, bool) or not hasattr(type(channel_axis), "__index__"):
        raise TypeError(f"{name}: channel_axis must be an int or None, got {channel_axis!r}")
    return operator.index(channel_axis)


def _to_batch_order(ndim: int, axis: int, core: int, what: str) -> list[int]:
    """The permutation that moves ``axis`` to just before the last ``core`` axes."""
    if not -ndim <= axis < ndim:
        raise KernelError(
            f"{what}: channel_axis={axis} is out of range for an array of {ndim} dimension(s)"
        )
    if ndim - 1 < core:
        raise KernelError(
            f"{what}: channel_axis={axis} leaves {ndim - 1} of its {ndim} dimension(s) to "
            f"filter, but the kernel reads {core}"
        )
    order = [d for d in range(ndim) if d != axis % ndim]
    order.insert(ndim - 1 - core, axis % ndim)
    return order


def _permuted(array: Any, order: list[int]) -> Any:
    if order == list(range(len(order))):
        return array
    if getattr(array, "__cuda_ndarray__", False) is True:  # Numba's transpose is 2-D only
        return transposed(array, order)
    return array.transpose(order)  # NumPy, Dask, CuPy


def _inverse(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for position, axis in enumerate(order):
        inverse[axis] = position
    return inverse


def per_channel(
    run: Callable[[list[Any], Any], Any],
    arrays: list[Any],
    out: Any,
    axis: int,
    core: int,
    name: str,
) -> Any:
    """``run(arrays, out)`` with ``axis`` of every array (and of ``out``) as a batch axis.

    Parameters
    ----------
    run : callable
        Runs the stencil or chain on the moved arrays, writing the moved ``out``
        (or None), and returns its result.
    arrays : list of arrays
        NumPy, Dask, CuPy or Numba device arrays.
    out : array or None
        Where the caller wants the result.
    axis : int
        The channel axis, counted in each array (negative: from its end).
    core : int
        The kernel's core dimensions.
    name : str
        The stencil or chain, for messages.

    Returns
    -------
    array
        ``out``, or the result with the channel axis back where it was.
    """
    arrays = [a if hasattr(a, "ndim") else np.asarray(a) for a in arrays]  # lists, scalars
    orders = [
        _to_batch_order(a.ndim, axis, core, f"{name}: input {i}") for i, a in enumerate(arrays)
    ]
    moved = [_permuted(a, order) for a, order in zip(arrays, orders)]
    target = None
    if out is not None:
        target = _permuted(out, _to_batch_order(out.ndim, axis, core, f"{name}: out="))
    result = run(moved, target)
    if out is not None:
        return out
    return _permuted(result, _inverse(_to_batch_order(result.ndim, axis, core, name)))
