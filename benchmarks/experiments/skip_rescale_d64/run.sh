#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/skip_rescale_d64/run.sh   (2-3 min)
# The warp-uniform skip of a unit O rescale below d = 128 too (skip_rescale_d64.patch, switch FS_SKIP_ALL_D;
# README.md here): the probes and sanitizers of ../run_switch_variant.sh (its d = 128 rows are controls: the switch
# changes nothing there).
PATCH=benchmarks/experiments/skip_rescale_d64/skip_rescale_d64.patch DEFINE=FS_SKIP_ALL_D=1 TAG=skip_d64 \
    exec bash benchmarks/experiments/run_switch_variant.sh
