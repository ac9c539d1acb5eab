#!/usr/bin/env bash
# GPU: the JAX engine with XLA's own float32 <-> float64 conversions (xp.ieee_conversions, the GPU default) against
# its integer conversions (FLASHSIM_JAX_IEEE_CVT=0), in one call:
#   1. tests/test_numerics_engines.py -k native: 2^16 raw-bit triples, jitted on the GPU, against the numpy fast path;
#   2. tools/jax_gpu_bench.py --n 16384 with the native conversions: trouble heads against the numpy engine, then
#      N = 16384 against the kernel (bits and time);
#   3. the same N = 16384 timing with the integer conversions (--skip-check);
#   4. tests/test_engine_jax.py on the GPU (every engine problem against the numpy engine), as time allows.
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_ieee_cvt/run.sh  -> $OUT/jax_ieee_cvt.tgz
set -uo pipefail
STEP_TAIL=2 source "$(dirname "$0")/../jax_steps.sh" jax_ieee_cvt
step pytest_native 90 python3 -m pytest -q -ra tests/test_numerics_engines.py -k native
step bench_native 120 env FLASHSIM_JAX_IEEE_CVT=1 python3 tools/jax_gpu_bench.py --n 16384 --json $D/jax_gpu_native.json
step bench_integer 90 env FLASHSIM_JAX_IEEE_CVT=0 python3 tools/jax_gpu_bench.py --n 16384 --skip-check \
     --json $D/jax_gpu_integer.json
tar czf ${OUT:-.}/jax_ieee_cvt.tgz -C /tmp jax_ieee_cvt
step pytest_engine_jax 140 python3 -m pytest -q -ra -x tests/test_engine_jax.py
tar czf ${OUT:-.}/jax_ieee_cvt.tgz -C /tmp jax_ieee_cvt
