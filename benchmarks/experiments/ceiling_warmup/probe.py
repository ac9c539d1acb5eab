"""Does the first mma.sync ceiling a process measures read low for want of a warm-up? (flashsim.gpu.peak.warm)

    PYTHONPATH=. python3 benchmarks/experiments/ceiling_warmup/probe.py      (on the GPU, first thing in a call: ~10 s)

The m16n8k16 f32 / f16 ceilings (the two `flashsim bench kernel` measures) four times in one process: with no
warm-up, at once again with none, after a 0.5 s warm-up (peak.WARM_S), and after a 2 s one. If the first reads low
and the warmed ones agree, the half second is enough."""

import time

from flashsim.commands.bench import CEILING_KINDS
from flashsim.gpu import peak

kinds = tuple(CEILING_KINDS.values())
print("m16n8k16 ceilings (TFLOP/s), 8 chains per warp, every SM; one process, in this order:")
for label, warm_s in (
    ("cold, no warm-up", 0.0),
    ("again, no warm-up", 0.0),
    ("0.5 s warm-up", 0.5),
    ("2 s warm-up", 2.0),
):
    t0 = time.perf_counter()
    r = peak.measure(kinds=kinds, warm_s=warm_s)
    print(
        f"  {label:<18} "
        + "  ".join(f"{peak.KINDS[k][0]} {r[peak.KINDS[k][0]]['tflops']:6.1f}" for k in kinds)
        + f"   ({time.perf_counter() - t0:.1f} s)",
        flush=True,
    )
