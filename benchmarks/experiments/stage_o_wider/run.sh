#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/stage_o_wider/run.sh   (about 3 min)
# O staged for 16-byte stores (FS_OSTAGE=1, no patch: the checkout's kernel/flash_fwd.cu) in the builds
# KernelConfig.stage_o left out (eighth round's rule), against the same builds without it, in alternating rounds, each
# variant build first checked bit for bit against the emulator (README.md here); then compute-sanitizer memcheck and
# racecheck on one small launch of each (d, P@V) of the set. Results: $OUT/stage_o_wider_probe.txt, _sanitize.txt and
# the JSONs. Bring $OUT back as it is (its files are small).
set -euo pipefail
source benchmarks/experiments/probe_shapes.sh
probe_shapes kernel/flash_fwd.cu FS_OSTAGE=1 stage_o_wider stage_o_wider stage_o_wider 4,16,4096 16,16,1024
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  "$CS" --tool $tool --error-exitcode 1 python3 benchmarks/experiments/kernel_variant_probe.py \
      --source kernel/flash_fwd.cu --define FS_OSTAGE=1 --cases stage_o_wider --one --json /dev/null 2>&1 \
      | tee -a "$OUT/stage_o_wider_sanitize.txt"
done
