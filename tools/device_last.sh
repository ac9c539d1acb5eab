#!/usr/bin/env bash
# Device round: every GPU-marked test, the specials verify set (saved for CI), the mma capture (generator v2),
# `flashsim calibrate` end to end, and the JAX backend on the GPU.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT/mma
echo "== pytest -m gpu"; timeout 300 python3 -m pytest -q -ra -m gpu -p no:cacheprovider tests 2>&1 | tail -6
echo "== verify specials"; timeout 200 python3 -m flashsim.cli verify --kinds specials --seeds 2 \
    --save-cases $OUT/attn_sm90_specials.npz 2>&1 | tail -4
echo "== verify specials, 8-warp shape"; timeout 200 python3 -m flashsim.cli verify --kinds specials,adversarial \
    --warps 8 --m-tiles 1 --kv-tile 64 --only --shape 1,2,200,333,128 --shape 1,1,300,100,128,causal 2>&1 | tail -2
echo "== mma capture v2"; timeout 200 python3 -m flashsim.gpu.capture.mma --out $OUT/mma 2>&1 | tail -4
echo "== calibrate"; FLASHSIM_CACHE=/tmp/fscache timeout 300 python3 -m flashsim.cli calibrate --quick 2>&1 | tail -6
echo "== jax on the GPU"; timeout 400 python3 tools/jax_gpu_bench.py --n 16384 --json $OUT/jax_gpu.json 2>&1 | tee $OUT/jax_gpu.txt | tail -25
