"""dask_image.ndmorph's and scipy.ndimage's morphology, compiled by stencilpipe's stencil compiler.

``import stencilpipe.ndmorph as ndm`` where code had ``import dask_image.ndmorph as ndm``:
binary_erosion, binary_dilation, binary_opening and binary_closing take dask-image's
parameters in its order (plus scipy's ``output=`` and ``axes=`` keyword-only), and
scipy's grey_erosion, grey_dilation, grey_opening and grey_closing (which dask-image
lacks) take scipy's. Values are scipy.ndimage's on the whole array; NumPy in gives
NumPy out, Dask gives Dask (any chunking), CuPy gives CuPy. Structures are min/max
stencils (:mod:`stencilpipe.ndfilters`' machinery); no scipy function runs on the data.
:data:`STAGES` offers them as pipeline stages (``- grey_opening: {size: 3}``).
"""

from ._binary import binary_closing, binary_dilation, binary_erosion, binary_opening
from ._grey import grey_closing, grey_dilation, grey_erosion, grey_opening
from ._stages import STAGES

__all__ = [
    "STAGES",
    "binary_closing",
    "binary_dilation",
    "binary_erosion",
    "binary_opening",
    "grey_closing",
    "grey_dilation",
    "grey_erosion",
    "grey_opening",
]
