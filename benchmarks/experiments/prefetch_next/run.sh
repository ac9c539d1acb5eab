#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/prefetch_next/run.sh   (about 4 min)
# prefetch_next.patch (README.md here), switch FS_PREFETCH_NEXT=2: each block asks L2 for the Q tile and the first
# K / V tile of the block 2 x SMs further in launch order.
# run_switch_variant.sh: the default set at 4,16,4096, 16,16,1024 and 64,16,512 (a block has the fewest tiles there),
# the causal set at 4,16,4096, memcheck and racecheck. Results: $OUT/prefetch_next_probe.txt,
# prefetch_next_sanitize.txt, the JSONs.
set -euo pipefail
PATCH=benchmarks/experiments/prefetch_next/prefetch_next.patch \
    DEFINE=FS_PREFETCH_NEXT=2 TAG=prefetch_next EXTRA_SHAPES=64,16,512 bash benchmarks/experiments/run_switch_variant.sh
