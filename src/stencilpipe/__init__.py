"""stencilpipe: neighbourhood filters written once in Python, run on image stacks at any scale.

>>> import stencilpipe as sp
>>> @sp.stencil
... def smooth(x):
...     return (x[-1, 0] + x[0, 0] + x[1, 0]) // 3
"""

import importlib.metadata as _metadata

try:
    __version__ = _metadata.version("stencilpipe")
except _metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

from . import library, ndfilters
from .backends import BackendError, to_backend
from .errors import (
    BoundaryError,
    ClusterError,
    ConfigError,
    ImageStackError,
    KernelError,
    StencilpipeError,
)
from .io import (
    NoSpaceLeft,
    OutputBusy,
    Provenance,
    StackInfo,
    TargetError,
    WriteReport,
    imread,
    imsave,
    inspect,
)
from .stencils import Chain, Stencil, chain, stencil

__all__ = [
    "BackendError",
    "BoundaryError",
    "Chain",
    "ClusterError",
    "ConfigError",
    "ImageStackError",
    "KernelError",
    "NoSpaceLeft",
    "OutputBusy",
    "Provenance",
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
    "ndfilters",
    "stencil",
    "to_backend",
]
