#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/exp_in_pv/run_more.sh   (about 3 min)
# The second probe of exp_in_pv.patch (README.md here): the builds run.sh left out (causal, d = 224, INT8, f32 at
# d = 160 / 224) and f32 d = 128 tilings that do not spill with the switch. Results: $OUT/exp_in_pv_more_probe.txt
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/exp_in_pv/exp_in_pv.patch /tmp/variant_exp_in_pv)
probe_shapes "$SRC" FS_EXP_IN_PV=1 exp_in_pv_more exp_in_pv_more exp_in_pv_more 4,16,4096 16,16,1024
