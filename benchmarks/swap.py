"""Issue 14's test as a user runs it: one script, ``import dask_image.ndfilters as ndf``
swapped for ``import stencilpipe.ndfilters as ndf``.

The script (:data:`SCRIPT`) calls every function of ``dask_image.ndfilters`` under every
boundary mode on a chunked 3-D uint16 stack (``BENCH_SHAPE``, ``BENCH_CHUNKS``) and saves
what each call computed. Each side runs as a fresh process, from start to exit:
stencilpipe first with an empty kernel cache (its very first run: every kernel compiled),
then both sides ``BENCH_ROUNDS`` times in turn (stencilpipe's cache filled). Every array is
compared with scipy.ndimage applied to the whole NumPy array.

Run: ``python benchmarks/swap.py`` (a few minutes: the cold run compiles every kernel).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

sys.path.insert(0, os.path.dirname(__file__))
from side_by_side import load  # noqa: E402

SHAPE = tuple(int(n) for n in os.environ.get("BENCH_SHAPE", "16,128,128").split(","))
CHUNKS = tuple(int(n) for n in os.environ.get("BENCH_CHUNKS", "4,64,64").split(","))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
MODES = ["reflect", "mirror", "nearest", "wrap", "constant"]

#: The user's script: ``{module}`` is the only difference between the two sides.
SCRIPT = """
import json, sys, time
import numpy as np, dask.array as da
import {module} as ndf

shape, chunks, modes = {shape}, {chunks}, {modes}
x = np.random.default_rng(0).integers(0, 4096, shape).astype(np.uint16)
stack = da.from_array(x, chunks=chunks)
ball = np.zeros((3, 3, 3), bool)
ball[1, 1, :] = ball[1, :, 1] = ball[:, 1, 1] = True
weights = np.arange(27, dtype=np.float64).reshape(3, 3, 3) / 27
calls = {{
    "convolve": lambda m: ndf.convolve(stack, weights, mode=m),
    "correlate": lambda m: ndf.correlate(stack, weights, mode=m),
    "gaussian_filter": lambda m: ndf.gaussian_filter(stack, 1.5, mode=m),
    "gaussian_gradient_magnitude": lambda m: ndf.gaussian_gradient_magnitude(stack, 1, mode=m),
    "gaussian_laplace": lambda m: ndf.gaussian_laplace(stack, 1, mode=m),
    "generic_filter": lambda m: ndf.generic_filter(stack, np.max, size=3, mode=m),
    "laplace": lambda m: ndf.laplace(stack, mode=m),
    "maximum_filter": lambda m: ndf.maximum_filter(stack, footprint=ball, mode=m),
    "median_filter": lambda m: ndf.median_filter(stack, size=3, mode=m),
    "minimum_filter": lambda m: ndf.minimum_filter(stack, size=(1, 5, 5), mode=m),
    "percentile_filter": lambda m: ndf.percentile_filter(stack, 25, size=3, mode=m),
    "prewitt": lambda m: ndf.prewitt(stack, axis=1, mode=m),
    "rank_filter": lambda m: ndf.rank_filter(stack, 4, size=3, mode=m),
    "sobel": lambda m: ndf.sobel(stack, mode=m),
    "threshold_local": lambda m: ndf.threshold_local(stack, 5, mode=m),
    "uniform_filter": lambda m: ndf.uniform_filter(stack, 5, mode=m),
}}
seconds, results = {{}}, {{}}
for name, call in calls.items():
    start = time.perf_counter()
    for mode in modes:
        results[f"{{name}}-{{mode}}"] = call(mode).compute()
    seconds[name] = time.perf_counter() - start
np.savez(sys.argv[1], **results)
print(json.dumps(seconds))
"""


def expected(x: np.ndarray, ball: np.ndarray, weights: np.ndarray) -> dict[str, np.ndarray]:
    """scipy.ndimage's arrays for every call of :data:`SCRIPT` (threshold_local as
    dask-image defines it: the gaussian-weighted local mean of the image in float64)."""
    wide = x.astype(np.float64)
    calls = {
        "convolve": lambda m: ndi.convolve(x, weights, mode=m),
        "correlate": lambda m: ndi.correlate(x, weights, mode=m),
        "gaussian_filter": lambda m: ndi.gaussian_filter(x, 1.5, mode=m),
        "gaussian_gradient_magnitude": lambda m: ndi.gaussian_gradient_magnitude(x, 1, mode=m),
        "gaussian_laplace": lambda m: ndi.gaussian_laplace(x, 1, mode=m),
        "generic_filter": lambda m: ndi.generic_filter(x, np.max, size=3, mode=m),
        "laplace": lambda m: ndi.laplace(x, mode=m),
        "maximum_filter": lambda m: ndi.maximum_filter(x, footprint=ball, mode=m),
        "median_filter": lambda m: ndi.median_filter(x, size=3, mode=m),
        "minimum_filter": lambda m: ndi.minimum_filter(x, size=(1, 5, 5), mode=m),
        "percentile_filter": lambda m: ndi.percentile_filter(x, 25, size=3, mode=m),
        "prewitt": lambda m: ndi.prewitt(x, axis=1, mode=m),
        "rank_filter": lambda m: ndi.rank_filter(x, 4, size=3, mode=m),
        "sobel": lambda m: ndi.sobel(x, mode=m),
        "threshold_local": lambda m: ndi.gaussian_filter(wide, (5 - 1) / 6.0, mode=m),
        "uniform_filter": lambda m: ndi.uniform_filter(x, 5, mode=m),
    }
    return {f"{name}-{mode}": call(mode) for name, call in calls.items() for mode in MODES}


def run_script(module: str, folder: Path, env: dict[str, str]) -> tuple[float, dict, dict]:
    """Wall seconds of the script from process start to exit, its per-function seconds,
    and the arrays it computed."""
    script = folder / f"script_{module.split('.')[0]}.py"  # not named as a package
    script.write_text(SCRIPT.format(module=module, shape=SHAPE, chunks=CHUNKS, modes=MODES))
    arrays = folder / f"{module.split('.')[0]}.npz"
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(script), str(arrays)], env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{module}: the script failed\n{done.stderr}")
    with np.load(arrays) as saved:
        return wall, json.loads(done.stdout), dict(saved)


def differences(got: dict, oracle: dict) -> list[str]:
    """The calls whose arrays differ from scipy's (floats beyond 1e-6 relative)."""
    wrong = []
    for key, want in oracle.items():
        have = got[key]
        if have.dtype.kind == "f" or want.dtype.kind == "f":
            same = np.allclose(have, want, rtol=1e-6, atol=1e-6)
        else:
            same = np.array_equal(have, want)
        if not same:
            wrong.append(key)
    return wrong


def main() -> None:
    x = np.random.default_rng(0).integers(0, 4096, SHAPE).astype(np.uint16)
    ball = np.zeros((3, 3, 3), bool)
    ball[1, 1, :] = ball[1, :, 1] = ball[:, 1, 1] = True
    oracle = expected(x, ball, np.arange(27, dtype=np.float64).reshape(3, 3, 3) / 27)
    print(f"{SHAPE} uint16 in {CHUNKS} chunks, 16 functions x {len(MODES)} modes; {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "STENCILPIPE_CACHE_DIR": str(folder / "kernels")}
        cold, _, arrays = run_script("stencilpipe.ndfilters", folder, env)
        print(f"stencilpipe, empty kernel cache: {cold:.1f} s")
        walls = {"dask_image.ndfilters": [], "stencilpipe.ndfilters": []}
        per_function = {}
        for _ in range(ROUNDS):
            for module in walls:
                wall, seconds, arrays = run_script(module, folder, env)
                walls[module].append(wall)
                for name, value in seconds.items():
                    best = per_function.setdefault((module, name), value)
                    per_function[module, name] = min(best, value)
                wrong = differences(arrays, oracle)
                print(f"{module}: {wall:.1f} s, arrays unlike scipy's: {wrong or 'none'}")
    names = sorted({name for _, name in per_function})
    print("\n| function (5 modes) | stencilpipe s | dask-image s | speed-up |")
    print("|---|---:|---:|---:|")
    for name in names:
        ours, theirs = (
            per_function["stencilpipe.ndfilters", name],
            per_function["dask_image.ndfilters", name],
        )
        print(f"| {name} | {ours:.3f} | {theirs:.3f} | {theirs / ours:.1f}x |")
    ours, theirs = min(walls["stencilpipe.ndfilters"]), min(walls["dask_image.ndfilters"])
    print(
        f"| whole script, start to exit (best of {ROUNDS}) | {ours:.1f} | {theirs:.1f} | "
        f"{theirs / ours:.2f}x |"
    )
    print(
        f"| whole script, stencilpipe's first run (empty cache) | {cold:.1f} | {theirs:.1f} | "
        f"{theirs / cold:.2f}x |"
    )


if __name__ == "__main__":
    main()
