"""What a stack's axes are: their kinds, physical step sizes, units, and the channel names.

:class:`Metadata` describes the array that :func:`~stencilpipe.io.imread` returns, one
letter per axis: ``t`` time, ``c`` channel, ``z``, ``y``, ``x`` space, ``s`` the samples
of an RGB(A) pixel, and ``i`` frames of unknown kind (a directory of images, a plain
multi-page TIFF). The axes come in the order filters need: the batch axes (``t``, ``i``,
``c``) first, then ``z, y, x``, then ``s``; so the last two (or three, with ``z``) axes are
the spatial ones a stencil reads, and time and channel planes are never mixed.

Units are the UDUNITS-2 names that OME-NGFF uses (``micrometer``, ``second``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "AXIS_KINDS",
    "Arrangement",
    "Metadata",
    "arrange",
    "canonical_order",
    "ngff_unit",
    "ome_unit",
]

#: The kind of each axis letter (the NGFF axis ``type``; ``i`` and ``s`` have none there).
AXIS_KINDS = {"t": "time", "c": "channel", "i": "frames", "z": "space", "y": "space",
              "x": "space", "s": "samples"}  # fmt: skip
#: Where each kind of axis goes: batch axes first (time before channels, as NGFF orders
#: them), then space, then the samples of a pixel.
_RANK = {"t": 0, "i": 1, "c": 2, "z": 3, "y": 4, "x": 5, "s": 6}

#: OME's unit symbols (OME-XML, ImageJ) and what NGFF calls them.
_UNITS = {
    "Å": "angstrom", "nm": "nanometer", "µm": "micrometer", "um": "micrometer",
    "micron": "micrometer", "mm": "millimeter", "cm": "centimeter", "m": "meter",
    "in": "inch", "inch": "inch", "ps": "picosecond", "ns": "nanosecond",
    "µs": "microsecond", "us": "microsecond", "ms": "millisecond", "s": "second",
    "sec": "second", "min": "minute", "h": "hour",
}  # fmt: skip
_SYMBOLS = {name: symbol for symbol, name in reversed(list(_UNITS.items()))}


def ngff_unit(unit: str | None) -> str | None:
    """The NGFF (UDUNITS-2) name of an OME or ImageJ unit symbol; other names unchanged.

    Examples
    --------
    >>> ngff_unit("µm"), ngff_unit("micron"), ngff_unit("second"), ngff_unit(None)
    ('micrometer', 'micrometer', 'second', None)
    """
    if not unit:
        return None
    return _UNITS.get(unit.strip(), unit.strip())


def ome_unit(unit: str | None) -> str | None:
    """The OME-XML symbol of an NGFF unit name (``micrometer`` -> ``µm``)."""
    return _SYMBOLS.get(unit, unit) if unit else None


def canonical_order(axes: str) -> list[int]:
    """The permutation that puts ``axes`` in the order of :class:`Metadata` (stable).

    Examples
    --------
    >>> canonical_order("zcyx"), canonical_order("tczyx")
    ([1, 0, 2, 3], [0, 1, 2, 3, 4])
    """
    return sorted(range(len(axes)), key=lambda i: _RANK[axes[i]])


@dataclass(frozen=True)
class Metadata:
    """The axes of an image stack and what is known of them.

    Attributes
    ----------
    axes : str
        One letter per array axis (see the module docs), such as ``"tczyx"``.
    scale : tuple of float
        The physical size of one step along each axis (1.0 where unknown).
    units : tuple of str or None
        The unit of each step (NGFF names such as ``"micrometer"``; None where unknown).
    channel_names : tuple of str
        One name per channel of the ``c`` axis, when the source names them.
    """

    axes: str
    scale: tuple[float, ...] = ()
    units: tuple[str | None, ...] = ()
    channel_names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.axes)
        object.__setattr__(self, "scale", tuple(float(s) for s in self.scale) or (1.0,) * n)
        object.__setattr__(self, "units", tuple(self.units) or (None,) * n)
        if len(self.scale) != n or len(self.units) != n:
            raise ValueError(f"axes {self.axes!r} need {n} scales and units")

    @classmethod
    def of(
        cls,
        axes: str,
        sizes: dict[str, float] | None = None,
        units: dict[str, str | None] | None = None,
        channel_names: Sequence[str] = (),
    ) -> Metadata:
        """Metadata for ``axes`` from per-letter step ``sizes`` and ``units`` (others: unknown)."""
        sizes, units = sizes or {}, units or {}
        return cls(
            axes,
            tuple(_positive(sizes.get(a)) for a in axes),
            tuple(ngff_unit(units.get(a)) for a in axes),
            tuple(str(n) for n in channel_names),
        )

    def transposed(self, order: Sequence[int]) -> Metadata:
        """This metadata for the axes taken in ``order``."""
        return Metadata(
            "".join(self.axes[i] for i in order),
            tuple(self.scale[i] for i in order),
            tuple(self.units[i] for i in order),
            self.channel_names,
        )

    def without(self, letters: str) -> Metadata:
        """This metadata without the axes ``letters`` (channel names go with ``c``)."""
        keep = [i for i, a in enumerate(self.axes) if a not in letters]
        names = () if "c" in letters else self.channel_names
        return Metadata(
            "".join(self.axes[i] for i in keep),
            tuple(self.scale[i] for i in keep),
            tuple(self.units[i] for i in keep),
            names,
        )

    @property
    def spatial(self) -> str:
        """The spatial axes, such as ``"zyx"``."""
        return "".join(a for a in self.axes if AXIS_KINDS[a] == "space")

    def as_dict(self) -> dict[str, Any]:
        """Plain data: ``axes``, ``scale`` and ``units`` (by axis), ``channel_names``."""
        return {
            "axes": self.axes,
            "scale": dict(zip(self.axes, self.scale, strict=True)),
            "units": dict(zip(self.axes, self.units, strict=True)),
            "channel_names": list(self.channel_names),
        }

    def summary(self) -> str:
        """One line for people, such as ``tczyx, z 2 micrometer, y 0.5 micrometer, ...``."""
        steps = [
            f"{a} {s:g}{' ' + u if u else ''}"
            for a, s, u in zip(self.axes, self.scale, self.units, strict=True)
            if s != 1.0 or u
        ]
        return ", ".join([self.axes, *steps])


def _positive(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 1.0
    return number if math.isfinite(number) and number > 0 else 1.0


@dataclass(frozen=True)
class Arrangement:
    """How an array as stored becomes the array :func:`~stencilpipe.io.imread` returns:
    drop the axes of length 1 (but ``y, x``), put the rest in canonical order, merge the
    frame axes of unknown kind into one, and give a lone frame a frame axis."""

    keep: tuple[int, ...]
    order: tuple[int, ...]
    shape: tuple[int, ...]
    metadata: Metadata

    def apply(self, array: Any) -> Any:
        """``array`` (NumPy or Dask, in the stored layout) arranged."""
        return self._apply(array, len(self.keep), self.shape)

    def apply_lead(self, array: Any) -> Any:
        """The same for an array of the axes before the frame axes alone (frames of files)."""
        frame_ndim = len(self.metadata.axes) - self.metadata.axes.index("y")
        return self._apply(array, len(self.keep) - frame_ndim, self.shape[:-frame_ndim])

    def _apply(self, array: Any, kept: int, shape: tuple[int, ...]) -> Any:
        # Dropped by reshape, not by an integer index (that would turn a NumPy object
        # array of one frame into its element).
        picked = array.reshape([n for i, n in enumerate(array.shape) if i in self.keep])
        moved = picked.transpose(self.order[:kept])
        return moved if moved.shape == shape else moved.reshape(shape)


def arrange(metadata: Metadata, shape: Sequence[int]) -> Arrangement:
    """The :class:`Arrangement` of an array of ``shape`` whose axes ``metadata`` describes.

    Examples
    --------
    >>> plan = arrange(Metadata("zcyx"), (4, 2, 8, 9))
    >>> plan.metadata.axes, plan.shape
    ('czyx', (2, 4, 8, 9))
    >>> arrange(Metadata("iiyx"), (2, 3, 8, 9)).shape
    (6, 8, 9)
    """
    seen: set[str] = set()
    letters = []
    for letter in metadata.axes:  # a kind that occurs twice is a frame axis the second time
        letters.append("i" if letter in seen and letter not in "i" else letter)
        seen.add(letter)
    named = Metadata("".join(letters), metadata.scale, metadata.units, metadata.channel_names)
    keep = tuple(i for i, (a, n) in enumerate(zip(named.axes, shape)) if n > 1 or a in "yx")
    kept = named.transposed(keep)
    order = canonical_order(kept.axes)
    moved = kept.transposed(order)
    sizes = [shape[keep[i]] for i in order]
    first = moved.axes.find("i")
    frames = moved.axes.count("i")
    if frames > 1:  # unknown axes sit side by side in canonical order: one axis of all
        sizes[first : first + frames] = [math.prod(sizes[first : first + frames])]
        moved = moved.without("i")
        moved = Metadata(
            moved.axes[:first] + "i" + moved.axes[first:],
            (*moved.scale[:first], 1.0, *moved.scale[first:]),
            (*moved.units[:first], None, *moved.units[first:]),
            moved.channel_names,
        )
    if moved.axes[0] in "yx":
        sizes.insert(0, 1)
        moved = Metadata("i" + moved.axes, (1.0, *moved.scale), (None, *moved.units),
                         moved.channel_names)  # fmt: skip
    channels = moved.axes.find("c")
    if channels < 0 or len(moved.channel_names) != sizes[channels]:
        moved = replace(moved, channel_names=())
    return Arrangement(keep, tuple(order), tuple(sizes), moved)
