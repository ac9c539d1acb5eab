#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/o_staging/run.sh   (about 2-3 min)
# O through shared memory for 16-byte stores (o_staging.patch, switch FS_OSTAGE; README.md here): the probes and
# sanitizers of ../run_switch_variant.sh.
PATCH=benchmarks/experiments/o_staging/o_staging.patch DEFINE=FS_OSTAGE=1 TAG=o_staging \
    exec bash benchmarks/experiments/run_switch_variant.sh
