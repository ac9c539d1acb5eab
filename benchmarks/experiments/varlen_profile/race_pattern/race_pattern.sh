#!/usr/bin/env bash
# On the GPU machine, from the repository root: race_pattern.cu's cases under compute-sanitizer's racecheck, each
# case launched alone, then the same cases in flashsim.ptx (the CPU side, for one log):
#     OUT=<dir> bash benchmarks/experiments/varlen_profile/race_pattern/race_pattern.sh
set -uo pipefail
[[ -n ${OUT:-} ]] || { echo "set OUT" >&2; exit 2; }
mkdir -p "$OUT"
HERE=benchmarks/experiments/varlen_profile/race_pattern
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
"$SAN" --version | tail -1 >> "$OUT/gpu.txt"
for i in $(python3 -c "import sys; sys.path.insert(0, '$HERE'); import race_pattern as r; print(*range(len(r.CASES)))"); do
  echo "== case $i" >> "$OUT/racecheck.txt"
  "$SAN" --tool racecheck --print-limit 4 python3 "$HERE/race_pattern.py" --gpu --case "$i" >> "$OUT/racecheck.txt" 2>&1
done
grep -E "^== case|: values|RACECHECK SUMMARY" "$OUT/racecheck.txt" > "$OUT/summary.txt"
cat "$OUT/summary.txt"
