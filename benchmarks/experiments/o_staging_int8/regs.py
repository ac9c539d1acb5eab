"""ptxas registers / spill bytes of the INT8 / FP8 builds (and two f16 controls) with today's kernel, the patched one
with its switch off, and on (FS_OSTAGE_Q8=1), on sm_90 and sm_120. No GPU (NVRTC). From the repository root:
    python benchmarks/experiments/o_staging_int8/regs.py > benchmarks/experiments/o_staging_int8/regs.txt"""

import pathlib
import subprocess
import sys
import tempfile

from flashsim.config import KernelConfig
from flashsim.gpu.launch import build_kernel

here = pathlib.Path(__file__).parent
with tempfile.TemporaryDirectory() as tmp:
    out = subprocess.run(
        [
            "bash",
            "-c",
            f"source benchmarks/experiments/patched_kernel.sh && patched_kernel "
            f"{here / 'o_staging_int8.patch'} {tmp}/v",
        ],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(out.stderr)
    patched = pathlib.Path(out.stdout.strip()).read_text()
rows = [
    ("int8", "f32", (4, 2, 32, 3)),
    ("int8", "f32", (4, 2, 64, 2)),
    ("int8", "f16x2", (4, 2, 64, 2)),
    ("int8", "f16", (4, 2, 64, 2)),
    ("int8-fp8", "f32", (4, 2, 32, 2)),
    ("int8-fp8", "f16x2", (4, 2, 32, 2)),
    ("none", "f32", (4, 2, 64, 2)),
    ("none", "f16", (4, 2, 64, 2)),
]
print("arch quant pv_accum tiling | today | patched, switch off | on   (registers / spill bytes)")
for arch in ("sm_90", "sm_120"):  # sm_90: the tilings above; sm_120: its default of each (quant, P@V)
    for quant, pv, t in rows if arch == "sm_90" else dict.fromkeys((q, a, None) for q, a, _ in rows):
        if arch == "sm_90":
            c = KernelConfig(
                head_dim=128, pv_accum=pv, quant=quant, warps=t[0], m_tiles=t[1], kv_tile=t[2], stages=t[3]
            )
        else:
            c = KernelConfig.default("sm_120", head_dim=128, pv_accum=pv, quant=quant)
        r = []
        for src, on in ((None, 0), (patched, 0), (patched, 1)):
            b = build_kernel(c, arch, source=src, extra_defines={"FS_OSTAGE_Q8": 1} if on else None)
            r.append(f"{b.registers}/{b.spill_stores + b.spill_loads}")
        print(arch, quant, pv, f"{c.warps}x{c.m_tiles}x{c.kv_tile}x{c.stages}", "|", " | ".join(r), flush=True)
