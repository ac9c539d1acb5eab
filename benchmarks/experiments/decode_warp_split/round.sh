#!/usr/bin/env bash
# The device rounds that take the warp_split decode rule into the default call (writes under $OUT, tars its logs):
#   round.sh check   the small calls' bits and sanitizers, the serving round's verify (the capture
#                    attn_sm90_serving.npz, with the warp_split cases), sanitize and fused (attn_sm90_serving_fused.npz)
#                    steps, then rule_check.py (the rule on held-out shapes beside the split call, FA2 and cuDNN)
#   round.sh paged   forms.py (warp_split forms: deeper rings on pages, splits across blocks too at B=8 and B=1),
#                    the serving round's verify and fused steps
#                    (the captures), then ncu on the contiguous / paged warp_split and paged split calls, each
#                    started only while BUDGET (500 s) leaves room
#   round.sh pages   paged_check.py (the paged rule's candidates on held-out shapes), the serving round's sanitize,
#                    verify and fused steps, forms.py --rows heads (B=1, d = 64 / 256), then the decode rows under both
#                    flushes (bench_serving --decode), each started only while BUDGET (540 s) leaves room
#   round.sh sweep   paged_sweep.py (the paged rule's form beside the split call over the number of row groups, d=256's
#                    two-block form), the serving round's verify and fused steps (the 62-case captures), the decode
#                    rows under both flushes, ncu on B=12 and B=8 pages of 16 (the split call, the default and both
#                    forms), each started only while BUDGET (540 s) leaves room
#   round.sh table   the serving table's decode rows under both L2 flushes (bench_serving --decode), the serving
#                    round's verify and fused steps again (the captures of the final case set), the public call's
#                    rows (--call) and the serving GPU tests, each started only while BUDGET (560 s) leaves room
set -uo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
H=benchmarks/experiments/decode_warp_split
R=$OUT/r; mkdir -p "$R"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$R/gpu.txt"
case ${1:-} in
  check)
    python3 $H/small_calls.py > "$R/small_calls.txt" 2>&1; echo "small_calls exit $?"
    for tool in memcheck racecheck; do
      compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 --print-limit 20 \
        python3 $H/small_calls.py > "$R/small_calls_$tool.txt" 2>&1
      echo "$tool exit $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$R/small_calls_$tool.txt" | tail -1)"
    done
    OUT=$R/serving bash benchmarks/serving/run_device.sh verify sanitize fused; echo "serving round exit $?"
    python3 $H/rule_check.py --json "$R/rule_check.json" > "$R/rule_check.txt" 2>&1; echo "rule_check exit $?"
    cat "$R/rule_check.txt" ;;
  table)
    T0=$(date +%s)
    left() { echo $(( ${BUDGET:-560} - ($(date +%s) - T0) )); }
    for f in zero read; do
      timeout 120 python3 benchmarks/bench_serving.py --decode --flush $f --json "$R/decode_$f.json" > "$R/decode_$f.txt" 2>&1
      echo "decode $f exit $? at $(( $(date +%s) - T0 )) s"; cat "$R/decode_$f.txt"
    done
    (( $(left) > 200 )) && { OUT=$R/capture bash benchmarks/serving/run_device.sh verify fused; echo "serving round exit $?"; }
    (( $(left) > 100 )) && { timeout $(( $(left) - 90 )) python3 benchmarks/bench_serving.py --call --json "$R/call.json" \
      > "$R/call.txt" 2>&1; echo "call exit $?"; tail -20 "$R/call.txt"; }
    (( $(left) > 80 )) && { OUT=$R/serving bash benchmarks/serving/run_device.sh tests; echo "serving tests exit $?"; }
    echo "round took $(( $(date +%s) - T0 )) s" ;;
  paged)
    T0=$(date +%s)
    left() { echo $(( ${BUDGET:-500} - ($(date +%s) - T0) )); }
    timeout 240 python3 $H/forms.py --json "$R/forms.json" > "$R/forms.txt" 2>&1; echo "forms exit $?"; cat "$R/forms.txt"
    (( $(left) > 150 )) && { OUT=$R/capture bash benchmarks/serving/run_device.sh verify fused > "$R/capture.txt" 2>&1
      echo "serving round exit $?"; tail -12 "$R/capture.txt"; }
    (( $(left) > 60 )) && { timeout $(( $(left) - 30 )) ncu -k regex:flash_fwd -c 6 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats python3 $H/forms.py --once \
      > "$R/ncu.txt" 2>&1; echo "ncu exit $?"
      grep -E "flash_fwd|Throughput|Hit Rate|Achieved Occupancy|Grid Size|Block Size|Duration" "$R/ncu.txt" | head -60; }
    echo "round took $(( $(date +%s) - T0 )) s" ;;
  pages)
    T0=$(date +%s)
    left() { echo $(( ${BUDGET:-540} - ($(date +%s) - T0) )); }
    FLASHSIM_CACHE=$R/build timeout 180 python3 $H/paged_check.py --json "$R/paged_check.json" > "$R/paged_check.txt" 2>&1
    echo "paged_check exit $? at $(( $(date +%s) - T0 )) s"; cat "$R/paged_check.txt"
    (( $(left) > 150 )) && { OUT=$R/capture bash benchmarks/serving/run_device.sh sanitize verify fused > "$R/capture.txt" 2>&1
      echo "serving round exit $? at $(( $(date +%s) - T0 )) s"; tail -14 "$R/capture.txt"; }
    (( $(left) > 190 )) && { timeout 120 python3 $H/forms.py --rows heads --json "$R/forms_heads.json" \
      > "$R/forms_heads.txt" 2>&1; echo "forms heads exit $? at $(( $(date +%s) - T0 )) s"; cat "$R/forms_heads.txt"; }
    for f in zero read; do   # the time left, halved for the first flush, at most 120 s each
      t=$(( $(left) - 10 )); [[ $f == zero ]] && t=$(( t / 2 )); (( t > 120 )) && t=120; (( t > 40 )) || break
      timeout $t python3 benchmarks/bench_serving.py --decode --flush $f --json "$R/decode_$f.json" > "$R/decode_$f.txt" 2>&1
      echo "decode $f exit $? at $(( $(date +%s) - T0 )) s"; cat "$R/decode_$f.txt"
    done
    rm -rf "$R/build"; echo "round took $(( $(date +%s) - T0 )) s" ;;
  sweep)
    T0=$(date +%s)
    left() { echo $(( ${BUDGET:-540} - ($(date +%s) - T0) )); }
    FLASHSIM_CACHE=$R/build timeout 240 python3 $H/paged_sweep.py --json "$R/paged_sweep.json" > "$R/paged_sweep.txt" 2>&1
    echo "paged_sweep exit $? at $(( $(date +%s) - T0 )) s"; cat "$R/paged_sweep.txt"
    (( $(left) > 200 )) && { OUT=$R/capture bash benchmarks/serving/run_device.sh verify fused > "$R/capture.txt" 2>&1
      echo "serving round exit $? at $(( $(date +%s) - T0 )) s"; tail -8 "$R/capture.txt"; }
    for f in zero read; do
      (( $(left) > 100 )) || break
      timeout 60 python3 benchmarks/bench_serving.py --decode --flush $f --json "$R/decode_$f.json" > "$R/decode_$f.txt" 2>&1
      echo "decode $f exit $? at $(( $(date +%s) - T0 )) s"; cat "$R/decode_$f.txt"
    done
    for b in 12 8; do   # why the paged form loses at 96 row groups and wins at 64: the four launches under ncu
      (( $(left) > 70 )) || break
      FLASHSIM_CACHE=$R/build timeout 60 ncu -k regex:flash_fwd -c 4 --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --section Occupancy --section LaunchStats python3 $H/paged_sweep.py --once $b > "$R/ncu_b$b.txt" 2>&1
      echo "ncu B=$b exit $?"; grep -E "flash_fwd|launched|DRAM Throughput|Memory Throughput|Duration|Grid Size" "$R/ncu_b$b.txt" | head -30
    done
    rm -rf "$R/build"; echo "round took $(( $(date +%s) - T0 )) s" ;;
  *) echo "usage: round.sh check|paged|pages|sweep|table" >&2; exit 2 ;;
esac
tar -C "$OUT" -cf "$OUT/round_${1}.tar" r && rm -rf "$R"
