"""Is the persistent build really persistent? Times one small problem (1 x 4 x 1024 x 128, 32 work items) with the
plain kernel and with FS_PERSIST = 3 / 264 / 1, and compares O bit for bit:
3 resident CTAs must take many times as long as 32 CTAs.

    (after run.sh's patch step) PYTHONPATH=. python3 benchmarks/experiments/persistent_prefetch/timing_check.py
"""

import sys

import numpy as np
import torch

sys.path.insert(0, ".")
from flashsim import gpu
from flashsim.commands.bench import cuda_time
from flashsim.config import KernelConfig
from flashsim.gpu import launch

src = open("/tmp/variant_pf/kernel/flash_fwd.cu").read()  # run.sh's patched source
plain = launch.build_kernel
q, k, v = (torch.randn(1, 4, 1024, 128, device="cuda", dtype=torch.float16) for _ in range(3))
cfg = KernelConfig.default("sm_90", head_dim=128, pv_accum="f16")
for name, defs in (
    ("plain", None),
    ("P=3", {"FS_PERSIST": 3}),
    ("P=264", {"FS_PERSIST": 264}),
    ("P=1", {"FS_PERSIST": 1}),
):
    launch.build_kernel = (lambda c, a, d=defs: plain(c, a, source=src, extra_defines=d)) if defs else plain
    launch.clear_caches()
    go, (do, dl), prob = gpu.prepared_launch(q, k, v, config=cfg)
    go(sync=True)
    o = do.cpu().numpy().copy()  # torch inputs: torch outputs
    ms = cuda_time(lambda: go(sync=False), 5, 3)[0]  # device ms per call
    if name == "plain":
        ref = o
    print(
        name,
        f"{ms * 1e3:.1f} us per call",
        "same O as plain:",
        np.array_equal(o.view(np.uint16), ref.view(np.uint16)),
        flush=True,
    )
