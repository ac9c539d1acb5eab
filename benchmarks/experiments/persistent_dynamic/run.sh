#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/persistent_dynamic/run.sh
# A persistent grid with dynamic work (persistent_dynamic.patch, FS_PERSIST = P): the first P CTAs stay resident, run
# their own item and then draw the next from a global counter until none is left (causal: longest first); the other
# CTAs exit at once; no prefetch across items. experiments/persistent/ dealt the items statically (c, c + P, ...).
# A/B in alternating rounds against the plain kernel (kernel_variant_probe.py), bit for bit first; then the sanitizers
# with P = 3 so that every CTA runs several items (the barrier between items is what racecheck must see).
set -euo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT" /tmp/pdyn/kernel
cp kernel/flash_fwd.cu /tmp/pdyn/kernel/flash_fwd.cu
(cd /tmp/pdyn && patch -s -p1 < "$OLDPWD/benchmarks/experiments/persistent_dynamic/persistent_dynamic.patch")
SRC=/tmp/pdyn/kernel/flash_fwd.cu
python3 benchmarks/experiments/kernel_variant_probe.py --source $SRC --define FS_PERSIST=264 --cases causal \
    --shape 4,16,4096 --json "$OUT/pdyn_causal_4x16x4096.json" 2>&1 | tee -a "$OUT/pdyn_probe.txt"
python3 benchmarks/experiments/kernel_variant_probe.py --source $SRC --define FS_PERSIST=264 --cases defaults \
    --shape 16,16,1024 --json "$OUT/pdyn_defaults_16x16x1024.json" 2>&1 | tee -a "$OUT/pdyn_probe.txt"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  "$CS" --tool $tool --error-exitcode 1 python3 benchmarks/experiments/kernel_variant_probe.py --source $SRC \
      --define FS_PERSIST=3 --cases causal --one --json /dev/null 2>&1 | tee -a "$OUT/pdyn_sanitize.txt"
done
