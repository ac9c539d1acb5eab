#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> [STEPS="profile occupancy"] bash benchmarks/experiments/causal_profile/run.sh
# Nsight Compute's PC sampling and instruction counts of the f16 kernel, non-causal and causal, and the causal f32
# one (tools/stall_profile.py --causal), exported per SASS instruction with its kernel line; then, anywhere:
#     python3 tools/stall_profile.py --summary <(zcat stalls_source.csv.gz) ...
set -euo pipefail
STEPS=${STEPS:-profile occupancy}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
if [[ " $STEPS " == *" profile "* ]]; then
  "$NCU" --clock-control none --kernel-name flash_fwd --section SourceCounters --section WarpStateStats \
      -o /tmp/stalls -f python3 tools/stall_profile.py --causal 2>&1 | tail -20 | tee "$OUT/ncu.txt"
  "$NCU" -i /tmp/stalls.ncu-rep --page source --csv --print-source cuda,sass > /tmp/stalls_source.csv
  gzip -c /tmp/stalls_source.csv > "$OUT/stalls_source.csv.gz"
  python3 tools/stall_profile.py --summary /tmp/stalls_source.csv --causal --top 25 > "$OUT/stall_profile.txt" 2>&1
fi
# achieved occupancy and throughput of the same three launches (ncu's Occupancy and SpeedOfLight sections)
if [[ " $STEPS " == *" occupancy "* ]]; then
  "$NCU" --clock-control none --kernel-name flash_fwd --section Occupancy --section SpeedOfLight \
      python3 tools/stall_profile.py --causal > "$OUT/ncu_occupancy.txt" 2>&1
fi
