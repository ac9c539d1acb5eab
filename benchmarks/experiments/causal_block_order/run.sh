#!/usr/bin/env bash
# Causal blocks in reverse order (the longest query blocks first) against the committed kernel, on this GPU:
#   OUT=<dir> bash benchmarks/experiments/causal_block_order/run.sh
# Runs flashsim bench kernel on causal shapes (and one non-causal control) with the kernel as committed, then with
# kernel/flash_fwd.cu edited so that a causal block takes query block gridDim.x - 1 - blockIdx.x (same arithmetic
# per block: the emulator is unaffected), and verifies the edited kernel bit for bit. It edits kernel/flash_fwd.cu in
# the working tree: run it on a scratch copy (the device machine's), never in a checkout you commit from.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
SHAPES=(--shape 4,16,4096,128,causal --shape 8,32,2048,64,causal --shape 16,16,1024,128,causal --shape 4,16,4096,128)
python3 -m flashsim.cli bench kernel --reps 20 --rounds 7 "${SHAPES[@]}" > "$OUT/before.txt" 2>&1
sed -i 's/    const int r0 = blockIdx.x \* BLOCK_M;/    const int r0 = (CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BLOCK_M;   \/\/ longest causal blocks first/' kernel/flash_fwd.cu
grep -n "longest causal" kernel/flash_fwd.cu >> "$OUT/after.txt"
python3 -m flashsim.cli bench kernel --reps 20 --rounds 7 "${SHAPES[@]}" >> "$OUT/after.txt" 2>&1
python3 -m flashsim.cli verify --kinds normal,adversarial > "$OUT/verify_after.txt" 2>&1
tail -1 "$OUT/verify_after.txt"
grep -E "^[0-9]+,[0-9]+" "$OUT/before.txt" "$OUT/after.txt" | cut -c1-140
