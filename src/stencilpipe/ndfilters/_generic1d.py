"""generic_filter1d: a user's function over each line along an axis, compiled by Numba.

scipy calls ``function(input_line, output_line, *extra_arguments, **extra_keywords)``
once per line: ``input_line`` holds the line as doubles, extended at both ends as
the boundary mode says (``filter_size - 1`` more values, placed by ``origin``),
and the function writes the ``output_line``. Here one Numba-compiled loop calls
the compiled function on every line, and the doubles are stored in the output
dtype as scipy stores them. On Dask, each block holds whole lines (the filtered
axis in one chunk), so the function sees what it sees in scipy.
"""

from __future__ import annotations

import functools
import types

import numpy as np

from ..errors import KernelError
from ..stencils.boundary import MODE_CODES, fold
from ..stencils.dask_apply import is_dask_array
from ._apply import as_array, check_real, dtypes_of, filter_mode, finish
from ._correlate import axis_index, window_origin
from ._kernels import store_kernel

__all__ = ["generic_filter1d"]


@functools.lru_cache(maxsize=64)
def _driver(function, n_extra: int, keywords: tuple[str, ...]):
    """A compiled loop calling ``function`` (compiled) on each (input, output) line pair."""
    import numba

    if not callable(function):
        raise TypeError(f"generic_filter1d: function must be callable, got {function!r}")
    compiled = numba.njit(function) if isinstance(function, types.FunctionType) else function
    extra = [f"_sp_arg{k}" for k in range(n_extra)] + [f"_sp_kw_{key}" for key in keywords]
    passed = extra[:n_extra] + [f"{key}=_sp_kw_{key}" for key in keywords]
    source = (
        f"def lines(inputs, outputs, {', '.join(extra)}):\n"
        + "    for k in range(inputs.shape[0]):\n"
        + f"        _sp_function(inputs[k], outputs[k], {', '.join(passed)})\n"
    )
    namespace = {"_sp_function": compiled}
    exec(compile(source, "<generic_filter1d>", "exec"), namespace)  # noqa: S102
    return numba.njit(namespace["lines"])


def _extended(lines: np.ndarray, before: int, after: int, mode: str, cval: float) -> np.ndarray:
    """``lines`` (one per row) extended by ``before`` and ``after`` values as ``mode`` says."""
    n = lines.shape[-1]
    if mode == "constant":
        extended = np.full((lines.shape[0], before + n + after), float(cval))
        extended[:, before : before + n] = lines
        return extended
    code = MODE_CODES[mode]
    return np.ascontiguousarray(lines[:, [fold(j, n, code) for j in range(-before, n + after)]])


def generic_filter1d(
    input,
    function,
    filter_size,
    axis=-1,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    extra_arguments=(),
    extra_keywords=None,
):
    """``function`` over each line along ``axis`` (scipy.ndimage.generic_filter1d).

    Parameters
    ----------
    input : array_like
        NumPy or Dask array.
    function : callable
        ``function(input_line, output_line, *extra_arguments, **extra_keywords)``: reads
        the extended line (float64, ``filter_size - 1`` longer) and writes the output
        line (float64); compiled with Numba (``nopython``). A function Numba cannot
        compile raises a :class:`~stencilpipe.KernelError` naming it and Numba's reason.
    filter_size : int
        The window's length.
    axis : int
        The axis of the lines.
    output : dtype or ndarray, optional
        Output dtype, or a NumPy array to write into; default the input's dtype.
    mode : str
        Boundary mode (scipy's names).
    cval : scalar
        Value outside the array under ``constant``.
    origin : int
        Shift of the window.
    extra_arguments : tuple
        Further positional arguments of ``function``.
    extra_keywords : dict, optional
        Keyword arguments of ``function``.

    Returns
    -------
    array
        Of the input's array type.
    """
    array = as_array(input)
    check_real(array, "generic_filter1d")
    if hasattr(array, "__cuda_array_interface__"):
        raise TypeError("generic_filter1d runs on the CPU: pass a NumPy or Dask array")
    dtypes = dtypes_of(array, output, "generic_filter1d")
    if filter_size < 1:
        raise RuntimeError("invalid filter size")
    axis = axis_index(axis, array.ndim)
    origin = window_origin(int(filter_size), origin)
    mode = filter_mode(mode)
    before = filter_size // 2 + origin
    after = filter_size - filter_size // 2 - 1 - origin
    keywords = dict(extra_keywords or {})
    driver = _driver(function, len(extra_arguments), tuple(keywords))
    arguments = (*extra_arguments, *keywords.values())

    def lines(block: np.ndarray) -> np.ndarray:
        moved = np.moveaxis(np.asarray(block, dtype=np.float64), axis, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        outputs = np.zeros_like(flat)
        if flat.size:
            driver(_extended(flat, before, after, mode, cval), outputs, *arguments)
        return np.moveaxis(outputs.reshape(moved.shape), -1, axis)

    name = getattr(function, "__name__", repr(function))
    try:
        lines(np.zeros((1,) * array.ndim))  # compile now: errors here, not in a worker
    except Exception as exc:
        import numba.core.errors

        if not isinstance(exc, numba.core.errors.NumbaError):
            raise
        reason = str(exc).strip().splitlines()[0]
        raise KernelError(
            f"generic_filter1d: Numba cannot compile function {name!r} for float64 lines "
            f"({reason}); write it with NumPy/math operations Numba supports, or call "
            "scipy.ndimage.generic_filter1d"
        ) from None
    if is_dask_array(array):
        values = array.rechunk({axis: -1}).map_blocks(lines, dtype=np.float64)
    else:
        values = lines(array)
    result = store_kernel(dtypes.kernel_store)(values, channel_axis=None)
    return finish(result, dtypes, output)
