"""stencilpipe.ndfilters and ndmorph against dask_image.ndfilters/ndmorph and scipy.ndimage,
side by side in one run.

A chunked 3-D stack (uint16 and float32), every ndfilters and ndmorph function with
typical arguments (binary morphology on the uint16 stack thresholded at its median;
dask-image has no grey morphology: ``-``). Times are the best of ``--repeat`` runs after one warm-up run (which
compiles stencilpipe's kernels); dask inputs are computed with Dask's threaded
scheduler, scipy runs on the whole NumPy array. Ratios above 1 mean stencilpipe is
faster. The last column is the largest difference from scipy (0 for exact).

Chunks below ``stencil.SMALL_CALL`` elements are small calls: ``--path small`` times the
loops they run while a filter's kernel written out would cost a compile (a machine's first
use), ``--path written-out`` the kernels written out (compiled, or loaded from the cache).

    python benchmarks/ndfilters.py [--shape 16 256 256] [--chunks 4 128 128] [--repeat 3]
                                   [--path written-out|small]
"""

from __future__ import annotations

import argparse
import importlib
import time

import dask
import dask.array as da
import dask_image.ndfilters as dif
import dask_image.ndmorph as dim
import numpy as np
import scipy.ndimage as ndi

import stencilpipe.ndfilters as ndf
import stencilpipe.ndmorph as ndm

WEIGHTS = np.arange(27.0).reshape(3, 3, 3) / 351.0
BALL = ndi.generate_binary_structure(3, 1)


def local_max(values):
    return values.max()


#: name -> (positional arguments, keyword arguments), the same for the three libraries.
CASES = {
    "correlate": ((WEIGHTS,), {}),
    "convolve": ((WEIGHTS,), {}),
    "uniform_filter": ((3,), {}),
    "minimum_filter": ((3,), {}),
    "maximum_filter": ((), {"footprint": BALL}),
    "median_filter": ((3,), {}),
    "rank_filter": ((5,), {"size": 3}),
    "percentile_filter": ((25,), {"footprint": BALL}),
    "gaussian_filter": ((1.5,), {}),
    "gaussian": ((1.5,), {}),
    "gaussian_laplace": ((1.0,), {}),
    "gaussian_gradient_magnitude": ((1.0,), {}),
    "sobel": ((), {}),
    "prewitt": ((), {}),
    "laplace": ((), {}),
    "generic_filter": ((local_max,), {"size": 3}),
    "threshold_local": ((5,), {}),
}
#: ndmorph's cases: name -> (positional arguments, keyword arguments).
MORPH_CASES = {
    "binary_erosion": ((), {"iterations": 2}),
    "binary_dilation": ((), {"structure": np.ones((3, 3, 3), bool)}),
    "binary_opening": ((), {}),
    "binary_closing": ((), {"iterations": 2}),
    "grey_erosion": ((), {"size": 3}),
    "grey_dilation": ((), {"footprint": BALL}),
    "grey_opening": ((), {"size": (1, 5, 5)}),
    "grey_closing": ((), {"structure": BALL.astype(np.float64)}),
}


def best_time(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return min(times)


def dask_call(function, lazy, args, kwargs):
    return lambda: function(lazy, *args, **kwargs).compute()


def scipy_call(name, data, args, kwargs):
    if name == "gaussian":
        name = "gaussian_filter"
    if name == "threshold_local":  # dask-image's, on one chunk: scipy's gaussian per block
        return lambda: dif.threshold_local(da.from_array(data), *args, **kwargs).compute()
    return lambda: getattr(ndi, name)(data, *args, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=3, default=(16, 256, 256))
    parser.add_argument("--chunks", type=int, nargs=3, default=(4, 128, 128))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="function names to run")
    parser.add_argument("--path", choices=["written-out", "small"], default="written-out")
    options = parser.parse_args()
    calls = importlib.import_module("stencilpipe.stencils.stencil")
    if options.path == "small":
        calls.Stencil._at_hand = lambda *args: False
    else:
        calls.SMALL_CALL = 0
    rng = np.random.default_rng(0)
    stacks = {
        "uint16": rng.integers(0, 4096, options.shape).astype(np.uint16),
        "float32": rng.standard_normal(options.shape).astype(np.float32),
    }
    header = (
        f"{'function':<28} {'dtype':<8} {'stencilpipe s':>13} {'dask-image s':>12} "
        f"{'scipy s':>9} {'vs dask-image':>13} {'vs scipy':>9} {'max |diff|':>11}"
    )
    print(
        f"shape {tuple(options.shape)}, chunks {tuple(options.chunks)}, best of "
        f"{options.repeat}, {options.path} path"
    )
    print(header)
    print("-" * len(header))
    binary = {"bool": stacks["uint16"] > np.median(stacks["uint16"])}
    tables = [(ndf, dif, CASES, stacks)]
    tables += [(ndm, dim, {n: c for n, c in MORPH_CASES.items() if "binary" in n}, binary)]
    tables += [(ndm, None, {n: c for n, c in MORPH_CASES.items() if "grey" in n}, stacks)]
    with dask.config.set(scheduler="threads"):
        for ours_module, their_module, cases, data_by_dtype in tables:
            for name, (args, kwargs) in cases.items():
                if options.only and name not in options.only:
                    continue
                for dtype, data in data_by_dtype.items():
                    print(row(name, dtype, data, args, kwargs, ours_module, their_module, options))


def row(name, dtype, data, args, kwargs, ours_module, their_module, options) -> str:
    """One line of the table: the three timings, the two ratios, the largest difference."""
    lazy = da.from_array(data, chunks=tuple(options.chunks))
    ours = dask_call(getattr(ours_module, name), lazy, args, kwargs)
    reference = scipy_call(name, data, args, kwargs)
    result = ours()  # warm-up: compiles
    expected = reference()
    diff = float(np.max(np.abs(result.astype(np.float64) - expected)))
    t_ours = best_time(ours, options.repeat)
    t_scipy = best_time(reference, options.repeat)
    t_theirs_text, ratio_text = "-", "-"
    if their_module is not None:
        theirs = dask_call(getattr(their_module, name), lazy, args, kwargs)
        theirs()
        t_theirs = best_time(theirs, options.repeat)
        t_theirs_text, ratio_text = f"{t_theirs:.4f}", f"{t_theirs / t_ours:.2f}x"
    return (
        f"{name:<28} {dtype:<8} {t_ours:>13.4f} {t_theirs_text:>12} {t_scipy:>9.4f} "
        f"{ratio_text:>13} {t_scipy / t_ours:>8.2f}x {diff:>11.3g}"
    )


if __name__ == "__main__":
    main()
