#!/usr/bin/env bash
# Nsight Compute over profile.py's decode calls (one call per shape, after a warm-up), from the repository root:
#     OUT=<dir> bash benchmarks/experiments/decode_profile/profile.sh
# -> $OUT/shapes.jsonl (grid, splits, waves), $OUT/ncu.csv (per kernel: time, DRAM throughput, achieved and
# theoretical occupancy, waves, L2 hit rate, registers, shared memory; from $OUT/decode.ncu-rep), $OUT/ncu.log.
set -uo pipefail
[[ -n ${OUT:-} ]] || { echo "set OUT" >&2; exit 2; }
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
HERE=benchmarks/experiments/decode_profile
python3 $HERE/profile.py > "$OUT/shapes.jsonl" 2> "$OUT/shapes.err" || { cat "$OUT/shapes.err"; exit 1; }
METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,\
sm__warps_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct,launch__grid_size,\
launch__block_size,launch__waves_per_multiprocessor,launch__registers_per_thread,\
launch__shared_mem_per_block_dynamic,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,\
launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,smsp__cycles_active.avg.pct_of_peak_sustained_elapsed
# every flash_fwd / combine launch of the run (a warm-up call, then the measured one, per shape): summarize.py takes
# the second call's kernels of each shape
ncu --kernel-name regex:'flash_fwd|combine' --metrics "$METRICS" --export "$OUT/decode" --force-overwrite \
  python3 $HERE/profile.py > "$OUT/ncu.log" 2>&1
echo "ncu exit $?"
ncu --import "$OUT/decode.ncu-rep" --csv --page raw > "$OUT/ncu.csv" 2>> "$OUT/ncu.log"
echo "kernels profiled: $(grep -c -E 'flash_fwd|combine' "$OUT/ncu.csv")"; tail -3 "$OUT/ncu.log"
