#!/usr/bin/env bash
# On the H200, from the repository root: OUT=<dir> bash benchmarks/experiments/persistent_prefetch/run.sh
# The persistent grid with dynamic work plus a prefetch across items (persistent_prefetch.patch, FS_PERSIST = P;
# README.md here): run_persistent_variant.sh's five steps, prefix "pf" (the logs here: its probe timings are void,
# benchmarks/RESULTS.md, sixth round; its checks with FS_PERSIST=3 of each run's first case and its sanitizer runs
# stand). Then: (cd /tmp/variant_pf/tree && PYTHONPATH=. python3 benchmarks/experiments/persistent_prefetch/timing_check.py)
# (persistence checked directly; it reads the patched source at /tmp/variant_pf/kernel/flash_fwd.cu).
PATCH=benchmarks/experiments/persistent_prefetch/persistent_prefetch.patch TAG=pf \
    exec bash benchmarks/experiments/run_persistent_variant.sh
