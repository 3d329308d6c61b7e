"""The generated CUDA kernels, run by Numba's CUDA simulator: no GPU needed.

``NUMBA_ENABLE_CUDASIM=1`` only takes effect before Numba is first imported,
so the cases (``cuda_simulator_cases.py``) run in a pytest subprocess of their own.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

CASES = Path(__file__).with_name("cuda_simulator_cases.py")
ROOT = Path(__file__).parents[2]


@pytest.mark.skipif(not importlib.util.find_spec("numba_cuda"), reason="no numba-cuda")
def test_cuda_kernels_under_the_simulator():
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", str(CASES), "-q", "--tb=short", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    summary = run.stdout.strip().splitlines()[-1:] or ["(no output)"]
    assert run.returncode == 0, f"{summary[0]}\n\n{run.stdout[-6000:]}\n{run.stderr[-2000:]}"
    assert " passed" in summary[0] and "skipped" not in summary[0], summary[0]
