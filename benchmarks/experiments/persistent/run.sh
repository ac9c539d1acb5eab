#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/persistent/run.sh
# A persistent grid (persistent.patch, FS_PERSIST = P): the first P CTAs stay resident and loop over the work items
# (causal: longest first), the others exit at once; no prefetch across items. Does a block's fixed cost
# (benchmarks/block_cost.py: 2.6 tile times with f16 P@V) shrink when no CTA is launched or retired between items?
# A/B in alternating rounds against the plain kernel (kernel_variant_probe.py), bit for bit first; then the sanitizers
# with P = 3 so that every CTA runs several items (the barrier between items is what racecheck must see).
set -euo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/persist/kernel
cp kernel/flash_fwd.cu /tmp/persist/kernel/flash_fwd.cu
(cd /tmp/persist && patch -s -p1 < "$OLDPWD/benchmarks/experiments/persistent/persistent.patch")
SRC=/tmp/persist/kernel/flash_fwd.cu
python3 benchmarks/experiments/kernel_variant_probe.py --source $SRC --define FS_PERSIST=264 --cases causal \
    --shape 4,16,4096 --json "$OUT/persist_causal_4x16x4096.json" 2>&1 | tee -a "$OUT/persist_probe.txt"
python3 benchmarks/experiments/kernel_variant_probe.py --source $SRC --define FS_PERSIST=264 --cases defaults \
    --shape 16,16,1024 --json "$OUT/persist_defaults_16x16x1024.json" 2>&1 | tee -a "$OUT/persist_probe.txt"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  "$CS" --tool $tool --error-exitcode 1 python3 benchmarks/experiments/kernel_variant_probe.py --source $SRC \
      --define FS_PERSIST=3 --cases causal --one --json /dev/null 2>&1 | tee -a "$OUT/persist_sanitize.txt"
done
