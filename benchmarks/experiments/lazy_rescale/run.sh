#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> [THRESHOLDS="8"] bash benchmarks/experiments/lazy_rescale/run.sh
# (about 1 min a threshold). What O's rescale costs once it is rare: lazy_rescale.patch (README.md here) keeps each
# row's running max until a tile's max exceeds it by more than FS_LAZY_RESCALE (in the exponent's units, so p <= 2^k),
# and skips the O rescale by the warp vote at every head dim; kernel_variant_probe.py times it against the plain
# kernel in alternating rounds at 4,16,4096. Timing only: the emulator keeps the exact max, so every check prints
# DIFFERS. Results: $OUT/lazy_rescale_probe.txt, lazy_<k>_4x16x4096.json.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/lazy_rescale/lazy_rescale.patch /tmp/variant_lazy)
for k in ${THRESHOLDS:-8}; do
  probe_shapes "$SRC" FS_LAZY_RESCALE=$k lazy_rescale lazy_$k lazy_rescale 4,16,4096
done
