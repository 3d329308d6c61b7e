"""Errors raised by the I/O layer; all derive from :class:`stencilpipe.errors.StencilpipeError`."""

from __future__ import annotations

from ..errors import ImageStackError, StencilpipeError

__all__ = ["BadImageFile", "NoSpaceLeft", "OutputBusy", "TargetError"]


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


class OutputBusy(StencilpipeError, RuntimeError):
    """Another live run holds the lock on the output (see :mod:`stencilpipe.io.lock`)."""


class NoSpaceLeft(StencilpipeError, OSError):
    """The output's file system (or quota) is full: a fault of the whole write, not of a frame.

    Raised by a writing task for its ``directory``; the runner stops the write and says so.
    """

    def __init__(self, directory: str, detail: str = "") -> None:
        super().__init__(f"no space left on device writing to {directory}{detail}")
        self.directory = directory
        self.detail = detail

    def __reduce__(self):
        return type(self), (self.directory, self.detail)
