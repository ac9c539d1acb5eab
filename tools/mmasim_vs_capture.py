"""CPU: mmasim (PyPI, arch "Hopper") on every mma of the H200 capture tests/data/mma_sm90.npz, bit for bit.

Usage (repo root, with the test extras installed): python3 tools/mmasim_vs_capture.py
Run on 2026-11-29: 0 differing outputs of 7,241,728 (f32.f16.f16.f32 1,146,880; f16.f16.f16.f16 1,277,952;
f32.bf16.bf16.f32 4,816,896, about 2 minutes). CI runs a 24-mma-per-category sample (tests/test_mma_mmasim.py).
"""

import pathlib
import sys
import time

import numpy as np
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
from test_mma_mmasim import bits, mmasim_mma  # noqa: E402

from flashsim.gpu.capture import mma as cap  # noqa: E402

torch.set_num_threads(1)
capture = cap.load_capture(pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "mma_sm90.npz")
t0 = time.time()
status = 0
for type_name, res in capture.items():
    t = cap.TYPES[type_name]
    bad_total = n_total = 0
    for i, name in enumerate(res["names"]):
        for m in np.flatnonzero(res["category"] == i):
            d = mmasim_mma(
                "sm_90",
                type_name,
                res["a"][m].view(t.in_dtype),
                res["b"][m].view(t.in_dtype),
                res["c"][m].view(t.c_dtype),
            )
            bad = int((bits(d) != res["d"][m]).sum())
            if bad:
                print(f"{type_name} {name} mma {m}: {bad} outputs differ")
            bad_total += bad
            n_total += d.size
    status |= bad_total > 0
    print(f"{type_name}: mmasim differs from the H200 on {bad_total} of {n_total} outputs ({time.time() - t0:.0f} s)")
sys.exit(status)
