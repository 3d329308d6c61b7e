"""generic_filter (a user's function over the footprint, compiled by Numba) and threshold_local.

scipy's generic_filter calls a Python function per element with the footprint's
values as a 1-D float64 array (or, through a LowLevelCallable, compiled code).
Here the function is compiled with Numba and called from the kernel: the
kernel fills a buffer with the values in the footprint's C order and stores the
returned double as scipy does. It reads the input as float64, padded by the
footprint's reach with the mode (``cval`` as a double), so that one kernel per
function and footprint serves every mode and input dtype: each compile of a
kernel calling a user's function takes seconds, and is not cached on disk; a kernel
calling one of NumPy's functions (``np.max``, ``np.std``) is.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np

from ..errors import KernelError
from ..library import _from_source
from ..stencils import Stencil
from ..stencils.boundary import NUMPY_PAD_MODES
from ..stencils.dask_apply import is_dask_array
from ..stencils.windows import SCIPY_STORES
from ._apply import (
    Pass,
    as_array,
    check_axes,
    check_real,
    dtypes_of,
    filter_mode,
    finish,
    run_passes,
)
from ._casting import Dtypes, store_lines
from ._correlate import uniform_filter
from ._derivatives import gaussian_filter
from ._generic_window import GenericWindow
from ._kernels import box_places
from ._order import box_or_footprint, expand, median_filter, offsets_of, warn_size_ignored

__all__ = ["generic_filter", "threshold_local"]


def _jitted(function):
    """A Python ``function`` as a Numba dispatcher (compiled lazily, on first call); others
    (NumPy's functions such as ``np.std``, Numba dispatchers) as they are: Numba knows them."""
    if not callable(function):
        raise TypeError(f"generic_filter: function must be callable, got {function!r}")
    if isinstance(function, types.FunctionType):
        import numba

        return numba.njit(function)
    return function


def _kernel_source(offsets, n_extra: int, keywords: list[str], store: np.dtype) -> str:
    reads = ["x[" + ", ".join(map(str, offset)) + "]" for offset in offsets]
    arguments = ["buffer"] + [f"_sp_arg{k}" for k in range(n_extra)]
    arguments += [f"{key}=_sp_kw_{key}" for key in keywords]
    lines = ["def generic_filter(x):", f"    buffer = np.empty({len(reads)}, np.float64)"]
    lines += [f"    buffer[{k}] = {read}" for k, read in enumerate(reads)]
    lines.append(f"    t = np.float64(_sp_function({', '.join(arguments)}))")
    return "\n".join(lines + store_lines("t", store)) + "\n"


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def _kernel(function, offsets, extra_arguments, keywords, store) -> Stencil:
    """The stencil calling ``function`` (compiled) on the values at ``offsets``; its small
    calls run :class:`._generic_window.GenericWindow` (up to 3 axes, no keywords: one
    compile per function, whatever the footprint)."""
    source = _kernel_source(offsets, len(extra_arguments), [key for key, _ in keywords], store)
    namespace = {"_sp_function": _jitted(function)}
    # NumPy scalars as Python numbers: the compiler writes constants into the kernel's
    # module as source, and repr(np.float64(5.0)) is not source there.
    namespace.update({f"_sp_arg{k}": _plain(a) for k, a in enumerate(extra_arguments)})
    namespace.update({f"_sp_kw_{key}": _plain(value) for key, value in keywords})
    kernel_store = np.dtype(np.uint8) if store.kind == "b" else store
    made = _from_source("generic_filter", source, namespace, dtype=kernel_store)
    args = tuple(_plain(a) for a in extra_arguments)
    if not keywords and kernel_store in SCIPY_STORES and len(offsets[0]) <= 3 and _hashable(args):
        reach, places = box_places(offsets)
        made.passes = {"small": (GenericWindow(reach, places, namespace["_sp_function"], args),)}
    return made


def _hashable(value: Any) -> bool:
    """Whether ``value`` can key a cache (a pass is compiled once per its attributes)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


#: Kernels of recent (function, footprint, arguments, store) calls: a user's function cannot
#: be cached on disk (it is injected into the module), so each process compiles it once.
_cached_kernel = functools.lru_cache(maxsize=64)(_kernel)


def generic_filter(
    image,
    function,
    size=None,
    footprint=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    extra_arguments=(),
    extra_keywords=None,
    *,
    output=None,
    axes=None,
):
    """``function`` of the values in each window (dask_image / scipy ``generic_filter``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    function : callable
        Takes a 1-D float64 array of the footprint's values (C order) and returns a
        number; compiled with Numba (``nopython``): NumPy functions on arrays, math,
        loops. A function Numba cannot compile raises a :class:`~stencilpipe.KernelError`
        naming it and Numba's reason.
    size, footprint, mode, cval, origin, output, axes
        As for :func:`stencilpipe.ndfilters.minimum_filter` (one mode for all axes).
    extra_arguments : tuple
        Further positional arguments of ``function``.
    extra_keywords : dict, optional
        Keyword arguments of ``function``.
    """
    warn_size_ignored(size, footprint)
    array = as_array(image)
    check_real(array, "generic_filter")
    axes = check_axes(axes, array.ndim)
    footprint, origins = expand(array, box_or_footprint(size, footprint, len(axes)), origin, axes)
    if not isinstance(mode, str):
        raise RuntimeError("A sequence of modes is not supported by generic_filter")
    mode = filter_mode(mode)
    keywords = dict(extra_keywords or {})
    dtypes = dtypes_of(array, output, "generic_filter")
    arguments = (offsets_of(footprint, origins), tuple(extra_arguments))
    arguments += (tuple(sorted(keywords.items())), dtypes.store)
    try:
        stencil = _cached_kernel(function, *arguments)
    except TypeError:  # unhashable extra arguments: compiled for this call only
        stencil = _kernel(function, *arguments)
    # The outside is in the padding: the kernel's own mode never reads it.
    step = Pass(lambda _dtype: stencil, "nearest")
    doubles = Dtypes(np.dtype(np.float64), dtypes.store, dtypes.output)
    name = getattr(function, "__name__", repr(function))
    try:
        if is_dask_array(array):  # compile now, not in a worker at compute time
            run_passes(np.zeros((1,) * array.ndim), [step], doubles, 0)
        padded = _padded(array.astype(np.float64), stencil.halo, mode, cval)
        result = run_passes(padded, [step], doubles, 0)
    except KernelError as exc:
        reason = str(exc).split(": ", 1)[-1].split(". Kernels may", 1)[0]
        raise KernelError(
            f"generic_filter: Numba cannot compile function {name!r} for a 1-D float64 "
            f"array of the footprint's values ({reason}); write it with NumPy/math "
            "operations Numba supports, or call scipy.ndimage.generic_filter"
        ) from None
    inside = tuple(slice(before, before + n) for (before, _), n in zip(stencil.halo, array.shape))
    return finish(result[inside], dtypes, output)


def _padded(values, halo, mode: str, cval):
    """``values`` (NumPy, Dask or CuPy) padded by ``halo`` under the compiler's ``mode``."""
    if is_dask_array(values):
        import dask.array as da

        pad = da.pad
    elif hasattr(values, "__cuda_array_interface__"):
        import cupy

        pad = cupy.pad
    else:
        pad = np.pad
    extra = {"constant_values": float(cval)} if mode == "constant" else {}
    return pad(values, [tuple(widths) for widths in halo], mode=NUMPY_PAD_MODES[mode], **extra)


def threshold_local(
    image, block_size, method="gaussian", offset=0, mode="reflect", param=None, cval=0
):
    """Local threshold: a weighted mean of each neighbourhood minus ``offset``
    (dask_image.ndfilters.threshold_local), computed in float64.

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    block_size : int or sequence of int
        The neighbourhood's size.
    method : {'gaussian', 'mean', 'median', 'generic'}
        The local statistic: a Gaussian with sigma ``(block_size - 1) / 6`` (or
        ``param``), the mean, the median, or ``param`` as a generic_filter function.
    offset : float
        Subtracted from the statistic.
    mode : str
        Boundary mode.
    param : float or callable, optional
        Sigma for 'gaussian', the function for 'generic'.
    cval : scalar
        Value outside the array under ``constant``.
    """
    array = as_array(image).astype(np.float64)
    if method == "generic":
        if not callable(param):
            raise ValueError(
                "Must include a valid function to use as the 'param' keyword argument."
            )
        thresholds = generic_filter(array, param, block_size, mode=mode, cval=cval)
    elif method == "gaussian":
        sigma = (np.array(block_size).astype(float) - 1) / 6.0 if param is None else param
        thresholds = gaussian_filter(array, sigma, mode=mode, cval=cval)
    elif method == "mean":
        thresholds = uniform_filter(array, block_size, mode=mode, cval=cval)
    elif method == "median":
        thresholds = median_filter(array, block_size, mode=mode, cval=cval)
    else:
        raise ValueError(
            "Invalid method specified. Please use `generic`, `gaussian`, `mean`, or `median`."
        )
    return thresholds - offset
