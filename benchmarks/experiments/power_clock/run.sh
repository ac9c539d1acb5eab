#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/power_clock/run.sh   (about 40 s)
# sustain.py's stretches (the ceiling probe, default and varied operands; the d = 128 f16 / f32 kernels) while
# nvidia-smi samples SM clock and power every 100 ms (SUSTAIN_ARGS: more sustain.py options, e.g.
# "--no-ceiling --inputs randn const"). Results: $OUT/sustain.txt, sustain.json, smi.csv; then
# python3 benchmarks/experiments/power_clock/summarize.py $OUT (no GPU).
set -euo pipefail
: "${OUT:?set OUT}"
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 100 > "$OUT/smi.csv" &
SMI=$!
python3 benchmarks/experiments/power_clock/sustain.py --seconds 4 --json "$OUT/sustain.json" ${SUSTAIN_ARGS:-} 2>&1 \
    | tee "$OUT/sustain.txt"
kill $SMI
