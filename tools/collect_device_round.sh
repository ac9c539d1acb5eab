#!/usr/bin/env bash
# Copy what tools/device_round.sh brought back from the H200 into the repository, from the repository root:
#
#     tools/collect_device_round.sh DIR [--sfu-tables] [--date YYYY-MM-DD] [--no-check]
#
# DIR holds what came back from the device's $OUT: summary.txt and round.tar (logs/<step>.txt, json/, captures/),
# round_2.tar, ... (older rounds: logs/ loose beside them).
#   captures (round.tar: captures/)      -> tests/data/   attn_sm90_{defaults,w8m1,specials,f16x2,variants,quant}.npz, mma_sm90.npz,
#                                                          mma_sm90_summary.json, layout_sm90.npz, sfu_sample_sm90.npz
#   ptx_isa/<topic>_sm90.npz             -> tests/data/ptx_isa/ (flashsim.ptx's silicon probes)
#   sfu_tables_sm90.npz                  -> flashsim/data/sfu/ only with --sfu-tables (package data: ship new tables
#                                           only when the calibration itself changed)
#   logs/*.txt, json/*.json, summary.txt -> benchmarks/logs/<date>/  (<date>: the round's, from summary.txt;
#                                           the summary as summary_<steps>.txt, one per device call)
# Then it stamps the copied captures with their compiled fingerprint (tools/stamp_captures.py: each capture's recorded
# sources and defines must equal this checkout's; run it in the checkout the round ran from, with the pinned NVRTC of
# .ci/constraints.txt), runs tests/test_drift.py (no GPU) unless --no-check, and prints what to commit. Nothing is
# committed.
set -euo pipefail

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit "$1"; }
DIR="" SFU_TABLES=0 DATE="" CHECK=1
while [[ $# -gt 0 ]]; do
  case $1 in
    -h|--help) usage 0 ;;
    --sfu-tables) SFU_TABLES=1 ;;
    --date) DATE=${2:?--date needs YYYY-MM-DD}; shift ;;
    --no-check) CHECK=0 ;;
    -*) echo "unknown option $1" >&2; usage 2 ;;
    *) [[ -z $DIR ]] || usage 2; DIR=$1 ;;
  esac
  shift
done
[[ -n $DIR && -d $DIR ]] || { echo "give the folder that came back from the device" >&2; usage 2; }
[[ -f flashsim/__init__.py && -d tests/data ]] || { echo "run from the repository root" >&2; exit 2; }

if [[ -z $DATE ]]; then
  DATE=$(sed -n 's/^date: \([0-9-]*\)$/\1/p' "$DIR/summary.txt" 2>/dev/null | head -1)
  DATE=${DATE:-$(date -u +%Y-%m-%d)}
fi
LOGS=benchmarks/logs/$DATE
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for t in "$DIR"/round*.tar "$DIR"/captures*.tar "$DIR"/json*.tar; do   # round.tar, round_2.tar, ... (pack in device_round.sh)
  [[ -f $t ]] && tar -C "$WORK" -xf "$t"
done

CAPTURES=(attn_sm90_defaults.npz attn_sm90_w8m1.npz attn_sm90_specials.npz attn_sm90_f16x2.npz attn_sm90_variants.npz attn_sm90_quant.npz
          mma_sm90.npz mma_sm90_summary.json
          layout_sm90.npz sfu_sample_sm90.npz)
copied=() copied_captures=()
for f in "${CAPTURES[@]}"; do
  if [[ -f $WORK/captures/$f ]]; then
    cp "$WORK/captures/$f" tests/data/ && copied+=("tests/data/$f") && copied_captures+=("tests/data/$f")
  fi
done
for f in "$WORK"/captures/*; do     # anything else the round captured
  [[ -e $f ]] || continue
  name=$(basename "$f")
  [[ " ${CAPTURES[*]} " == *" $name "* ]] && continue
  if [[ $name == ptx_isa && -d $f ]]; then   # the silicon probes of flashsim.ptx (no compiled stamp: each
    mkdir -p tests/data/ptx_isa               # records its PTX's sha256, checked by tests/test_ptx_silicon.py)
    cp "$f"/*.npz tests/data/ptx_isa/ && copied+=(tests/data/ptx_isa/*.npz)
  elif [[ $name == sfu_tables_sm90.npz && $SFU_TABLES == 1 ]]; then
    cp "$f" flashsim/data/sfu/ && copied+=("flashsim/data/sfu/$name")
  elif [[ $name == sfu_tables_sm90.npz ]]; then
    echo "not copied: $name (package data: pass --sfu-tables to ship it)"
  else
    echo "not copied: $name (not a known capture)"
  fi
done

mkdir -p "$LOGS"
if [[ -f $DIR/summary.txt ]]; then   # one summary per device call: summary_<its steps>.txt
  steps=$(sed -n 's/^steps: \([a-z ]*\) (budget.*$/\1/p' "$DIR/summary.txt" | head -1 | tr ' ' '-')
  cp "$DIR/summary.txt" "$LOGS/summary_${steps:-round}.txt" && copied+=("$LOGS/summary_${steps:-round}.txt")
fi
for f in "$DIR"/logs/*.txt "$WORK"/logs/*.txt "$WORK"/json/*.json; do   # logs: in round.tar (older rounds: loose)
  [[ -f $f ]] && cp "$f" "$LOGS/" && copied+=("$LOGS/$(basename "$f")")
done
[[ ${#copied[@]} -gt 0 ]] || { echo "nothing to copy in $DIR"; exit 1; }
printf 'copied %s\n' "${copied[@]}"

if [[ ${#copied_captures[@]} -gt 0 ]]; then
  python tools/stamp_captures.py "${copied_captures[@]}" || {
    echo "tools/stamp_captures.py refused or failed: see above (a capture of other sources: re-capture it)"; exit 1; }
fi
if [[ $CHECK == 1 ]]; then
  python -m pytest -q -p no:cacheprovider tests/test_drift.py || {
    echo "tests/test_drift.py fails: the captures do not match the sources here (see above)"; exit 1; }
fi
echo "next: python -m pytest -q tests/test_emulator_silicon.py tests/test_mma_silicon.py tests/test_layout_silicon.py tests/test_sfu.py"
echo "      then review and commit: tests/data $LOGS$([[ $SFU_TABLES == 1 ]] && echo " flashsim/data/sfu" || true)"
