"""ptxas registers / spill bytes of every d >= 128 default with an f32 O (pv_accum f32, f16x2), O staging off and on
(FS_OSTAGE forced), on sm_90 and sm_120: the evidence for KernelConfig.stage_o's head-dim rule. No GPU (NVRTC).
    python benchmarks/experiments/o_staging/regs_sweep.py > benchmarks/experiments/o_staging/regs_sweep.txt
With --all: every head dim 32-256 and every P@V accumulation (f16 too), bf16 left out (its builds match f16's here)
    python benchmarks/experiments/o_staging/regs_sweep.py --all > benchmarks/experiments/stage_o_wider/regs_all.txt"""

import itertools
import sys

from flashsim.config import KernelConfig
from flashsim.gpu.launch import build_kernel

print("arch d dtype pv_accum tiling(WxMxKVxS) | off: registers/spill | on: registers/spill | stage_o")
ALL = "--all" in sys.argv[1:]
dims = (32, 64, 96, 128, 160, 192, 224, 256) if ALL else (128, 160, 192, 224, 256)
dtypes, accs = (("f16",), ("f16", "f32", "f16x2")) if ALL else (("f16", "bf16"), ("f32", "f16x2"))
for arch, d, dt, pv in itertools.product(("sm_90", "sm_120"), dims, dtypes, accs):
    c = KernelConfig.default(arch, head_dim=d, pv_accum=pv, dtype=dt) if (dt, pv) != ("bf16", "f16x2") else None
    if c is None:
        continue
    out = []
    for on in (0, 1):
        b = build_kernel(c, arch, extra_defines={"FS_OSTAGE": on})
        out.append(f"{b.registers}/{b.spill_stores + b.spill_loads}B")
    print(
        arch,
        d,
        dt,
        pv,
        f"{c.warps}x{c.m_tiles}x{c.kv_tile}x{c.stages}",
        "| off",
        out[0],
        "| on",
        out[1],
        "|",
        int(c.stage_o),
        flush=True,
    )
