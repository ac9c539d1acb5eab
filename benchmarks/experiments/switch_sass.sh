#!/usr/bin/env bash
# No GPU needed: static SASS opcode counts of a switch experiment, off and on (tools/sass_ops.py on NVRTC builds),
# then ptxas registers and spill bytes of the defaults at d = 64 / 96 / 128 (f16, f32, f16x2 P@V) on sm_90 and sm_120.
#     bash benchmarks/experiments/switch_sass.sh PATCH NAME [OPS [CONFIG ...]]     (from the repository root)
# PATCH applies to the kernel of the commit its first line names (patched_kernel.sh); NAME is the switch (FS_...), defined to 1
# on top of the patched source for the "on" build. OPS: tools/sass_ops.py --ops (default STG,STS,LDS,LDSM,SYNCS,BAR,
# HMMA,LDGSTS,STL,LDL); CONFIG: KernelConfig.default overrides (default d = 128 with f16 and f32 P@V), on sm_90.
set -euo pipefail
PATCH=${1:?patch} NAME=${2:?switch name} OPS=${3:-STG,STS,LDS,LDSM,SYNCS,BAR,HMMA,LDGSTS,STL,LDL}
shift $(( $# < 3 ? $# : 3 ))
CONFIGS=("$@"); [[ ${#CONFIGS[@]} -eq 0 ]] && CONFIGS=(head_dim=128,pv_accum=f16 head_dim=128,pv_accum=f32)
source benchmarks/experiments/patched_kernel.sh
WORK=$(mktemp -d)
OFF=$(patched_kernel "$PATCH" "$WORK")
cd "$WORK/tree"                  # the patch's own commit: its flashsim and tools/sass_ops.py build what the patch was made for
{ echo "#define $NAME 1"; cat "$OFF"; } > "$WORK/on.cu"
for side in off on; do
  src=$OFF; [[ $side == on ]] && src=$WORK/on.cu
  echo "$NAME $side:"
  PYTHONPATH=$PWD python3 tools/sass_ops.py --arch sm_90 --ops "$OPS" --source "$src" "${CONFIGS[@]}"
done
PYTHONPATH=$PWD python3 - "$OFF" "$NAME" <<'PY'
import sys
from flashsim.config import KernelConfig
from flashsim.gpu.launch import build_kernel
src, name = open(sys.argv[1]).read(), sys.argv[2]
print("ptxas registers / spill bytes, switch off -> on:")
for arch in ("sm_90", "sm_120"):
    for d, acc in ((128, "f16"), (128, "f32"), (128, "f16x2"), (64, "f16"), (64, "f32"), (96, "f32")):
        cfg = KernelConfig.default(arch, head_dim=d, pv_accum=acc)
        off, on = (build_kernel(cfg, arch, source=src, extra_defines={name: v}) for v in (0, 1))
        print(f"  {arch} d={d} {acc:<5} {off.registers} / {off.spill_stores + off.spill_loads} B -> "
              f"{on.registers} / {on.spill_stores + on.spill_loads} B")
PY
rm -rf "$WORK"
