"""Register layouts of sm_120a's kind::f8f6f4 and block-scaled mma.sync (flashsim.layout.fragments A4 / B4 / A8 / B8,
flashsim.layout.blockscale) against CuTe's SM120 MMA atoms (CUTLASS include/cute/atom/mma_traits_sm120.hpp), stated
here as flashsim.layout.cute Layouts: an independent second statement of the PTX ISA's formulas and figures."""

from __future__ import annotations

import numpy as np
import pytest

from flashsim.layout import A4, A8, B4, B8, blockscale, cute_coords, pack4, pack8, unpack4, unpack8
from flashsim.layout.cute import Layout

# SM120_16x8x64_TN_VS (kind::mxf4 / mxf4nvf4): (T32, V32) -> (M16, K64), index m + 16 k; (T32, V16) -> (N8, K64)
CUTE_A4 = Layout(((4, 8), (8, 2, 2)), ((128, 1), (16, 8, 512)))
CUTE_B4 = Layout(((4, 8), (8, 2)), ((64, 1), (8, 256)))
# SM120_16x8x32_TN (kind::f8f6f4 and mxf8f6f4): MMA_Traits<SM80_16x8x32_S32S8S8S32_TN>'s layouts, one byte an element
CUTE_A8_SM120 = Layout(((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256)))
CUTE_B8_SM120 = Layout(((4, 8), (4, 2)), ((32, 1), (8, 128)))
# the scale factors: (T32, V K) -> (M16, K) and (N8, K), "effectively 16 threads due to the 2:0 mode" / 8 threads
CUTE_SFA = {K: Layout(((2, 2, 8), K), ((8, 0, 1), 16)) for K in (32, 64)}
CUTE_SFB = {K: Layout(((4, 8), K), ((0, 1), 8)) for K in (32, 64)}


def test_fragment_maps_match_cute_sm120():
    """A4 / B4 (the ISA's m16n8k64 4-bit formulas) and A8 / B8 (m16n8k32, the f8f6f4 kinds' byte containers) equal
    CuTe's SM120 atoms; every element held once."""
    for fmap, cute, rows, a_operand in ((A4, CUTE_A4, 16, True), (B4, CUTE_B4, 8, False)):
        first, second = cute_coords(cute, rows)
        if a_operand:
            assert np.array_equal(first, fmap.row) and np.array_equal(second, fmap.col)
        else:
            assert np.array_equal(second, fmap.row) and np.array_equal(first, fmap.col)
        assert (fmap.lane_of >= 0).all() and fmap.regs * fmap.per_reg == fmap.elems
    r, c = cute_coords(CUTE_A8_SM120, 16)
    assert np.array_equal(r, A8.row) and np.array_equal(c, A8.col)
    n, k = cute_coords(CUTE_B8_SM120, 8)
    assert np.array_equal(k, B8.row) and np.array_equal(n, B8.col)
    assert (A4.regs, B4.regs, A8.regs, B8.regs) == (4, 2, 4, 2)


def test_nibble_and_byte_order():
    """Elements low to high (PTX ISA's fragment tables): a_0 in the lowest nibble / byte of the first register."""
    codes = np.arange(16, dtype=np.uint8)[None]
    assert pack4(codes).tolist() == [[0x76543210, 0xFEDCBA98]]
    assert np.array_equal(unpack4(pack4(codes)), codes)
    b = np.arange(1, 9, dtype=np.uint8)[None]
    assert np.array_equal(unpack8(pack8(b)), b)


@pytest.mark.parametrize("K", [32, 64])
def test_scale_lanes_match_cute(K):
    """Every (lane, value) of CuTe's SFALayout / SFBLayout names a scale this lane's register holds under our
    selectors: SF_A of row m in lane 4 (m % 8) + 2 thread_id_a + m // 8 (the pair of thread_id_a = lane % 4 // 2),
    SF_B of column n in lane 4 n + thread_id_b (thread_id_b = lane % 4); and every row / column has its lanes."""
    lane = np.arange(32)[:, None]
    sfa = CUTE_SFA[K].table().reshape(K, 32).T  # [lane, v] -> m + 16 k
    m = sfa % 16
    assert np.array_equal(blockscale.sfa_lane(m, (lane % 4) // 2), np.broadcast_to(lane, m.shape))
    sfb = CUTE_SFB[K].table().reshape(K, 32).T
    n = sfb % 8
    assert np.array_equal(blockscale.sfb_lane(n, lane % 4), np.broadcast_to(lane, n.shape))
    assert set(m.ravel()) == set(range(16)) and set(n.ravel()) == set(range(8))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_select_scales_inverts_scale_words(n):
    """select_scales reads back what scale_words put, for every valid selector (Table 37); chunk j of a row in byte
    byte_id + j; the bytes it does not read (fill) never reach the scales."""
    rng = np.random.default_rng(n)
    bytes_a, threads_a, bytes_b, threads_b = blockscale.SELECTORS[n]
    for ba in bytes_a:
        for ta in threads_a:
            sa = rng.integers(0, 256, (3, 16, n)).astype(np.uint8)
            words = blockscale.scale_words(sa, "a", ba, ta, fill=0xEE)
            assert np.array_equal(blockscale.select_scales(words, "a", n, ba, ta), sa)
            raw = words.view("<u4").view(np.uint8).reshape(3, 32, 4)
            assert raw[:, blockscale.sfa_lane(5, ta), ba + n - 1].tolist() == sa[:, 5, n - 1].tolist()
    for bb in bytes_b:
        for tb in threads_b:
            sb = rng.integers(0, 256, (3, n, 8)).astype(np.uint8)
            words = blockscale.scale_words(sb, "b", bb, tb, fill=0x11)
            assert np.array_equal(blockscale.select_scales(words, "b", n, bb, tb), sb)


def test_check_selectors():
    blockscale.check_selectors(2, 2, 1, 0, 3)
    for args, match in (
        ((2, 1, 0, 0, 0), "byte-id-a = 1 with scale_vec::2X"),
        ((1, 0, 2, 0, 0), "thread-id-a = 2"),
        ((4, 0, 0, 2, 0), "byte-id-b = 2"),
        ((1, 0, 0, 0, 4), "thread-id-b = 4"),
    ):
        with pytest.raises(ValueError, match=match):
            blockscale.check_selectors(*args)


def test_containers():
    """e2m1 in bits 2..5 of its byte, e2m3 / e3m2 in bits 0..5; the padding bits are ignored when read (the reading
    flashsim takes, mmasim's); ue4m3 scale bytes lose bit 7."""
    codes = np.arange(16, dtype=np.uint8)
    assert np.array_equal(blockscale.to_container(codes, "e2m1"), codes << 2)
    assert np.array_equal(blockscale.from_container(np, (codes << 2) | 0xC3, "e2m1"), codes)
    six = np.arange(64, dtype=np.uint8)
    for f in ("e2m3", "e3m2"):
        assert np.array_equal(blockscale.from_container(np, six | 0xC0, f), six)
    assert blockscale.scale_codes(np.uint8(0xFF), "ue4m3") == 0x7F
    assert blockscale.scale_codes(np.uint8(0xFF), "ue8m0") == 0xFF
