"""Gaussian filters and derivatives: gaussian(_filter)(1d), gaussian_laplace,
gaussian_gradient_magnitude, sobel, prewitt, laplace.

Each is scipy's sequence of 1-D correlations, every pass stored in the output
dtype (sobel, prewitt and laplace of 8/16-bit frames and volumes as the one correlation
that gives the same result, :func:`_in_one_pass`); the components of a Laplacian or a gradient
magnitude are combined as scipy combines them, with the arithmetic of the output dtype
(``+=``, squares, ``np.sqrt`` with its loop), which NumPy, Dask and CuPy arrays share.
"""

from __future__ import annotations

import functools
import numbers
from typing import Any

import numpy as np

from ..stencils.dask_apply import is_dask_array, map_stencil_blocks
from ..stencils.threads import single_threaded
from ._apply import as_array, check_axes, dtypes_of, filter_mode, finish, normalize_sequence
from ._correlate import _correlate_nd, axis_index, correlate1d, run_1d
from ._kernels import correlate1d_kernel

__all__ = [
    "gaussian",
    "gaussian_filter",
    "gaussian_filter1d",
    "gaussian_gradient_magnitude",
    "gaussian_laplace",
    "laplace",
    "prewitt",
    "sobel",
]


def _gaussian_kernel1d(sigma: float, order: int, radius: int) -> np.ndarray:
    """scipy's 1-D Gaussian (derivative) weights: ``q(x) * phi(x)``, normalised ``phi``."""
    if order < 0:
        raise ValueError("order must be non-negative")
    exponents = np.arange(order + 1)
    sigma2 = sigma * sigma
    x = np.arange(-radius, radius + 1)
    phi = np.exp(-0.5 / sigma2 * x**2)
    phi = phi / phi.sum()
    if order == 0:
        return phi
    # q' + q * p' with p' = -x / sigma**2, as a matrix acting on q's coefficients.
    q = np.zeros(order + 1)
    q[0] = 1
    derivative = np.diag(exponents[1:], 1) + np.diag(np.ones(order) / -sigma2, -1)
    for _ in range(order):
        q = derivative.dot(q)
    return (x[:, None] ** exponents).dot(q) * phi


def _gaussian_weights(sigma: Any, order: int, truncate: float, radius: Any) -> tuple[float, ...]:
    """The weights scipy's gaussian_filter1d correlates with (reversed kernel)."""
    sd = float(sigma)
    lw = int(truncate * sd + 0.5) if radius is None else radius
    if not isinstance(lw, numbers.Integral) or lw < 0:
        raise ValueError("Radius must be a nonnegative integer.")
    with np.errstate(all="ignore"):  # sigma=0 gives NaN weights, as in scipy
        weights = _gaussian_kernel1d(sigma, order, int(lw))[::-1]
    return tuple(float(w) for w in weights)


def gaussian_filter1d(
    input,
    sigma,
    axis=-1,
    order=0,
    output=None,
    mode="reflect",
    cval=0.0,
    truncate=4.0,
    *,
    radius=None,
):
    """1-D Gaussian filter or derivative (scipy.ndimage.gaussian_filter1d).

    Parameters
    ----------
    input : array_like
        NumPy, Dask or CuPy array.
    sigma : float
        Standard deviation.
    axis : int
        The axis filtered.
    order : int
        Derivative order (0: smoothing).
    output, mode, cval
        As for :func:`stencilpipe.ndfilters.correlate1d`.
    truncate : float
        Radius in standard deviations, ``int(truncate * sigma + 0.5)``.
    radius : int, optional
        The radius itself, overriding ``truncate``.
    """
    weights = _gaussian_weights(sigma, order, truncate, radius)
    return correlate1d(input, weights, axis, output, mode, cval, 0)


def _gaussian_steps(ndim, sigma, order, mode, truncate, radius, axes) -> list[tuple]:
    """1-D steps of scipy's gaussian_filter: axes with sigma above 1e-15, in order."""
    axes = check_axes(axes, ndim)
    orders = normalize_sequence(order, len(axes))
    sigmas = normalize_sequence(sigma, len(axes))
    modes = normalize_sequence(mode, len(axes))
    radii = normalize_sequence(radius, len(axes))
    steps = []
    for axis, s, o, m, r in zip(axes, sigmas, orders, modes, radii):
        if s > 1e-15:
            weights = _gaussian_weights(s, o, truncate, r)
            steps.append((functools.partial(correlate1d_kernel, weights, 0), m, axis))
    return steps


def gaussian_filter(
    image,
    sigma,
    order=0,
    mode="reflect",
    cval=0.0,
    truncate=4.0,
    *,
    output=None,
    radius=None,
    axes=None,
):
    """Multidimensional Gaussian filter (dask_image / scipy.ndimage ``gaussian_filter``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    sigma : float or sequence of float
        Standard deviation, for all axes or per axis; 0 leaves an axis unfiltered.
    order : int or sequence of int
        Derivative order per axis.
    mode : str or sequence of str
        Boundary mode, for all axes or per axis.
    cval : scalar
        Value outside the array under ``constant``.
    truncate : float
        Radius in standard deviations.
    output : dtype or ndarray, optional
        Output dtype (each 1-D pass is stored in it, as scipy does).
    radius : int or sequence of int, optional
        Radius per axis, overriding ``truncate``.
    axes : sequence of int, optional
        The axes filtered.
    """
    array = as_array(image)
    steps = _gaussian_steps(array.ndim, sigma, order, mode, truncate, radius, axes)
    return run_1d(array, "gaussian_filter", output, steps, cval)


def gaussian(image, sigma, order=0, mode="reflect", cval=0.0, truncate=4.0, **kwargs):
    """Alias of :func:`gaussian_filter` (as in dask_image.ndfilters)."""
    return gaussian_filter(image, sigma, order, mode, cval, truncate, **kwargs)


def _sum(parts: list[Any]) -> Any:
    """``out = parts[0]; out += part`` in the parts' dtype (wrapping integers, as scipy)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _magnitude(parts: list[Any]) -> Any:
    """scipy's ``sqrt(sum(part * part))`` with the output dtype's arithmetic; the square root
    takes NumPy's loop for that dtype and is cast back (``casting='unsafe'``)."""
    total = _sum([part * part for part in parts])
    root = np.sqrt(total)  # NaN for wrapped negative integers, with scipy's warning
    with np.errstate(invalid="ignore"):
        return root.astype(total.dtype)


def _combined(image, mode, output, axes, combine, component, name, reach):
    """scipy's generic_laplace / generic_gradient_magnitude: ``component(array, axis, mode,
    dtype)`` along each axis filtered, stored in the output dtype, then ``combine``-d in it;
    a copy without axes. ``reach(ndim)`` is how far the components read along each axis.

    On Dask with one mode, every block computes all components and their combination
    after one halo exchange (separate lazy components cost one exchange each, and the
    laplace of a (16, 256, 256) stack was slower than dask-image's).
    """
    array = as_array(image)
    dtypes = dtypes_of(array, output, name)
    axes = check_axes(axes, array.ndim)
    if not axes:
        return finish(array, dtypes, output)
    modes = normalize_sequence(mode, len(axes))
    if is_dask_array(array) and len(set(map(filter_mode, modes))) == 1:
        args = (modes[0], dtypes.output, axes, combine, component, name, reach)

        def blocks(block: Any) -> Any:
            with single_threaded():
                return _combined(block, *args)

        halos = [(r, r) if d in axes else (0, 0) for d, r in enumerate(reach(array.ndim))]
        wrap = filter_mode(modes[0]) == "wrap"
        result = map_stencil_blocks(
            blocks, [array], halos, wrap=wrap, dtype=dtypes.output, name=name
        )
        return finish(result, dtypes, output)
    parts = [component(array, axis, m, dtypes.store) for axis, m in zip(axes, modes)]
    return finish(combine(parts), dtypes, output)


def _sigmas_over(ndim: int, sigma: Any, axes: Any) -> list[Any]:
    """``sigma`` per axis of an ``ndim``-D array, 0 on the axes not filtered."""
    axes = check_axes(axes, ndim)
    full = [0] * ndim
    for s, ax in zip(normalize_sequence(sigma, len(axes)), axes):
        full[ax] = s
    return full


def _gaussian_derivative(image, sigma, order, mode, cval, truncate, output, axes, radius, name):
    sigmas = _sigmas_over(as_array(image).ndim, sigma, axes)

    def component(array, axis, m, dtype):
        orders = [order if d == axis else 0 for d in range(array.ndim)]
        return gaussian_filter(
            array, sigmas, orders, m, cval, truncate, output=dtype, radius=radius
        )

    def reach(ndim: int) -> list[int]:
        radii = normalize_sequence(radius, ndim)
        return [
            len(_gaussian_weights(s, 0, truncate, r)) // 2 if s > 1e-15 else 0
            for s, r in zip(sigmas, radii)
        ]

    combine = _sum if order == 2 else _magnitude
    return _combined(image, mode, output, axes, combine, component, name, reach)


def gaussian_laplace(
    image, sigma, mode="reflect", cval=0.0, truncate=4.0, *, output=None, axes=None, radius=None
):
    """Laplace filter of Gaussian second derivatives (dask_image / scipy ``gaussian_laplace``).

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    sigma : float or sequence of float
        Standard deviation per axis.
    mode : str or sequence of str
        Boundary mode, for all axes or per axis filtered.
    cval, truncate, output, axes, radius
        As for :func:`gaussian_filter`.
    """
    return _gaussian_derivative(
        image, sigma, 2, mode, cval, truncate, output, axes, radius, "gaussian_laplace"
    )


def gaussian_gradient_magnitude(
    image, sigma, mode="reflect", cval=0.0, truncate=4.0, *, output=None, axes=None, radius=None
):
    """Gradient magnitude of Gaussian derivatives (dask_image / scipy
    ``gaussian_gradient_magnitude``).

    Parameters are those of :func:`gaussian_laplace`.
    """
    return _gaussian_derivative(
        image, sigma, 1, mode, cval, truncate, output, axes, radius, "gaussian_gradient_magnitude"
    )


#: Stores in which :func:`_edge`'s two passes (and laplace's parts) over 8/16-bit
#: integers equal one 3x3 correlation (see :func:`_in_one_pass`).
_ONE_PASS_STORES = frozenset(
    np.dtype(t)
    for t in ("uint8", "int8", "uint16", "int16", "int32", "int64", "float32", "float64")
)


def _in_one_pass(array: Any, modes: list[Any], output: Any, name: str) -> bool:
    """Whether sobel/prewitt of a 2-D or 3-D ``array`` may run as one 3x3(x3) correlation
    with the outer product of its passes' weights: fewer passes over memory (2048x2048, 2
    threads, interleaved, prewitt two passes / one: uint8 4.17 / 2.18 ms, uint16 4.71 /
    2.40, OpenCV's filter2D 3.76 and 24.3; sobel of a (64, 256, 256) uint8 volume 6.4 /
    5.4); and laplace as one correlation with the sum of its parts' weights (its parts,
    each stored in the output dtype, add with the dtype's wrap-around: the same argument;
    2048x2048 uint8 10.1 -> 2.2 ms, uint16 12.0 -> 2.2, cv2.Laplacian 3.3 and 19.9; the
    volume 19.5 -> 3.3).

    For 8/16-bit integers every sum is an integer below ``2**24`` in magnitude. A pass's
    sums ``t`` are stored in the output dtype: exactly in int32, int64 and the floats,
    else truncated through int32 and wrapped to ``t`` modulo ``2**bits``
    (:func:`.window_kernels.store_c`), which the next pass's integer weights carry to its
    own sum (within int32's range), stored with the same wrap: the one pass's result.
    (uint32 and uint64 are left out: a negative ``t`` wraps to a value the next pass sums
    out of int32's range, or out of a double's exact integers.) Each pass folds its own
    axis and the correlation folds each the same way, except under ``constant``, where a
    later pass reads ``cval`` outside the result before it rather than the sum of
    ``cval``-filled lines.
    """
    if array.ndim not in (2, 3) or array.dtype.kind not in "iu" or array.dtype.itemsize > 2:
        return False
    if len({filter_mode(m) for m in modes}) != 1 or filter_mode(modes[0]) == "constant":
        return False
    return dtypes_of(array, output, name).store in _ONE_PASS_STORES


def _edge(image, axis, mode, cval, output, smoothing, name):
    array = as_array(image)
    axis = axis_index(axis, array.ndim)
    modes = normalize_sequence(mode, array.ndim)
    if _in_one_pass(array, modes, output, name):
        lines = [(-1.0, 0.0, 1.0) if d == axis else smoothing for d in range(array.ndim)]
        weights = functools.reduce(np.multiply.outer, lines)
        return _correlate_nd(array, weights, modes[0], cval, 0, output, None, False, name)
    derivative = functools.partial(correlate1d_kernel, (-1.0, 0.0, 1.0), 0)
    smooth = functools.partial(correlate1d_kernel, smoothing, 0)
    steps = [(derivative, modes[axis], axis)]
    steps += [(smooth, modes[d], d) for d in range(array.ndim) if d != axis]
    return run_1d(array, name, output, steps, cval)


def sobel(image, axis=-1, mode="reflect", cval=0.0, *, output=None):
    """Sobel derivative (dask_image / scipy.ndimage ``sobel``): [-1, 0, 1] along ``axis``,
    then [1, 2, 1] along each other axis, each pass stored in the output dtype.

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    axis : int
        The axis of the derivative.
    mode : str or sequence of str
        Boundary mode, for all axes or per axis.
    cval : scalar
        Value outside the array under ``constant``.
    output : dtype or ndarray, optional
        Output dtype (integer outputs wrap, as in scipy).
    """
    return _edge(image, axis, mode, cval, output, (1.0, 2.0, 1.0), "sobel")


def prewitt(image, axis=-1, mode="reflect", cval=0.0, *, output=None):
    """Prewitt derivative (dask_image / scipy.ndimage ``prewitt``): as :func:`sobel` with
    [1, 1, 1] across."""
    return _edge(image, axis, mode, cval, output, (1.0, 1.0, 1.0), "prewitt")


def _laplace_weights(ndim: int) -> np.ndarray:
    """scipy's laplace of an ``ndim``-D array as one correlation: [1, -2, 1] along each
    axis, summed."""
    weights = np.zeros((3,) * ndim)
    for axis in range(ndim):
        weights[(1,) * axis + (slice(None),) + (1,) * (ndim - axis - 1)] += (1.0, -2.0, 1.0)
    return weights


def laplace(image, mode="reflect", cval=0.0, *, output=None, axes=None):
    """Discrete Laplacian (dask_image / scipy.ndimage ``laplace``): [1, -2, 1] along each
    axis, each stored in the output dtype and summed in it.

    Parameters
    ----------
    image : array_like
        NumPy, Dask or CuPy array.
    mode : str or sequence of str
        Boundary mode, for all axes or per axis filtered.
    cval, output, axes
        As for :func:`stencilpipe.ndfilters.correlate`.
    """

    array = as_array(image)
    if array.ndim in (2, 3) and len(check_axes(axes, array.ndim)) == array.ndim:
        modes = normalize_sequence(mode, array.ndim)
        if _in_one_pass(array, modes, output, "laplace"):
            args = (modes[0], cval, 0, output, None, False, "laplace")
            return _correlate_nd(array, _laplace_weights(array.ndim), *args)

    def component(array, axis, m, dtype):
        return correlate1d(array, (1.0, -2.0, 1.0), axis, dtype, m, cval)

    return _combined(array, mode, output, axes, _sum, component, "laplace", lambda n: [1] * n)
