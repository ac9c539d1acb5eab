"""Warp register file and shuffles: PTX shfl.sync semantics checked against the CUDA guide's wording."""

import ml_dtypes
import numpy as np
import pytest

from flashsim.layout import fragments as F
from flashsim.layout import regfile as R

LANE = np.arange(32)
WIDTHS = (1, 2, 4, 8, 16, 32)


def lane_values(batch=()):
    """Distinct raw words per lane and register, so a shuffle's source lane can be read back."""
    return (
        np.arange(32, dtype=np.uint32)[:, None] * 0x10001
        + np.arange(3, dtype=np.uint32) * 0x100
        + np.zeros(batch + (1, 1), np.uint32)
    )


def source(out):
    return (out[..., 0] // 0x10001).astype(np.int64)


# The CUDA C++ Programming Guide, "Warp Shuffle Functions", describes each __shfl_*_sync for a width w:
# the warp is split into groups of w lanes; xor may read an earlier group but reading a later one
# returns the caller's own value; idx reads srcLane % w inside the caller's group; up/down return
# the caller's own value when the source falls outside its group. Those sentences, as code:


def guide_xor(mask, w):
    j = LANE ^ mask
    return np.where(j < (LANE // w) * w + w, j, LANE)


def guide_idx(src, w):
    return (LANE // w) * w + np.asarray(src) % w


def guide_up(delta, w):
    j = LANE - delta
    return np.where(j >= (LANE // w) * w, j, LANE)


def guide_down(delta, w):
    j = LANE + delta
    return np.where(j < (LANE // w) * w + w, j, LANE)


@pytest.mark.parametrize("w", WIDTHS)
def test_shuffles_follow_the_cuda_guide(w):
    vals = lane_values()
    for k in range(32):
        assert np.array_equal(source(R.shfl_xor(vals, k, w)), guide_xor(k, w)), ("xor", k)
        assert np.array_equal(source(R.shfl_idx(vals, k, w)), guide_idx(k, w)), ("idx", k)
        assert np.array_equal(source(R.shfl_up(vals, k, w)), guide_up(k, w)), ("up", k)
        assert np.array_equal(source(R.shfl_down(vals, k, w)), guide_down(k, w)), ("down", k)
    per_lane = (LANE * 7 + 3) % 64  # a per-lane source operand, beyond 31 too
    assert np.array_equal(source(R.shfl_idx(vals, per_lane, w)), guide_idx(per_lane, w))


def test_shuffle_predicate_and_batching():
    j, valid = R.shfl_source_lanes("down", 4, R.width_c(8))
    assert np.array_equal(valid, (LANE % 8) + 4 < 8) and np.array_equal(j[~valid], LANE[~valid])
    vals = lane_values((2, 5))  # (2, 5, 32, 3): leading warp dims
    out = R.shfl_xor(vals, 3)
    assert np.array_equal(out, vals[..., LANE ^ 3, :])
    assert np.array_equal(R.shfl_xor(out, 3), vals)  # bfly is an involution
    lane_last = np.moveaxis(vals, -2, -1)
    assert np.array_equal(R.shfl_xor(lane_last, 3, axis=-1), np.moveaxis(out, -2, -1))


def test_quad_allreduce_gives_the_row_statistics_of_the_accumulator():
    """Per-lane max / sum over its elements of row g (c0, c1 of every n8 tile), then the quad all-reduce:
    every lane holds the full row max and the row sum in the kernel's order of additions."""
    rng = np.random.default_rng(3)
    s = rng.standard_normal((4, 16, 64)).astype(np.float32)
    regs = F.c_fragment(s).view(np.float32).reshape(4, 32, 8, 4)  # (warp, lane, ntile, c_i)
    top = regs[..., 0:2].reshape(4, 32, 16)  # row g
    bottom = regs[..., 2:4].reshape(4, 32, 16)  # row g + 8
    m = R.quad_allreduce(np.stack([top.max(-1), bottom.max(-1)], axis=-1), np.maximum)
    assert np.array_equal(m[..., 0], s.max(-1)[:, R.GROUP_ID]) and np.array_equal(
        m[..., 1], s.max(-1)[:, R.GROUP_ID + 8]
    )
    part = np.stack([top.sum(-1, dtype=np.float32), bottom.sum(-1, dtype=np.float32)], axis=-1)
    total = R.quad_allreduce(part, np.add)
    q = part.reshape(4, 8, 4, 2)
    expect = (q[:, :, 0] + q[:, :, 1]) + (q[:, :, 2] + q[:, :, 3])  # lane 4g after xor 1, then xor 2
    assert np.array_equal(total.view(np.uint32), np.repeat(expect, 4, axis=1).view(np.uint32))


def test_regfile_round_trips_and_views():
    rng = np.random.default_rng(5)
    tile = rng.integers(0, 1 << 16, size=(2, 16, 32), dtype=np.uint16).view(ml_dtypes.bfloat16)
    rf = R.RegFile.from_tile(F.A, tile)
    assert rf.regs == 8 and rf.batch == (2,)
    assert np.array_equal(rf.words, F.a_fragment(tile))
    assert np.array_equal(rf.to_tile(F.A, ml_dtypes.bfloat16).view(np.uint16), tile.view(np.uint16))
    assert np.array_equal(R.RegFile.from_pairs(rf.bf16x2()).words, rf.words)
    o = rng.standard_normal((16, 128)).astype(np.float32)
    ro = R.RegFile.from_tile(F.C_F32, o)
    assert ro.regs == 64 and np.array_equal(ro.to_tile(F.C_F32, np.float32), o)
    assert np.array_equal(R.RegFile.from_f32(ro.f32()).words, ro.words)
    assert ro[[0, 4]] == R.RegFile(ro.words[..., [0, 4]]) and ro[3].regs == 1
    assert ro.shfl_xor(1).shfl_xor(1) == ro and ro.shfl_idx(0).words[5, 0] == ro.words[0, 0]
    assert ro[0:2].concat(ro[2:4]) == ro[0:4]
    h = R.RegFile.from_tile(F.C_F16, o.astype(np.float16))
    assert np.array_equal(h.f16x2(), F.C_F16.gather(o.astype(np.float16)))
    assert R.RegFile.zeros(4, (3,)).words.shape == (3, 32, 4)


def test_bad_input():
    with pytest.raises(ValueError, match="uint32"):
        R.RegFile(np.zeros((32, 4), np.float32))
    with pytest.raises(ValueError, match=r"\(\.\.\., 32, R\)"):
        R.RegFile(np.zeros((16, 4), np.uint32))
    with pytest.raises(ValueError, match="mode"):
        R.shfl_sync(lane_values(), "rotate", 1)
    with pytest.raises(ValueError, match="width"):
        R.shfl_xor(lane_values(), 1, width=3)
    with pytest.raises(ValueError, match="32 lanes"):
        R.shfl_xor(np.zeros((16, 2)), 1)
    with pytest.raises(ValueError, match="float32"):
        R.RegFile.from_f32(np.zeros((32, 2), np.float64))
    with pytest.raises(ValueError, match="positive int"):
        R.RegFile.zeros(0)
