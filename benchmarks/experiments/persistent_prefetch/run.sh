#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/persistent_prefetch/run.sh
# The persistent grid with dynamic work (experiments/persistent_dynamic/) plus a prefetch across items
# (persistent_prefetch.patch, FS_PERSIST = P, f16 / bf16 builds): a CTA draws its next item when it starts one, loads
# the next item's first KV tiles into the ring after its own (under its last tiles) and the next Q once its last
# Q K^T is done, so a new item starts on a full pipeline. Question: does that hide a block's fixed cost (2.6 tile
# times with f16 P@V, benchmarks/block_cost.py)?
# 1-2. A/B against the plain kernel, alternating rounds (P = 264: two CTAs per SM), causal and N = 1024.
# 3-4. P = 3, so that each CTA runs several items and every prefetch path runs: the probe's bit-for-bit checks on
#      both case sets (small timed shape: the timing of 3 CTAs means nothing).
# 5.   memcheck and racecheck with P = 3.
set -euo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/pf/kernel
cp kernel/flash_fwd.cu /tmp/pf/kernel/flash_fwd.cu
(cd /tmp/pf && patch -s -p1 < "$OLDPWD/benchmarks/experiments/persistent_prefetch/persistent_prefetch.patch")
SRC=/tmp/pf/kernel/flash_fwd.cu
P=benchmarks/experiments/kernel_variant_probe.py
python3 $P --source $SRC --define FS_PERSIST=264 --cases causal --shape 4,16,4096 \
    --json "$OUT/pf_causal_4x16x4096.json" 2>&1 | tee -a "$OUT/pf_probe.txt"
python3 $P --source $SRC --define FS_PERSIST=264 --cases defaults --shape 16,16,1024 \
    --json "$OUT/pf_defaults_16x16x1024.json" 2>&1 | tee -a "$OUT/pf_probe.txt"
for cases in causal defaults; do
  python3 $P --source $SRC --define FS_PERSIST=3 --cases $cases --shape 1,4,1024 --rounds 1 \
      --json "$OUT/pf_p3_$cases.json" 2>&1 | tee -a "$OUT/pf_p3_checks.txt"
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  "$CS" --tool $tool --error-exitcode 1 python3 $P --source $SRC --define FS_PERSIST=3 --cases causal --one \
      --json /dev/null 2>&1 | tee -a "$OUT/pf_sanitize.txt"
done
