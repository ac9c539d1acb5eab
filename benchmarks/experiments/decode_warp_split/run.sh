#!/usr/bin/env bash
# The device round of this experiment (writes under $OUT): the small calls' bits, the timing table of three decode
# rows, then the small calls under compute-sanitizer's memcheck and racecheck. `run.sh slim`: the bits and the B=8
# row only (when little device time is left).
set -uo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD
H=benchmarks/experiments/decode_warp_split
ROWS="decode,decode d=64,decode d=256"
[[ ${1:-} == slim ]] && ROWS=decode
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/device.txt"
python3 $H/small_calls.py 2>&1 | tee "$OUT/small_calls.txt"
python3 $H/warp_split.py --rows "$ROWS" --json "$OUT/warp_split.json" 2>&1 | tee "$OUT/warp_split.txt"
[[ ${1:-} == slim ]] && exit 0
# (--report-api-errors no: cuda-python's driver lookups under torch report failed cuGetProcAddress calls, host noise)
for tool in memcheck racecheck; do
  compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 --print-limit 20 \
    python3 $H/small_calls.py > "$OUT/sanitize_$tool.txt" 2>&1
  echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_$tool.txt" | tail -1)"
done
