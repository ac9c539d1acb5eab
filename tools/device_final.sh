#!/usr/bin/env bash
# Device round: sanitizers on every default variant, verify of the defaults (saved for CI), the full benchmark.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
echo "== kernel vs float64 reference"; timeout 200 python3 tools/kernel_vs_reference.py --quick 2>&1 | tail -2
echo "== memcheck";  timeout 200 compute-sanitizer --tool memcheck --leak-check no python3 tools/sanitize_kernel.py 2>&1 | grep -v "^ran" | tail -4
echo "== racecheck"; timeout 300 compute-sanitizer --tool racecheck python3 tools/sanitize_kernel.py 2>&1 | grep -v "^ran" | tail -4
echo "== verify defaults"
timeout 300 python3 -m flashsim.cli verify --kinds normal,wide,adversarial --json $OUT/verify.json \
    --save-cases $OUT/attn_sm90.npz 2>&1 | tee $OUT/verify.txt | tail -3
echo "== bench"; timeout 300 python3 -m flashsim.cli bench kernel --reps 10 2>&1 | tee $OUT/bench.txt | tail -8
