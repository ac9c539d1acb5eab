#!/usr/bin/env bash
# GPU: Nsight Compute on the fused kernel at N = 16384 (the shape the sweep compiled: JAX's persistent cache holds
# it on a warm machine), with the instruction mix per pipe. Usage (device, repo root):
#   OUT=dir bash benchmarks/experiments/jax_staged/profile.sh  -> $OUT/jax_staged_profile.tgz
set -uo pipefail
D=/tmp/jax_staged_profile; rm -rf $D; mkdir -p $D
export PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
M=smsp__inst_executed.sum,smsp__sass_thread_inst_executed_op_fp32_pred_on.sum
M=$M,smsp__sass_thread_inst_executed_op_fp64_pred_on.sum,smsp__sass_thread_inst_executed_op_integer_pred_on.sum
M=$M,smsp__sass_thread_inst_executed_op_conversion_pred_on.sum,smsp__sass_thread_inst_executed_op_memory_pred_on.sum
M=$M,smsp__sass_thread_inst_executed_op_control_pred_on.sum,smsp__sass_thread_inst_executed_op_misc_pred_on.sum
M=$M,smsp__sass_thread_inst_executed_op_bit_pred_on.sum,smsp__sass_thread_inst_executed_op_uniform_pred_on.sum
M=$M,smsp__sass_inst_executed_op_global_ld.sum,smsp__sass_inst_executed_op_global_st.sum
M=$M,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum
echo "\$ ncu ... $*" > $D/ncu.txt
timeout ${NCU_S:-300} ncu --clock-control none --kernel-name regex:flashsim_fused --launch-count 1 \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section InstructionStats --metrics $M \
    python3 tools/jax_fused_sweep.py --n ${N:-16384} --shapes ${SHAPE:-16x4} --reps 3 >> $D/ncu.txt 2>&1
echo "exit $?" >> $D/ncu.txt
tail -5 $D/ncu.txt
cp -r /tmp/jax_staged $D/first_call 2>/dev/null
tar czf ${OUT:-.}/jax_staged_profile.tgz -C /tmp jax_staged_profile
