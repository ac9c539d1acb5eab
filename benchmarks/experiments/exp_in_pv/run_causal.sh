#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/exp_in_pv/run_causal.sh   (~2 min)
# Why did exp_in_pv lose on short causal launches at d = 128 (0.918-0.971 at 16,16,1024, 1.018-1.023 at 4,16,4096)?
# The causal d = 128 f16 default with it forced on (--define FS_EXP_IN_PV=1) against the default (off), over N from
# 512 to 8192 (16 heads); the non-causal default, on in both builds, is the probe's own spread.
# Results: $OUT/exp_in_pv_causal_probe.txt and the JSONs.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
probe_shapes kernel/flash_fwd.cu FS_EXP_IN_PV=1 exp_in_pv_causal exp_in_pv_causal exp_in_pv_causal \
    64,16,512 16,16,1024 8,16,2048 4,16,4096 2,16,8192
