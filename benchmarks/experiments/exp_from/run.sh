#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/exp_from/run.sh   (about 2-3 min)
# exp_from.patch (README.md here), switch FS_EXP_FROM=k: exp_in_pv for the k16 slices from slice k on (forced on where
# the configuration leaves it off), the first k slices' exponentials before the vote as without it. Probed with k = 1
# and k = 3 against each build's default, alternating rounds, at 4,16,4096 and 16,16,1024, every variant build first
# checked bit for bit against the emulator. Results: $OUT/exp_from_probe.txt and the JSONs.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/exp_from/exp_from.patch /tmp/variant_exp_from)
probe_shapes "$SRC" FS_EXP_FROM=1 exp_from_1 exp_from_1 exp_from 4,16,4096 16,16,1024
probe_shapes "$SRC" FS_EXP_FROM=3 exp_from_3 exp_from_3 exp_from 4,16,4096 16,16,1024
