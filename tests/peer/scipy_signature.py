"""stencilpipe.ndfilters behind scipy.ndimage's signatures, for scipy's own test cases.

stencilpipe.ndfilters takes dask-image's parameter order (``mode`` third,
``output=`` keyword-only); scipy's tests pass ``output`` positionally, so they
run against these wrappers. Each wrapper only reorders arguments.
"""

from __future__ import annotations

from scipy.ndimage import _ni_support  # noqa: F401  (scipy's tests reach for it)

import stencilpipe.ndfilters as ndf
from stencilpipe.ndfilters import (  # noqa: F401  (scipy order already)
    convolve1d,
    correlate1d,
    gaussian_filter1d,
    generic_filter1d,
    maximum_filter1d,
    minimum_filter1d,
    uniform_filter1d,
)


def correlate(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return ndf.correlate(input, weights, mode, cval, origin, output=output, axes=axes)


def convolve(input, weights, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return ndf.convolve(input, weights, mode, cval, origin, output=output, axes=axes)


def uniform_filter(input, size=3, output=None, mode="reflect", cval=0.0, origin=0, *, axes=None):
    return ndf.uniform_filter(input, size, mode, cval, origin, output=output, axes=axes)


def _order(name):
    def wrapper(
        input,
        size=None,
        footprint=None,
        output=None,
        mode="reflect",
        cval=0.0,
        origin=0,
        *,
        axes=None,
    ):
        return getattr(ndf, name)(
            input, size, footprint, mode, cval, origin, output=output, axes=axes
        )

    wrapper.__name__ = name
    return wrapper


minimum_filter = _order("minimum_filter")
maximum_filter = _order("maximum_filter")
median_filter = _order("median_filter")


def rank_filter(
    input,
    rank,
    size=None,
    footprint=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    axes=None,
):
    return ndf.rank_filter(
        input, rank, size, footprint, mode, cval, origin, output=output, axes=axes
    )


def percentile_filter(
    input,
    percentile,
    size=None,
    footprint=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    *,
    axes=None,
):
    return ndf.percentile_filter(
        input, percentile, size, footprint, mode, cval, origin, output=output, axes=axes
    )


def gaussian_filter(
    input,
    sigma,
    order=0,
    output=None,
    mode="reflect",
    cval=0.0,
    truncate=4.0,
    *,
    radius=None,
    axes=None,
):
    return ndf.gaussian_filter(
        input, sigma, order, mode, cval, truncate, output=output, radius=radius, axes=axes
    )


def gaussian_laplace(input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None, **kw):
    return ndf.gaussian_laplace(input, sigma, mode, cval, output=output, axes=axes, **kw)


def gaussian_gradient_magnitude(
    input, sigma, output=None, mode="reflect", cval=0.0, *, axes=None, **kw
):
    return ndf.gaussian_gradient_magnitude(input, sigma, mode, cval, output=output, axes=axes, **kw)


def sobel(input, axis=-1, output=None, mode="reflect", cval=0.0):
    return ndf.sobel(input, axis, mode, cval, output=output)


def prewitt(input, axis=-1, output=None, mode="reflect", cval=0.0):
    return ndf.prewitt(input, axis, mode, cval, output=output)


def laplace(input, output=None, mode="reflect", cval=0.0, *, axes=None):
    return ndf.laplace(input, mode, cval, output=output, axes=axes)


def generic_filter(
    input,
    function,
    size=None,
    footprint=None,
    output=None,
    mode="reflect",
    cval=0.0,
    origin=0,
    extra_arguments=(),
    extra_keywords=None,
    *,
    axes=None,
):
    return ndf.generic_filter(
        input,
        function,
        size,
        footprint,
        mode,
        cval,
        origin,
        extra_arguments,
        extra_keywords,
        output=output,
        axes=axes,
    )
