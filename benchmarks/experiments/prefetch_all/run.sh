#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/prefetch_all/run.sh   (about 4 min)
# prefetch_all.patch (README.md here), switch FS_PREFETCH_ALL: the prologue fills every ring slot, the last one
# included, instead of leaving it to the refill after tile 0's Q K^T.
# run_switch_variant.sh: the default set at 4,16,4096, 16,16,1024 and 64,16,512 (a block has the fewest tiles there),
# the causal set at 4,16,4096, memcheck and racecheck. Results: $OUT/prefetch_all_probe.txt, prefetch_all_sanitize.txt,
# the JSONs.
set -euo pipefail
PATCH=benchmarks/experiments/prefetch_all/prefetch_all.patch \
    DEFINE=FS_PREFETCH_ALL=1 TAG=prefetch_all EXTRA_SHAPES=64,16,512 bash benchmarks/experiments/run_switch_variant.sh
