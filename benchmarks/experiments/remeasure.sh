#!/usr/bin/env bash
# On the H200, from the repository root: the experiments whose timings the variant probe voided (it timed every
# variant with its switch off until the sixth round's fix; benchmarks/RESULTS.md, sixth round), measured again:
#     OUT=<dir> bash benchmarks/experiments/remeasure.sh [PART ...]     parts: mbarrier min_blocks lpt persistent
# Measured on 2026-12-01 (each experiment's 2026-12-01/ folder; benchmarks/RESULTS.md, seventh round): the mbarrier
# ring and the longest-first order paid and are now in kernel/flash_fwd.cu. Each patch names the commit it applies to
# on its first line (1c63f30 here); patched_kernel.sh unpacks that commit and each probe runs there, with the Python
# side the patch was measured with (today's configuration builds a different kernel); each switch changes its build.
# About 1.5-2 min a part (persistent: its two variants, about 4 min); two device calls for all of them.
set -euo pipefail
: "${OUT:?set OUT}"
OUT=$(realpath -m "$OUT")
export PYTHONUNBUFFERED=1
PARTS=("$@")
[[ ${#PARTS[@]} -eq 0 ]] && PARTS=(mbarrier min_blocks lpt persistent)
E=benchmarks/experiments
source $E/patched_kernel.sh
mkdir -p "$OUT"

probe() {   # probe PATCH DEFINE TAG PROBE-ARGS...: the patched kernel against the plain one (kernel_variant_probe.py)
  local patch=$1 define=$2 tag=$3; shift 3
  local src
  src=$(patched_kernel "$patch" "/tmp/remeasure_$tag")
  (cd "/tmp/remeasure_$tag/tree" && PYTHONPATH=$PWD python3 $E/kernel_variant_probe.py --source "$src" \
      --define "$define" "$@") 2>&1 | tee -a "$OUT/${tag}_probe.txt"
}

for part in "${PARTS[@]}"; do
  case $part in
    mbarrier)   probe $E/mbarrier_ring/mbarrier_ring.patch FS_MBAR=1 mbar --cases defaults --json "$OUT/mbar.json" ;;
    min_blocks) probe $E/min_blocks/min_blocks.patch FS_MIN_BLOCKS=3 min_blocks --cases min_blocks \
                    --json "$OUT/min_blocks.json" ;;
    lpt)        for shape in 4,16,4096 8,32,2048; do
                  probe $E/lpt/lpt.patch FS_LPT=1 lpt --cases causal --shape $shape --json "$OUT/lpt_${shape//,/x}.json"
                done ;;
    persistent) for v in persistent_dynamic:pdyn persistent_prefetch:pf; do
                  PATCH=$E/${v%%:*}/${v%%:*}.patch TAG=${v##*:} bash $E/run_persistent_variant.sh
                done ;;
    *) echo "unknown part $part (mbarrier min_blocks lpt persistent)" >&2; exit 2 ;;
  esac
done
