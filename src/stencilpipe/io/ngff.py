"""OME-NGFF (OME-Zarr) image metadata: read into :class:`Metadata`, and written from it.

Reading takes NGFF 0.1-0.5 (``multiscales`` at the top of the attributes, or under
``ome`` from 0.5 on); writing makes NGFF 0.5. The JSON is small and written here: the
tests check it against ngff-zarr's reader and validator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .metadata import Metadata

__all__ = ["NGFF_VERSION", "ngff_attributes", "ngff_metadata"]

NGFF_VERSION = "0.5"
_TYPES = {"t": "time", "c": "channel", "z": "space", "y": "space", "x": "space"}
_LETTERS = {"time": "t", "channel": "c"}


def _scales(transforms: Sequence[dict] | None, ndim: int) -> np.ndarray:
    scale = np.ones(ndim)
    for transform in transforms or ():
        if transform.get("type") == "scale" and len(transform.get("scale", ())) == ndim:
            scale *= np.asarray(transform["scale"], dtype=float)
    return scale


def ngff_metadata(image: dict, omero: dict | None, ndim: int) -> Metadata:
    """The metadata of the first level of the NGFF ``multiscales`` entry ``image``.

    Axes named ``t, c, z, y, x`` keep their names; other time and channel axes become
    ``t`` and ``c``, anything else a frame axis of unknown kind (``i``).
    """
    axes = image.get("axes") or [{"name": n} for n in "tczyx"[-ndim:]]
    letters, units = [], []
    for axis in axes:
        axis = axis if isinstance(axis, dict) else {"name": axis}
        name = str(axis.get("name", "")).lower()
        letters.append(name if name in _TYPES else _LETTERS.get(str(axis.get("type")), "i"))
        units.append(axis.get("unit"))
    first = image.get("datasets", [{}])[0]
    scale = _scales(first.get("coordinateTransformations"), ndim)
    scale *= _scales(image.get("coordinateTransformations"), ndim)
    channels = (omero or {}).get("channels") or []
    names = [str(c.get("label", f"channel {i}")) for i, c in enumerate(channels)]
    return Metadata("".join(letters), tuple(scale), tuple(units), tuple(names))


def ngff_attributes(
    metadata: Metadata,
    name: str,
    levels: Sequence[tuple[str, Sequence[float]]],
    dtype: np.dtype,
    version: str = NGFF_VERSION,
) -> dict[str, Any]:
    """The attributes of an NGFF image group: ``{"ome": {...}}`` for NGFF 0.5 (Zarr v3),
    ``{"multiscales": [...], "omero": {...}}`` for NGFF 0.4 (Zarr v2).

    Parameters
    ----------
    metadata : Metadata
        The axes of the stored arrays (``t``, ``c``, ``i``, ``z``, ``y``, ``x`` only).
    name : str
        The image's name.
    levels : sequence of (str, sequence of float)
        Each level's array path and scale, full resolution first.
    dtype : numpy.dtype
        The arrays' dtype (for the display window of each channel).
    version : str
        ``"0.5"`` or ``"0.4"``.
    """
    axes = []
    for letter, unit in zip(metadata.axes, metadata.units, strict=True):
        axis: dict[str, Any] = {"name": letter}
        if letter in _TYPES:
            axis["type"] = _TYPES[letter]
        if unit:
            axis["unit"] = unit
        axes.append(axis)
    datasets = [
        {"path": path, "coordinateTransformations": [{"type": "scale", "scale": list(scale)}]}
        for path, scale in levels
    ]
    image = {"name": name, "axes": axes, "datasets": datasets}
    if version == "0.4":
        ome: dict[str, Any] = {"multiscales": [{"version": "0.4", **image}]}
    else:
        ome = {"version": version, "multiscales": [image]}
    if metadata.channel_names:
        low, high = _window(dtype)
        ome["omero"] = {
            "channels": [
                {
                    "label": label,
                    "color": "FFFFFF",
                    "active": True,
                    "window": {"min": low, "max": high, "start": low, "end": high},
                }
                for label in metadata.channel_names
            ],
        }
    return ome if version == "0.4" else {"ome": ome}


def _window(dtype: np.dtype) -> tuple[float, float]:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return float(info.min), float(info.max)
    return 0.0, 1.0
