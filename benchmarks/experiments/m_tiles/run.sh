#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/m_tiles/run.sh   (about 3 min)
# Three and four m16 tiles per warp (README.md here): each candidate first bit for bit against the emulator
# (check_bits.py), then timed against the default tiling in alternating rounds (tools/tile_ab.py) at 4,16,4096 full
# and causal and 16,16,1024. Results: $OUT/check_bits.txt, $OUT/tile_ab.txt and .json.
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
CANDIDATES=(128,f16,4x3x32x2 128,f16,4x3x32x3 128,f16,4x4x16x3 128,f16,4x4x32x2
            64,f16,4x3x64x2 64,f16,4x3x64x3 64,f16,4x4x32x3 64,f16,8x4x32x2)
{ echo "\$ PYTHONPATH=. python3 benchmarks/experiments/m_tiles/check_bits.py ${CANDIDATES[*]}"
  PYTHONPATH=. python3 benchmarks/experiments/m_tiles/check_bits.py "${CANDIDATES[@]}"
} 2>&1 | tee "$OUT/check_bits.txt"
PAIRS=()
for c in "${CANDIDATES[@]}"; do
  d=${c%%,*}
  base=$([[ $d == 128 ]] && echo 4x2x64x2 || echo 4x2x128x3)
  PAIRS+=(--pair "${c%,*},$base,${c##*,}")
done
{ echo "\$ PYTHONPATH=. python3 tools/tile_ab.py ${PAIRS[*]} --json \$OUT/tile_ab.json"
  PYTHONPATH=. python3 tools/tile_ab.py "${PAIRS[@]}" --json "$OUT/tile_ab.json"; } 2>&1 | tee "$OUT/tile_ab.txt"
