"""stencilpipe: neighbourhood filters written once in Python, run on image stacks at any scale.

>>> import stencilpipe as sp
>>> @sp.stencil
... def smooth(x):
...     return (x[-1, 0] + x[0, 0] + x[1, 0]) // 3
"""

from . import library
from .errors import BoundaryError, ImageStackError, KernelError, StencilpipeError
from .stencils import Chain, Stencil, chain, stencil

__all__ = [
    "BoundaryError",
    "Chain",
    "ImageStackError",
    "KernelError",
    "Stencil",
    "StencilpipeError",
    "chain",
    "library",
    "stencil",
]
