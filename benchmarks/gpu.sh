#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: set up CuPy and numba-cuda for its CUDA version,
# run the real-GPU tests, then the GPU benchmark (the benchmark runs even where a test
# failed; the exit status then says so).
#
#   bash benchmarks/gpu.sh [OUTPUT_DIR]     # the plot goes to OUTPUT_DIR (default: .)
#
# PYTHON=... picks the interpreter (default: the project's .venv). Exit status 2: no usable GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
OUTPUT_DIR=${1:-.}

fail() { echo "gpu.sh: $*" >&2; exit 2; }

[ -x "$PY" ] || fail "no interpreter at $PY: run 'make test' once to create .venv, or set PYTHON"
command -v nvidia-smi >/dev/null || fail "no CUDA device: nvidia-smi is not installed (no NVIDIA driver)"
nvidia-smi -L || fail "no CUDA device: nvidia-smi lists none"
CUDA_MAJOR=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9][0-9]*\)\..*/\1/p' | head -n 1)
case "$CUDA_MAJOR" in
    12|13) ;;
    *) fail "the driver supports CUDA '${CUDA_MAJOR:-?}'; this script knows CUDA 12 and 13" ;;
esac

# One kernel compiled and launched by Numba, one CuPy reduction: proves driver, NVVM and CuPy.
probe() {
    "$PY" - <<'EOF' 2>&1
import numpy as np, cupy
from numba import cuda
@cuda.jit
def one(a):
    a[cuda.grid(1)] = 1
a = cupy.zeros(32, np.int32)
one[1, 32](a)
assert int(a.sum()) == 32
print("GPU ready:", cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
EOF
}

if ! probe; then
    echo "gpu.sh: installing CuPy and numba-cuda for CUDA $CUDA_MAJOR into $("$PY" -c 'import sys; print(sys.prefix)')"
    "$PY" -m pip install --quiet "cupy-cuda${CUDA_MAJOR}x" "numba-cuda[cu${CUDA_MAJOR}]" \
        || fail "pip could not install cupy-cuda${CUDA_MAJOR}x and numba-cuda[cu${CUDA_MAJOR}] (no network?)"
    probe || fail "CuPy or numba-cuda still cannot use the GPU (see above)"
fi
"$PY" -c "import matplotlib" 2>/dev/null || "$PY" -m pip install --quiet matplotlib \
    || echo "gpu.sh: matplotlib could not be installed; the benchmark will skip its plot"

echo "== real-GPU tests"
"$PY" -m pytest tests/stencils/test_cuda_device.py tests/test_gpu.py \
    tests/peer/test_peer_dask_image_ndmorph.py::test_cupy_ndmorph \
    -m gpu -q -n "${GPU_TEST_WORKERS:-4}" -p no:cacheprovider -rs --durations=15 || tests_failed=1

echo "== GPU benchmark"
mkdir -p "$OUTPUT_DIR"
"$PY" benchmarks/gpu.py --plot "$OUTPUT_DIR/gpu_crossover.png"
[ -z "${tests_failed:-}" ] || fail "some real-GPU tests failed (see above)"
