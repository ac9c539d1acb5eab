#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/kv_split/run.sh   (about 2-3 min)
# K and V of a ring slot on their own mbarriers (kv_split.patch, switch FS_KV_SPLIT; README.md here), against the same
# source with the switch off, alternating rounds, every build first checked bit for bit against the emulator
# (benchmarks/experiments/kernel_variant_probe.py): the default set at 4,16,4096 and at 16,16,1024, the causal set at
# 4,16,4096; then memcheck and racecheck on the variant. The patch is against the kernel of commit 6ff1892 (BASE), taken
# from git so that it applies whatever the kernel is now.
set -euo pipefail
: "${OUT:?set OUT}"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
WORK=/tmp/variant_kv_split
rm -rf "$WORK" && mkdir -p "$WORK/kernel" "$OUT"
git show "${BASE:-6ff1892}:kernel/flash_fwd.cu" > "$WORK/kernel/flash_fwd.cu"
(cd "$WORK" && patch -s -p1 < "$OLDPWD/benchmarks/experiments/kv_split/kv_split.patch")
SRC=$WORK/kernel/flash_fwd.cu
P=benchmarks/experiments/kernel_variant_probe.py
for run in "defaults 4,16,4096" "defaults 16,16,1024" "causal 4,16,4096"; do
  set -- $run
  python3 $P --source $SRC --define FS_KV_SPLIT=1 --cases $1 --shape $2 --json "$OUT/kv_split_$1_${2//,/x}.json" 2>&1 \
      | tee -a "$OUT/kv_split_probe.txt"
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  for cases in defaults causal; do
    "$CS" --tool $tool --error-exitcode 1 python3 $P --source $SRC --define FS_KV_SPLIT=1 --cases $cases --one \
        --json /dev/null 2>&1 | tee -a "$OUT/kv_split_sanitize.txt"
  done
done
