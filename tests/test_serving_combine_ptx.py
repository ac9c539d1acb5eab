"""flash_combine (kernel/flash_fwd.cu, split builds) run by flashsim.ptx on the CPU against the emulator's combine
(flashsim.emulator.kernel_program.combine), bit for bit, under racecheck: parts with empty splits (-inf LSE), a row
whose every part is empty, NaN and huge LSEs, and more parts than a warp has lanes (the staging loops twice)."""

from __future__ import annotations

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim import provenance
from flashsim.constants import COMBINE_WARPS
from flashsim.emulator.kernel_program import combine
from flashsim.gpu.build import kernel_dir
from flashsim.problem import resolve_options
from flashsim.serving.problem import prepare_kvcache

pytestmark = [pytest.mark.nvrtc, pytest.mark.sass]


@pytest.fixture(scope="module")
def kernel():
    q = np.zeros((2, 1, 8, 64), np.float16)
    k = np.zeros((2, 512, 2, 64), np.float16)
    opts = resolve_options(None, None, None, None, None, None, "bnhd", None)
    prob = prepare_kvcache(q, k, k, None, None, 4, opts=opts, arch="sm_90", sm_count=132)
    cfg = prob.config
    assert cfg.split
    src = (kernel_dir() / "flash_fwd.cu").read_text()
    return P.compile(src, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)).kernel("flash_combine"), cfg


def _parts(rng, splits, rows, d):
    lse = (rng.standard_normal((splits, rows)) * 4).astype(np.float32)
    lse[rng.random((splits, rows)) < 0.25] = -np.inf  # empty splits
    lse[:, 0] = -np.inf  # a row without keys
    lse[1, 1] = np.nan
    lse[0, 2] = 80.0  # a part that dominates
    o = (rng.standard_normal((splits, rows, d)) * np.exp2(rng.integers(-8, 8, (splits, rows, 1)))).astype(np.float32)
    return lse, o


@pytest.mark.parametrize("splits", [3, 40])
def test_combine_kernel_equals_the_emulator(kernel, splits):
    kern, cfg = kernel
    d, heads, nq, batch = cfg.head_dim, 8, 1, 2
    rows = batch * nq * heads
    lse_p, o_p = _parts(np.random.default_rng(splits), splits, rows, d)
    o = np.zeros((rows, d), np.float16)
    lse = np.zeros(rows, np.float32)
    args = [o_p, lse_p, o, lse, np.int32(splits), np.int32(rows), np.int32(nq), np.int32(heads)]
    P.launch(kern, -(-rows // COMBINE_WARPS), 32 * COMBINE_WARPS, args, check="racecheck")
    o_ref, lse_ref = combine(lse_p, o_p, "sm_90", np.float16)
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_ref).view(np.uint16))
    # the kernel writes LSE in (b, h, i) order; rows are (b, i, h)
    want = np.asarray(lse_ref, np.float32).reshape(batch, nq, heads).transpose(0, 2, 1).reshape(-1)
    np.testing.assert_array_equal(lse.view(np.uint32), want.view(np.uint32))
