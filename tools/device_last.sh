#!/usr/bin/env bash
# Device round: every GPU-marked test, `flashsim calibrate` end to end, and the JAX backend on the GPU.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo "== pytest -m gpu"; timeout 300 python3 -m pytest -q -ra -m gpu -p no:cacheprovider tests 2>&1 | tail -6
echo "== calibrate"; FLASHSIM_CACHE=/tmp/fscache timeout 300 python3 -m flashsim.cli calibrate --quick 2>&1 | tail -8
echo "== jax on the GPU"; timeout 400 python3 tools/jax_gpu_bench.py --n 16384 --json $OUT/jax_gpu.json 2>&1 | tee $OUT/jax_gpu.txt | tail -25
