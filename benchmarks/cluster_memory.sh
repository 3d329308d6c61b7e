#!/usr/bin/env bash
# Issue 18's scenario: a 150 x 2048 x 2048 uint16 Zarr stack (1.26 GB) through
# gaussian -> mean -> sobel to Zarr on a scheduler with two
# `dask worker --memory-limit 400MB --nthreads 1` (3x the workers' total memory limit in
# input alone). Prints the dry run, the run's summary, the client's peak RSS and every
# worker restart the nannies logged. Run from the repository root:
#     bash benchmarks/cluster_memory.sh [workdir]        (about a minute; 2.6 GB of disk)
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="$ROOT/.venv/bin"
WORK="${1:-$(mktemp -d)}"
mkdir -p "$WORK"
cd "$WORK" || exit 1
rm -rf in.zarr out.zarr
"$BIN/python" -c "
import dask.array as da, numpy as np
x = da.random.default_rng(0).integers(0, 4000, (150, 2048, 2048), dtype=np.uint16, chunks=(1, 1024, 1024))
x.to_zarr('in.zarr')"
PORT=$("$BIN/python" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$BIN/dask" scheduler --host 127.0.0.1 --port "$PORT" --no-dashboard >scheduler.log 2>&1 &
SCHEDULER=$!
sleep 4
for i in 1 2; do
    "$BIN/dask" worker "tcp://127.0.0.1:$PORT" --memory-limit 400MB --nthreads 1 --no-dashboard >"worker$i.log" 2>&1 &
done
sleep 8
cat >run.yaml <<YAML
input: in.zarr
output: out.zarr
stages: [{gaussian: {sigma: 1.0}}, {mean: {size: 3}}, {sobel: {axis: 0}}]
resume: false
cluster: {address: "tcp://127.0.0.1:$PORT"}
YAML
"$BIN/stencilpipe" run --dry-run run.yaml
/usr/bin/time -v "$BIN/stencilpipe" run run.yaml 2>time.log
echo "exit $?"
grep -E "Maximum resident|Elapsed" time.log
echo "worker restarts: $(grep -c 'Restarting' worker1.log worker2.log | paste -sd' ')"
pkill -f "dask worker tcp://127.0.0.1:$PORT"
kill "$SCHEDULER"
