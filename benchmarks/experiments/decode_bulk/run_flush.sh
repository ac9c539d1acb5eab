#!/usr/bin/env bash
# On the GPU machine, from the repository root (OUT=DIR): bench_serving's timing against triton's do_bench and the two
# ways of emptying the L2 (flush_check.py), then the decode rows of the serving table under each (--flush zero, the
# default, and read), beside FA2 and cuDNN. Results: $OUT/*.txt and *.json.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt"
python3 benchmarks/experiments/decode_bulk/flush_check.py --json "$OUT/flush_check.json" > "$OUT/flush_check.txt" 2>&1
for f in zero read; do
  python3 benchmarks/bench_serving.py --decode --flush $f --json "$OUT/decode_$f.json" > "$OUT/decode_$f.txt" 2>&1
done
cat "$OUT/flush_check.txt" "$OUT/decode_zero.txt" "$OUT/decode_read.txt"
