#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> [ABLATE="1 2 4 3 7"] bash benchmarks/experiments/ablation/run.sh
# (about 2 min). Where the d = 128 / 64 defaults' time goes: ablation.patch (README.md here) leaves parts of the KV
# loop out by the bits of FS_ABLATE (1 the online softmax and O rescale, 2 the K / V refill copies, 4 P V), and
# kernel_variant_probe.py times each ablated build against the full kernel ("plain" = this checkout's kernel) in
# alternating rounds at 4,16,4096. The ablated builds compute a wrong O by design: their checks print DIFFERS.
# Never a candidate to land; no sanitizer run. Results: $OUT/ablation_probe.txt, ablation_<value>_4x16x4096.json.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/ablation/ablation.patch /tmp/variant_ablation)
for ab in ${ABLATE:-1 2 4 3 7}; do
  probe_shapes "$SRC" FS_ABLATE=$ab ablation ablation_$ab ablation 4,16,4096
done
