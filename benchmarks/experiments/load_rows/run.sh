#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/load_rows/run.sh
# 1. load_rows.patch (load_tile's fast path as one template for in-bound and ragged tiles) A/B against the kernel
#    before it, same run, alternating rounds; the probe's "variant" is the OLD kernel (the patch reversed; the define
#    switches nothing), "plain" the new one. Every build checked bit for bit against the emulator.
# 2. flashsim bench kernel over N = 1024 .. 8192 at d = 128 (B x N constant): the fixed cost of a CUDA block.
set -euo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cp kernel/flash_fwd.cu /tmp/old_flash_fwd.cu
patch -s -R /tmp/old_flash_fwd.cu < benchmarks/experiments/load_rows/load_rows.patch
python3 benchmarks/experiments/kernel_variant_probe.py --source /tmp/old_flash_fwd.cu --define FS_OLD_LOAD_TILE=1 \
    --cases defaults --json "$OUT/load_rows_probe.json" 2>&1 | tee "$OUT/load_rows_probe.txt"
python3 -m flashsim.cli bench kernel --shape 16,16,1024,128 --shape 8,16,2048,128 --shape 4,16,4096,128 \
    --shape 2,16,8192,128 --json "$OUT/bench_n_sweep.json" 2>&1 | tee "$OUT/bench_n_sweep.txt"
