#!/usr/bin/env bash
# The Hopper round on the H100 / H200, from the repository root, in one device call:
#
#     OUT=<dir> bash tools/device_hopper.sh [STEP ...]
#
#   bf16     benchmarks/experiments/bf16_attention_rows/run.py --gpu: a public-style bf16 attention kernel's outputs
#            (the constant-folding defect's witness)                                         -> $OUT/bf16/
#   wgmma    python3 -m flashsim.gpu.capture.wgmma: every dense wgmma form on adversarial inputs -> $OUT/wgmma/
#   wgptx    python3 -m flashsim.gpu.capture.wgmma_ptx: descriptor / swizzle / fragment probes   -> $OUT/wgptx/
#   tma      python3 -m flashsim.gpu.capture.tma --isolate: TMA and bulk copies with the driver's maps, each case
#            in a process of its own (a case the GPU faults on is recorded as failed)        -> $OUT/tma/
#   cluster  python3 -m flashsim.gpu.capture.isa --topic cluster: the cluster probes (mapa, DSMEM, barriers,
#            special registers)                                                             -> $OUT/cluster/
#   triton   python3 tools/triton_capture.py capture: Triton's own cubins on the GPU              -> $OUT/triton/
#   tmafault compute-sanitizer memcheck on the TMA cases of $TMA_SKIP alone (a case the GPU faults on)  -> $OUT/tma/
#   decodeprof  benchmarks/experiments/decode_profile/profile.sh: Nsight Compute over one call of each decode row
#            (time, DRAM throughput, occupancy, waves, L2 hit rate)                              -> $OUT/decodeprof/
#   decode   benchmarks/bench_serving.py --decode: the decode rows (every shape, the paged caches) beside FA2 / cuDNN
#                                                                                          -> $OUT/decode/
#   decodesweep  benchmarks/bench_serving.py --decode --sweep: the decode rows beside FA2 / cuDNN with neighbouring
#            tilings and split counts                                                      -> $OUT/decodesweep/
#   tanh     python3 -m flashsim.gpu.capture.tanh: tanh.approx.f32 on every input of binades 117-130, packed for the
#            interpolator analysis (benchmarks/experiments/tanh_interpolator/)             -> $OUT/tanh/
#   serving  benchmarks/serving/run_call.sh $SERVING_STEPS (default: tests bits bench sanitize)  -> $OUT/serving/
#   cutlass  tools/thirdparty_capture.py capture-cutlass: CUTLASS's sm90 GEMM and CuTe's Hopper tutorial built and
#            run on the GPU (carry .thirdparty: `python tools/thirdparty_capture.py stage` first)  -> $OUT/cutlass/
#   flashinfer  tools/thirdparty_capture.py capture-flashinfer: FlashInfer's FA3-style sm90 prefill (5 variants built
#            in parallel, 8 input cases; carry .thirdparty as for cutlass)                   -> $OUT/flashinfer/
#
# A step whose module is absent is skipped and said so; each step has its own time cap; $OUT/summary.txt has one
# line per step (seconds, exit status). Files under $OUT/<step>/ come back (at most two folders down). The tree a call
# carries is limited to 64 MiB: tools/device_slim.sh hold before the call, restore after. The device returns at most
# 8 files: PACK=1 turns each step's folder into $OUT/<step>.tar (the tanh step's own tars, up to 15 MB each, are
# moved up beside it instead of nested).
set -uo pipefail
[[ -n ${OUT:-} ]] || { echo "set OUT" >&2; exit 2; }
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
STEPS=("$@"); [[ ${#STEPS[@]} -eq 0 ]] && STEPS=(bf16 wgmma wgptx tma cluster triton serving)
mkdir -p "$OUT"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/summary.txt" 2>&1
step() {  # step NAME CAP MODULE-OR-FILE COMMAND...
  local name=$1 cap=$2 need=$3; shift 3
  mkdir -p "$OUT/$name"
  if [[ ! -e $need ]]; then echo "$name: skipped ($need absent)" | tee -a "$OUT/summary.txt"; return; fi
  local t0=$(date +%s)
  timeout "$cap" "$@" > "$OUT/$name/log.txt" 2>&1; local rc=$?
  echo "$name: rc $rc, $(( $(date +%s) - t0 )) s" | tee -a "$OUT/summary.txt"; tail -25 "$OUT/$name/log.txt"
}
for s in "${STEPS[@]}"; do
  case $s in
    bf16) step bf16 60 benchmarks/experiments/bf16_attention_rows/run.py \
            python3 benchmarks/experiments/bf16_attention_rows/run.py --gpu "$OUT/bf16" ;;
    wgmma) step wgmma 240 flashsim/gpu/capture/wgmma.py python3 -m flashsim.gpu.capture.wgmma --out "$OUT/wgmma" ;;
    wgptx) step wgptx 120 flashsim/gpu/capture/wgmma_ptx.py python3 -m flashsim.gpu.capture.wgmma_ptx --out "$OUT/wgptx" ;;
    tma) step tma 300 flashsim/gpu/capture/tma.py python3 -m flashsim.gpu.capture.tma --isolate --skip "${TMA_SKIP:-}" \
            --out "$OUT/tma" ;;
    tmafault) step tmafault 120 flashsim/gpu/capture/tma.py compute-sanitizer --tool memcheck \
            python3 -m flashsim.gpu.capture.tma --only "${TMA_SKIP:-}" --out "$OUT/tmafault/run" ;;
    cluster) step cluster 120 kernel/capture/isa/cluster.cu python3 -m flashsim.gpu.capture.isa --topic cluster --out "$OUT/cluster" ;;
    triton) step triton 180 tools/triton_capture.py python3 tools/triton_capture.py capture --out "$OUT/triton" ;;
    serving) step serving 330 benchmarks/serving/run_call.sh env OUT="$OUT/serving" \
            bash benchmarks/serving/run_call.sh ${SERVING_STEPS:-tests bits bench sanitize} ;;
    decodeprof) step decodeprof 240 benchmarks/experiments/decode_profile/profile.sh env OUT="$OUT/decodeprof" \
            bash benchmarks/experiments/decode_profile/profile.sh ;;
    decode) step decode 240 benchmarks/bench_serving.py python3 benchmarks/bench_serving.py --decode \
            --json "$OUT/decode/bench.json" ;;
    decodesweep) step decodesweep 330 benchmarks/bench_serving.py python3 benchmarks/bench_serving.py --decode --sweep \
            --json "$OUT/decodesweep/bench.json" ;;
    tanh) step tanh 240 flashsim/gpu/capture/tanh.py python3 -m flashsim.gpu.capture.tanh --out "$OUT/tanh" ;;
    cutlass) step cutlass 240 .thirdparty python3 tools/thirdparty_capture.py capture-cutlass --sources .thirdparty \
            --out "$OUT/cutlass" ;;
    flashinfer) step flashinfer 300 .thirdparty python3 tools/thirdparty_capture.py capture-flashinfer \
            --sources .thirdparty --out "$OUT/flashinfer" ;;
    *) echo "unknown step $s" >&2 ;;
  esac
done
if [[ ${PACK:-0} == 1 ]]; then
  for s in "${STEPS[@]}"; do
    [[ -d $OUT/$s ]] || continue
    find "$OUT/$s" -maxdepth 1 -name 'tanh_*.tar' -exec mv {} "$OUT/" \;
    tar -C "$OUT" -cf "$OUT/$s.tar" "$s" && rm -rf "${OUT:?}/$s"
  done
  ls -la "$OUT"
fi
