"""The emulator against outputs of the real kernel captured on the H200, bit for bit, with no GPU.

tests/data/attn_sm90/*.npz were written by `flashsim verify --save-cases DIR` on the H200: the inputs,
the configuration, and the kernel's O and LSE. flashsim.attention must reproduce every bit of them.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig

DATA = pathlib.Path(__file__).parent / "data" / "attn_sm90"
CASES = sorted(DATA.glob("*.npz"))


@pytest.mark.skipif(not CASES, reason="no H200 attention captures in tests/data/attn_sm90 yet")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_emulator_reproduces_the_h200_bits(path):
    z = np.load(path)
    cfg = KernelConfig(**json.loads(str(z["config"])))
    o, lse = flashsim.attention(z["q"], z["k"], z["v"], config=cfg, causal=cfg.causal, pv_accum=cfg.pv_accum,
                                arch=str(z["arch"]), progress=False)
    o_bad = np.count_nonzero(o.view(np.uint16) != z["o"].view(np.uint16))
    lse_bad = np.count_nonzero(lse.view(np.uint32) != z["lse"].view(np.uint32))
    assert (o_bad, lse_bad) == (0, 0), f"{o_bad} of {o.size} O and {lse_bad} of {lse.size} LSE elements differ"
