#!/usr/bin/env bash
# GPU: the fused kernel with inline PTX (engine_pallas.PTX) before it becomes the JAX engine's default on a GPU
# (issue 10, fourteenth round). One call (about 8 minutes), each step under its own limit, logs in /tmp/jax_ptx2:
#   1. the compiled fused kernel against the numpy engine on all three of the test's problems (PTX on);
#   2. tests/test_engine_jax.py on the GPU with the fused kernel and PTX on (FLASHSIM_JAX_FUSED=1);
#   3. tools/jax_fused_sweep.py at N = 16384 over program shapes ($SHAPES) and the scan engine, median of 3 runs;
#   4. Nsight Compute on $NCU_SHAPE: the instruction count, the issue rate and why warps stall (every
#      smsp__average_warps_issue_stalled_* ratio).
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_ptx/run.sh  -> $OUT/jax_ptx2.tgz
set -uo pipefail
source "$(dirname "$0")/../jax_steps.sh" jax_ptx2
export FLASHSIM_PALLAS_PTX=1
step pytest_fused_all ${PYTEST_S:-150} env FLASHSIM_TEST_ALL_FUSED=1 python3 -m pytest -q -ra \
     tests/test_engine_pallas.py -k "compiled_fused or ptx_shims"
step pytest_engine_jax_fused ${JAXTEST_S:-150} env FLASHSIM_JAX_FUSED=1 python3 -m pytest -q -ra -x \
     tests/test_engine_jax.py
step sweep ${SWEEP_S:-150} python3 tools/jax_fused_sweep.py --n 16384 --shapes ${SHAPES:-16x16p 32x16p 16x4p 32x8p} \
     --scan --reps 10 --emu-reps 3 --json $D/sweep.json
M=smsp__inst_executed.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio
step ncu ${NCU_S:-120} ncu --clock-control none --kernel-name regex:flashsim_fused --launch-count 1 \
     --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
     --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --metrics "$M" \
     python3 tools/jax_fused_sweep.py --n 16384 --shapes ${NCU_SHAPE:-16x16p} --reps 2
tar czf ${OUT:-.}/jax_ptx2.tgz -C /tmp jax_ptx2
