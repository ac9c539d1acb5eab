#!/usr/bin/env bash
# On the H200, from the repository root: one measurement of a persistent-grid variant of kernel/flash_fwd.cu.
#     OUT=<dir> PATCH=<variant.patch> TAG=<prefix> bash benchmarks/experiments/run_persistent_variant.sh
# (each experiment's run.sh calls this with its patch: persistent/, persistent_dynamic/, persistent_prefetch/)
# 1-2. A/B against the plain kernel in alternating rounds with FS_PERSIST=264 (two CTAs per SM on the H200): the
#      causal set at 4,16,4096, the defaults at 16,16,1024 (benchmarks/experiments/kernel_variant_probe.py).
# 3-4. FS_PERSIST=3, so that each CTA runs several items: the probe's bit-for-bit checks on both case sets (small timed
#      shape: the timing of 3 CTAs means nothing).
# 5.   memcheck and racecheck with FS_PERSIST=3.
# Results: $OUT/<TAG>_probe.txt, <TAG>_p3_checks.txt, <TAG>_sanitize.txt and the probes' JSONs.
set -euo pipefail
: "${OUT:?set OUT}" "${PATCH:?set PATCH}" "${TAG:?set TAG}"
OUT=$(realpath -m "$OUT") && mkdir -p "$OUT"
source benchmarks/experiments/patched_kernel.sh   # the patch on the kernel of the commit its first line names
SRC=$(patched_kernel "$PATCH" "/tmp/variant_$TAG")
cd "/tmp/variant_$TAG/tree"      # the patch's own commit: its flashsim builds the kernel the patch was made for
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
P=benchmarks/experiments/kernel_variant_probe.py
python3 $P --source $SRC --define FS_PERSIST=264 --cases causal --shape 4,16,4096 \
    --json "$OUT/${TAG}_causal_4x16x4096.json" 2>&1 | tee -a "$OUT/${TAG}_probe.txt"
python3 $P --source $SRC --define FS_PERSIST=264 --cases defaults --shape 16,16,1024 \
    --json "$OUT/${TAG}_defaults_16x16x1024.json" 2>&1 | tee -a "$OUT/${TAG}_probe.txt"
for cases in causal defaults; do
  python3 $P --source $SRC --define FS_PERSIST=3 --cases $cases --shape 1,4,1024 --rounds 1 \
      --json "$OUT/${TAG}_p3_$cases.json" 2>&1 | tee -a "$OUT/${TAG}_p3_checks.txt"
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  "$CS" --tool $tool --error-exitcode 1 python3 $P --source $SRC --define FS_PERSIST=3 --cases causal --one \
      --json /dev/null 2>&1 | tee -a "$OUT/${TAG}_sanitize.txt"
done
