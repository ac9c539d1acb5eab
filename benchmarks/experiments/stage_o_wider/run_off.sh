#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/stage_o_wider/run_off.sh   (about 2 min)
# The other side of the ninth round's KernelConfig.stage_o rule: its defaults at d = 160 and 224 f16, staged by the
# rule without a timing of their own, against the same builds unstaged (--define FS_OSTAGE=0), alternating rounds,
# each build checked bit for bit first (d = 192 f16 a control, measured staged in run.sh's rounds). "variant" is the
# unstaged build: variant / default < 1 means the staging pays. Results: $OUT/stage_o_off_probe.txt and the JSONs.
set -euo pipefail
: "${OUT:?set OUT}"
OUT=$(realpath -m "$OUT") && mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
P=benchmarks/experiments/kernel_variant_probe.py
ARGS=(--source kernel/flash_fwd.cu --define FS_OSTAGE=0 --cases stage_o_off)
for shape in 4,16,4096 16,16,1024; do
  echo "\$ python3 $P ${ARGS[*]} --shape $shape" | tee -a "$OUT/stage_o_off_probe.txt"
  python3 $P "${ARGS[@]}" --shape $shape --json "$OUT/stage_o_off_${shape//,/x}.json" 2>&1 \
      | tee -a "$OUT/stage_o_off_probe.txt"
done
