"""Where chunks live: NumPy in host memory or CuPy on the GPU, and moving Dask chunks between them.

A pipeline with ``backend: cupy`` moves each chunk to the device once after
reading and back once before writing (:func:`to_backend` adds one task per
chunk each way, whatever the number of stages); the stencils in between see
CuPy chunks and run their CUDA kernels. CuPy is imported only when a GPU
backend is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dask.array as da
import numpy as np

from .errors import StencilpipeError

__all__ = [
    "BackendError",
    "Backend",
    "BACKENDS",
    "CROSSOVER_PIXELS",
    "choose_backend",
    "gpu_status",
    "to_backend",
]

#: Frames with at least this many pixels go to the GPU under ``backend: auto``: measured by
#: ``benchmarks/gpu.py`` on an H200 against 16 CPU threads (3x3 uint8 mean, pinned transfers
#: counted), the CPU path wins at 64x64 (0.38 ms against 0.47) and loses from 128x128 up.
CROSSOVER_PIXELS = 128 * 128


class BackendError(StencilpipeError, RuntimeError):
    """A backend that this machine cannot provide (no CuPy, no GPU)."""


@dataclass(frozen=True)
class Backend:
    """How to move one chunk into a backend, and an empty chunk of it for Dask's ``meta``."""

    name: str
    convert: Callable[[Any], Any]
    empty: Callable[[tuple[int, ...], np.dtype], Any]


def _to_host(chunk: Any) -> np.ndarray:
    """A chunk in host memory (a CuPy chunk is copied off the device)."""
    return (
        chunk.get()
        if hasattr(chunk, "get") and not isinstance(chunk, np.ndarray)
        else np.asarray(chunk)
    )


def _to_cupy(chunk: Any) -> Any:
    import cupy

    return cupy.asarray(chunk)


def _cupy_empty(shape: tuple[int, ...], dtype: np.dtype) -> Any:
    import cupy

    return cupy.empty(shape, dtype)


#: The backends by name. Tests may register stand-ins here.
BACKENDS: dict[str, Backend] = {
    "numpy": Backend("numpy", _to_host, np.empty),
    "cupy": Backend("cupy", _to_cupy, _cupy_empty),
}


def gpu_status() -> str | None:
    """None when CuPy can use a GPU here, else why not (one line)."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed (pip install 'stencilpipe[gpu]')"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA reports a missing driver in many ways
        return f"CUDA is not usable ({type(exc).__name__}: {exc})"
    return None if count else "no CUDA device is present"


def choose_backend(requested: str, frame_shape: tuple[int, ...]) -> str:
    """The backend to run on: ``requested``, with ``auto`` resolved and ``cupy`` checked.

    Parameters
    ----------
    requested : {'numpy', 'cupy', 'auto'} or a registered name
    frame_shape : tuple of int
        Shape of one frame; ``auto`` picks the GPU for frames of at least
        :data:`CROSSOVER_PIXELS` pixels when a GPU is usable.

    Raises
    ------
    BackendError
        ``cupy`` on a machine without a usable GPU.
    """
    if requested == "auto":
        large = int(np.prod(frame_shape[:2])) >= CROSSOVER_PIXELS
        return "cupy" if large and gpu_status() is None else "numpy"
    if requested == "cupy":
        reason = gpu_status()
        if reason is not None:
            raise BackendError(f"backend 'cupy' needs a GPU: {reason}; use backend: numpy or auto")
    if requested not in BACKENDS:
        raise BackendError(f"unknown backend {requested!r}; expected one of {', '.join(BACKENDS)}")
    return requested


def to_backend(array: Any, name: str) -> Any:
    """``array`` with its chunks (or itself) moved to backend ``name``.

    Parameters
    ----------
    array : numpy, cupy or dask array
    name : str
        ``"numpy"`` or ``"cupy"`` (or a registered stand-in).

    Returns
    -------
    The same kind of array: a Dask array gets one conversion task per chunk
    and the right ``meta``; any other array is converted directly.

    Examples
    --------
    >>> import dask.array as da, stencilpipe as sp
    >>> x = da.zeros((4, 8, 8), chunks=(2, 8, 8))
    >>> type(sp.to_backend(x, "numpy")._meta).__name__
    'ndarray'
    """
    backend = BACKENDS.get(name)
    if backend is None:
        raise BackendError(f"unknown backend {name!r}; expected one of {', '.join(BACKENDS)}")
    if isinstance(array, da.Array):
        meta = backend.empty((0,) * array.ndim, array.dtype)
        return da.map_blocks(backend.convert, array, dtype=array.dtype, meta=meta)
    return backend.convert(array)
