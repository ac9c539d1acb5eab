#!/usr/bin/env bash
# GPU: the JAX engine's fused Pallas kernel (flashsim.emulator.engine_pallas) on the H200, in one call:
#   1. tests/test_engine_pallas.py (the compiled kernel against the numpy engine; the CPU tests too);
#   2. tools/jax_gpu_bench.py --n 16384: the default (scan) engine on the GPU beside the kernel, every bit;
#   3. Nsight Compute on the fused kernel (N = 2048, 16 rows x 16 warps): launch, occupancy and warp stall reasons;
#   4. tools/jax_fused_sweep.py at N = 16384 for the program shapes in $SHAPES (default 16x32).
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_fused/run.sh  -> $OUT/jax_fused.tgz
set -uo pipefail
STEP_TAIL=3 source "$(dirname "$0")/../jax_steps.sh" jax_fused
step pytest_engine_pallas 240 python3 -m pytest -q -ra tests/test_engine_pallas.py
step jax_gpu_bench 200 python3 tools/jax_gpu_bench.py --n 16384 --json $D/jax_gpu.json
step ncu_fused 240 ncu --clock-control none --kernel-name regex:flashsim_fused --launch-count 1 \
     --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
     --section ComputeWorkloadAnalysis --section InstructionStats \
     python3 tools/jax_fused_sweep.py --n 2048 --shapes 16x16 --reps 3
step jax_fused_sweep 240 python3 tools/jax_fused_sweep.py --n 16384 --shapes ${SHAPES:-16x32} --json $D/sweep.json
tar czf ${OUT:-.}/jax_fused.tgz -C /tmp jax_fused
