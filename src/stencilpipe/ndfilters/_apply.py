"""Running scipy-style filters: arguments as scipy reads them, passes through compiled stencils.

A filter is one or more passes (a stencil each, with its boundary mode); each
pass stores scipy's output dtype, as scipy's separable filters do. The Stencil
dispatches on the array's type: NumPy in, NumPy out; Dask in, Dask out (with
the halo exchanged between chunks); CuPy in, CuPy out.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..errors import BoundaryError
from ..stencils import Stencil
from ..stencils.dask_apply import is_dask_array, map_stencil_blocks
from ..stencils.threads import single_threaded
from ._casting import Dtypes, as_compute_input, resolve_dtypes

__all__ = [
    "ModeError",
    "ShapeError",
    "Pass",
    "as_array",
    "check_axes",
    "check_real",
    "filter_mode",
    "filtered",
    "finish",
    "normalize_sequence",
    "run_passes",
]

#: scipy's filter modes (the grid-* names are aliases for filters) -> the compiler's.
_MODES = {
    "reflect": "reflect",
    "grid-mirror": "reflect",
    "constant": "constant",
    "grid-constant": "constant",
    "nearest": "nearest",
    "mirror": "mirror",
    "wrap": "wrap",
    "grid-wrap": "wrap",
}


class ModeError(BoundaryError, RuntimeError):
    """An unknown boundary mode (a RuntimeError too, as scipy raises)."""


class ShapeError(RuntimeError, ValueError):
    """Weights or a footprint whose shape does not fit the input: scipy raises a
    RuntimeError, dask-image a ValueError; code written for either catches this."""


def filter_mode(mode: Any) -> str:
    """The compiler's name of scipy filter mode ``mode``."""
    try:
        return _MODES[mode]
    except (KeyError, TypeError):
        raise ModeError(
            f"boundary mode not supported: {mode!r}; expected one of {', '.join(_MODES)}"
        ) from None


def as_array(input: Any) -> Any:
    """A Dask, CuPy or NumPy array as it is; anything else (lists, scalars) as NumPy."""
    if is_dask_array(input) or hasattr(input, "__cuda_array_interface__"):
        return input
    return np.asarray(input)


def check_real(array: Any, name: str) -> None:
    """A TypeError for complex input (scipy computes some filters on complex, not these)."""
    if array.dtype.kind == "c":
        raise TypeError(f"{name}: Complex type not supported by stencilpipe.ndfilters")


def normalize_sequence(value: Any, rank: int) -> list[Any]:
    """``value`` repeated ``rank`` times, or as a list of ``rank`` entries (scipy's rule)."""
    if not isinstance(value, str) and np.iterable(value):
        values = list(value)
        if len(values) != rank:
            raise RuntimeError("sequence argument must have length equal to input rank")
        return values
    return [value] * rank


def check_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """scipy's ``axes=``: None is every axis; negative axes count from the end; no repeats."""
    if axes is None:
        return tuple(range(ndim))
    given: tuple[int, ...]
    if isinstance(axes, Iterable) and not isinstance(axes, (str, bytes)):
        given = tuple(operator.index(ax) for ax in axes)
    elif np.isscalar(axes):
        given = (operator.index(axes),)  # type: ignore[arg-type]  # np.isscalar's TypeGuard
    else:
        raise ValueError("axes must be an integer, iterable of integers, or None")
    for ax in given:
        if not -ndim <= ax < ndim:
            raise ValueError(f"specified axis: {ax} is out of range")
    unique = tuple(ax % ndim for ax in given)
    if len(set(unique)) != len(unique):
        raise ValueError("axes must be unique")
    return unique


class Pass:
    """One pass of a filter: a stencil built for the dtype it reads, and its boundary mode.

    Parameters
    ----------
    build : callable
        ``build(in_dtype) -> Stencil``, or for a line kernel ``build(in_dtype, across)``
        (see :func:`._kernels._line_read`); the stencil stores the call's store dtype.
    mode : str
        scipy mode name (aliases allowed).
    axis : int, optional
        For a line kernel, the axis it runs along. Along the last axis it is a 1-D kernel;
        along another, the array is viewed as (before, axis, after) and the kernel is 2-D
        (``across``), its loops running along the contiguous ``after`` (a 1-D kernel over
        a strided axis does not vectorise: 2-3x slower). Two compiled kernels serve every
        axis and dimensionality. None for a kernel with one index per axis of the array.
    """

    def __init__(self, build: Callable[..., Stencil], mode: Any, axis: int | None = None):
        self.build = build
        self.mode = filter_mode(mode)
        self.axis = axis


def _fits(cval: Any, dtype: np.dtype) -> bool:
    """Whether ``cval`` is exactly a value of ``dtype`` (what the compiler's fill needs)."""
    if np.iscomplexobj(cval):
        raise ValueError("Cannot provide a complex-valued cval when the input is real.")
    if dtype.kind != "f" and not np.isfinite(cval):
        return False
    with np.errstate(all="ignore"):
        return bool(np.asarray(cval).astype(dtype) == cval)


class _Spares:
    """Intermediate arrays of multi-pass filters, kept between calls up to ``limit`` bytes
    (the latest given back kept first).

    A fresh intermediate per call costs more than the passes: when a call frees its
    intermediate and output together, glibc returns the memory to the system, and the next
    call's arrays are faulted in (and zeroed) page by page as the passes write them.
    2048x2048 uint8, 1 thread: a 5x5 minimum as two line passes took 2.1 ms (about 1000
    page faults) against 0.3 + 0.3 ms for each pass alone.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """A kept array of ``shape`` and ``dtype`` (its contents left over), else a new one."""
        with self._lock:
            for k, array in enumerate(self._free):
                if array.shape == shape and array.dtype == dtype:
                    return self._free.pop(k)
        return np.empty(shape, dtype)

    def give(self, array: np.ndarray) -> None:
        """Keep ``array`` for a later :meth:`take`, dropping the oldest kept above ``limit``."""
        with self._lock:
            self._free.append(array)
            while sum(kept.nbytes for kept in self._free) > self.limit:
                self._free.pop(0)


#: Intermediates kept for the next call: two 2048x2048 float64 frames.
_SPARES = _Spares(64 << 20)


def filtered(array: Any, passes: Sequence[Pass], dtypes: Dtypes, cval: Any, output: Any) -> Any:
    """A filter's return value: ``array`` through ``passes`` (:func:`run_passes`), in the
    output dtype, written into an ``output`` array when one was given (:func:`finish`)."""
    return finish(run_passes(array, passes, dtypes, cval, output), dtypes, output)


def run_passes(
    array: Any, passes: Sequence[Pass], dtypes: Dtypes, cval: Any, output: Any = None
) -> Any:
    """``array`` through ``passes`` in turn, each storing ``dtypes.kernel_store``.

    scipy fills the outside of the array with ``cval`` as a double: where that
    value is not one of the input's dtype (``cval=0.5`` on integers), the pass
    reads the input as float64. On Dask, passes of one mode run together on each
    block, with one halo exchange for all of them (their halos summed). On NumPy,
    the passes but the last write into arrays kept between calls (:class:`_Spares`),
    and the last into ``output`` where it is a C-contiguous array of the dtypes the
    pass and the filter return (returned then): a copy less (a 2048x2048 uint8
    ``rank_filter`` 3x3, 1 thread: 2.14 -> 1.71 ms).
    """
    if is_dask_array(array) and len(passes) > 1 and len({p.mode for p in passes}) == 1:
        return _dask_blocks(array, passes, dtypes, cval)
    result = as_compute_input(array, dtypes)
    steps = list(_built(result.dtype, passes, cval, result.ndim))
    spare = isinstance(result, np.ndarray)
    taken = []
    into_output = False
    try:
        for k, (step, stencil, reads) in enumerate(steps):
            if result.dtype != reads:
                result = result.astype(reads)
            out, stores = None, np.dtype(stencil.dtype or reads)
            if spare and k < len(steps) - 1:
                out = _SPARES.take(result.shape, stores)
                taken.append(out)
            elif spare and _written_into(output, stores, dtypes):
                out, into_output = output, True
            result = _run(step, stencil, result, step.mode, cval, out)
    finally:
        for out in taken:
            _SPARES.give(out)
    return output if into_output else result  # output, not _run's reshaped view of it


def _written_into(output: Any, stores: np.dtype, dtypes: Dtypes) -> bool:
    """Whether a NumPy filter's last pass, storing ``stores``, may write into ``output``."""
    return (
        isinstance(output, np.ndarray)
        and output.flags.c_contiguous
        and output.dtype == stores == dtypes.output
    )


def _run(step: Pass, stencil: Stencil, array: Any, mode: str, cval: Any, out: Any) -> Any:
    """One pass's ``stencil`` over ``array`` under ``mode``, into ``out`` (None: a new array)."""
    boundary: Any = mode  # checked by filter_mode
    fill = cval if mode == "constant" else 0
    options = dict(channel_axis=None, boundary=boundary, cval=fill)
    if step.axis is None or step.axis == array.ndim - 1:
        return stencil(array, out=out, **options)
    shape, axis = array.shape, step.axis
    lines = (math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :]))
    target = None if out is None else out.reshape(lines)
    return stencil(array.reshape(lines), out=target, **options).reshape(shape)


def _built(
    dtype: np.dtype, passes: Sequence[Pass], cval: Any, ndim: int
) -> Iterator[tuple[Pass, Stencil, np.dtype]]:
    """(pass, stencil, dtype it reads) for an ``ndim``-D input of ``dtype``: float64 where a
    constant mode's ``cval`` does not fit the dtype."""
    for step in passes:
        if step.mode == "constant" and not _fits(cval, dtype):
            dtype = np.dtype(np.float64)
        if step.axis is None:
            stencil = step.build(dtype)
        else:
            stencil = step.build(dtype, step.axis != ndim - 1)
        yield step, stencil, dtype
        dtype = stencil.dtype or dtype  # None: the dtype it reads


def _dask_blocks(array: Any, passes: Sequence[Pass], dtypes: Dtypes, cval: Any) -> Any:
    """All ``passes`` on each block of a Dask array, after one overlap of their summed halos."""
    halos = [[0, 0] for _ in range(array.ndim)]
    for step, stencil, _ in _built(dtypes.compute, passes, cval, array.ndim):
        axes = range(array.ndim) if step.axis is None else [step.axis]
        for axis, (before, after) in zip(axes, stencil.halo):
            halos[axis][0] += before
            halos[axis][1] += after

    def blocks(block: Any) -> Any:
        with single_threaded():
            return run_passes(block, passes, dtypes, cval)

    return map_stencil_blocks(
        blocks,
        [array],
        [(before, after) for before, after in halos],
        wrap=passes[0].mode == "wrap",
        dtype=dtypes.kernel_store,
        name="ndfilters",
    )


def finish(result: Any, dtypes: Dtypes, output: Any) -> Any:
    """The filter's return value: ``result`` in the output dtype, written into an ``output``
    array when one was given (NumPy only, as scipy)."""
    if result is output:  # the last pass wrote into it
        return output
    if result.dtype != dtypes.output:
        result = result.astype(dtypes.output)
    if output is None or isinstance(output, (str, type, np.dtype)):
        return result
    if is_dask_array(result):
        raise TypeError("output= must be a dtype for a Dask input (the result is lazy)")
    if output.shape != result.shape:
        raise RuntimeError("output shape not correct")
    output[...] = result
    return output


def dtypes_of(array: Any, output: Any, name: str) -> Dtypes:
    """:func:`._casting.resolve_dtypes` for ``array`` (checking an ``output`` array's shape)."""
    if output is not None and not isinstance(output, (str, type, np.dtype)):
        if tuple(output.shape) != tuple(array.shape):
            raise RuntimeError("output shape not correct")
    return resolve_dtypes(array.dtype, output, name)
