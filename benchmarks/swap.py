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
import types
from pathlib import Path

import numpy as np
from scipy import ndimage as ndi

sys.path.insert(0, os.path.dirname(__file__))
from side_by_side import load  # noqa: E402

SHAPE = tuple(int(n) for n in os.environ.get("BENCH_SHAPE", "16,128,128").split(","))
CHUNKS = tuple(int(n) for n in os.environ.get("BENCH_CHUNKS", "4,64,64").split(","))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 3))
MODES = ["reflect", "mirror", "nearest", "wrap", "constant"]

#: Each call of the script: the function and its arguments after the array.
CALLS = {
    "convolve": "weights",
    "correlate": "weights",
    "gaussian_filter": "1.5",
    "gaussian_gradient_magnitude": "1",
    "gaussian_laplace": "1",
    "generic_filter": "np.max, size=3",
    "laplace": "",
    "maximum_filter": "footprint=ball",
    "median_filter": "size=3",
    "minimum_filter": "size=(1, 5, 5)",
    "percentile_filter": "25, size=3",
    "prewitt": "axis=1",
    "rank_filter": "4, size=3",
    "sobel": "",
    "threshold_local": "5",
    "uniform_filter": "5",
}

#: What the script defines before its calls (``np`` is NumPy).
SETUP = """
x = np.random.default_rng(0).integers(0, 4096, {shape}).astype(np.uint16)
ball = np.zeros((3, 3, 3), bool)
ball[1, 1, :] = ball[1, :, 1] = ball[:, 1, 1] = True
weights = np.arange(27, dtype=np.float64).reshape(3, 3, 3) / 27
"""


def calls_source(array: str) -> str:
    """A dict literal of one ``lambda mode: ndf.<function>(array, ..., mode=mode)`` per call."""
    lines = [
        f"    {name!r}: lambda m: ndf.{name}({array}, {args + ', ' if args else ''}mode=m),"
        for name, args in CALLS.items()
    ]
    return "{\n" + "\n".join(lines) + "\n}"


#: The user's script: ``{module}`` is the only difference between the two sides.
SCRIPT = """
import json, sys, time
import numpy as np, dask.array as da
import {module} as ndf
{setup}
stack = da.from_array(x, chunks={chunks})
calls = {calls}
seconds, results = {{}}, {{}}
for name, call in calls.items():
    start = time.perf_counter()
    for mode in {modes}:
        results[f"{{name}}-{{mode}}"] = call(mode).compute()
    seconds[name] = time.perf_counter() - start
np.savez(sys.argv[1], **results)
print(json.dumps(seconds))
"""


def threshold_local(image: np.ndarray, block_size: int, mode: str) -> np.ndarray:
    """dask-image's threshold_local (method 'gaussian', offset 0) on a NumPy array: the
    gaussian-weighted local mean of the image in float64."""
    return ndi.gaussian_filter(image.astype(np.float64), (block_size - 1) / 6.0, mode=mode)


def expected() -> dict[str, np.ndarray]:
    """scipy.ndimage's arrays for every call of :data:`SCRIPT`, on the whole array."""
    functions = {name: getattr(ndi, name, None) for name in CALLS}
    scipy_as_ndf = types.SimpleNamespace(**{**functions, "threshold_local": threshold_local})
    scope = {"np": np, "ndf": scipy_as_ndf}
    exec(SETUP.format(shape=SHAPE), scope)
    calls = eval(calls_source("x"), scope)
    return {f"{name}-{mode}": call(mode) for name, call in calls.items() for mode in MODES}


def run_script(module: str, folder: Path, env: dict[str, str]) -> tuple[float, dict, dict]:
    """Wall seconds of the script from process start to exit, its per-function seconds,
    and the arrays it computed."""
    script = folder / f"script_{module.split('.')[0]}.py"  # not named as a package
    setup = SETUP.format(shape=SHAPE)
    source = SCRIPT.format(
        module=module, setup=setup, chunks=CHUNKS, calls=calls_source("stack"), modes=MODES
    )
    script.write_text(source)
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
    oracle = expected()
    print(
        f"{SHAPE} uint16 in {CHUNKS} chunks, {len(CALLS)} functions x {len(MODES)} modes; {load()}"
    )
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
