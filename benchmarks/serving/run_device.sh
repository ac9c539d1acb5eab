#!/usr/bin/env bash
# The serving round on the H200, from the repository root, in one device call (at most 500 s of steps):
#
#     OUT=<dir> bash benchmarks/serving/run_device.sh [STEP ...]
#
#   steps: verify sanitize tests bench (the default: all four), and fused
#
#   verify    flashsim verify --serving: every serving case (KV cache contiguous and paged, split-KV and its combine,
#             GQA packing, varlen) GPU against the emulator bit for bit, saved as the capture attn_sm90_serving.npz
#             (per case: outputs, the case, its configuration and split count, the inputs' hash, the build's source
#             record) and verify_serving.json
#   sanitize  compute-sanitizer memcheck and racecheck over benchmarks/serving/sanitize_serving.py (decode with
#             splits, paged, varlen, flash_combine, and unchecked bad indices that the kernel must clamp)
#   tests     python3 -m pytest -m gpu tests/test_serving_gpu.py (the serving GPU tests)
#   bench     benchmarks/bench_serving.py --sweep: the speed table beside FA2 and cuDNN (bench_serving.json)
#   fused     the fused-check build (flashsim.gpu.serving.FUSED: the index check inside flash_fwd):
#             verify --serving --fused against the emulator, saved as captures/attn_sm90_serving_fused.npz (stamp it
#             as the other), then memcheck and racecheck over sanitize_serving.py --fused
#
# A failing step does not stop the others; each step's time is capped so the round ends inside one call. What comes
# back: $OUT/summary.txt (environment, one line per step, the verdicts and the speed table) and $OUT/serving.tar
# (logs/, json/ and captures/attn_sm90_serving.npz), well under 8 files of 16 MB. Back on the development machine:
# tar -xf serving.tar; copy captures/attn_sm90_serving.npz to tests/data/ and stamp it (python tools/stamp_captures.py
# tests/data/attn_sm90_serving.npz) in the checkout the round ran from, so its recorded sources are the working
# tree's; file the logs and JSON under benchmarks/logs/<date>/.
# Exit status: 0 every step passed, 1 one failed (named in the summary), 2 bad usage.
set -uo pipefail

ALL_STEPS=(verify sanitize tests bench)
declare -A CAP=([verify]=120 [sanitize]=140 [tests]=80 [bench]=160 [fused]=260)   # seconds, to kill a step
STEPS=("$@")
[[ ${#STEPS[@]} -eq 0 ]] && STEPS=("${ALL_STEPS[@]}")
for s in "${STEPS[@]}"; do
  [[ -v "CAP[$s]" ]] || { echo "unknown step '$s'; steps: ${ALL_STEPS[*]} fused" >&2; exit 2; }
done
[[ -f flashsim/__init__.py && -d kernel ]] || { echo "run from the repository root" >&2; exit 2; }
[[ -n ${OUT:-} ]] || { echo "set OUT to the folder for the results: OUT=<dir> $0" >&2; exit 2; }

export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
STAGE=$(mktemp -d /tmp/serving_round.XXXXXX)
mkdir -p "$OUT" "$STAGE/logs" "$STAGE/json" "$STAGE/captures"
export FLASHSIM_CACHE=$STAGE/cache
SUMMARY=$OUT/summary.txt
PY=python3
START=$(date +%s)

note() { echo "$*" | tee -a "$SUMMARY"; }
run() {   # run LOG LIMIT CMD...: CMD's output appended to LOG (and shown), killed after LIMIT seconds
  local log=$1 limit=$2; shift 2
  echo "\$ $*" | tee -a "$log"
  local rc=0
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log" || rc=${PIPESTATUS[0]}
  [[ $rc -eq 124 || $rc -eq 137 ]] && echo "(killed after $limit s)" | tee -a "$log"
  return "$rc"
}
sanitizer_clean() {   # LOG FROM_LINE: a "SUMMARY: 0 ..." line and no "SUMMARY: <nonzero>" line after FROM_LINE
  local part; part=$(tail -n +"$2" "$1")
  grep -Eq 'SUMMARY: [1-9]' <<<"$part" && { echo "sanitizer reported problems (above)" | tee -a "$1"; return 1; }
  grep -Eq 'SUMMARY: 0 (errors|hazards)' <<<"$part" || { echo "no sanitizer summary line" | tee -a "$1"; return 1; }
}

step_verify() {
  run "$1" "${CAP[verify]}" $PY -m flashsim.cli verify --serving --save-cases "$STAGE/captures/attn_sm90_serving.npz" \
      --json "$STAGE/json/verify_serving.json" || return
  RESULT=$(grep -m1 '^verdict:' "$1" || echo "no verdict line")
}

sanitize_with() {   # LOG SECONDS [--fused]: memcheck, then racecheck, over sanitize_serving.py
  local log=$1 t=$(( $2 / 2 )) cs from
  shift 2
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x $cs ]] || { echo "compute-sanitizer not found" | tee -a "$log"; return 1; }
  $PY benchmarks/serving/sanitize_serving.py --list "$@" | tee -a "$log" || return
  from=$(( $(wc -l < "$log") + 1 ))
  run "$log" "$t" "$cs" --tool memcheck --leak-check no --error-exitcode 1 $PY benchmarks/serving/sanitize_serving.py \
      "$@" || return
  sanitizer_clean "$log" "$from" || return
  from=$(( $(wc -l < "$log") + 1 ))
  run "$log" "$t" "$cs" --tool racecheck --error-exitcode 1 $PY benchmarks/serving/sanitize_serving.py "$@" || return
  sanitizer_clean "$log" "$from" || return
  RESULT="memcheck and racecheck clean on $($PY benchmarks/serving/sanitize_serving.py --list | wc -l) launches"
}

step_sanitize() { sanitize_with "$1" "${CAP[sanitize]}"; }

step_fused() {
  local verdict
  run "$1" 120 $PY -m flashsim.cli verify --serving --fused \
      --save-cases "$STAGE/captures/attn_sm90_serving_fused.npz" --json "$STAGE/json/verify_serving_fused.json" \
      || return
  verdict=$(grep -m1 '^verdict:' "$1" || echo "no verdict line")
  sanitize_with "$1" $(( CAP[fused] - 120 )) --fused || return
  RESULT="$verdict; $RESULT (fused)"
}

step_tests() {
  run "$1" "${CAP[tests]}" $PY -m pytest -q -ra -m gpu -p no:cacheprovider tests/test_serving_gpu.py || return
  RESULT=$(grep -E '[0-9]+ (passed|failed|skipped)' "$1" | tail -1 || true)
  grep -Eq '[0-9]+ passed' "$1" || { echo "no GPU test ran" | tee -a "$1"; return 1; }
}

step_bench() {
  run "$1" "${CAP[bench]}" $PY benchmarks/bench_serving.py --sweep --json "$STAGE/json/bench_serving.json" || return
  RESULT="speed table written (bench_serving.json)"
}

{
  echo "serving round $(date -u +%Y-%m-%dT%H:%M:%SZ), steps: ${STEPS[*]}"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1)"
  echo "python: $($PY -c 'import sys, torch, numpy; print(sys.version.split()[0], "torch", torch.__version__, "numpy", numpy.__version__)' 2>&1)"
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
} > "$SUMMARY"
cat "$SUMMARY"

failed=()
for s in "${STEPS[@]}"; do
  log=$STAGE/logs/$s.txt
  : > "$log"
  t0=$(date +%s)
  RESULT=""
  echo "== $s (at most ${CAP[$s]} s)"
  if "step_$s" "$log"; then status=ok; else status="FAILED (exit $?)"; failed+=("$s"); fi
  note "$s: $status in $(( $(date +%s) - t0 )) s: ${RESULT:-see logs/$s.txt}"
  tar -C "$STAGE" -cf "$OUT/serving.tar" logs json captures   # re-packed after every step: a killed round keeps its results
done

{
  echo "== summary (round $(( $(date +%s) - START )) s)"
  grep -h -E '^(verdict|flashsim verify)' "$STAGE/logs/verify.txt" 2>/dev/null
  grep -h -E 'MISMATCH|[0-9.]+% ' "$STAGE/logs/verify.txt" 2>/dev/null | grep -v ' 100.0000% ' | grep -v '^case' | head -5
  grep -h -E '^(sanitize_serving|=+ .*(ERROR|SUMMARY))' "$STAGE/logs/sanitize.txt" 2>/dev/null | head -4
  grep -h -E '^(verdict|sanitize_serving|=+ .*(ERROR|SUMMARY))' "$STAGE/logs/fused.txt" 2>/dev/null | head -5
  grep -h -E '[0-9]+ (passed|failed)' "$STAGE/logs/tests.txt" 2>/dev/null | tail -1
  sed -n '/^bench_serving on/,/^bench_serving:/p' "$STAGE/logs/bench.txt" 2>/dev/null
  [[ ${#failed[@]} -eq 0 ]] && echo "every step passed" || echo "failed steps: ${failed[*]}"
} | tee -a "$SUMMARY"
[[ ${#failed[@]} -eq 0 ]]
