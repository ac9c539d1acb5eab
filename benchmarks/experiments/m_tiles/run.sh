#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/m_tiles/run.sh   (about 3 min)
# Three and four m16 tiles per warp (README.md here): each candidate first bit for bit against the emulator
# (`flashsim verify`, verify_tiling.sh), then timed against the default tiling in alternating rounds (tools/tile_ab.py)
# at 4,16,4096 full and causal and 16,16,1024. Results: $OUT/verify.txt, $OUT/tile_ab.txt and .json.
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
export PYTHONPATH=$PWD
source benchmarks/experiments/m_tiles/verify_tiling.sh
RUNNER=()
CANDIDATES=(128,f16,4x3x32x2 128,f16,4x3x32x3 128,f16,4x4x16x3 128,f16,4x4x32x2
            64,f16,4x3x64x2 64,f16,4x3x64x3 64,f16,4x4x32x3 64,f16,8x4x32x2)
for c in "${CANDIDATES[@]}"; do
  IFS=, read -r d acc tiling <<< "$c"
  verify_tiling "$d" "$acc" "$tiling"
done 2>&1 | tee "$OUT/verify.txt"
PAIRS=()
for c in "${CANDIDATES[@]}"; do
  d=${c%%,*}
  base=$([[ $d == 128 ]] && echo 4x2x64x2 || echo 4x2x128x3)
  PAIRS+=(--pair "${c%,*},$base,${c##*,}")
done
{ echo "\$ python3 tools/tile_ab.py ${PAIRS[*]} --json \$OUT/tile_ab.json"
  python3 tools/tile_ab.py "${PAIRS[@]}" --json "$OUT/tile_ab.json"
} 2>&1 | tee "$OUT/tile_ab.txt"
