#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/prefetch_next/run.sh   (about 4 min)
# prefetch_next.patch (README.md here), switch FS_PREFETCH_NEXT=2: each block asks L2 for the Q tile and the first
# K / V tile of the block 2 x SMs further in launch order. run_switch_variant.sh (the default set at 4,16,4096 and
# 16,16,1024, the causal set at 4,16,4096, memcheck and racecheck), then the default set at 64,16,512.
# Results: $OUT/prefetch_next_probe.txt, prefetch_next_sanitize.txt, the JSONs.
set -euo pipefail
export PATCH=benchmarks/experiments/prefetch_next/prefetch_next.patch DEFINE=FS_PREFETCH_NEXT=2 TAG=prefetch_next
bash benchmarks/experiments/run_switch_variant.sh
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel "$PATCH" /tmp/variant_prefetch_next_512)
cd /tmp/variant_prefetch_next_512/tree && export PYTHONPATH=$PWD
probe_shapes "$SRC" "$DEFINE" defaults prefetch_next_defaults prefetch_next 64,16,512
