#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/m_tiles/sanitize.sh   (about 1 min)
# compute-sanitizer memcheck and racecheck on tilings with three and four m16 tiles per warp (check_bits.py's
# ragged full / causal / window launches, which also compare each with the emulator). Results: $OUT/sanitize.txt.
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TILINGS=(128,f16,4x3x32x2 128,f16,4x4x16x3 64,f16,4x4x32x3 64,f16,4x3x64x3)
for tool in memcheck racecheck; do
  echo "\$ compute-sanitizer --tool $tool --error-exitcode 1 python3 benchmarks/experiments/m_tiles/check_bits.py ${TILINGS[*]}" \
      | tee -a "$OUT/sanitize.txt"
  PYTHONPATH=. "$CS" --tool $tool --error-exitcode 1 python3 benchmarks/experiments/m_tiles/check_bits.py "${TILINGS[@]}" \
      2>&1 | tee -a "$OUT/sanitize.txt"
done
