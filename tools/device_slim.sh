#!/usr/bin/env bash
# The working tree a device call carries is limited to 64 MiB (tracked files included), and the stored captures alone
# come near it. Before a device call whose steps do not read them, hold the big captures outside the checkout; after
# it, put them back (the files are moved, never changed; git status shows them deleted in between):
#
#     tools/device_slim.sh hold        # moves tests/data's attention, k32, SFU-sample and FlashInfer captures to $HOLD
#     tools/device_slim.sh restore     # moves them back
#
# HOLD defaults to /tmp/flashsim-device-hold. The captures' own re-capture steps (tools/device_round.sh captures,
# verify --replay) need them: do not hold them for those.
set -euo pipefail
cd "$(dirname "$0")/.."
HOLD=${HOLD:-/tmp/flashsim-device-hold}
FILES=(tests/data/attn_sm90_*.npz tests/data/mma_k32_sm90.npz tests/data/sfu_approx_sample_sm90.npz
       tests/data/thirdparty/flashinfer_*.npz)
case ${1:-} in
  hold)
    for f in "${FILES[@]}"; do [[ -e $f ]] && mkdir -p "$(dirname "$HOLD/$f")" && mv "$f" "$HOLD/$f"; done
    echo "held $(find "$HOLD/tests" -type f | wc -l) files in $HOLD; tracked files now $(git ls-files -z | xargs -0 cat 2>/dev/null | wc -c) bytes" ;;
  restore)
    [[ -d $HOLD/tests/data ]] || { echo "nothing held in $HOLD" >&2; exit 1; }
    (cd "$HOLD" && find tests -type f) | while read -r f; do mv "$HOLD/$f" "$f"; done
    echo "restored; git status: $(git status --short tests/data | wc -l) changed paths in tests/data" ;;
  *) echo "usage: tools/device_slim.sh hold|restore" >&2; exit 2 ;;
esac
