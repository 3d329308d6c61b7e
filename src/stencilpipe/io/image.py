"""An opened stack together with what it is: :class:`Image`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dask.array as da

from .metadata import Metadata
from .stackinfo import StackInfo

__all__ = ["Image"]


@dataclass(frozen=True)
class Image:
    """A lazy stack and its axes, physical sizes, units and channel names.

    ``data`` is the plain Dask array :func:`~stencilpipe.io.imread` returns (filters take
    it as it is); the rest describes its axes, one entry per axis of ``data``.

    Attributes
    ----------
    data : dask.array.Array
    info : StackInfo
        The full description (source, files, chunks, skipped files...).
    """

    data: da.Array
    info: StackInfo

    @property
    def axes(self) -> str:
        """One letter per axis of ``data``: ``t``, ``c``, ``z``, ``y``, ``x``, ``s``, ``i``."""
        return self.info.axes

    @property
    def scale(self) -> tuple[float, ...]:
        """The physical size of one step along each axis (1.0 where unknown)."""
        return self.info.scale

    @property
    def units(self) -> tuple[str | None, ...]:
        """The unit of each axis (NGFF names such as ``"micrometer"``; None where unknown)."""
        return self.info.units

    @property
    def channel_names(self) -> tuple[str, ...]:
        """The names of the ``c`` axis's channels, when the source names them."""
        return self.info.channel_names

    @property
    def metadata(self) -> Metadata:
        """All of the above, as :func:`~stencilpipe.io.imsave` takes it (``metadata=``)."""
        return self.info.metadata or Metadata(self.axes)

    def as_dict(self) -> dict[str, Any]:
        """The description as JSON-serialisable data."""
        return self.info.as_dict()
