#!/usr/bin/env bash
# One device round on the H200, from the repository root:
#
#     OUT=<dir> tools/device_round.sh [STEP ...]        steps: captures verify tests sanitize bench (default: all five)
#                                                       and attn (the attention captures alone, part of captures),
#                                                       quantbench (benchmarks/bench_quant.py, ~30 s)
#
# Then, back on the development machine: tools/collect_device_round.sh <the files that came back from OUT>
# (captures -> tests/data, stamped by tools/stamp_captures.py, logs -> benchmarks/logs/<date>/, and tests/test_drift.py
# run on the result), in the same checkout, so that the recorded sources are the working tree's.
#
# Steps, in the order given (default order below). Times: measured on the H200 (summary_*.txt of the 2026-11-30 and
# 2026-12-01 rounds; ESTIMATE below holds the round's own guesses); summary.txt records each step's time.
#   captures  ~3-4 min    re-capture every GPU capture of tests/data, each with its source record (flashsim.provenance:
#                         sha256 of the kernel source + the build's defines: what ran); collect_device_round.sh adds
#                         the compiled fingerprint here (tools/stamp_captures.py), which tests/test_drift.py checks:
#                           layout_sm90.npz                python3 -m flashsim.gpu.capture.layout   (~10 s)
#                           mma_sm90.npz + _summary.json   python3 -m flashsim.gpu.capture.mma      (~30-60 s)
#                           attn_sm90_{defaults,w8m1,specials}.npz
#                                                          flashsim verify --replay tests/data/<f> --save-cases:
#                                                          the very cases of the stored file (configs, shapes, kinds,
#                                                          seeds; the regenerated inputs must hash as recorded)
#                                                          (~20-40 s each; without the stored file: the commands
#                                                          that first made them, see capture_attn below)
#                           sfu_sample_sm90.npz (+ sfu_tables_sm90.npz)  python3 -m flashsim.gpu.capture.sfu (~1 min)
#                         -> tests/data/ (sfu_tables only with collect --sfu-tables, -> flashsim/data/sfu/)
#   verify    37-45 s     flashsim verify, default shapes and kinds: kernel vs emulator bit for bit (JSON + text)
#                         -> benchmarks/logs/<date>/verify.txt, verify.json
#   tests     57-78 s     python3 -m pytest -q -ra -m gpu tests      -> benchmarks/logs/<date>/tests.txt
#             (+ about 50 s since the fourteenth round: Triton compiles the fused kernel's four GPU test cases,
#             5-10 s each with inline PTX; 212 GPU tests took 109 s, benchmarks/experiments/jax_ptx/2026-12-01/
#             call5_final/tests_gpu.txt)
#   sanitize  63-81 s     compute-sanitizer memcheck and racecheck over every default kernel variant
#                         (tools/sanitize_kernel.py --list: 54 variants); fails on any error or hazard
#                         -> benchmarks/logs/<date>/sanitize.txt
#   quantbench 29 s       benchmarks/bench_quant.py: INT8 / FP8 attention beside the f16 kernel and the ceilings
#                         -> benchmarks/logs/<date>/quantbench.txt, bench_quant.json
#   ptxisa    (new)       python3 -m flashsim.gpu.capture.isa: the silicon probes of flashsim.ptx -> captures/ptx_isa/
#                         (collect_device_round.sh copies them to tests/data/ptx_isa/)
#   sfuapprox (new)       python3 -m flashsim.gpu.capture.sfu_approx --quick: the GPU sample of the SFU's approximate
#                         functions with its provenance (the full 2^32 validation is a run by hand: its README)
#   ptxverify (new)       flashsim verify --ptx on small shapes: GPU, flashsim.ptx and the numpy engine three ways
#   peak      9-10 s      benchmarks/bench_peak.py (flashsim bench peak), with --vary all and --sweep,
#                         tests/test_gpu_peak.py -> benchmarks/logs/<date>/peak.txt, bench_peak*.json
#   jax       ~2 min      tools/jax_gpu_bench.py --n 16384 and tools/jax_gpu_variants.py --n 16384 (the JAX engine
#                         on the GPU beside the kernel; loop structures)  -> jax.txt, jax_gpu.json, jax_gpu_variants.json
#   bench     45-55 s     flashsim bench kernel --reps 20 --rounds 7 (the anchor shapes, beside torch FA2 and cuDNN) and
#                         tools/jax_gpu_bench.py --n 16384 (the JAX backend on the GPU beside the kernel)
#                         -> benchmarks/logs/<date>/bench.txt, jax_gpu.json
# After a kernel change, `attn verify tests sanitize bench` fits one 10-minute device call (318 s on 2026-12-01: the
# attention captures are the only ones that name flash_fwd.cu); the full `captures` step adds the mma, layout and SFU
# captures. Collect each call's files into its own dated folder (tools/collect_device_round.sh DIR --date DATE: a second
# collect into the same folder overwrites the logs of the same name).
# FRESH_SETS="quant ..." re-makes those attention sets from the command that defines them (below: capture_attn)
# instead of replaying the stored file's cases: after cases were added to a set (flashsim verify's case lists).
# The round stops by itself before BUDGET seconds (default 540): a step that cannot finish in the time left is
# not started (exit status 3, the summary names the steps still to run); a step past the time left is killed.
# Not in the round any more (run by hand when needed): the tile-shape sweep of device_tiles.sh (flashsim bench kernel
# --warps/--m-tiles/--kv-tile/--stages), `flashsim calibrate --quick` (the sfu capture and test_sfu's GPU test cover
# it), tools/kernel_vs_reference.py (tests/test_kernel_gpu.py checks the same float64 reference bound).
#
# What comes back (the device returns at most 8 files, each under 16 MB, at most 2 folders deep):
#   $OUT/summary.txt          environment, one line per step (status, seconds), what is left to run
#   logs/<step>.txt           each step's full log (inside round.tar)
#   $OUT/round.tar, round_2.tar, ...   captures/ (every capture file, ~19 MB) and json/ (verify.json, jax_gpu.json,
#                             captures_attn_*.json), each under PACK_MB (default 14) MB, re-packed after every step so a
#                             killed round keeps its results
# The loose files behind round.tar stay in $STAGE (default: a fresh folder under /tmp).
# Bring $OUT back as it is: an archive of the whole of it is over 16 MB and does not come back (a round was lost so
# on 2026-12-01).
#
# The device has python3 with torch, cupy, jax (CUDA), cuda-python, compute-sanitizer; flashsim is not installed:
# PYTHONPATH=$PWD. If ml_dtypes or hypothesis is missing there, put wheels in .whl/ here (pip download ml_dtypes
# hypothesis -d .whl --only-binary=:all: --python-version 3.12) and carry .whl: they are installed from it.
# Exit status: 0 every step passed; 1 a step failed (the first failure stops the round); 2 bad usage; 3 out of time.
set -euo pipefail

ALL_STEPS=(captures verify tests sanitize bench)   # and, by name only: attn, quantbench, peak, jax, ptxisa, ptxverify, sfuapprox
# ESTIMATE: measured in the 2026-11-30 and 2026-12-01 rounds (summary_*.txt: attn 77-128 s, verify 35-45, tests
# 54-78, sanitize 63-86, bench 45-55, quantbench 28-29, peak 9-10), with a margin (bench's was 180 s, which kept it
# from starting with 102 s left in 2026-12-01f)
declare -A ESTIMATE=([captures]=240 [attn]=150 [verify]=60 [tests]=150 [sanitize]=120 [bench]=90
                     [quantbench]=45 [peak]=30 [jax]=150 [ptxisa]=60 [ptxverify]=120 [sfuapprox]=60)                                 # seconds, to plan
declare -A CAP=([captures]=420 [attn]=300 [verify]=240 [tests]=420 [sanitize]=480 [bench]=420
                [quantbench]=240 [peak]=240 [jax]=400 [ptxisa]=240 [ptxverify]=300 [sfuapprox]=240)                                   # seconds, to kill

usage() { sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && usage 0
STEPS=("$@")
[[ ${#STEPS[@]} -eq 0 ]] && STEPS=("${ALL_STEPS[@]}")
for s in "${STEPS[@]}"; do
  [[ -v "ESTIMATE[$s]" ]] || { echo "unknown step '$s'; steps: ${ALL_STEPS[*]}" >&2; exit 2; }
done
[[ -f flashsim/__init__.py && -d kernel ]] || { echo "run from the repository root" >&2; exit 2; }
[[ -n ${OUT:-} ]] || { echo "set OUT to the folder for the results: OUT=<dir> $0 ${STEPS[*]}" >&2; exit 2; }

export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false            # JAX beside cuda.core / torch in one process
BUDGET=${BUDGET:-540}
START=$(date +%s)
STAGE=${STAGE:-$(mktemp -d /tmp/device_round.XXXXXX)}
mkdir -p "$OUT" "$STAGE/captures" "$STAGE/json" "$STAGE/logs"
export FLASHSIM_CACHE=$STAGE/cache                      # no stale user calibration on the device
SUMMARY=$OUT/summary.txt
PY=python3

DEADLINE=$(( START + BUDGET ))
STEP_END=$DEADLINE
left() {   # seconds left for the running step (its cap, and the round's budget)
  local end=$(( STEP_END < DEADLINE ? STEP_END : DEADLINE ))
  echo $(( end - $(date +%s) ))
}
note() { echo "$*" | tee -a "$SUMMARY"; }

pack() {   # round.tar (logs/, json/ and the first captures), round_2.tar, ...: each under PACK_MB (the device returns
           # at most 8 files, each under 16 MB; the captures are ~19 MB since the FP8 cases)
  local limit=$(( ${PACK_MB:-14} * 1024 * 1024 )) n=1 size=0 files=(logs json) f sz
  rm -f "$OUT"/round*.tar
  for f in $(cd "$STAGE" && find captures -type f 2>/dev/null | sort); do
    sz=$(stat -c %s "$STAGE/$f")
    if (( size + sz > limit && ${#files[@]} > 0 )); then
      tar -C "$STAGE" -cf "$OUT/round$([[ $n -gt 1 ]] && echo _$n).tar" "${files[@]}"; n=$(( n + 1 )); files=(); size=0
    fi
    files+=("$f"); size=$(( size + sz ))
  done
  tar -C "$STAGE" -cf "$OUT/round$([[ $n -gt 1 ]] && echo _$n).tar" "${files[@]}"
}

# run LOG LIMIT CMD...: CMD with its output appended to LOG (and shown), killed after LIMIT seconds.
# Step functions run where bash ignores set -e (in an if), so every call below ends in || return.
run() {
  local log=$1 limit=$2; shift 2
  (( limit > 0 )) || { echo "out of time before: $*" | tee -a "$log"; return 124; }
  echo "\$ $*" | tee -a "$log"
  local rc=0
  timeout --kill-after=15 "$limit" "$@" 2>&1 | tee -a "$log" || rc=${PIPESTATUS[0]}
  [[ $rc -eq 124 || $rc -eq 137 ]] && echo "(killed after $limit s)" | tee -a "$log"
  return "$rc"
}

need_modules() {   # need_modules MOD...: import them, installing from .whl/ if carried and one is missing
  local missing=()
  for m in "$@"; do $PY -c "import $m" 2>/dev/null || missing+=("$m"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  if [[ -d .whl ]]; then
    $PY -m pip install -q --no-index --find-links .whl "${missing[@]}" || true
    missing=(); for m in "$@"; do $PY -c "import $m" 2>/dev/null || missing+=("$m"); done
  fi
  [[ ${#missing[@]} -eq 0 ]] || { echo "missing python modules: ${missing[*]} (see the header: .whl/)"; return 1; }
}

# -- the steps: each writes $STAGE/logs/<step>.txt (packed into round.tar); a failing command fails the step ------

capture_attn() {   # capture_attn SET LOG LIMIT: tests/data/attn_sm90_SET.npz again, case for case
  local set=$1 log=$2 limit=$3 stored=tests/data/attn_sm90_$1.npz how
  if [[ -f $stored && " ${FRESH_SETS:-} " != *" $set "* ]]; then
    how=(--replay "$stored")
  else                                  # how the files were first made (tools/device_{final,verify,last}.sh)
    case $set in
      defaults) how=(--kinds normal,wide,adversarial) ;;
      w8m1)     how=(--kinds normal,wide,adversarial --warps 8 --m-tiles 1 --kv-tile 64 --stages 3) ;;
      specials) how=(--kinds specials --seeds 2) ;;
      f16x2)    how=(--pv-accum f16x2 --kinds normal,wide,adversarial,specials) ;;
      variants) how=(--variants) ;;
      quant)    how=(--quant) ;;
    esac
  fi
  run "$log" "$limit" $PY -m flashsim.cli verify "${how[@]}" --save-cases "$STAGE/captures/attn_sm90_$set.npz" \
      --json "$STAGE/json/captures_attn_$set.json" || return
}

step_captures() {
  local log=$1 c=$STAGE/captures
  need_modules numpy ml_dtypes cuda.core || return
  run "$log" "$(left)" $PY -m flashsim.gpu.capture.layout --out "$c" || return
  run "$log" "$(left)" $PY -m flashsim.gpu.capture.mma --out "$c" || return
  for set in $ATTN_SETS; do capture_attn "$set" "$log" "$(left)" || return; done
  run "$log" "$(left)" $PY -m flashsim.gpu.capture.sfu --out "$c" || return
  local want=(layout_sm90.npz mma_sm90.npz mma_sm90_summary.json attn_sm90_defaults.npz attn_sm90_w8m1.npz
              attn_sm90_specials.npz attn_sm90_f16x2.npz attn_sm90_variants.npz attn_sm90_quant.npz
              sfu_sample_sm90.npz
              sfu_tables_sm90.npz)
  for f in "${want[@]}"; do [[ -f $c/$f ]] || { echo "missing capture $f" | tee -a "$log"; return 1; }; done
  ( cd "$c" && ls -l "${want[@]}" ) | tee -a "$log" || return
  RESULT="${#want[@]} capture files"
}

ATTN_SETS="defaults w8m1 specials f16x2 variants quant"

step_attn() {      # only the attention captures (after a change of kernel/flash_fwd.cu or its defines)
  local log=$1 c=$STAGE/captures
  need_modules numpy ml_dtypes cuda.core || return
  for set in $ATTN_SETS; do capture_attn "$set" "$log" "$(left)" || return; done
  for set in $ATTN_SETS; do [[ -f $c/attn_sm90_$set.npz ]] || { echo "missing attn_sm90_$set.npz" | tee -a "$log"; return 1; }; done
  RESULT="$(echo $ATTN_SETS | wc -w) attention capture files ($(grep -c '^verdict: every bit agrees' "$log") sets bit-exact)"
}

step_ptxisa() {   # the silicon probes of flashsim.ptx (flashsim/ptx/probes): GPU outputs -> captures/ptx_isa/
  local log=$1
  need_modules numpy ml_dtypes cuda.core || return
  local from=()   # the PTX made here with the pinned NVRTC (python -m flashsim.gpu.capture.isa --export-ptx .probes_ptx)
  [[ -d .probes_ptx ]] && from=(--ptx-dir .probes_ptx)
  run "$log" "$(left)" $PY -m flashsim.gpu.capture.isa --out "$STAGE/captures/ptx_isa" "${from[@]}" || return
  RESULT="$(ls "$STAGE/captures/ptx_isa" | wc -l) probe capture files"
}

step_sfuapprox() {   # the sample of the SFU's approximate functions (--quick: windows, not all 2^32 inputs)
  local log=$1
  need_modules numpy ml_dtypes cuda.core || return
  run "$log" "$(left)" $PY -m flashsim.gpu.capture.sfu_approx --quick --out "$STAGE/sfa" || return
  cp "$STAGE/sfa/sfu_approx_sample_sm90.npz" "$STAGE/captures/" || return
  RESULT="sfu_approx_sample_sm90.npz"
}

step_ptxverify() {   # three ways on small shapes: GPU, the kernel's PTX in flashsim.ptx, the numpy engine
  local log=$1
  need_modules numpy ml_dtypes cuda.core || return
  run "$log" "$(left)" $PY -m flashsim.cli verify --ptx --only --shape 1,2,200,200,64 --shape 1,1,130,257,128,causal \
    --kinds normal,adversarial --pv-accum all --json "$STAGE/json/verify_ptx.json" || return
  RESULT=$(grep -m1 '^verdict:' "$log" || echo "no verdict line")
}

step_verify() {
  local log=$1
  need_modules numpy ml_dtypes cuda.core || return
  run "$log" "$(left)" $PY -m flashsim.cli verify --fa2-rule gpu --json "$STAGE/json/verify.json" || return
  RESULT=$(grep -m1 '^verdict:' "$log" || echo "no verdict line")
}

step_tests() {
  local log=$1
  need_modules numpy ml_dtypes cuda.core pytest hypothesis || return
  run "$log" "$(left)" $PY -m pytest -q -ra -m gpu -p no:cacheprovider tests || return
  RESULT=$(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)
}

sanitizer_clean() {   # sanitizer_clean LOG FROM_LINE: a "SUMMARY: 0 ..." line and no "SUMMARY: <nonzero>" line
  local part; part=$(tail -n +"$2" "$1")
  grep -Eq 'SUMMARY: [1-9]' <<<"$part" && { echo "sanitizer reported problems (above)" | tee -a "$1"; return 1; }
  grep -Eq 'SUMMARY: 0 (errors|hazards)' <<<"$part" || { echo "no sanitizer summary line found" | tee -a "$1"; return 1; }
}

step_sanitize() {
  local log=$1 cs from
  need_modules numpy ml_dtypes cuda.core || return
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x $cs ]] || { echo "compute-sanitizer not found" | tee -a "$log"; return 1; }
  $PY tools/sanitize_kernel.py --list | tee -a "$log" || return
  from=$(( $(wc -l < "$log") + 1 ))
  run "$log" "$(left)" "$cs" --tool memcheck --leak-check no --error-exitcode 1 $PY tools/sanitize_kernel.py || return
  sanitizer_clean "$log" "$from" || return
  from=$(( $(wc -l < "$log") + 1 ))
  run "$log" "$(left)" "$cs" --tool racecheck --error-exitcode 1 $PY tools/sanitize_kernel.py || return
  sanitizer_clean "$log" "$from" || return
  RESULT="memcheck and racecheck clean on $($PY tools/sanitize_kernel.py --list | wc -l) variants"
}

step_quantbench() {   # the quantized kernels beside the f16 one and the ceilings, same run (benchmarks/bench_quant.py)
  local log=$1
  need_modules numpy ml_dtypes cuda.core torch || return
  run "$log" "$(left)" $PY benchmarks/bench_quant.py --json "$STAGE/json/bench_quant.json" || return
  RESULT="quantized attention benchmark written"
}

step_bench() {
  local log=$1
  need_modules numpy ml_dtypes cuda.core torch jax || return
  run "$log" "$(left)" $PY -m flashsim.cli bench kernel --reps 20 --rounds 7 --json "$STAGE/json/bench_kernel.json" || return
  run "$log" "$(left)" $PY benchmarks/bench_variants.py --json "$STAGE/json/bench_variants.json" || return
  if [[ ${JAX_BENCH:-0} == 1 ]]; then
    run "$log" "$(left)" $PY tools/jax_gpu_bench.py --n 16384 --json "$STAGE/json/jax_gpu.json" || return
  fi
  RESULT="kernel and variant benchmarks written"
}

step_peak() {   # the mma.sync ceiling of every instruction (flashsim bench peak), its warps x chains sweep, its GPU test
  local log=$1
  need_modules numpy ml_dtypes cuda.core pytest || return
  run "$log" "$(left)" $PY benchmarks/bench_peak.py --json "$STAGE/json/bench_peak.json" || return
  run "$log" "$(left)" $PY benchmarks/bench_peak.py --vary all --json "$STAGE/json/bench_peak_vary_all.json" || return
  run "$log" "$(left)" $PY benchmarks/bench_peak.py --sweep --json "$STAGE/json/bench_peak_sweep.json" || return
  run "$log" "$(left)" $PY -m pytest -q -ra -m gpu -p no:cacheprovider tests/test_gpu_peak.py || return
  RESULT="ceilings measured; $(grep -E '[0-9]+ (passed|failed)' "$log" | tail -1)"
}

step_jax() {   # the JAX engine on the GPU beside the kernel (tools/jax_gpu_bench.py), and its loop variants
  local log=$1
  need_modules numpy ml_dtypes cuda.core jax || return
  run "$log" "$(left)" $PY tools/jax_gpu_bench.py --n 16384 --json "$STAGE/json/jax_gpu.json" || return
  run "$log" "$(left)" $PY tools/jax_gpu_variants.py --n 16384 --json "$STAGE/json/jax_gpu_variants.json" || return
  RESULT=$(grep -m1 'emulation .* = .*x;' "$log" || echo "JAX engine measured")
}

# -- the round -----------------------------------------------------------------------------------------------------

{
  echo "device round $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "date: $(date -u +%Y-%m-%d)"
  echo "steps: ${STEPS[*]} (budget ${BUDGET} s)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown)"
  echo "python: $($PY -c 'import sys; print(sys.version.split()[0])') $($PY - <<'EOF' 2>/dev/null
import importlib
out = []
for m in ("numpy", "ml_dtypes", "hypothesis", "torch", "jax", "cuda.core", "cuda.bindings"):
    try:
        out.append(f"{m} {getattr(importlib.import_module(m), '__version__', '?')}")
    except Exception:
        out.append(f"{m} missing")
print(", ".join(out))
EOF
)"
  echo "staging: $STAGE"
} > "$SUMMARY"
cat "$SUMMARY"

done_steps=()
finish() {
  local rc=$?
  pack || true
  local todo=()
  for s in "${STEPS[@]}"; do [[ " ${done_steps[*]} " == *" $s "* ]] || todo+=("$s"); done
  [[ ${#todo[@]} -gt 0 ]] && note "not run: ${todo[*]} -> OUT=\$OUT tools/device_round.sh ${todo[*]}"
  local n; n=$(find "$OUT" -type f | wc -l)
  [[ $n -le 8 ]] || note "warning: $n files under \$OUT; the device returns 8 at most"
  find "$OUT" -type f -size +15M -printf 'warning: %p is over 15 MB\n' | tee -a "$SUMMARY"
  note "round: exit $rc after $(( $(date +%s) - START )) s"
  echo "== summary"; grep -E '^(captures|attn|verify|tests|sanitize|bench|quantbench|not run|round):' "$SUMMARY" || true
  exit "$rc"
}
trap finish EXIT
trap 'exit 143' TERM INT      # killed from outside: still pack and summarise

for s in "${STEPS[@]}"; do
  if (( $(left) < ESTIMATE[$s] )); then
    note "$s: not started: $(left) s left, it needs about ${ESTIMATE[$s]} s"
    exit 3
  fi
  log=$STAGE/logs/$s.txt
  : > "$log"
  t0=$(date +%s)
  RESULT=""
  STEP_END=$(( t0 + CAP[$s] ))
  echo "== $s (at most $(left) s) -> $log"
  if "step_$s" "$log"; then rc=0; else rc=$?; fi
  STEP_END=$DEADLINE
  dt=$(( $(date +%s) - t0 ))
  done_steps+=("$s")
  pack
  if [[ $rc -ne 0 ]]; then
    note "$s: FAILED (exit $rc) after $dt s: see logs/$s.txt in round.tar"
    tail -n 15 "$log"
    exit 1
  fi
  note "$s: ok in $dt s: $RESULT"
done
