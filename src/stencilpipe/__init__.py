"""stencilpipe: neighbourhood filters written once in Python, run on image stacks at any scale.

>>> import stencilpipe as sp
>>> @sp.stencil
... def smooth(x):
...     return (x[-1, 0] + x[0, 0] + x[1, 0]) // 3

Names load on first use (PEP 562): ``import stencilpipe`` alone imports neither
NumPy's stack of Dask and Numba nor the IO libraries, so ``stencilpipe --help`` and
other commands that need none of them start in a fraction of a second.
"""

import importlib
from typing import TYPE_CHECKING, Any

__version__: str  # looked up on first use (see __getattr__)

from .errors import (
    BoundaryError,
    ClusterError,
    ConfigError,
    ImageStackError,
    KernelError,
    StencilpipeError,
)

if TYPE_CHECKING:
    from . import library, ndfilters, ndmorph
    from .backends import BackendError, to_backend
    from .io import (
        Image,
        Metadata,
        NoSpaceLeft,
        OutputBusy,
        Provenance,
        StackInfo,
        TargetError,
        WriteReport,
        imread,
        imsave,
        inspect,
        read_image,
    )
    from .stencils import Chain, Stencil, chain, stencil

#: Where each lazily loaded name lives: a submodule (its own name) or a module's attribute.
_WHERE = {
    "library": ".library",
    "ndfilters": ".ndfilters",
    "ndmorph": ".ndmorph",
    "BackendError": ".backends",
    "to_backend": ".backends",
    **dict.fromkeys(
        [
            "Image",
            "Metadata",
            "NoSpaceLeft",
            "OutputBusy",
            "Provenance",
            "StackInfo",
            "TargetError",
            "WriteReport",
            "imread",
            "imsave",
            "inspect",
            "read_image",
        ],
        ".io",
    ),
    **dict.fromkeys(["Chain", "Stencil", "chain", "stencil"], ".stencils"),
}

__all__ = [
    "BackendError",
    "BoundaryError",
    "Chain",
    "ClusterError",
    "ConfigError",
    "Image",
    "ImageStackError",
    "KernelError",
    "Metadata",
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
    "ndmorph",
    "read_image",
    "stencil",
    "to_backend",
]


def _version() -> str:
    """The installed distribution's version (importlib.metadata: looked up on first use)."""
    import importlib.metadata as metadata

    try:
        return metadata.version("stencilpipe")
    except metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()[name] = version = _version()
        return version
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'stencilpipe' has no attribute {name!r}")
    module = importlib.import_module(where, __name__)
    value = module if where == f".{name}" else getattr(module, name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"__version__"})
