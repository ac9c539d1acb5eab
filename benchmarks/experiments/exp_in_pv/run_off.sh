#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/exp_in_pv/run_off.sh   (about 1-2 min)
# After KernelConfig.exp_in_pv landed: the builds its rule turns on that no probe had timed, against themselves with
# the exponentials back before the vote (--define FS_EXP_IN_PV=0; "variant" in the table is the build WITHOUT it),
# d = 192 f32 as the control. Results: $OUT/exp_in_pv_off_probe.txt and the JSONs.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
probe_shapes kernel/flash_fwd.cu FS_EXP_IN_PV=0 exp_in_pv_off exp_in_pv_off exp_in_pv_off 4,16,4096 16,16,1024
