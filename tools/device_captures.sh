#!/usr/bin/env bash
# Device round: silicon captures (mma, layout, SFU tables) and the GPU test files. Writes under $OUT:
#   $OUT/mma/*, $OUT/layout/*, $OUT/sfu/*  -> copy into tests/data and flashsim/data/sfu (see README).
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/mma $OUT/layout $OUT/sfu
echo "== layout capture"; timeout 120 python3 -m flashsim.gpu.capture.layout --out $OUT/layout 2>&1 | tail -30
echo "== mma capture";    timeout 200 python3 -m flashsim.gpu.capture.mma --out $OUT/mma 2>&1 | tail -30
echo "== sfu capture";    timeout 400 python3 -m flashsim.gpu.capture.sfu --out $OUT/sfu 2>&1 | tail -45
echo "== gpu tests";      timeout 200 python3 -m pytest -q -ra -m gpu tests/test_gpu_runtime.py tests/test_budget.py 2>&1 | tail -15
