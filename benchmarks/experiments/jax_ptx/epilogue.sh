#!/usr/bin/env bash
# GPU: the fused path's epilogue moved onto the device (engine_pallas._epilogue). One call: the wall-clock
# breakdown of a run (breakdown.py), the JAX engine's tests on the GPU, the fused kernel's GPU tests with all three
# problems, and tools/jax_gpu_bench.py at N = 16384 (bits against the numpy engine and the kernel).
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_ptx/epilogue.sh  -> $OUT/jax_epilogue.tgz
set -uo pipefail
source "$(dirname "$0")/../jax_steps.sh" jax_epilogue
STEP_TAIL=10 step breakdown ${BREAK_S:-120} python3 benchmarks/experiments/jax_ptx/breakdown.py --json $D/breakdown.json
step pytest_engines ${JAXTEST_S:-200} env FLASHSIM_TEST_ALL_FUSED=1 python3 -m pytest -q -ra tests/test_engine_jax.py \
     tests/test_engine_pallas.py
step bench ${BENCH_S:-150} python3 tools/jax_gpu_bench.py --n 16384 --json $D/bench.json
tar czf ${OUT:-.}/jax_epilogue.tgz -C /tmp jax_epilogue
