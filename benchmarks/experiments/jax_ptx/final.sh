#!/usr/bin/env bash
# GPU: the fourteenth round's closing call for the JAX engine, on the code that lands (the fused kernel with inline
# PTX the default on one GPU, 16 rows x 16 warps). Steps, each under its own limit, logs in /tmp/jax_final:
#   1. tests/test_engine_jax.py on the GPU (the fused kernel now runs every problem it covers);
#   2. every GPU-marked test (the device round's tests step) with FLASHSIM_TEST_ALL_FUSED=1: all three compiled
#      fused-kernel problems against the numpy engine, the PTX shims' raw-bit test, the engines' GPU tests;
#   3. tools/jax_gpu_bench.py at N = 16384: the trouble-head check against the numpy engine, the kernel, the
#      default engine's first and compiled calls, every bit of O and LSE;
#   4. tools/jax_fused_sweep.py at N = 16384, 16 x 16 with PTX, and the scan engine, median of 5 calls each.
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_ptx/final.sh  -> $OUT/jax_final.tgz
set -uo pipefail
source "$(dirname "$0")/../jax_steps.sh" jax_final
step pytest_engine_jax ${JAXTEST_S:-200} python3 -m pytest -q -ra tests/test_engine_jax.py
step tests_gpu ${GPUTEST_S:-200} env FLASHSIM_TEST_ALL_FUSED=1 python3 -m pytest -q -ra -m gpu tests
step bench ${BENCH_S:-150} python3 tools/jax_gpu_bench.py --n 16384 --json $D/bench.json
step sweep ${SWEEP_S:-100} python3 tools/jax_fused_sweep.py --n 16384 --shapes 16x16p --scan --reps 10 \
     --emu-reps 5 --json $D/sweep.json
tar czf ${OUT:-.}/jax_final.tgz -C /tmp jax_final
