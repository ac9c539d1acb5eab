#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/exp_in_pv/run.sh   (about 3-4 min)
# exp_in_pv.patch (README.md here), switch FS_EXP_IN_PV: kernel_variant_probe.py times the patched kernel with the
# switch on against the same source with it off, alternating rounds, at 4,16,4096 and 16,16,1024, each variant build
# first checked bit for bit against the emulator. Results: $OUT/exp_in_pv_probe.txt and the JSONs.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/exp_in_pv/exp_in_pv.patch /tmp/variant_exp_in_pv)
probe_shapes "$SRC" FS_EXP_IN_PV=1 exp_in_pv exp_in_pv exp_in_pv 4,16,4096 16,16,1024
