#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/persistent/run.sh
# A persistent grid (persistent.patch, FS_PERSIST = P): the first P CTAs stay resident and loop over the work items
# c, c + P, ... (causal: longest first), the others exit at once; no prefetch across items. The logs here were made
# by an earlier form of this script (steps 1, 2 and 5 of run_persistent_variant.sh, prefix "persist") with the probe
# whose variant timings are void (benchmarks/RESULTS.md, sixth round).
PATCH=benchmarks/experiments/persistent/persistent.patch TAG=persist \
    exec bash benchmarks/experiments/run_persistent_variant.sh
