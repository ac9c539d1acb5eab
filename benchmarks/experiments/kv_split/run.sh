#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/kv_split/run.sh   (about 2-3 min)
# K and V of a ring slot on their own mbarriers (kv_split.patch, switch FS_KV_SPLIT; README.md here): the probes and
# sanitizers of ../run_switch_variant.sh.
PATCH=benchmarks/experiments/kv_split/kv_split.patch DEFINE=FS_KV_SPLIT=1 TAG=kv_split \
    exec bash benchmarks/experiments/run_switch_variant.sh
