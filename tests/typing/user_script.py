"""A user's script, checked by mypy (tests/test_typing.py): correct calls pass, and each
wrong one is an error the checker must find (``type: ignore[code]`` with
``warn_unused_ignores``: an ignore that is not needed fails the check)."""

from __future__ import annotations

import dask.array as da
import numpy as np
import numpy.typing as npt

import stencilpipe as sp


@sp.stencil
def smooth(x):
    return (x[-1, 0] + x[0, 0] + x[1, 0]) / 3


@sp.stencil(boundary="nearest")
def edges(x):
    return x[0, 1] - x[0, -1]


frame: npt.NDArray[np.float32] = np.zeros((64, 64), np.float32)
stack = da.zeros((8, 64, 64), chunks=(2, 64, 64))

# The result follows the input: NumPy in, NumPy out; Dask in, Dask out.
smoothed: npt.NDArray[np.generic] = smooth(frame)
lazy: da.Array = edges(stack)
blurred: da.Array = sp.library.gaussian(1.5)(stack)
chained: da.Array = sp.chain(smooth, edges)(stack)
filtered: npt.NDArray[np.generic] = sp.ndfilters.uniform_filter(frame, size=3)
chunked: da.Array = sp.ndfilters.median_filter(stack, size=(1, 3, 3))
sp.library.mean((3, 5), boundary="mirror")
sp.stencil(boundary="wrap")(lambda x: x[0, 0])

# Wrong calls the checker must catch.
sp.library.mean(size="3")  # type: ignore[arg-type]
sp.stencil(boundary="reflected")  # type: ignore[call-overload]
smooth(frame, boundary="edge")  # type: ignore[call-overload]
wrong: da.Array = smooth(frame)  # type: ignore[assignment]
sp.chain(smooth, 3)  # type: ignore[arg-type]
