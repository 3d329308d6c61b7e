"""Read image stacks lazily and write them back atomically, in parallel, resumably.

Stacks keep what they are: axes, physical sizes, units and channel names (OME-TIFF,
ImageJ, TIFF tags, OME-Zarr) travel to OME-Zarr and OME-TIFF outputs; paths may be fsspec
URLs (``s3://``, ``gs://``, ``az://``, ``http(s)://`` to read, ``memory://``).

>>> import os, tempfile
>>> import numpy as np
>>> from stencilpipe.io import imread, imsave
>>> folder = tempfile.mkdtemp()
>>> report = imsave(np.zeros((2, 32, 40), np.uint8), os.path.join(folder, "in", "*.png"))
>>> stack = imread(os.path.join(folder, "in"))
>>> print(imsave(stack + 1, os.path.join(folder, "out")))  # doctest: +ELLIPSIS
/.../out: wrote 2 frames (...)
>>> sorted(os.listdir(os.path.join(folder, "out")))
['.stencilpipe', '00000.tif', '00001.tif']
"""

from .errors import NoSpaceLeft, OutputBusy, TargetError
from .image import Image
from .metadata import Metadata
from .plan import PendingWrite, WriteReport
from .provenance import Provenance
from .read import imread, inspect, read_image
from .stackinfo import StackInfo, source_names
from .write import imsave, plan_write

__all__ = [
    "Image",
    "Metadata",
    "NoSpaceLeft",
    "OutputBusy",
    "PendingWrite",
    "Provenance",
    "StackInfo",
    "TargetError",
    "WriteReport",
    "imread",
    "imsave",
    "inspect",
    "plan_write",
    "read_image",
    "source_names",
]
