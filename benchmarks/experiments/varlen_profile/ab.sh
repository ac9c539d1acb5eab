#!/usr/bin/env bash
# A kernel change against the build before it, on the GPU, from the repository root:
#     OUT=<dir> BEFORE=<the earlier kernel/flash_fwd.cu> [RUN="<script> <args>"] \
#         bash benchmarks/experiments/varlen_profile/ab.sh
# Two rounds, each the checkout's kernel then BEFORE (copied over kernel/flash_fwd.cu and put back at the end), each in
# a fresh process running RUN --out DIR (default run.py --quick: the varlen batch and the dense sequence of equal work,
# CUDA-graph replays; benchmarks/experiments/decode_bulk/decode_ab.py times the decode rows).
set -uo pipefail
[[ -n ${OUT:-} && -f ${BEFORE:-} ]] || { echo "set OUT and BEFORE (a kernel/flash_fwd.cu)" >&2; exit 2; }
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
cp kernel/flash_fwd.cu "$OUT/after.cu"
cp "$BEFORE" "$OUT/before.cu"
trap 'cp "$OUT/after.cu" kernel/flash_fwd.cu' EXIT
for round in 1 2; do
  for which in after before; do
    cp "$OUT/$which.cu" kernel/flash_fwd.cu
    python3 ${RUN:-benchmarks/experiments/varlen_profile/run.py --quick} --out "$OUT/$which$round" 2>&1 \
      | sed "s/^/$which, round $round: /" | tee -a "$OUT/ab.txt"
  done
done
