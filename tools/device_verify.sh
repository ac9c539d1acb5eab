#!/usr/bin/env bash
# Device round: flashsim verify (kernel vs emulator, bit for bit) on the default cases, saved for CI.
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
timeout 500 python3 -m flashsim.cli verify --kinds normal,wide,adversarial --json $OUT/verify.json \
    --save-cases $OUT/attn_sm90.npz 2>&1 | tee $OUT/verify.txt
