#!/usr/bin/env bash
# One command for a GPU machine: the whole suite on CuPy, then the benchmarks on CuPy with the device's own
# floors (copy GB/s, matmul TFLOP/s) measured in the same run. Logs and JSON go to ${OUT:-gpu_check_out}/.
#
#   bash scripts/gpu_check.sh            # needs an NVIDIA GPU; installs refpos[test,cupy] if something is missing
#
# Environment:
#   GPU_CHECK_BACKEND  backend to run (default cupy; "numpy" is a dry run of this script on the CPU)
#   BENCH_TIMEOUT      seconds for each benchmark command (default 240)
#   SUITE_TIMEOUT      seconds for the test suite (default 900); what ran is in the log either way
#   PYTEST_WORKERS     pytest-xdist workers when pytest-xdist is installed (default 8; 0 runs serially)
#   PYTEST_ARGS        more pytest arguments (default -rfE: a line for each failure and error)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_check_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CI=${CI:-true}
backend=${GPU_CHECK_BACKEND:-cupy}
py=${PYTHON:-python3}

needs="import refpos, hypothesis, array_api_strict, scipy, mpmath, threadpoolctl"
[ "$backend" = cupy ] && needs="$needs, cupy"
if ! "$py" -c "$needs" 2>/dev/null; then
  extras=test
  [ "$backend" = cupy ] && extras=test,cupy
  "$py" -m pip install -q -e ".[$extras]" || { echo "gpu_check: cannot install refpos[$extras]"; exit 2; }
fi
if [ "$backend" = cupy ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/device.txt"
fi
"$py" -c "import cupy; print('cupy', cupy.__version__)" 2>/dev/null | tee -a "$out/device.txt"

status=0
bench() {  # bench NAME SUITE [ARGS...]: one benchmark, its JSON kept, its table printed
  local name=$1; shift
  echo "== refpos bench $* --backend $backend"
  timeout "${BENCH_TIMEOUT:-240}" "$py" -m refpos bench "$@" --backend "$backend" --json > "$out/bench_$name.json" \
    || { echo "gpu_check: bench $name failed or timed out"; status=1; return; }
  "$py" -c "import json, sys; from refpos.tools.bench import _format_record
meta = json.load(open(sys.argv[1])); print(' '.join(f'{k}={v}' for k, v in meta['meta'].items()))
for r in meta['records']: print(_format_record(r))" "$out/bench_$name.json" || status=1
}
echo "== spec suite and unit tests (REFPOS_BACKEND=$backend)"
workers=()
if [ "${PYTEST_WORKERS:-8}" != 0 ] && "$py" -c "import xdist" 2>/dev/null; then
  workers=(-n "${PYTEST_WORKERS:-8}")
fi
REFPOS_BACKEND=$backend timeout "${SUITE_TIMEOUT:-900}" "$py" -m pytest -q -p no:cacheprovider --durations=15 \
  "${workers[@]}" ${PYTEST_ARGS:--rfE} 2>&1 | tee "$out/pytest_$backend.log" || status=1
bench floors floors
bench rope rope                                   # (1, 32, 4096, 128): a Llama-sized head batch, 64 MiB in float32
bench rope_large rope --shape 4 32 8192 128       # 1 GiB in float32: enough bytes to reach the copy bandwidth
bench attention attention --sizes 2048 8192 32768 --heads 8 --head-dim 128
bench attention_causal attention --sizes 2048 8192 32768 --heads 8 --head-dim 128 --causal

exit $status
