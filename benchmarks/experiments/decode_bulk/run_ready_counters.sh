#!/usr/bin/env bash
# On the GPU machine, from the repository root (OUT=DIR; captures held out of the tree), with the checkout carrying
# combine_columns.patch and ready_counters.patch applied (from a checkout without them: patch -p1 < each, in that
# order, first), in one device call:
#   1. decode_parts.py three times: the kernel before both patches, with combine_columns.patch alone, and with both
#      (the patches taken off and put back with patch(1), never git: the device's .git may be stale);
#   2. decode_ab.py --others: the decode rows beside FA2 and cuDNN, on the checkout's kernel;
#   3. the serving round on the checkout's kernel (benchmarks/serving/run_device.sh verify sanitize fused tests:
#      every serving case against the emulator bit for bit, both captures retaken, memcheck / racecheck);
#   4. overhead.py, if time is left.
# Results: $OUT/log.txt (all of 1, 2 and 4), $OUT/ab/decode_ab.json, $OUT/overhead.json, $OUT/s/ (the round).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
D=benchmarks/experiments/decode_bulk
START=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$OUT/gpu.txt"
{
  patch -s -R -p1 < $D/ready_counters.patch && patch -s -R -p1 < $D/combine_columns.patch || exit 1
  echo "== decode_parts.py: before both patches"; python3 $D/decode_parts.py
  patch -s -p1 < $D/combine_columns.patch || exit 1
  echo "== decode_parts.py: combine_columns.patch"; python3 $D/decode_parts.py
  patch -s -p1 < $D/ready_counters.patch || exit 1
  echo "== decode_parts.py: combine_columns.patch + ready_counters.patch"; python3 $D/decode_parts.py
  echo "== decode_ab.py --others (both patches)"; python3 $D/decode_ab.py --others --out "$OUT/ab"
  echo "== timing done after $(( $(date +%s) - START )) s"
} > "$OUT/log.txt" 2>&1
OUT=$OUT/s bash benchmarks/serving/run_device.sh verify sanitize fused tests > /dev/null 2>&1
echo "== round done after $(( $(date +%s) - START )) s" >> "$OUT/log.txt"
if (( $(date +%s) - START < 480 )); then
  { echo "== overhead.py"; python3 $D/overhead.py --json "$OUT/overhead.json"; } >> "$OUT/log.txt" 2>&1
fi
tail -60 "$OUT/log.txt"; cat "$OUT/s/summary.txt" 2>/dev/null | head -30
