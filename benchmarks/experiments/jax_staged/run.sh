#!/usr/bin/env bash
# GPU: the fused Pallas kernel with its mma chains read from staged memory (issue 10), in one call:
#   1. tests/test_engine_pallas.py (the compiled kernel against the numpy engine, every bit);
#   2. tools/jax_fused_sweep.py at N = 16384 for the program shapes in $SHAPES, and the scan engine, each beside the
#      real kernel, every bit of O and LSE;
#   3. Nsight Compute on the fused kernel at N = 2048 ($NCU_SHAPE): instructions, issue, occupancy, stalls.
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_staged/run.sh  -> $OUT/jax_staged.tgz
set -uo pipefail
source "$(dirname "$0")/../jax_steps.sh" jax_staged
step pytest_engine_pallas ${PYTEST_S:-150} python3 -m pytest -q -ra -x tests/test_engine_pallas.py
step sweep ${SWEEP_S:-300} python3 tools/jax_fused_sweep.py --n 16384 --shapes ${SHAPES:-16x4 32x4 16x8} --scan \
     --reps 10 --json $D/sweep.json
step ncu ${NCU_S:-100} ncu --clock-control none --kernel-name regex:flashsim_fused --launch-count 1 \
     --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
     --section ComputeWorkloadAnalysis --section InstructionStats \
     python3 tools/jax_fused_sweep.py --n 2048 --shapes ${NCU_SHAPE:-16x4} --reps 3
tar czf ${OUT:-.}/jax_staged.tgz -C /tmp jax_staged
