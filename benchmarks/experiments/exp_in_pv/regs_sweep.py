"""ptxas registers / spill bytes of the builds exp_in_pv.patch touches (d >= 128: the builds with the rescale vote;
the plain f16 / f32 P V paths), switch off and on, on sm_90 and sm_120: the evidence for KernelConfig.exp_in_pv's rule.
No GPU (NVRTC). SOURCE: the patched kernel (patched_kernel.sh), or today's kernel once the switch landed.
    PYTHONPATH=. python benchmarks/experiments/exp_in_pv/regs_sweep.py SOURCE \
        > benchmarks/experiments/exp_in_pv/regs_sweep.txt"""

import itertools
import sys

from flashsim.config import KernelConfig
from flashsim.gpu.launch import build_kernel

src = open(sys.argv[1]).read()
print("arch d dtype pv_accum quant causal softcap tiling(WxMxKVxS) | off: registers/spill | on: registers/spill")
VARIANTS = [
    dict(dtype="f16", pv_accum="f16"),
    dict(dtype="f16", pv_accum="f32"),
    dict(dtype="bf16", pv_accum="f32"),
    dict(dtype="f16", pv_accum="f16", quant="int8"),
    dict(dtype="f16", pv_accum="f32", quant="int8"),
]
for arch, d, var, causal in itertools.product(("sm_90", "sm_120"), (128, 160, 192, 224, 256), VARIANTS, (False, True)):
    for softcap in (False, True) if d == 128 and "quant" not in var else (False,):
        c = KernelConfig.default(arch, head_dim=d, causal=causal, softcap=softcap, **var)
        out = []
        for on in (0, 1):
            b = build_kernel(c, arch, source=src, extra_defines={"FS_EXP_IN_PV": on})
            out.append(f"{b.registers}/{b.spill_stores + b.spill_loads}B")
        print(
            arch,
            d,
            c.dtype,
            c.pv_accum,
            c.quant,
            int(causal),
            int(softcap),
            f"{c.warps}x{c.m_tiles}x{c.kv_tile}x{c.stages}",
            "| off",
            out[0],
            "| on",
            out[1],
            flush=True,
        )
