"""Gufunc semantics on arrays in GPU memory: CuPy, Numba, any ``__cuda_array_interface__``.

The same rules as :func:`.gufunc.apply_numpy` (shapes, dtypes, boundary modes,
``cval``, batch dimensions), and the result stays on the device, in the
input's library: CuPy in, CuPy out; otherwise a Numba device array.

Nothing is copied (except an input that ``out`` overlaps, which is read from a
copy: the result is the same as without ``out=``). Inputs and ``out`` are viewed
as Numba device arrays; batch dimensions are broadcast with zero strides and flattened into one by
restriding, and the kernel writes ``out`` in place whatever its strides.
Leading batch dimensions that cannot be flattened without a copy (a stack
broadcast against a sliced stack, say) are looped over here, one launch each.
Kernels run on CuPy's current stream when the input is CuPy, else on the
default stream.

Numba's CUDA target (and :mod:`.codegen_cuda`, which needs it) is imported on
the first device array, CuPy only when a CuPy array arrives: importing this
module imports neither, so the CPU path can test for device arrays for free.
"""

from __future__ import annotations

import math
import sys
import threading
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import KernelError
from .dtypes import check_dtype, result_dtype
from .gufunc import check_shapes, fill_values

if TYPE_CHECKING:
    from .kernel import Kernel

__all__ = ["apply_cuda", "is_device_array", "transposed"]


def is_device_array(value: Any) -> bool:
    """Whether ``value`` is an array in GPU memory; imports nothing.

    Parameters
    ----------
    value : object
        Anything.

    Returns
    -------
    bool
        True for an object with ``__cuda_array_interface__`` (CuPy, Numba,
        PyTorch, ...) and for a Numba device array, which has no such
        interface under the CUDA simulator.
    """
    return (
        hasattr(value, "__cuda_array_interface__")
        or getattr(value, "__cuda_ndarray__", False) is True
    )


def _cupy_of(arrays: list[Any]) -> Any:
    """The ``cupy`` module if any of ``arrays`` is a CuPy array (then it is imported already)."""
    if any(type(a).__module__.partition(".")[0] == "cupy" for a in arrays):
        return sys.modules["cupy"]
    return None


def _device_view(array: Any, what: str) -> Any:
    """A Numba device array over ``array``'s memory (no copy, no synchronisation)."""
    from numba import cuda

    if not is_device_array(array):
        raise TypeError(
            f"{what} is a {type(array).__name__} in host memory while other inputs are on the GPU; "
            "move it to the device first (cupy.asarray or numba.cuda.to_device)"
        )
    if cuda.devicearray.is_cuda_ndarray(array):
        return array
    return cuda.as_cuda_array(array, sync=False)


def _restrided(view: Any, shape: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    """A view of the same first element with another shape and strides (in bytes)."""
    from numba import cuda

    devicearray: Any = cuda.devicearray  # numba.cuda's config and arrays carry no types
    if cuda.config.ENABLE_CUDASIM:  # type: ignore[attr-defined]  # arrays wrap NumPy arrays
        return devicearray.FakeCUDAArray(np.lib.stride_tricks.as_strided(view, shape, strides))
    return devicearray.DeviceNDArray(shape, strides, view.dtype, gpu_data=view.gpu_data)


def transposed(array: Any, order: list[int]) -> Any:
    """A view of device ``array`` with its axes in ``order`` (Numba's transpose is 2-D only)."""
    view = _device_view(array, "the array")
    shape, strides = tuple(view.shape), tuple(view.strides)
    return _restrided(view, tuple(shape[d] for d in order), tuple(strides[d] for d in order))


def _byte_range(view: Any) -> tuple[int, int]:
    """First and one-past-last byte addresses that ``view``'s elements may occupy."""
    from numba import cuda

    interface = (
        view._ary.__array_interface__  # the simulator's arrays wrap NumPy arrays
        if cuda.config.ENABLE_CUDASIM  # type: ignore[attr-defined]
        else view.__cuda_array_interface__
    )
    first = interface["data"][0]
    reach = [(n - 1) * s for n, s in zip(view.shape, view.strides)]
    return (
        first + sum(r for r in reach if r < 0),
        first + sum(r for r in reach if r > 0) + view.dtype.itemsize,
    )


def _overlaps(view: Any, other: Any) -> bool:
    """Whether the memory spans of two device views meet (a conservative test)."""
    if view.size == 0 or other.size == 0:
        return False
    (start, stop), (other_start, other_stop) = _byte_range(view), _byte_range(other)
    return start < other_stop and other_start < stop


def _fresh_copy(array: Any, view: Any) -> Any:
    """A C-contiguous device copy of ``array`` (whose Numba view is ``view``)."""
    if _cupy_of([array]) is not None:
        return _device_view(array.copy(), "a copy")
    from numba import cuda

    if view.is_c_contiguous():
        fresh = cuda.device_array(view.shape, view.dtype)
        fresh.copy_to_device(view)
        return fresh
    # Numba copies device arrays only between identical layouts: through the host.
    return cuda.to_device(np.ascontiguousarray(view.copy_to_host()))


def _broadcast(view: Any, shape: tuple[int, ...]) -> Any:
    """``view`` broadcast to ``shape``: zero strides on batch dimensions it lacks or has as 1."""
    pad = len(shape) - view.ndim
    strides = tuple(
        0 if d < pad or view.shape[d - pad] != n else view.strides[d - pad]
        for d, n in enumerate(shape)
    )
    return _restrided(view, shape, strides)


def _at(view: Any, index: tuple[int, ...], shape: tuple[int, ...]) -> Any:
    """The part of ``view`` that, broadcast to ``shape``, lies at the leading batch ``index``.

    Indexes the array itself, never a broadcast view of it: Numba's device
    arrays index zero strides wrongly (numba-cuda 0.30).
    """
    pad = len(shape) - view.ndim
    own = tuple(0 if view.shape[d - pad] == 1 else i for d, i in enumerate(index) if d >= pad)
    return view[own] if own else view


def _flat_stride(shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """The one stride that walks dimensions ``shape`` in order, or None when there is none."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    for (_, outer), (n, inner) in zip(dims, dims[1:]):
        if outer != inner * n:
            return None
    return dims[-1][1] if dims else 0


def _flatten(view: Any, batch_ndim: int) -> Any:
    """``view`` with its first ``batch_ndim`` dimensions as one (they must be flattenable)."""
    shape, strides = tuple(view.shape), tuple(view.strides)
    stride = _flat_stride(shape[:batch_ndim], strides[:batch_ndim])
    assert stride is not None
    rows = math.prod(shape[:batch_ndim])
    return _restrided(view, (rows, *shape[batch_ndim:]), (stride, *strides[batch_ndim:]))


def _looped_dims(views: list[Any], batch_ndim: int) -> int:
    """How many leading batch dimensions to loop over so that the rest flatten in every view."""

    def flattens(view: Any, k: int) -> bool:
        shape, strides = tuple(view.shape)[k:batch_ndim], tuple(view.strides)[k:batch_ndim]
        return _flat_stride(shape, strides) is not None

    return next(k for k in range(batch_ndim + 1) if all(flattens(v, k) for v in views))


def _allocate(arrays: list[Any], shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """An uninitialised device array in the library of the inputs (CuPy, else Numba)."""
    cupy = _cupy_of(arrays)
    if cupy is not None:
        return cupy.empty(shape, dtype)
    from numba import cuda

    return cuda.device_array(shape, dtype)


def _stream(arrays: list[Any]) -> Any:
    """CuPy's current stream (wrapped for Numba) when an array is CuPy, else the default stream."""
    cupy = _cupy_of(arrays)
    pointer = cupy.cuda.get_current_stream().ptr if cupy is not None else 0
    if not pointer:
        return 0
    from numba import cuda

    return cuda.external_stream(pointer)


def _apply_passes(stencil: Kernel, passes: tuple, array: Any, out: Any, cval: Any) -> Any:
    """``stencil`` as its 1-D ``passes`` under ``constant``, each padding its input with
    ``cval`` (scipy's sobel), intermediates on the device; only the last writes ``out``."""
    view = _device_view(array, f"{stencil.name}: input 0")
    check_shapes(stencil, [view])
    in_dtype = check_dtype(view.dtype, f"{stencil.name}: input 0")
    fill_values(cval, [in_dtype], stencil.name)  # the input's cval check, before any launch
    out_dtype = result_dtype([in_dtype], stencil.dtype) if out is None else out.dtype
    *first, last = passes
    for step in first:
        array = apply_cuda(step, [array], [], out=None, mode="constant", cval=cval)
    last = last.with_options(dtype=out_dtype)
    return apply_cuda(last, [array], [], out=out, mode="constant", cval=cval)


#: numba-cuda loads a kernel's module into the CUDA context on its first launch with a given
#: signature, without a lock: two threads launching it at once (a Dask worker's threads) both
#: load it and the second fails ("key already in dictionary"). First launches take this lock;
#: the signatures each kernel has been launched with are remembered in ``_launched``.
_first_launch = threading.Lock()
_launched: weakref.WeakKeyDictionary[Any, set[tuple]] = weakref.WeakKeyDictionary()


def _launch(kernel: Any, grid: tuple, block: tuple, stream: Any, args: list[Any]) -> None:
    """``kernel.apply[grid, block, stream](*args)``, safe from many threads at once."""
    from numba import typeof

    signature = tuple(typeof(a) for a in args)
    if signature in _launched.get(kernel, ()):
        kernel.apply[grid, block, stream](*args)
        return
    with _first_launch:
        kernel.apply[grid, block, stream](*args)
        _launched.setdefault(kernel, set()).add(signature)


def apply_cuda(
    stencil: Kernel, arrays: list[Any], scalars: list[Any], *, out: Any, mode: str, cval: Any
) -> Any:
    """Run ``stencil`` on device arrays; see :func:`stencilpipe.stencil` for the semantics.

    Parameters
    ----------
    stencil : Kernel
        The stencil (:class:`.kernel.Kernel`).
    arrays : list
        Its array arguments, all in GPU memory.
    scalars : list
        Its scalar arguments.
    out : device array or None
        Where to write the result (any strides); allocated when None.
    mode : str
        Boundary mode.
    cval : scalar
        Fill value of the ``constant`` mode.

    Returns
    -------
    device array
        ``out``, or a new CuPy array (CuPy inputs) or Numba device array (others).
    """
    constant_passes = (stencil.passes or {}).get("constant") if mode == "constant" else None
    if constant_passes:
        return _apply_passes(stencil, constant_passes, arrays[0], out, cval)
    views = [_device_view(a, f"{stencil.name}: input {i}") for i, a in enumerate(arrays)]
    batch, core_shape = check_shapes(stencil, views)
    shape = batch + core_shape
    in_dtypes = tuple(
        check_dtype(v.dtype, f"{stencil.name}: input {i}") for i, v in enumerate(views)
    )
    if out is None:
        out = _allocate(arrays, shape, result_dtype(list(in_dtypes), stencil.dtype))
    elif not is_device_array(out) or tuple(out.shape) != shape:
        raise KernelError(
            f"{stencil.name}: out= must be a device array of shape {shape}, "
            f"got {type(out).__name__} of shape {getattr(out, 'shape', None)}"
        )
    out_view = _device_view(out, f"{stencil.name}: out=")
    out_dtype = check_dtype(out_view.dtype, f"{stencil.name}: out=")
    if out_view.size == 0:
        return out
    cvals = fill_values(cval, list(in_dtypes), stencil.name)
    # An out= that overlaps an input would be read after it is written (a neighbour's
    # element, in another thread block): such inputs are read from a copy.
    views = [_fresh_copy(a, v) if _overlaps(v, out_view) else v for a, v in zip(arrays, views)]
    from .codegen_cuda import block_shape, grid_shape

    kernel = stencil.compiled(in_dtypes, out_dtype, mode, target="cuda")
    views.append(out_view)
    full = [_broadcast(v, shape) for v in views]
    looped = _looped_dims(full, len(batch))
    inner = shape[looped:]
    block = block_shape(shape[-1])
    grid = grid_shape(shape[-1], math.prod(inner[:-1]), block)
    stream = _stream([*arrays, out])
    for index in np.ndindex(*batch[:looped]):
        parts = [_broadcast(_at(v, index, shape), inner) for v in views] if index else full
        *inputs, target = (_flatten(p, len(batch) - looped) for p in parts)
        with kernel.errors_translated():
            _launch(kernel, grid, block, stream, [*inputs, target, *scalars, *cvals, kernel.mode])
    return out
