#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/ablation/run.sh   (about 2-3 min)
# Where the d = 128 / 64 defaults' time goes: ablation.patch (README.md here) leaves parts of the KV loop out by the
# bits of FS_ABLATE (1 the online softmax and O rescale, 2 the K / V refill copies, 4 P V), and
# kernel_variant_probe.py times each ablated build against the full kernel ("plain" = this checkout's kernel) in
# alternating rounds at 4,16,4096. The ablated builds compute a wrong O by design: their checks print DIFFERS.
# Never a candidate to land; no sanitizer run. Results: $OUT/ablation_probe.txt and one JSON per FS_ABLATE value.
set -euo pipefail
: "${OUT:?set OUT}"
OUT=$(realpath -m "$OUT") && mkdir -p "$OUT"
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/ablation/ablation.patch /tmp/variant_ablation)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
P=benchmarks/experiments/kernel_variant_probe.py
for ab in ${ABLATE:-1 2 4 3 5 7}; do
  echo "\$ python3 $P --source <ablation.patch on 669fee1> --define FS_ABLATE=$ab --cases ablation --shape 4,16,4096" \
      | tee -a "$OUT/ablation_probe.txt"
  python3 $P --source "$SRC" --define FS_ABLATE=$ab --cases ablation --shape 4,16,4096 \
      --json "$OUT/ablation_$ab.json" 2>&1 | tee -a "$OUT/ablation_probe.txt"
done
