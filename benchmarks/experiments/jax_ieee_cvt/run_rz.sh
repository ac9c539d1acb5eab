#!/usr/bin/env bash
# GPU: the tensor-core model's rounding through float64 and XLA's own narrowing (native_rz.patch: round_scaled
# small=True under xp.ieee_conversions; not kept), in one call: the patch applied for the run, the GPU tests that
# hold it (and the conversions) to the numpy fast path, then tools/jax_gpu_bench.py --n 16384 (trouble heads against
# the numpy engine, N = 16384 against the kernel), the patch taken out again.
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_ieee_cvt/run_rz.sh  -> $OUT/jax_ieee_rz.tgz
set -uo pipefail
STEP_TAIL=2 source "$(dirname "$0")/../jax_steps.sh" jax_ieee_rz
P=benchmarks/experiments/jax_ieee_cvt/native_rz.patch
tail -n +2 $P | patch -p1 -s || exit 1
trap 'tail -n +2 $P | patch -p1 -R -s' EXIT
step pytest_native_rz 100 python3 -m pytest -q -ra tests/test_tensorcore_engines.py tests/test_numerics_engines.py \
     -k "native"
step bench_native_rz 120 python3 tools/jax_gpu_bench.py --n 16384 --json $D/jax_gpu_native_rz.json
tar czf ${OUT:-.}/jax_ieee_rz.tgz -C /tmp jax_ieee_rz
