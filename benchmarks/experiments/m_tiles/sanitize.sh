#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/m_tiles/sanitize.sh   (about 2 min)
# compute-sanitizer memcheck and racecheck on tilings with three and four m16 tiles per warp, through
# verify_tiling.sh's `flashsim verify` launches (full, causal, window; each also compared with the emulator).
# Results: $OUT/sanitize.txt.
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
export PYTHONPATH=$PWD
source benchmarks/experiments/m_tiles/verify_tiling.sh
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  RUNNER=("$CS" --tool "$tool" --error-exitcode 1)
  for c in 128,f16,4x3x32x2 128,f16,4x4x16x3 64,f16,4x4x32x3 64,f16,4x3x64x3; do
    IFS=, read -r d acc tiling <<< "$c"
    verify_tiling "$d" "$acc" "$tiling"
  done
done 2>&1 | tee -a "$OUT/sanitize.txt"
