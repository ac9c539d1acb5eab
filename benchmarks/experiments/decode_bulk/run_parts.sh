#!/usr/bin/env bash
# On the GPU machine, from the repository root (OUT=DIR): the decode's parts (decode_parts.py) and the per-byte / per-launch
# fit of every kernel reading its cache (streaming_fit.py), in one call; results under $OUT.
set -uo pipefail
export PYTHONPATH=$PWD
D=benchmarks/experiments/decode_bulk
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt"
python3 $D/streaming_fit.py --json "$OUT/streaming_fit.json" 2>&1 | tee "$OUT/streaming_fit.txt"
python3 $D/decode_parts.py --json "$OUT/parts.json" 2>&1 | tee "$OUT/parts.txt"
