#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/mt_split/run.sh   (about 2 min)
# mt_split.patch (README.md here), switch FS_MT_SPLIT: kernel_variant_probe.py times the patched kernel with the
# switch on against this checkout's kernel ("plain"), alternating rounds, at 4,16,4096 and 16,16,1024, each variant
# build first checked bit for bit against the emulator. No sanitizer run: it runs before landing, if it pays.
# Results: $OUT/mt_split_probe.txt and the JSONs.
set -euo pipefail
: "${OUT:?set OUT}"
OUT=$(realpath -m "$OUT") && mkdir -p "$OUT"
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/mt_split/mt_split.patch /tmp/variant_mt_split)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
P=benchmarks/experiments/kernel_variant_probe.py
for shape in 4,16,4096 16,16,1024; do
  echo "\$ python3 $P --source <mt_split.patch on 669fee1> --define FS_MT_SPLIT=1 --cases mt_split --shape $shape" \
      | tee -a "$OUT/mt_split_probe.txt"
  python3 $P --source "$SRC" --define FS_MT_SPLIT=1 --cases mt_split --shape $shape \
      --json "$OUT/mt_split_${shape//,/x}.json" 2>&1 | tee -a "$OUT/mt_split_probe.txt"
done
