#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> [CYCLES="15000 40000"] [PATCH=stagger_smid.patch] bash benchmarks/experiments/stagger/run.sh
# (about 2 min). Whether a block's fixed cost is lost because an SM's two blocks run in step: stagger.patch (README.md
# here) makes the first wave's second block on each SM (linear block index in [132, 264)) wait FS_STAGGER_CYCLES SM
# cycles before it starts, and kernel_variant_probe.py times it against the plain kernel in alternating rounds at
# 16,16,1024 and 4,16,4096. The same arithmetic: every check must print "bit-exact".
# PATCH=stagger_smid.patch picks the delayed block of each SM by %smid instead (placement.py showed the linear
# index does not). Results: $OUT/stagger_probe.txt, stagger_<cycles>_<shape>.json.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel "benchmarks/experiments/stagger/${PATCH:-stagger.patch}" /tmp/variant_stagger)
for c in ${CYCLES:-15000 40000}; do
  probe_shapes "$SRC" FS_STAGGER_CYCLES=$c stagger stagger_$c stagger 16,16,1024 4,16,4096
done
