"""The exceptions stencilpipe raises for users' mistakes.

Every error a user can cause derives from :class:`StencilpipeError` and from the
builtin that fits (``ValueError``, ``TypeError``), so ``except ValueError`` keeps
working. Messages say what went wrong, where, and how to fix it; anything else
that escapes is an internal bug.
"""

from __future__ import annotations

__all__ = [
    "StencilpipeError",
    "KernelError",
    "BoundaryError",
    "ImageStackError",
    "ConfigError",
    "ClusterError",
]


class StencilpipeError(Exception):
    """Root of every error caused by a user's input."""


class KernelError(StencilpipeError, ValueError):
    """A stencil kernel that cannot be analysed or compiled."""


class BoundaryError(StencilpipeError, ValueError):
    """An unknown boundary mode or a bad ``cval``."""


class ImageStackError(StencilpipeError, ValueError):
    """Input images that cannot form one stack (unreadable, mixed, missing)."""


class ConfigError(StencilpipeError, ValueError):
    """A pipeline configuration that is malformed or refers to something that does not exist."""


class ClusterError(StencilpipeError, ConnectionError):
    """A Dask cluster that cannot be reached or started."""
