#!/usr/bin/env bash
# The scan engine of the JAX backend on the H200 under three XLA flag sets, for three loop structures of
# tools/jax_gpu_variants.py (N = 16384, d = 128, one head, f32 P@V). From the repository root, on a GPU machine:
#     bash benchmarks/experiments/jax_xla_flags/run.sh
# Log: benchmarks/logs/2026-11-30/jax_gpu_flags.txt (taken when this script was tools/_flags_probe.sh).
for f in "" "--xla_gpu_enable_command_buffer=+WHILE,+CONDITIONAL" "--xla_gpu_enable_while_loop_double_buffering=true"; do
  echo "== XLA_FLAGS='$f'"; XLA_FLAGS="$f" PYTHONPATH=. timeout 150 python3 tools/jax_gpu_variants.py --n 16384 --only base,unroll+8,base+4 --no-parts 2>&1 | grep -v -i warn | tail -4
done
