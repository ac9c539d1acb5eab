#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> [MODES="1 2"] [SHAPES="4,16,4096"] bash benchmarks/experiments/pingpong_ring/run.sh
# (about 1 min a mode and shape). Ping-pong on today's kernel (README.md here): kernel_variant_probe.py times the
# 8-warp tilings with FS_PINGPONG on against themselves without it and against the default, in alternating rounds;
# every variant build is first checked bit for bit against the emulator (a schedule change: it must be bit-exact).
# Each probe runs under `timeout` (a turn protocol that deadlocks would hang the GPU otherwise).
# Results: $OUT/pingpong_ring_probe.txt, pingpong_<mode>_<shape>.json.
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
source benchmarks/experiments/patched_kernel.sh
SRC=$(patched_kernel benchmarks/experiments/pingpong_ring/pingpong_ring.patch /tmp/variant_pingpong_ring)
for mode in ${MODES:-1 2}; do
  # shellcheck disable=SC2086
  timeout "${PROBE_TIMEOUT:-240}" bash -c "source benchmarks/experiments/probe_shapes.sh;
    probe_shapes '$SRC' FS_PINGPONG=$mode pingpong_ring pingpong_$mode pingpong_ring ${SHAPES:-4,16,4096}"
done
