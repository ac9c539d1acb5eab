#!/usr/bin/env bash
# Exploratory device call for the attention variants (bf16, GQA, head dims 32-256, windows, softcap, bnhd):
#   OUT=<dir> tools/device_explore.sh
# 1. flashsim verify --variants (kernel vs emulator, bit for bit) and the default verify set (no regression);
# 2. tools/tile_sweep.py: every tiling candidate per head dim for f32 / f16 P@V (KernelConfig.default's sm_90 table).
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
export FLASHSIM_CACHE=$(mktemp -d)
mkdir -p "$OUT"
python3 -c "import ml_dtypes, numba; print('ml_dtypes', ml_dtypes.__version__, 'numba', numba.__version__)" 2>&1 | tee "$OUT/env.txt"
timeout 200 python3 -m flashsim.cli verify --variants --json "$OUT/verify_variants.json" > "$OUT/verify_variants.txt" 2>&1
echo "verify --variants rc=$?" | tee -a "$OUT/env.txt"
tail -3 "$OUT/verify_variants.txt"
timeout 120 python3 -m flashsim.cli verify --json "$OUT/verify_default.json" > "$OUT/verify_default.txt" 2>&1
echo "verify default rc=$?" | tee -a "$OUT/env.txt"
tail -2 "$OUT/verify_default.txt"
timeout 150 python3 tools/tile_sweep.py --sweep benchmarks/logs/2026-11-30b/register_sweep.json \
    --json "$OUT/tile_sweep_spill.json" --d 128,256 --accs f32 --max-spill 40 --budget 120 > "$OUT/tile_sweep_spill.txt" 2>&1
echo "tile sweep (spills) rc=$?" | tee -a "$OUT/env.txt"
timeout 150 python3 tools/tile_sweep.py --sweep benchmarks/logs/2026-11-30b/register_sweep.json \
    --json "$OUT/tile_sweep_f16x2.json" --d 32,96,160,192,224,256 --accs f16x2 --budget 120 > "$OUT/tile_sweep_f16x2.txt" 2>&1
echo "tile sweep (f16x2) rc=$?" | tee -a "$OUT/env.txt"
[[ ${SWEEP:-0} == 1 ]] || exit 0
timeout 250 python3 tools/tile_sweep.py --sweep benchmarks/logs/2026-11-30b/register_sweep.json \
    --json "$OUT/tile_sweep.json" --budget 220 > "$OUT/tile_sweep.txt" 2>&1
echo "tile sweep rc=$?" | tee -a "$OUT/env.txt"
tail -5 "$OUT/tile_sweep.txt"
