"""generic_filter's small calls: the user's function over a footprint given as data.

The kernel written out per function and footprint (:func:`._generic._kernel`)
reads each point's values from offsets written into its source: about 5 s of compiling
for a 3x3x3 box calling ``np.max``, again for each footprint. :class:`GenericWindow`
gathers the lines of the box around each output line (:func:`.window_kernels.gather`)
and fills the function's buffer from the footprint's places given as data, so one loop
per function serves every footprint (a NumPy function's loop is cached on disk; a
user's function is compiled once per process, as its kernel is). The CPU runs it on
small calls (:data:`stencilpipe.stencils.stencil.SMALL_CALL`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import KernelError
from ..stencils.boundary import MODE_CODES
from ..stencils.modules import load_module
from ..stencils.rewrite import source_literal
from ..stencils.windows import BoxPass, _Rows, box_frames, box_reach, scipy_store

__all__ = ["GenericWindow"]

_SOURCE = """\
import numba as _sp_numba
import numpy as _sp_np

from stencilpipe.stencils.windows import window_loops as _sp_window_loops

_SP_CACHE = {cache}
_sp_loops = _sp_window_loops()
_sp_gather = _sp_loops.gather
_sp_store_all = _sp_loops.store_all
{function}


@_sp_numba.njit(cache=_SP_CACHE, nogil=True)
def generic_window(x, out, cval, first, last, reach, kn, mode, to, bits, signed, qs, ss, args):
    a0, a1, n = x.shape[1], x.shape[2], x.shape[3]
    values = _sp_np.empty((reach[1] * reach[3], n + kn - 1), _sp_np.float64)
    buffer = _sp_np.empty(qs.size, _sp_np.float64)
    result = _sp_np.empty(n, _sp_np.float64)
    for t in range(first, last):
        b, i0 = t // a0, t % a0
        for i1 in range(a1):
            _sp_gather(x, b, i0, i1, reach, mode, cval, values)
            for i in range(n):
                for k in range(qs.size):
                    buffer[k] = values[qs[k], ss[k] + i]
                result[i] = _sp_np.float64(_sp_function(buffer, *args))
            _sp_store_all(result, out[b, i0, i1], to, bits, signed)
"""


@functools.cache
def _loop(function: Any) -> Any:
    """``generic_window`` calling ``function``: from a module cached on disk for NumPy's
    functions (written by name), else with the function placed in the module."""
    literal = source_literal(function)
    if literal is None:
        source = _SOURCE.format(cache=False, function="")
        module = load_module("generic_window", source, {"_sp_function": function})
    else:
        source = _SOURCE.format(cache=True, function=f"_sp_function = {literal}")
        module = load_module("generic_window", source)
    return module.generic_window


@dataclass(frozen=True)
class GenericWindow(BoxPass):
    """``function(buffer, *args)`` of the values at ``places`` of the box around each
    element (1 to 3 core axes; the buffer of doubles in the places' order), stored as
    scipy stores a double, for outputs of :data:`~stencilpipe.stencils.windows.SCIPY_STORES`.

    Attributes
    ----------
    reach : tuple of (int, int)
        The reach before and after each element of the box, per core axis.
    places : tuple of int
        The footprint's places in the box (flat, C order).
    function : callable
        A Numba dispatcher or one of NumPy's functions.
    args : tuple
        Its further positional arguments.
    """

    reach: tuple[tuple[int, int], ...]
    places: tuple[int, ...]
    function: Any
    args: tuple

    name = "generic_window"

    def _build(self, in_dtypes: tuple[np.dtype, ...], out_dtype: np.dtype, mode: str) -> _Rows:
        loop = _loop(self.function)
        ndim = len(self.reach)
        reach, kn = box_reach(self.reach)
        code = MODE_CODES[mode]
        places = np.array(self.places, np.intp)
        qs, ss = places // kn, places % kn
        stores = scipy_store(out_dtype)

        def call(x, out, cval, start, stop, to):
            xs, outs = box_frames(x, ndim), box_frames(out, ndim)
            try:
                loop(xs, outs, cval, start, stop, reach, kn, code, to, *stores, qs, ss, self.args)
            except Exception as exc:
                from numba.core.errors import NumbaError  # imported with the loop already

                if isinstance(exc, NumbaError):  # the user's function cannot be typed
                    raise KernelError(f"generic_window: {exc}") from None
                raise

        return _Rows(call, out_dtype.type)
