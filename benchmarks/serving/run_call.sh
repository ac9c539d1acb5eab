#!/usr/bin/env bash
# The public serving call on the GPU, from the repository root, in one device call (about 2 minutes on an H100):
#
#     OUT=<dir> bash benchmarks/serving/run_call.sh [STEP ...]
#
#   steps: tests bits bench sanitize hostparts (default: tests bench)
#
#   tests     pytest -m gpu tests/test_serving_call_gpu.py: no host synchronisation under torch's sync debug mode,
#             CUDA graphs of the default call bit-equal to eager (flash_fwd overlapping the check too),
#             torch.compile(fullgraph), the lazy ValueError of a bad index, max_seqlen_k's splits and bits (the other
#             serving GPU tests, tests/test_serving_gpu.py, are the bits step), the public call's eager path (no
#             dispatcher) bit-equal to the op and to a graph
#   bits      pytest -m gpu tests/test_serving_gpu.py: every front-end (numpy, torch op, cupy) against the emulator bit
#             for bit, through the packed launches (run_device.sh's tests step too)
#   bench     benchmarks/bench_serving.py --call: the public call (graph, eager, host time per call) beside the
#             launches alone and FA2 (torch SDPA; flash_attn's flash_attn_with_kvcache where importable) on the decode
#             shapes (bench_call.json, bench_call.log)
#   sanitize  compute-sanitizer memcheck over benchmarks/serving/sanitize_serving.py (the index check kernel with bad
#             indices included); slower, not in the default steps
#   hostparts benchmarks/experiments/serving_host_time/gpu_parts.py: the host time of the call's parts on CUDA (the
#             allocations, the key, the capture test) and of each form of the driver launch, each form checked bit
#             for bit (gpu_parts.txt, gpu_parts.json); under a minute, not in the default steps
#
# Each step's output goes to $OUT/<step>.log (and the screen); $OUT/summary.txt has one line per step.
# Exit status: 0 every step passed, 1 one failed, 2 bad usage.
set -uo pipefail

declare -A CAP=([tests]=120 [bits]=150 [bench]=180 [sanitize]=150 [hostparts]=120)   # seconds, to kill a step
STEPS=("$@")
[[ ${#STEPS[@]} -eq 0 ]] && STEPS=(tests bench)
for s in "${STEPS[@]}"; do
  [[ -v "CAP[$s]" ]] || { echo "unknown step '$s'; steps: tests bits bench sanitize hostparts" >&2; exit 2; }
done
[[ -f flashsim/__init__.py && -d kernel ]] || { echo "run from the repository root" >&2; exit 2; }
[[ -n ${OUT:-} ]] || { echo "set OUT to the folder for the results: OUT=<dir> $0" >&2; exit 2; }
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=python3
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>&1
  $PY -c "import torch; print('torch', torch.__version__)" 2>&1; git rev-parse --short HEAD 2>/dev/null; } \
  > "$OUT/summary.txt"

status=0
for s in "${STEPS[@]}"; do
  start=$(date +%s)
  case $s in
    tests) cmd=($PY -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_serving_call_gpu.py) ;;
    bits) cmd=($PY -m pytest -q -m gpu -rs -p no:cacheprovider tests/test_serving_gpu.py) ;;
    bench) cmd=($PY benchmarks/bench_serving.py --call --json "$OUT/bench_call.json") ;;
    sanitize) cmd=(compute-sanitizer --tool memcheck --error-exitcode 1 $PY benchmarks/serving/sanitize_serving.py) ;;
    hostparts) cmd=($PY benchmarks/experiments/serving_host_time/gpu_parts.py --out "$OUT") ;;
  esac
  echo "\$ ${cmd[*]}" | tee "$OUT/$s.log"
  timeout --kill-after=10 "${CAP[$s]}" "${cmd[@]}" 2>&1 | tee -a "$OUT/$s.log"
  rc=${PIPESTATUS[0]}
  line="$s: exit $rc in $(( $(date +%s) - start )) s"
  [[ $rc -eq 124 || $rc -eq 137 ]] && line+=" (killed after ${CAP[$s]} s)"
  [[ $s == tests || $s == bits ]] && line+=" | $(grep -E '(passed|failed|error|skipped)' "$OUT/$s.log" | tail -1)"
  echo "$line" | tee -a "$OUT/summary.txt"
  [[ $rc -eq 0 ]] || status=1
done
[[ -f $OUT/bench.log ]] && grep -E "^(bench_serving|call )" "$OUT/bench.log" >> "$OUT/summary.txt"
exit $status
