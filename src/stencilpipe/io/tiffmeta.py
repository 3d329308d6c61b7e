"""The axes, physical sizes, units and channel names of a TIFF file's first series.

They come from what tifffile parses: its series axes, the OME-XML (:func:`tifffile.xml2dict`)
of an OME-TIFF, the ImageJ description of a hyperstack, and else the resolution tags.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tifffile

from .metadata import Metadata

__all__ = ["TiffTags", "page_tags", "series_metadata"]

#: tifffile's axis letters that stencilpipe keeps; any other is a frame axis of unknown kind.
_KNOWN = {"T": "t", "C": "c", "Z": "z", "Y": "y", "X": "x", "S": "s"}
#: TIFF ResolutionUnit: 2 inch, 3 centimeter (1, none, says nothing).
_RESOLUTION_UNITS = {2: "inch", 3: "centimeter"}
_OME_DEFAULT_UNITS = {"x": "µm", "y": "µm", "z": "µm", "t": "s"}


@dataclass(frozen=True)
class TiffTags:
    """The tags of an input TIFF page that a frame written from it keeps.

    Attributes
    ----------
    resolution : tuple of float, optional
        Pixels per ``unit`` along x and y.
    unit : int
        The TIFF ResolutionUnit (1 none, 2 inch, 3 centimeter).
    description : str, optional
        The ImageDescription (an ImageJ or OME header, or free text).
    """

    resolution: tuple[float, float] | None = None
    unit: int = 1
    description: str | None = None

    def imwrite_options(self) -> dict[str, Any]:
        """These tags as :func:`tifffile.imwrite` keywords."""
        options: dict[str, Any] = {}
        if self.resolution:
            options.update(resolution=self.resolution, resolutionunit=self.unit)
        if self.description:
            options["description"] = self.description
        return options


def page_tags(page: Any) -> TiffTags | None:
    """The resolution tags and ImageDescription of a TIFF page (None when it has neither)."""
    tags = page.tags
    resolution = None
    if "XResolution" in tags and "YResolution" in tags:
        resolution = (_rational(tags["XResolution"].value), _rational(tags["YResolution"].value))
    unit_tag = tags.get("ResolutionUnit")
    description = tags.get("ImageDescription")
    found = TiffTags(
        resolution,
        int(unit_tag.value) if unit_tag else 2,
        description.value if description and isinstance(description.value, str) else None,
    )
    return found if found.resolution or found.description else None


def series_metadata(tif: tifffile.TiffFile) -> Metadata:
    """The metadata of ``tif.series[0]``, one letter per axis of its (squeezed) shape.

    A planar sample axis (``S`` before ``Y``) is a channel axis; letters that are not
    ``TCZYXS`` are frame axes of unknown kind (``i``).
    """
    series = tif.series[0]
    letters = []
    for position, letter in enumerate(series.axes):
        kind = _KNOWN.get(letter, "i")
        if kind == "s" and position != len(series.axes) - 1:
            kind = "c"  # planar samples: one plane per channel
        letters.append(kind)
    axes = "".join(letters)
    page = series.keyframe
    if tif.is_ome and tif.ome_metadata:
        return _ome(axes, tif.ome_metadata)
    sizes: dict[str, float] = {}
    units: dict[str, str | None] = {}
    tags = page_tags(page)
    x_res, y_res = tags.resolution if tags and tags.resolution else (0.0, 0.0)
    unit = _RESOLUTION_UNITS.get(tags.unit) if tags else None
    if x_res and y_res and (unit or tif.is_imagej):
        sizes.update(x=1 / x_res, y=1 / y_res)
        units.update(x=unit, y=unit)
    imagej = tif.imagej_metadata if tif.is_imagej else None
    if imagej:
        ij_unit = imagej.get("unit")
        if ij_unit and x_res and y_res:
            units.update(x=ij_unit, y=ij_unit)
        if "spacing" in imagej:
            sizes["z"], units["z"] = imagej["spacing"], ij_unit
        if imagej.get("finterval"):
            sizes["t"], units["t"] = imagej["finterval"], "s"
    return Metadata.of(axes, sizes, units)


def _rational(value: Any) -> float:
    if isinstance(value, tuple):
        numerator, denominator = value
        return numerator / denominator if denominator else 0.0
    return float(value)


def _ome(axes: str, xml: str) -> Metadata:
    """Metadata from the OME-XML of the file's first image."""
    images = tifffile.xml2dict(xml).get("OME", {}).get("Image", {})
    image = images[0] if isinstance(images, list) else images
    pixels = image.get("Pixels", {})
    sizes, units = {}, {}
    for letter in "xyz":
        key = f"PhysicalSize{letter.upper()}"
        if key in pixels:
            sizes[letter] = pixels[key]
            units[letter] = pixels.get(f"{key}Unit", _OME_DEFAULT_UNITS[letter])
    if "TimeIncrement" in pixels:
        sizes["t"] = pixels["TimeIncrement"]
        units["t"] = pixels.get("TimeIncrementUnit", _OME_DEFAULT_UNITS["t"])
    channels = pixels.get("Channel", [])
    channels = channels if isinstance(channels, list) else [channels]
    names = [str(c["Name"]) for c in channels if "Name" in c]
    names = names if len(names) == len(channels) else []
    return Metadata.of(axes, sizes, units, names if "c" in axes else ())
