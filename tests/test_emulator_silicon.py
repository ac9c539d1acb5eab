"""The emulator against outputs of the real kernel captured on the H200, bit for bit, with no GPU.

tests/data/attn_sm90_*.npz were written by `flashsim verify --save-cases FILE` on the H200 (tools/device_verify.sh
with the 8-warp x 1-tile shape, tools/device_final.sh with the sm_90 defaults, 4 warps x 2 m16 tiles):
per case the configuration, the kernel's O and LSE, and the (kind, shape, seed) that regenerate its inputs
(checked against a sha256 of the inputs the GPU saw). flashsim.attention must reproduce every bit.
"""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig
from flashsim.commands.verify import inputs_sha256, make_case_inputs

DATA = pathlib.Path(__file__).parent / "data"


def _cases():
    out = []
    for path in sorted(DATA.glob("attn_sm90_*.npz")):
        keys = {key.split("_")[0] for key in np.load(path).files}
        out += [(path.name, c) for c in sorted(keys, key=lambda c: int(c[1:]))]
    return out


CASES = _cases()


@pytest.mark.skipif(not CASES, reason="no H200 attention captures in tests/data/attn_sm90_*.npz yet")
@pytest.mark.parametrize("file, case", CASES, ids=[f"{f[10:-4]}-{c}" for f, c in CASES])
def test_emulator_reproduces_the_h200_bits(file, case):
    z = np.load(DATA / file)
    meta = json.loads(str(z[f"{case}_meta"]))
    cfg = KernelConfig(**meta["config"])
    q, k, v = make_case_inputs(meta["kind"], *meta["shape"], meta["seed"])
    assert inputs_sha256(q, k, v) == meta["inputs_sha256"], "regenerated inputs differ from those the GPU saw"
    o, lse = flashsim.attention(q, k, v, config=cfg, causal=cfg.causal,
                                pv_accum=cfg.pv_accum, arch=meta["arch"], progress=False)
    o_bad = np.count_nonzero(o.view(np.uint16) != z[f"{case}_o"].view(np.uint16))
    lse_bad = np.count_nonzero(lse.view(np.uint32) != z[f"{case}_lse"].view(np.uint32))
    assert (o_bad, lse_bad) == (0, 0), (f"{meta['name']}: {o_bad} of {o.size} O and {lse_bad} of {lse.size} "
                                        "LSE elements differ")
