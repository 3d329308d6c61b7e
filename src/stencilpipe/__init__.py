"""stencilpipe: neighbourhood filters written once in Python, run on image stacks at any scale.

>>> import stencilpipe as sp
>>> @sp.stencil
... def smooth(x):
...     return (x[-1, 0] + x[0, 0] + x[1, 0]) // 3
"""

from . import library
from .backends import BackendError, to_backend
from .errors import (
    BoundaryError,
    ClusterError,
    ConfigError,
    ImageStackError,
    KernelError,
    StencilpipeError,
)
from .io import StackInfo, TargetError, WriteReport, imread, imsave, inspect
from .stencils import Chain, Stencil, chain, stencil

__all__ = [
    "BackendError",
    "BoundaryError",
    "Chain",
    "ClusterError",
    "ConfigError",
    "ImageStackError",
    "KernelError",
    "StackInfo",
    "Stencil",
    "StencilpipeError",
    "TargetError",
    "WriteReport",
    "chain",
    "imread",
    "imsave",
    "inspect",
    "library",
    "stencil",
    "to_backend",
]
