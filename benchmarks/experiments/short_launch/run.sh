#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/short_launch/run.sh   (about 1-2 min)
# Why 16,16,1024 runs at 0.88-0.96 of 4,16,4096's rate (README.md here):
#  1. sustain: each shape launched back to back for 4 s while nvidia-smi samples SM clock and power every 100 ms
#     ($OUT/sustain.txt, sustain.json, smi.csv): do the shapes run at different clocks?
#  2. ncu (--clock-control none: the card's clocks are left alone): duration, SM clock, SM active cycles against
#     elapsed (the idle tail), tensor-pipe and issue utilisation, waves ($OUT/ncu.txt).
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
L=benchmarks/experiments/short_launch/launches.py
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 100 > "$OUT/smi.csv" &
SMI=$!
python3 $L --mode sustain --seconds 4 --json "$OUT/sustain.json" 2>&1 | tee "$OUT/sustain.txt"
kill $SMI
METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__cycles_active.avg,sm__cycles_elapsed.avg
METRICS+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
METRICS+=,smsp__issue_active.avg.pct_of_peak_sustained_active
METRICS+=,launch__waves_per_multiprocessor,launch__grid_size,launch__occupancy_limit_registers
METRICS+=,sm__warps_active.avg.pct_of_peak_sustained_active
{ echo "\$ ncu --clock-control none --kernel-name flash_fwd --metrics $METRICS python3 $L --mode profile"
  ncu --clock-control none --kernel-name flash_fwd --metrics "$METRICS" python3 $L --mode profile
} 2>&1 | tee "$OUT/ncu.txt"
