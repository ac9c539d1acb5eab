#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/stage_o_wider/run_off.sh   (about 2 min)
# The other side of the ninth round's KernelConfig.stage_o rule: its defaults at d = 160 and 224 f16, staged by the
# rule without a timing of their own, against the same builds unstaged (--define FS_OSTAGE=0), alternating rounds,
# each build checked bit for bit first (d = 192 f16 a control, measured staged in run.sh's rounds). "variant" is the
# unstaged build: variant / default < 1 means the staging pays. Results: $OUT/stage_o_off_probe.txt and the JSONs.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
probe_shapes kernel/flash_fwd.cu FS_OSTAGE=0 stage_o_off stage_o_off stage_o_off 4,16,4096 16,16,1024
