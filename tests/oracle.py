"""Independent oracles: a kernel evaluated by a plain Python loop on ``np.pad``-ed input.

Nothing here uses stencilpipe's code: padding is NumPy's, arithmetic is
Python's (ints do not overflow, floats are doubles), and the store rule is
written out from the documented contract.
"""

from __future__ import annotations

import numpy as np

#: scipy.ndimage's boundary names -> numpy.pad's.
NUMPY_PAD_MODE = {
    "reflect": "symmetric",
    "mirror": "reflect",
    "nearest": "edge",
    "wrap": "wrap",
    "constant": "constant",
}
MODES = tuple(NUMPY_PAD_MODE)


class _Relative:
    """Reads a padded array at offsets relative to one centre, as Python scalars."""

    def __init__(self, padded: np.ndarray, centre: tuple[int, ...]):
        self.padded = padded
        self.centre = centre

    def __getitem__(self, offsets):
        offsets = offsets if isinstance(offsets, tuple) else (offsets,)
        return self.padded[tuple(c + int(o) for c, o in zip(self.centre, offsets))].item()


def store(value, dtype) -> np.generic:
    """The documented store: round floats to nearest-even and saturate for integer outputs."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype.type(value)
    if isinstance(value, float):
        value = float(np.rint(value))
    info = np.iinfo(dtype)
    return dtype.type(min(max(value, info.min), info.max))


def pad(array: np.ndarray, halo, mode: str, cval=0) -> np.ndarray:
    core = len(halo)
    widths = [(0, 0)] * (array.ndim - core) + [tuple(h) for h in halo]
    extra = {"constant_values": cval} if mode == "constant" else {}
    return np.pad(array, widths, mode=NUMPY_PAD_MODE[mode], **extra)


def kernel_by_loop(func, arrays, scalars=(), *, halo, mode="reflect", cval=0, out_dtype=None):
    """Evaluate ``func`` (the undecorated kernel) at every element with a plain loop."""
    arrays = [np.asarray(a) for a in arrays]
    core = len(halo)
    out_dtype = np.result_type(*arrays) if out_dtype is None else np.dtype(out_dtype)
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    batch_shape = shape[: len(shape) - core]
    padded = [pad(a, halo, mode, cval) for a in arrays]
    padded = [np.broadcast_to(p, batch_shape + p.shape[p.ndim - core :]) for p in padded]
    out = np.empty(shape, out_dtype)
    for index in np.ndindex(shape):
        batch, centre = index[: len(batch_shape)], index[len(batch_shape) :]
        shifted = tuple(c + h[0] for c, h in zip(centre, halo))
        views = [_Relative(p[batch], shifted) for p in padded]
        out[index] = store(func(*views, *scalars), out_dtype)
    return out
