#!/usr/bin/env bash
# On the H200, from the repository root: one switch experiment on kernel/flash_fwd.cu, measured and checked.
#     OUT=<dir> PATCH=<x.patch> DEFINE=<FS_NAME=1> TAG=<prefix> [EXTRA_SHAPES="B,H,N ..."] \
#         bash benchmarks/experiments/run_switch_variant.sh
# (kv_split/, o_staging/, skip_rescale_d64/, prefetch_all/ and prefetch_next/run.sh call it with their patch). The patch applies to the kernel of the
# commit its first line names (patched_kernel.sh takes it from git). kernel_variant_probe.py times the
# patched source with the switch on against the same source with it off, in alternating rounds, each build first
# checked bit for bit against the emulator: the default set at 4,16,4096, 16,16,1024 and EXTRA_SHAPES, the causal set at
# 4,16,4096.
# Then compute-sanitizer memcheck and racecheck on the variant (the default and causal sets' first case each).
# Results: $OUT/<TAG>_probe.txt, <TAG>_sanitize.txt and the probes' JSONs. About 2-3 min.
set -euo pipefail
: "${PATCH:?set PATCH}" "${DEFINE:?set DEFINE}" "${TAG:?set TAG}"
source benchmarks/experiments/probe_shapes.sh      # OUT checked and made absolute; probe_shapes
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel "$PATCH" "/tmp/variant_$TAG")
cd "/tmp/variant_$TAG/tree"      # the patch's own commit: its flashsim builds the kernel the patch was made for
export PYTHONPATH=$PWD            # (probe_shapes.sh exported the checkout's)
P=benchmarks/experiments/kernel_variant_probe.py
probe_shapes "$SRC" "$DEFINE" defaults "${TAG}_defaults" "$TAG" 4,16,4096 16,16,1024 ${EXTRA_SHAPES:-}
probe_shapes "$SRC" "$DEFINE" causal "${TAG}_causal" "$TAG" 4,16,4096
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  for cases in defaults causal; do
    "$CS" --tool $tool --error-exitcode 1 python3 $P --source $SRC --define "$DEFINE" --cases $cases --one \
        --json /dev/null 2>&1 | tee -a "$OUT/${TAG}_sanitize.txt"
  done
done
