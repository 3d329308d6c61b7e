"""Which backend runs a kernel on which arrays: a small registry of array types.

As dask-image's ``dispatch``: each backend says which arrays it claims, and the
first backend (in registration order) that claims one of a call's arrays runs
the call; NumPy runs the rest. The GPU backend imports nothing until a device
array arrives, so a CPU-only process never loads CUDA or CuPy.

A library that brings its own array type registers a backend for it with
:func:`register`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .cuda_apply import apply_cuda, is_device_array
from .dask_apply import apply_dask, is_dask_array
from .gufunc import apply_numpy

__all__ = ["Backend", "backend_for", "register"]


@dataclass(frozen=True)
class Backend:
    """How one kind of array is computed on.

    Attributes
    ----------
    name : str
        Its name, for messages.
    claims : callable
        ``claims(array) -> bool``: whether an argument makes a call this backend's.
    apply : callable
        ``apply(kernel, arrays, scalars, *, out, mode, cval)``, as
        :func:`.gufunc.apply_numpy`.
    lazy : bool
        Whether it returns lazy results, which have no ``out=``.
    """

    name: str
    claims: Callable[[Any], bool]
    apply: Callable[..., Any]
    lazy: bool = False


def _apply_lazily(kernel: Any, arrays: list, scalars: list, *, out: Any, mode: str, cval: Any):
    return apply_dask(kernel, arrays, scalars, mode=mode, cval=cval)


_NUMPY = Backend("numpy", lambda array: True, apply_numpy)
_BACKENDS: list[Backend] = [
    Backend("dask", is_dask_array, _apply_lazily, lazy=True),
    Backend("cuda", is_device_array, apply_cuda),
]


def register(backend: Backend) -> None:
    """Let ``backend`` run calls on the arrays it claims (before the built-in ones)."""
    _BACKENDS.insert(0, backend)


def backend_for(arrays: Sequence[Any]) -> Backend:
    """The backend that runs a call on ``arrays``."""
    for backend in _BACKENDS:
        if any(backend.claims(array) for array in arrays):
            return backend
    return _NUMPY
