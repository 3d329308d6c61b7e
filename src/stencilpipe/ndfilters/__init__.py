"""scipy.ndimage's and dask_image.ndfilters' filters, compiled by stencilpipe's stencil compiler.

A one-line switch: ``import stencilpipe.ndfilters as ndf`` where code had
``import dask_image.ndfilters as ndf`` (or used ``scipy.ndimage``'s filters).
The functions take dask-image's parameters, in its order, with its defaults,
plus scipy's ``output=`` and ``axes=`` as keyword-only parameters; scipy's 1-D
forms take scipy's. Values are scipy.ndimage's on the whole array, integer
casting included (each separable pass stored in the output dtype, as scipy
does); NumPy in gives NumPy out, Dask gives Dask (any chunking), CuPy gives CuPy.
Complex input (and weights) is filtered in its real and imaginary parts where scipy
does so; bool, every integer type, float16 (computed in float32) and big-endian
arrays are read as scipy reads them, anything else is a TypeError.
Each footprint or set of weights becomes a kernel compiled once per process;
no scipy function runs on the data.
"""

from ._correlate import (
    convolve,
    convolve1d,
    correlate,
    correlate1d,
    uniform_filter,
    uniform_filter1d,
)
from ._derivatives import (
    gaussian,
    gaussian_filter,
    gaussian_filter1d,
    gaussian_gradient_magnitude,
    gaussian_laplace,
    laplace,
    prewitt,
    sobel,
)
from ._generic import generic_filter, threshold_local
from ._generic1d import generic_filter1d
from ._order import (
    maximum_filter,
    maximum_filter1d,
    median_filter,
    minimum_filter,
    minimum_filter1d,
    percentile_filter,
    rank_filter,
)

__all__ = [
    "convolve",
    "convolve1d",
    "correlate",
    "correlate1d",
    "gaussian",
    "gaussian_filter",
    "gaussian_filter1d",
    "gaussian_gradient_magnitude",
    "gaussian_laplace",
    "generic_filter",
    "generic_filter1d",
    "laplace",
    "maximum_filter",
    "maximum_filter1d",
    "median_filter",
    "minimum_filter",
    "minimum_filter1d",
    "percentile_filter",
    "prewitt",
    "rank_filter",
    "sobel",
    "threshold_local",
    "uniform_filter",
    "uniform_filter1d",
]
