#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/d64_profile/run.sh   (about 1-2 min)
# Where the d = 64 defaults' warps stall (issue 14 asks 65% of the ceiling at d = 64): Nsight Compute's PC sampling
# of the f16 and f32 P@V defaults at 4 x 16 x 4096 x 64 (tools/stall_profile.py --head-dim 64, clocks left alone),
# exported per SASS instruction with its kernel line, and summed up. Results: $OUT/ncu.txt, stalls_source.csv.gz,
# stall_profile.txt; then, anywhere: python3 tools/stall_profile.py --summary <(zcat stalls_source.csv.gz) ...
set -euo pipefail
: "${OUT:?set OUT}"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
mkdir -p "$OUT"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
"$NCU" --clock-control none --kernel-name flash_fwd --section SourceCounters --section WarpStateStats \
    -o /tmp/stalls_d64 -f python3 tools/stall_profile.py --head-dim 64 2>&1 | tail -20 | tee "$OUT/ncu.txt"
"$NCU" -i /tmp/stalls_d64.ncu-rep --page source --csv --print-source cuda,sass > /tmp/stalls_d64_source.csv
gzip -c /tmp/stalls_d64_source.csv > "$OUT/stalls_source.csv.gz"
python3 tools/stall_profile.py --summary /tmp/stalls_d64_source.csv --top 25 > "$OUT/stall_profile.txt" 2>&1
