#!/usr/bin/env bash
# One command for a GPU machine: the whole suite on CuPy, then the benchmarks on CuPy, with the device's
# own floors (copy GB/s, matmul TFLOP/s) measured in the same run. Writes logs to ${OUT:-gpu_check_out}/.
#
#   bash scripts/gpu_check.sh            # needs an NVIDIA GPU; installs refpos[test,cupy] if CuPy is missing
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-gpu_check_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 CI=${CI:-true}

python3 -c "import cupy" 2>/dev/null || python3 -m pip install -q -e ".[test,cupy]"
python3 -m pip install -q --no-deps -e . >/dev/null 2>&1 || true
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/device.txt"

status=0
echo "== spec suite and unit tests on CuPy"
REFPOS_BACKEND=cupy python3 -m pytest -q -p no:cacheprovider 2>&1 | tee "$out/pytest_cupy.log" || status=1

echo "== device floors, then refpos on CuPy (JSON in $out/)"
for suite in floors attention rope; do
  extra=()
  [ "$suite" = attention ] && extra=(--sizes 2048 8192 32768 --heads 8 --head-dim 128 --causal)
  python3 -m refpos.cli bench "$suite" --backend cupy "${extra[@]}" --json > "$out/bench_$suite.json" || status=1
  python3 -c "import json, sys; from refpos.bench import _format_record
for r in json.load(open(sys.argv[1]))['records']: print(_format_record(r))" "$out/bench_$suite.json" || status=1
done
exit $status
