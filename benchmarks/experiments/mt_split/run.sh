#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/mt_split/run.sh   (about 2 min)
# mt_split.patch (README.md here), switch FS_MT_SPLIT: kernel_variant_probe.py times the patched kernel with the
# switch on against this checkout's kernel ("plain"), alternating rounds, at 4,16,4096 and 16,16,1024, each variant
# build first checked bit for bit against the emulator. No sanitizer run: it runs before landing, if it pays.
# Results: $OUT/mt_split_probe.txt and the JSONs.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/mt_split/mt_split.patch /tmp/variant_mt_split)
probe_shapes "$SRC" FS_MT_SPLIT=1 mt_split mt_split mt_split 4,16,4096 16,16,1024
