#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/joint_rescale/run.sh   (2-3 min)
# One warp vote and one O rescale per KV tile for all m16 tiles, after all their softmaxes (joint_rescale.patch,
# switch FS_JOINT_RESCALE; README.md here): the probes and sanitizers of ../run_switch_variant.sh (its d = 64 rows are
# controls: the skip, and so the switch, is off below d = 128).
PATCH=benchmarks/experiments/joint_rescale/joint_rescale.patch DEFINE=FS_JOINT_RESCALE=1 TAG=joint_rescale \
    exec bash benchmarks/experiments/run_switch_variant.sh
