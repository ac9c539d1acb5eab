#!/usr/bin/env bash
# Nsight Compute over ncu_targets.py's two launches (the varlen batch, then the dense sequence of equal causal work),
# from the repository root:
#     OUT=<dir> bash benchmarks/experiments/varlen_profile/ncu.sh
# -> $OUT/ncu_details.txt (per launch: speed of light, warp states, occupancy, launch stats and the metrics below),
# $OUT/ncu.csv (the same, raw), $OUT/targets.txt. What it answers: of varlen's loss against dense, how much is SMs
# standing idle (sm__cycles_active against elapsed: the tail and the blocks' ramps), how much more issue work per
# useful FLOP (instructions), and how busy the tensor pipe is while an SM is active.
set -uo pipefail
[[ -n ${OUT:-} ]] || { echo "set OUT" >&2; exit 2; }
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
HERE=benchmarks/experiments/varlen_profile
METRICS=gpu__time_duration.sum,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,\
sm__cycles_elapsed.avg,smsp__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,\
sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,\
launch__grid_size,launch__waves_per_multiprocessor,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
ncu --clock-control none --kernel-name flash_fwd --section SpeedOfLight --section WarpStateStats \
  --section Occupancy --section LaunchStats --metrics "$METRICS" --export "$OUT/varlen" --force-overwrite \
  python3 $HERE/ncu_targets.py > "$OUT/targets.txt" 2>&1
echo "ncu exit $?"
ncu --import "$OUT/varlen.ncu-rep" --page details > "$OUT/ncu_details.txt" 2>&1
ncu --import "$OUT/varlen.ncu-rep" --csv --page raw > "$OUT/ncu.csv" 2>&1
rm -f "$OUT/varlen.ncu-rep"
grep -E "launch [12]|==PROF==|Error" "$OUT/targets.txt" | head
grep -E "flash_fwd|Duration|sm__cycles_active|sm__cycles_elapsed|inst_executed.sum|hmma|Achieved Occupancy|Waves" \
  "$OUT/ncu_details.txt" | head -40
