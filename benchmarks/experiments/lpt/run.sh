#!/usr/bin/env bash
# On the H200, from the repository root, with lpt.patch applied to kernel/flash_fwd.cu (FS_LPT, off by default):
#     OUT=<dir> bash benchmarks/experiments/lpt/run.sh
# Causal blocks longest first across the whole grid (FS_LPT=1) against the same kernel without it, same run,
# alternating rounds, every variant build first checked bit for bit against the emulator; at the two causal anchor
# shapes of flashsim bench kernel (4,16,4096 and 8,32,2048), and compute-sanitizer on the variant.
set -euo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT"
for shape in 4,16,4096 8,32,2048; do
  python3 benchmarks/experiments/kernel_variant_probe.py --source kernel/flash_fwd.cu --define FS_LPT=1 \
      --cases causal --shape $shape --json "$OUT/lpt_probe_${shape//,/x}.json" 2>&1 | tee -a "$OUT/lpt_probe.txt"
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  "$CS" --tool $tool --error-exitcode 1 python3 benchmarks/experiments/kernel_variant_probe.py \
      --source kernel/flash_fwd.cu --define FS_LPT=1 --cases causal --one --json /dev/null 2>&1 | tee -a "$OUT/lpt_sanitize.txt"
done
