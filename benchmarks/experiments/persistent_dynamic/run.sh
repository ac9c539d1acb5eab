#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/persistent_dynamic/run.sh
# A persistent grid with dynamic work (persistent_dynamic.patch, FS_PERSIST = P): the first P CTAs stay resident, run
# their own item and then draw the next from a global counter until none is left (causal: longest first); the other
# CTAs exit at once; no prefetch across items. The logs here were made by an earlier form of this script (steps 1, 2
# and 5 of run_persistent_variant.sh, prefix "pdyn") with the probe whose variant timings are void (RESULTS, sixth round).
PATCH=benchmarks/experiments/persistent_dynamic/persistent_dynamic.patch TAG=pdyn \
    exec bash benchmarks/experiments/run_persistent_variant.sh
