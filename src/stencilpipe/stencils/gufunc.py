"""Gufunc semantics on NumPy arrays: batch dimensions, broadcasting, ``out=``, dtypes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BoundaryError, KernelError
from .dtypes import check_dtype, result_dtype, wide_type_name

if TYPE_CHECKING:
    from .stencil import Stencil

__all__ = ["apply_numpy", "fill_values"]


def fill_values(cval: Any, dtypes: list[np.dtype], name: str) -> list[Any]:
    """``cval`` as each input's widened scalar, refusing values the input dtype cannot hold."""
    values = []
    for dtype in dtypes:
        converted = np.asarray(cval).astype(dtype)
        if np.ndim(cval) != 0 or converted != cval:
            raise BoundaryError(
                f"{name}: cval={cval!r} cannot be represented in the input dtype {dtype}; "
                "give a value of that dtype's range"
            )
        values.append(getattr(np, wide_type_name(dtype))(converted))
    return values


def _core_shape(stencil: Stencil, arrays: list[np.ndarray]) -> tuple[int, ...]:
    core = stencil.ndim
    shapes = {a.shape[a.ndim - core :] for a in arrays}
    for position, array in enumerate(arrays):
        if array.ndim < core:
            raise KernelError(
                f"{stencil.name}: input {position} has {array.ndim} dimension(s), but the kernel "
                f"reads {core} ({stencil.signature}); add leading axes or use a {array.ndim}-D kernel"
            )
    if len(shapes) != 1:
        raise KernelError(
            f"{stencil.name}: the inputs' last {core} dimensions differ ({sorted(shapes)}); "
            "the arrays a stencil reads must have the same core shape"
        )
    return shapes.pop()


def apply_numpy(
    stencil: Stencil, arrays: list[Any], scalars: list[Any], *, out: Any, mode: str, cval: Any
) -> np.ndarray:
    """Run ``stencil`` on NumPy arrays; see :func:`stencilpipe.stencil` for the semantics."""
    arrays = [np.asarray(a) for a in arrays]
    core = stencil.ndim
    core_shape = _core_shape(stencil, arrays)
    try:
        batch = np.broadcast_shapes(*(a.shape[: a.ndim - core] for a in arrays))
    except ValueError:
        raise KernelError(
            f"{stencil.name}: the inputs' batch dimensions "
            f"{[a.shape[: a.ndim - core] for a in arrays]} do not broadcast"
        ) from None
    in_dtypes = [check_dtype(a.dtype, f"{stencil.name}: input {i}") for i, a in enumerate(arrays)]
    if out is None:
        out = np.empty(batch + core_shape, dtype=result_dtype(in_dtypes, stencil.dtype))
    else:
        if not isinstance(out, np.ndarray) or out.shape != batch + core_shape:
            raise KernelError(
                f"{stencil.name}: out= must be a numpy array of shape {batch + core_shape}, "
                f"got {getattr(out, 'shape', type(out).__name__)}"
            )
        check_dtype(out.dtype, f"{stencil.name}: out=")
    if out.size == 0:
        return out
    flat_shape = (-1, *core_shape)
    flat_inputs = [np.broadcast_to(a, batch + core_shape).reshape(flat_shape) for a in arrays]
    flat_out = out.reshape(flat_shape)
    writes_through = np.shares_memory(flat_out, out) and flat_out.base is not None
    target = flat_out if writes_through else np.empty_like(flat_out)
    apply = stencil.compiled(tuple(in_dtypes), out.dtype, mode)
    apply(*flat_inputs, target, *scalars, *fill_values(cval, in_dtypes, stencil.name))
    if not writes_through:
        out[...] = target.reshape(out.shape)
    return out
