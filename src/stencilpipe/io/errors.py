"""Errors raised by the I/O layer; both derive from :class:`stencilpipe.errors.StencilpipeError`."""

from __future__ import annotations

from ..errors import ImageStackError, StencilpipeError

__all__ = ["BadImageFile", "TargetError"]


class BadImageFile(ImageStackError):
    """One input file that cannot be read; ``path`` and ``reason`` say which and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason

    def __reduce__(self):  # keep both fields when a worker sends the error to the client
        return type(self), (self.path, self.reason)


class TargetError(StencilpipeError, ValueError):
    """A write that stencilpipe refuses: it would touch the inputs, leave its directory,
    or the format cannot hold the data."""
