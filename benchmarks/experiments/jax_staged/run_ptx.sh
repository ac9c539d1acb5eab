#!/usr/bin/env bash
# GPU: the fused kernel's prepared faster form (engine_pallas.PTX, FLASHSIM_PALLAS_PTX=1: inline PTX shims and packed
# staging), prepared in the thirteenth round without device time (static SASS from tools/fused_sass.py: 27.6 -> 14.0
# thread instructions per emulated product).
# One call (about 8 minutes):
#   1. tests/test_engine_pallas.py::test_ptx_shims_equal_the_generic_routines_on_the_gpu (2^16 raw-bit cases of
#      add, sub, mul, div, fma, the tensor cores' rounding and the term's cast, against the portable routines);
#   2. the compiled fused kernel with the shims against the numpy engine (the trouble-head case);
#   3. tools/jax_fused_sweep.py at N = 16384 for $SHAPES (default 16x8p 16x16p: the shims on; the fewest static
#      instructions, and twice the warps per SM at 128 registers) beside the kernel, every bit.
# Usage (device, repo root): OUT=dir bash benchmarks/experiments/jax_staged/run_ptx.sh  -> $OUT/jax_ptx.tgz
set -uo pipefail
source "$(dirname "$0")/../jax_steps.sh" jax_ptx
step pytest_ptx_shims 90 python3 -m pytest -q -ra tests/test_engine_pallas.py -k ptx_shims
step pytest_fused_ptx ${PYTEST_S:-240} env FLASHSIM_PALLAS_PTX=1 python3 -m pytest -q -ra \
     tests/test_engine_pallas.py -k "compiled_fused"
step sweep ${SWEEP_S:-240} python3 tools/jax_fused_sweep.py --n 16384 --shapes ${SHAPES:-16x8p 16x16p} --reps 10 \
     --json $D/sweep.json
tar czf ${OUT:-.}/jax_ptx.tgz -C /tmp jax_ptx
