"""Built-in filters, each a :class:`~stencilpipe.Stencil` made with the same decorator.

Each function writes the kernel a user would write for its size and
dimensionality, as readable source (``f.info`` and ``inspect.getsource(f.func)``
show it), and returns ``stencil(kernel)``. Results follow scipy.ndimage's filter
of the same name: the same window placement for even sizes (the window starts
``size // 2`` before the centre), the same boundary modes.

Integer inputs give integer outputs: float results (mean, gaussian) are
rounded to nearest and saturated; sobel and laplace saturate too (scipy wraps
around instead). The rounding is of the exact float64 result, however the CPU
computes it: odd-count means of uint8/uint16 sum in integers and divide exactly;
the separable gaussian sums as scipy's correlate1d does (centre, then the pairs
``w * (x[-o] + x[o])``), so its float64 values are scipy's and integer results
are scipy's rounded; on uint8 frames it computes in float32 and recomputes in
float64 only the points within a proven error bound of a rounding boundary
(:mod:`.stencils.gauss_int`), with the same result. Sobel and laplace on 8/16-bit
inputs compute in int16/int32 (the compiler's range analysis proves they cannot
overflow).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .stencils import Stencil
from .stencils.correlate_passes import CorrelatePass
from .stencils.dtypes import exact_reciprocal
from .stencils.gauss_int import INPUTS as FLOAT32_GAUSSIAN_INPUTS
from .stencils.gauss_int import GaussianPass
from .stencils.stencil import ACROSS_ROWS
from .stencils.windows import (
    BOX_ROWS_UP_TO,
    BoxExtremum,
    BoxMean,
    BoxMedian3,
    ExtremumPass,
    RankWindow,
)

__all__ = ["mean", "gaussian", "sobel", "laplace", "minimum", "maximum", "median", "FILTERS"]


def _per_axis(value: Any, ndim: int, what: str) -> tuple[Any, ...]:
    values = tuple(value) if isinstance(value, Sequence) else (value,) * ndim
    if len(values) != ndim:
        raise ValueError(f"{what} has {len(values)} entries, expected {ndim} (one per axis)")
    return values


def _window(size: int | Sequence[int], ndim: int) -> list[tuple[int, int]]:
    """Offsets (first, last) per axis of a ``size`` window placed as scipy places it."""
    sizes = _per_axis(size, ndim, "size")
    for s in sizes:
        if not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(f"size must be a positive integer per axis, got {size!r}")
    return [(-(s // 2), s - s // 2 - 1) for s in sizes]


def _from_source(name: str, source: str, namespace: dict[str, Any], **options: Any) -> Stencil:
    """Compile kernel ``source`` defining ``name`` and decorate it, keeping its source readable
    (and the stencil picklable, as its source)."""
    return Stencil.from_source(name, source, namespace, module=__name__, **options)


def _loops(window: list[tuple[int, int]], body: str, name: str = "o", depth: int = 1) -> str:
    """``for o0 in range(...):`` nest around ``body`` (statements, using ``o0, o1, ...``),
    indented ``depth`` levels."""
    lines = []
    for d, (first, last) in enumerate(window):
        lines.append("    " * (depth + d) + f"for {name}{d} in range({first}, {last + 1}):")
    indent = "    " * (depth + len(window))
    lines += [indent + line for line in body.splitlines()]
    return "\n".join(lines)


def _index(ndim: int, name: str = "o") -> str:
    return ", ".join(f"{name}{d}" for d in range(ndim))


#: Window elements above which minimum, maximum and median run on the CPU as window
#: passes (:mod:`stencilpipe.stencils.windows`: time nearly flat in the window, compiled
#: once per dtype) instead of as their per-point kernels, which the GPU runs. Measured on
#: a 2048x2048 uint8 frame, 2 threads: a 3x3 minimum per point 0.8 ms against 1.7 ms as
#: passes, 5x5 2.0 against 1.5; a 7x7 median network compiles in 15 s and runs in 37 ms
#: against 1 s and about 400 ms for the histogram, so medians up to 7x7 stay networks.
WINDOW_PASSES_ABOVE = {"extremum": 9, "median": 49}


def _halos(window: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    return tuple((-first, last) for first, last in window)


def _extremum_kind(reach: Sequence[tuple[int, int]]) -> str:
    """How the CPU runs a minimum or maximum over the box reaching ``reach`` (before, after
    per core axis): ``"point"``, its per-point kernel, up to
    ``WINDOW_PASSES_ABOVE['extremum']`` elements; ``"box"``, one :class:`BoxExtremum` pass,
    over a 2-D box of up to :data:`~stencilpipe.stencils.windows.BOX_ROWS_UP_TO` rows;
    else ``"axes"``, an :class:`ExtremumPass` per axis. The rule of the library's
    :func:`minimum` and :func:`maximum` and of ndfilters' box minimum and maximum."""
    if math.prod(before + 1 + after for before, after in reach) <= WINDOW_PASSES_ABOVE["extremum"]:
        return "point"
    if len(reach) == 2 and sum(reach[0]) + 1 <= BOX_ROWS_UP_TO:
        return "box"
    return "axes"


def mean(size: int | Sequence[int] = 3, *, ndim: int = 2, **options: Any) -> Stencil:
    """Mean over a ``size`` window (scipy.ndimage.uniform_filter).

    Parameters
    ----------
    size : int or sequence of int
        Window size, for all axes or per axis.
    ndim : int
        Number of core dimensions (2 for frames, 3 for volumes).
    **options
        ``boundary``, ``cval``, ``dtype`` as for :func:`~stencilpipe.stencil`.

    Examples
    --------
    >>> import numpy as np, stencilpipe as sp
    >>> float(sp.library.mean(3)(np.arange(9.0).reshape(3, 3))[1, 1])
    4.0
    """
    window = _window(size, ndim)
    count = math.prod(last - first + 1 for first, last in window)
    source = (
        "def mean(x):\n    total = 0.0\n"
        + _loops(window, f"total += x[{_index(ndim)}]")
        + f"\n    return total{_divided_by(count)}\n"
    )
    # Sums along one axis at a time, divided once at the end: exact for integer inputs.
    sums = [
        {_along(d, o, ndim): 1.0 for o in range(first, last + 1)}
        for d, (first, last) in enumerate(window)
    ]
    whole = _separable(
        "mean", source, sums, options, divisor=count, narrow=_exact_in_float32(count)
    )
    if whole.passes is not None and count % 2:
        sizes = [last - first + 1 for first, last in window]
        for dtype in _SMALL_INTEGERS:
            exact = _integer_mean_passes(sums, sizes, dtype)
            # uint32 sums and their 64-bit products lose to float32 where float32 is exact
            # (uint16, 3x3: 3.4 ms against 2.0), and beat float64 (9x9: 24 ms against 43).
            wide = exact is not None and any(p.dtype.itemsize > 2 for p in exact)
            if exact is not None and not (wide and dtype in _exact_in_float32(count)):
                whole.passes[dtype] = exact
    if whole.passes is not None and ndim == 2 and count > BOX_MEAN_ABOVE:
        for dtype in _BOX_INTEGERS:
            bound = count * max(-int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
            if bound < 1 << 31:
                whole.passes[dtype] = (BoxMean(_halos(window), bound),)
    return whole


#: 2-D integer means over more elements than this run as running sums (:class:`BoxMean`),
#: whose time does not grow with the window. Measured (2048x2048, 2 threads, loaded
#: machine; separable sums / running sums): uint8 15x15 1.4 / 3.7 ms, 21x21 2.5 / 3.5,
#: 31x31 5.3-5.9 / 3.6; uint16 15x15 2.0-2.8 / 3.7-4.1, 31x31 13.2 / 2.4-4.2.
BOX_MEAN_ABOVE = 400

#: Integer inputs whose 2-D means may run as :class:`BoxMean`.
_BOX_INTEGERS = tuple(np.dtype(t) for t in ("uint8", "int8", "uint16", "int16"))


#: Integer inputs whose means may sum in uint16/uint32 (:func:`_integer_mean_passes`).
_SMALL_INTEGERS = tuple(np.dtype(t) for t in ("uint8", "uint16"))


def _integer_mean_passes(
    passes: list[dict[tuple[int, ...], float]], sizes: list[int], dtype: np.dtype
) -> tuple[Stencil, ...] | None:
    """The 1-D passes of an odd-count mean of unsigned ``dtype`` in exact integer arithmetic.

    Each pass adds its axis's values in the narrowest of uint16/uint32 that holds every
    partial sum (``prod(sizes so far) * max(dtype)``) and passes that type on; the last
    one divides with rounding: for an odd ``count`` no mean is a tie, so ``rint(s / count)``
    is ``(s + count // 2) // count``. Exactly the float64 kernel's result
    (:func:`_divided_by` rounds exactly), with 2-4x the SIMD lanes of float32, half its
    scratch bytes, and a division by a constant that LLVM turns into a multiplication.
    None when a sum needs more than uint32.
    """
    largest = int(np.iinfo(dtype).max)
    count = math.prod(sizes)
    types = []
    for d in range(len(sizes)):
        bound = math.prod(sizes[: d + 1]) * largest + (count // 2 if d == len(sizes) - 1 else 0)
        fits = [t for t in ("uint16", "uint32") if bound <= np.iinfo(t).max]
        if not fits:
            return None
        types.append(fits[0])
    steps = []
    for d, (terms, kind) in enumerate(zip(passes, types)):
        step = f"mean_pass{d}_{kind}"
        body = _weighted_sum(step, terms, kind)
        if d == len(passes) - 1:
            multiplier, shift = exact_reciprocal(count, bound)
            if multiplier >= 1 << 32:
                return None
            # The biased sum cast back to ``kind`` (it fits: ``bound``): LLVM then sees a
            # 16-bit operand and multiplies 16-bit lanes (pmulhuw), twice the 32-bit ones.
            rounded = (
                f"np.{kind}((np.uint64(np.{kind}(total + np.{kind}({count // 2})))"
                f" * np.uint64({multiplier}))"
                f" >> np.uint64({shift}))"
            )
            body = body.replace("    return total\n", f"    return {rounded}\n")
        steps.append(_from_source(step, body, {}, dtype=np.dtype(kind)))
    return tuple(steps)


def _divided_by(count: int) -> str:
    """Source that divides by ``count``: a multiplication by ``1 / count`` where that gives
    the same integer after rounding, since a vector division costs ~10x a multiplication.

    For an odd count a sum of integers divided by it is never a tie for rounding (its
    fraction is a multiple of 1 / count, never 1/2), so the last-bit difference of the
    reciprocal cannot change the rounded result; a power of two has an exact reciprocal.
    Other counts (6, 10, ...) divide.
    """
    if count % 2 or count & (count - 1) == 0:
        return f" * {1 / count!r}"
    return f" / {count}"


def _exact_in_float32(count: int) -> frozenset[np.dtype]:
    """Integer dtypes whose mean over ``count`` elements float32 rounds exactly as float64.

    The sums are integers below 2**24, exact in float32. Scaling by ``float32(1 / count)``
    is off by at most about ``2**-23`` relatively. For an odd count or a power of two (see
    :func:`_divided_by`) the true mean is never within ``1 / (2 * count)`` of a rounding
    tie, so the rounded result is the same while ``max|x| * 2**-23 < 1 / (2 * count)``.
    (tests/stencils/test_library.py checks every sum.)
    """
    if "*" not in _divided_by(count):
        return frozenset()
    dtypes = {np.dtype(np.uint8), np.dtype(np.int8)}
    if count < 64:
        dtypes |= {np.dtype(np.uint16), np.dtype(np.int16)}
    return frozenset(dtypes)


def _gaussian_weights(sigma: float, truncate: float) -> np.ndarray:
    """scipy.ndimage's 1-D Gaussian weights for ``sigma`` and ``truncate``."""
    radius = int(truncate * float(sigma) + 0.5)
    offsets = np.arange(-radius, radius + 1)
    weights = np.exp(-0.5 / float(sigma) ** 2 * offsets**2)
    return weights / weights.sum()


def gaussian(
    sigma: float | Sequence[float], truncate: float = 4.0, *, ndim: int = 2, **options: Any
) -> Stencil:
    """Gaussian smoothing (scipy.ndimage.gaussian_filter), same weights and radius.

    Integer outputs are scipy's float64 result (of the input as float64) rounded half to
    even and saturated. uint8 frames (2-D) compute it in float32, both passes in one sweep
    per row, and recompute in float64 the points whose float32 result lies within the
    bound of :func:`.stencils.gauss_int.error_bound` of ``k + 1/2`` (about 1.7e-4 for a
    5x5 kernel): the same result, at about OpenCV's speed.

    Parameters
    ----------
    sigma : float or sequence of float
        Standard deviation, for all axes or per axis; must be positive.
    truncate : float
        Radius in standard deviations: ``int(truncate * sigma + 0.5)``.
    ndim : int
        Number of core dimensions.
    **options
        ``boundary``, ``cval``, ``dtype``.
    """
    sigmas = _per_axis(sigma, ndim, "sigma")
    if any(not s > 0 for s in sigmas):
        raise ValueError(f"sigma must be positive, got {sigma!r}")
    weights = [_gaussian_weights(s, truncate) for s in sigmas]
    radii = [len(w) // 2 for w in weights]
    terms = {
        offset: float(math.prod(w[o + r] for w, o, r in zip(weights, offset, radii)))
        for offset in itertools.product(*(range(-r, r + 1) for r in radii))
    }
    passes = [
        {_along(d, o, ndim): float(w[o + r]) for o in range(-r, r + 1)}
        for d, (w, r) in enumerate(zip(weights, radii))
    ]
    whole = _separable("gaussian", _weighted_sum("gaussian", terms), passes, options)
    if whole.passes is not None and ndim == 2:
        # uint8 frames: float32, rounded as the float64 passes are (stencils.gauss_int).
        halves = [tuple(float(v) for v in w[r:]) for w, r in zip(weights, radii)]
        whole.passes.update(dict.fromkeys(FLOAT32_GAUSSIAN_INPUTS, (GaussianPass(*halves),)))
    return whole


def _along(axis: int, offset: int, ndim: int) -> tuple[int, ...]:
    """The offset ``offset`` along ``axis``, 0 along the others."""
    return tuple(offset if d == axis else 0 for d in range(ndim))


def _separable(
    name: str,
    source: str,
    passes: list[dict[tuple[int, ...], float]],
    options: dict,
    divisor: int | None = None,
    narrow: frozenset[np.dtype] = frozenset(),
) -> Stencil:
    """The stencil of ``source``, with its 1-D passes (weighted sums, one per axis, axis 0
    first; the last one divided by ``divisor``) attached for the CPU to run over row
    strips (:mod:`stencilpipe.stencils.fused`).

    The passes compute in float64, with float64 intermediates; for inputs of a dtype in
    ``narrow``, in float32 (twice the SIMD lanes), which the caller knows gives the same
    result. Only the last pass stores the output dtype.
    """
    whole = _from_source(name, source, {}, **options)
    if len(passes) < 2:
        return whole
    wide = _pass_stencils(name, passes, divisor, "float64")
    whole.passes = {None: wide}
    if narrow:
        float32 = _pass_stencils(name, passes, divisor, "float32")
        whole.passes.update(dict.fromkeys(narrow, float32))
    return whole


def _pass_stencils(
    name: str, passes: list[dict[tuple[int, ...], float]], divisor: int | None, float_type: str
) -> tuple[Stencil, ...]:
    """One stencil per 1-D pass, computing (and passing on) ``float_type``."""
    steps = []
    for d, terms in enumerate(passes):
        step = f"{name}_pass{d}_{float_type}"
        body = _weighted_sum(step, terms, float_type)
        if divisor is not None and d == len(passes) - 1:
            scale = _divided_by(divisor)
            if float_type != "float64":
                scale = f" * np.{float_type}({1 / divisor!r})"
            body = body.replace("    return total\n", f"    return total{scale}\n")
        made = _from_source(step, body, {}, dtype=np.dtype(float_type))
        if float_type == "float64" and d < len(passes) - 1:
            made.passes = _ring_of_rows(d, terms)
        steps.append(made)
    return tuple(steps)


def _ring_of_rows(axis: int, terms: dict[tuple[int, ...], float]) -> dict | None:
    """The passes of a float64 pass across rows (along ``axis``, not the last) where its
    rows share cache sets: over more than :data:`~.stencils.stencil.ACROSS_ROWS` rows, the
    same sums over a ring of rows (:class:`~.stencils.correlate_passes.CorrelatePass`).
    None for other passes.

    The ring adds :func:`_weighted_sum`'s symmetric terms in its order, but from the
    first term rather than from ``0.0``: the two differ only where every term is ``-0.0``
    (the ring's sum is ``-0.0``), and the last pass, along the rows and written out from
    ``0.0``, makes either ``0.0``.
    """
    weights = tuple(terms.values())
    if len(weights) <= ACROSS_ROWS or not _symmetric(terms) or not all(weights):
        return None
    ndim = len(next(iter(terms)))
    reach = len(weights) // 2
    return {"shared_sets": (CorrelatePass(axis, reach, reach, ndim, weights, 1),)}


def _weighted_sum(
    name: str, terms: dict[tuple[int, ...], float], float_type: str = "float64"
) -> str:
    """Kernel source returning ``sum(weight * x[offset])``, a statement per nonzero term.

    Statements rather than one long expression: a 9x9x9 gaussian has 729 terms,
    and an expression that long nests too deep for Python's parser. With a
    ``float_type`` other than float64 every value is cast to it (a Python float
    would promote the sum back to float64).
    """
    if float_type == "float64":
        start = "0.0" if any(isinstance(w, float) for w in terms.values()) else "0"

        def term(w: float, read: str) -> str:
            return f"{w!r} * {read}"
    elif np.dtype(float_type).kind == "u":  # unit weights (a mean's sums), kept in the type
        start = f"np.{float_type}(0)"

        def term(w: float, read: str) -> str:
            return f"np.{float_type}({read})"
    else:
        start = f"np.{float_type}(0.0)"

        def term(w: float, read: str) -> str:
            value = f"np.{float_type}({read})"
            return value if w == 1 else f"np.{float_type}({w!r}) * {value}"

    reads = {offset: "x[" + ", ".join(map(str, offset)) + "]" for offset in terms}
    if np.dtype(float_type).kind == "u":  # Numba would widen ``total += ...`` to int64
        lines = [
            f"    total = np.{float_type}(total + {term(w, reads[offset])})"
            for offset, w in terms.items()
            if w
        ]
    elif float_type == "float64" and _symmetric(terms):
        lines = [
            f"    total += {term(w, reads[o])}" for o, w in terms.items() if w and o == _flip(o)
        ]
        lines += [
            f"    total += {w!r} * ({reads[o]} + {reads[_flip(o)]})"
            for o, w in terms.items()
            if w and o < _flip(o)
        ]
    else:
        lines = [f"    total += {term(w, reads[offset])}" for offset, w in terms.items() if w]
    return f"def {name}(x):\n    total = {start}\n" + "\n".join(lines) + "\n    return total\n"


def _flip(offset: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-o for o in offset)


def _symmetric(terms: dict[tuple[int, ...], float]) -> bool:
    """Whether every weight equals its mirror's (``terms[-o] == terms[o]``).

    Such sums are written as scipy's correlate1d computes them: the centre's term,
    then ``w * (x[-o] + x[o])`` from the outermost pair inwards. It halves the
    multiplications (and the int-to-float conversions of integer inputs, whose pair
    sums are exact), and a 1-D pass gives scipy's float64 values bit for bit.
    """
    return all(terms.get(_flip(o)) == w for o, w in terms.items())


def sobel(axis: int = -1, *, ndim: int = 2, **options: Any) -> Stencil:
    """Sobel derivative along ``axis`` (scipy.ndimage.sobel): [-1, 0, 1] there, [1, 2, 1] across.

    As scipy's, under ``constant`` it is 1-D passes, each padding its input with ``cval``.

    Parameters
    ----------
    axis : int
        Axis of the derivative, among the kernel's ``ndim`` core axes.
    ndim : int
        Number of core dimensions.
    **options
        ``boundary``, ``cval``, ``dtype``.
    """
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"sobel: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis={axis} is out of range for a {ndim}-D sobel")
    axis %= ndim
    derivative, smoothing = (-1, 0, 1), (1, 2, 1)
    terms = {}
    for offset in itertools.product((-1, 0, 1), repeat=ndim):
        weight = 1
        for d, o in enumerate(offset):
            weight *= (derivative if d == axis else smoothing)[o + 1]
        terms[offset] = weight
    whole = _from_source("sobel", _weighted_sum("sobel", terms), {}, **options)
    if ndim > 1:
        # scipy's sobel is 1-D passes (the derivative, then the smoothing along each other
        # axis), each padding its input with cval: under constant they differ from the
        # 2-D kernel, which reads cval where the derivative pass gives 0. Under the folding
        # modes both agree, and the 2-D kernel itself (the None entry) is faster.
        passes = [{_along(axis, o, ndim): float(w) for o, w in zip((-1, 1), (-1, 1))}]
        passes += [
            {_along(d, o, ndim): float(w) for o, w in zip((-1, 0, 1), smoothing)}
            for d in range(ndim)
            if d != axis
        ]
        whole.passes = {
            None: (whole,),
            "constant": _pass_stencils("sobel", passes, None, "float64"),
        }
    return whole


def laplace(*, ndim: int = 2, **options: Any) -> Stencil:
    """Discrete Laplacian (scipy.ndimage.laplace): the sum over axes of [1, -2, 1].

    Parameters
    ----------
    ndim : int
        Number of core dimensions.
    **options
        ``boundary``, ``cval``, ``dtype``.
    """
    centre = (0,) * ndim
    axes = []
    for d in range(ndim):
        before = tuple(-1 if k == d else 0 for k in range(ndim))
        after = tuple(1 if k == d else 0 for k in range(ndim))
        axes.append(
            f"(x[{', '.join(map(str, before))}] - 2 * x[{', '.join(map(str, centre))}]"
            f" + x[{', '.join(map(str, after))}])"
        )
    source = "def laplace(x):\n    return " + " + ".join(axes) + "\n"
    return _from_source("laplace", source, {}, **options)


def _extremum(which: str, size: int | Sequence[int], ndim: int, options: dict) -> Stencil:
    window = _window(size, ndim)
    first = ", ".join(str(lo) for lo, _ in window)
    name = "minimum" if which == "min" else "maximum"
    source = (
        f"def {name}(x):\n    best = x[{first}]\n"
        + _loops(window, f"best = {which}(best, x[{_index(ndim)}])")
        + "\n    return best\n"
    )
    made = _from_source(name, source, {}, **options)
    halos = _halos(window)
    kind = _extremum_kind(halos)
    if kind == "box":
        made.passes = {"cpu": (BoxExtremum(halos, which == "max"),)}
    elif kind == "axes":
        made.passes = {
            "cpu": tuple(
                ExtremumPass(d, before, after, which == "max", ndim)
                for d, (before, after) in enumerate(halos)
                if before or after
            )
        }
    return made


def minimum(size: int | Sequence[int] = 3, *, ndim: int = 2, **options: Any) -> Stencil:
    """Minimum over a ``size`` window (scipy.ndimage.minimum_filter)."""
    return _extremum("min", size, ndim, options)


def maximum(size: int | Sequence[int] = 3, *, ndim: int = 2, **options: Any) -> Stencil:
    """Maximum over a ``size`` window (scipy.ndimage.maximum_filter)."""
    return _extremum("max", size, ndim, options)


def _batcher_network(n: int) -> list[tuple[int, int]]:
    """Compare-exchange pairs of Batcher's odd-even merge sort for ``n`` values."""
    size = 1 << max(0, (n - 1).bit_length())
    pairs = []
    p = 1
    while p < size:
        k = p
        while k >= 1:
            for j in range(k % p, size - k, 2 * k):
                for i in range(min(k, size - j - k)):
                    if (i + j) // (2 * p) == (i + j + k) // (2 * p):
                        pairs.append((i + j, i + j + k))
            k //= 2
        p *= 2
    # Missing values act as +infinity: comparators that touch them never swap.
    return [(a, b) for a, b in pairs if b < n]


def _selection_network(n: int, rank: int) -> list[tuple[int, int]]:
    """The comparators of a sorting network that the value at ``rank`` depends on."""
    needed = {rank}
    kept = []
    for a, b in reversed(_batcher_network(n)):
        if a in needed or b in needed:
            kept.append((a, b))
            needed |= {a, b}
    return kept[::-1]


def median(size: int | Sequence[int] = 3, *, ndim: int = 2, **options: Any) -> Stencil:
    """Median over a ``size`` window (scipy.ndimage.median_filter; upper median for even counts).

    The kernel is a selection network: only the compare-exchanges (``min``/``max``)
    of a Batcher sorting network that the median depends on, on values held in
    local variables, so it needs no memory and vectorises. On the CPU a 3x3 median (or a
    (1, 3, 3) one) runs :class:`~stencilpipe.stencils.windows.BoxMedian3` instead (Paeth's
    median of three sorted columns, in registers), and windows of more elements than
    ``WINDOW_PASSES_ABOVE["median"]`` a window loop
    (:class:`~stencilpipe.stencils.windows.RankWindow`: sorted columns, a histogram or a
    network run as data, compiled once per dtype).
    """
    window = _window(size, ndim)
    offsets = list(itertools.product(*(range(first, last + 1) for first, last in window)))
    rank = len(offsets) // 2
    if len(offsets) > WINDOW_PASSES_ABOVE["median"]:
        return _big_median(window, rank, options)
    lines = [f"    v{k} = x[{', '.join(map(str, offset))}]" for k, offset in enumerate(offsets)]
    lines += [
        f"    v{a}, v{b} = min(v{a}, v{b}), max(v{a}, v{b})"
        for a, b in _selection_network(len(offsets), rank)
    ]
    source = "def median(x):\n" + "\n".join(lines) + f"\n    return v{rank}\n"
    made = _from_source("median", source, {}, **options)
    if ndim <= 3 and window == [(0, 0)] * (ndim - 2) + [(-1, 1), (-1, 1)]:
        made.passes = {"cpu": (BoxMedian3(ndim),)}  # the network runs on the GPU
    return made


def _big_median(window: list[tuple[int, int]], rank: int, options: dict) -> Stencil:
    """A median over a big window: window passes on the CPU (up to 3 core axes), and a
    per-point kernel that compiles fast whatever the window (for the GPU, and ``wrap``):
    the value with ``rank`` values below it and more up to it, by counting."""
    ndim = len(window)
    first = ", ".join(str(lo) for lo, _ in window)
    count = (
        "value = x["
        + _index(ndim)
        + "]\nless = 0\nequal = 0\n"
        + _loops(
            window,
            "other = x[" + _index(ndim, "p") + "]\nless += other < value\nequal += other == value",
            name="p",
            depth=0,
        )
        + f"\nif less <= {rank} and {rank} < less + equal:\n    result = value"
    )
    source = f"def median(x):\n    result = x[{first}]\n" + _loops(window, count)
    made = _from_source("median", source + "\n    return result\n", {}, **options)
    if ndim <= 3:
        made.passes = {"cpu": (RankWindow(_halos(window), rank),)}
    return made


#: The built-in filters by name, as the CLI and configs refer to them.
FILTERS = {
    "mean": mean,
    "gaussian": gaussian,
    "sobel": sobel,
    "laplace": laplace,
    "minimum": minimum,
    "maximum": maximum,
    "median": median,
}
