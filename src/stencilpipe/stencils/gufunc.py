"""Gufunc semantics on NumPy arrays: batch dimensions, broadcasting, ``out=``, dtypes."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BoundaryError, KernelError
from .codegen_cpu import work_rows
from .dtypes import check_dtype, result_dtype, wide_type_name
from .fused import run_passes

if TYPE_CHECKING:
    from .kernel import Kernel

__all__ = ["apply_numpy", "check_out", "check_shapes", "fill_values", "overlaps"]


def fill_values(cval: Any, dtypes: list[np.dtype], name: str) -> list[Any]:
    """``cval`` as each input's widened scalar, refusing values the input dtype cannot hold.

    NaN (and infinities) fill float inputs; an integer input has no NaN to fill with.
    """
    if isinstance(cval, np.ndarray) and cval.ndim == 0:
        cval = cval[()]
    if not isinstance(cval, (int, float, np.number, np.bool_)):
        raise BoundaryError(f"{name}: cval must be a single number, got {cval!r}")
    values = [_fill_value(cval, dtype) for dtype in dtypes]
    for value, dtype in zip(values, dtypes):
        if value is _NAN_IN_INTEGERS:
            raise BoundaryError(
                f"{name}: cval=nan needs a float input, but the input dtype is {dtype}, which "
                "has no NaN; give a number of its range, or convert the input with .astype"
            )
        if value is None:
            raise BoundaryError(
                f"{name}: cval={cval!r} cannot be represented in the input dtype {dtype}; "
                "give a value of that dtype's range"
            )
    return values


_NAN_IN_INTEGERS = object()


@functools.lru_cache(maxsize=256)
def _fill_value(cval: Any, dtype: np.dtype) -> Any:
    if isinstance(cval, (float, np.floating)) and np.isnan(cval):
        return np.float64(cval) if dtype.kind == "f" else _NAN_IN_INTEGERS
    with np.errstate(all="ignore"):  # a value out of range is refused below, not warned about
        converted = np.asarray(cval).astype(dtype)
    if converted != cval:
        return None
    return getattr(np, wide_type_name(dtype))(converted)


def overlaps(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two NumPy arrays share an element (exactly; in doubt, True)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        # numpy's stubs allow only -1 and 0 here; numpy itself takes any bound.
        return np.shares_memory(a, b, max_work=_OVERLAP_WORK)  # type: ignore[arg-type]
    except np.exceptions.TooHardError:
        return True


#: Bound on the work of the exact overlap test (strides that make it harder count as overlap).
_OVERLAP_WORK = 10_000


def check_out(name: str, out: Any, shape: tuple[int, ...]) -> np.dtype:
    """The dtype of ``out=``, once it is known to be a NumPy array of ``shape``."""
    if not isinstance(out, np.ndarray) or out.shape != shape:
        raise KernelError(
            f"{name}: out= must be a numpy array of shape {shape}, "
            f"got {getattr(out, 'shape', type(out).__name__)}"
        )
    return check_dtype(out.dtype, f"{name}: out=")


def check_shapes(stencil: Kernel, arrays: list[Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(batch shape, core shape)`` of the inputs, or a :class:`KernelError` on a mismatch."""
    core = stencil.ndim
    for position, array in enumerate(arrays):
        if array.ndim < core:
            raise KernelError(
                f"{stencil.name}: input {position} has {array.ndim} dimension(s), but the kernel "
                f"reads {core} ({stencil.signature}); add leading axes or use a "
                f"{array.ndim}-D kernel"
            )
    shapes = {a.shape[a.ndim - core :] for a in arrays}
    if len(shapes) != 1:
        raise KernelError(
            f"{stencil.name}: the inputs' last {core} dimensions differ ({sorted(shapes)}); "
            "the arrays a stencil reads must have the same core shape"
        )
    try:
        batch = np.broadcast_shapes(*(a.shape[: a.ndim - core] for a in arrays))
    except ValueError:
        raise KernelError(
            f"{stencil.name}: the inputs' batch dimensions "
            f"{[a.shape[: a.ndim - core] for a in arrays]} do not broadcast"
        ) from None
    return batch, shapes.pop()


def apply_numpy(
    stencil: Kernel, arrays: list[Any], scalars: list[Any], *, out: Any, mode: str, cval: Any
) -> np.ndarray:
    """Run ``stencil`` on NumPy arrays; see :func:`stencilpipe.stencil` for the semantics."""
    arrays = [np.asarray(a) for a in arrays]
    batch, core_shape = check_shapes(stencil, arrays)
    in_dtypes = [check_dtype(a.dtype, f"{stencil.name}: input {i}") for i, a in enumerate(arrays)]
    if out is None:
        out = np.empty(batch + core_shape, dtype=result_dtype(in_dtypes, stencil.dtype))
    else:
        check_out(stencil.name, out, batch + core_shape)
    if out.size == 0:
        return out
    flat_shape = (-1, *core_shape)
    full_shape = batch + core_shape
    flat_inputs = [
        (a if a.shape == full_shape else np.broadcast_to(a, full_shape)).reshape(flat_shape)
        for a in arrays
    ]
    # Reshaping a C-contiguous out= is a view; any other layout is computed aside and copied in,
    # and so is an out= that overlaps an input (the kernel would read elements it has written).
    writes_through = out.flags.c_contiguous and not any(overlaps(out, a) for a in arrays)
    target = (
        out.reshape(flat_shape)
        if writes_through
        else np.empty(out.shape, out.dtype).reshape(flat_shape)
    )
    kernels = (
        stencil.pass_kernels(in_dtypes[0], mode, out.dtype, target.shape)
        if stencil.passes
        else (stencil,)
    )
    # Passes over row strips: a separable filter's 1-D passes (not on 1-D frames, which
    # have no rows to cut), or a window filter (:mod:`.windows`).
    if kernels != (stencil,) and (len(kernels) == 1 or target.ndim > 2):
        passes = stencil.strip_passes(in_dtypes[0], out.dtype, mode, cval, target.shape)
        run_passes(
            passes, np.ascontiguousarray(flat_inputs[0]), target, whole_frames=mode == "wrap"
        )
    else:
        apply = stencil.compiled(tuple(in_dtypes), out.dtype, mode)
        apply(
            *flat_inputs,
            target,
            *scalars,
            *fill_values(cval, in_dtypes, stencil.name),
            rows=work_rows(target.shape),
        )
    if not writes_through:
        out[...] = target.reshape(out.shape)
    return out
