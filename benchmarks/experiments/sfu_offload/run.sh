#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> [MODES="1 2 4 3"] bash benchmarks/experiments/sfu_offload/run.sh
# (about 3 min). Whether the SFU's exponentials hold the softmax back: sfu_offload.patch (README.md here) computes
# some of the softmax's exponentials with a polynomial on the FMA pipe instead of MUFU.EX2, chosen by FS_EX2_MODE
# (1 none at all, p = x: the bound; 2 every other one; 3 all; 4 one in four), and kernel_variant_probe.py times each
# mode against the plain kernel in alternating rounds at 4,16,4096. Timing only: the polynomial is not the SFU's
# function, so every check prints DIFFERS. Results: $OUT/sfu_offload_probe.txt, sfu_<mode>_4x16x4096.json.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/sfu_offload/sfu_offload.patch /tmp/variant_sfu)
for mode in ${MODES:-1 2 4 3}; do
  probe_shapes "$SRC" FS_EX2_MODE=$mode sfu_offload sfu_$mode sfu_offload 4,16,4096
done
