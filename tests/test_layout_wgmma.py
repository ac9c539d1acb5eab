"""flashsim.layout.wgmma against independent statements: the PTX ISA's worked examples of the canonical layouts,
CuTe's GMMA shared-memory atoms (cute/atom/mma_traits_sm90_gmma.hpp, tiled as tile_to_shape does, with the
descriptor make_gmma_desc derives) and its accumulator / register-A layouts, all stated as flashsim.layout.cute
Layouts here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.layout import fragments as F
from flashsim.layout import wgmma as L
from flashsim.layout.cute import Layout


def cute_swizzle(addr, b: int):
    """CuTe's Swizzle<b, 4, 3> on a byte address: bits [4, 4 + b) ^= bits [7, 7 + b)."""
    mask = ((1 << b) - 1) << 7
    return addr ^ ((addr & mask) >> 3)


# -- the descriptor ----------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**14 - 1),
    st.integers(0, 2**14 - 1),
    st.integers(0, 2**14 - 1),
    st.integers(0, 7),
    st.sampled_from(["none", "32B", "64B", "128B"]),
)
def test_descriptor_round_trip(start, lbo, sbo, base, mode):
    d = L.MatrixDescriptor(start << 4, lbo << 4, sbo << 4, base, mode)
    bits = d.bits
    assert bits == start | lbo << 16 | sbo << 32 | base << 49 | {"none": 0, "128B": 1, "64B": 2, "32B": 3}[mode] << 62
    assert L.decode_descriptor(bits) == d


def test_descriptor_ignores_unused_bits():
    d = L.MatrixDescriptor(0x400, 0x10, 0x400, 0, "128B")
    noise = (3 << 14) | (3 << 30) | (7 << 46) | (0x3FF << 52)
    assert L.decode_descriptor(d.bits | noise) == d


# -- canonical layouts: the ISA's worked examples (in elements) ---------------------------------------------------


def _offsets(mn, k, bits, mn_major, mode, lbo, sbo):
    return L.canonical_offsets(mn, k, bits, mn_major, mode, lbo, sbo) // (bits // 8)


def _table(layout: Layout, mn: int, k: int) -> np.ndarray:
    i, j = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
    return np.vectorize(lambda a, b: layout((a, b)))(i, j)


@pytest.mark.parametrize(
    "mode, layout, lbo, sbo",
    [  # K-major tf32 (T = 4): 16 rows (m = 2) x 16 K (2 wgmmas of k8)
        ("none", Layout(((8, 2), (4, 4)), ((4, 32), (1, 64))), 64 * 4, 32 * 4),
        ("32B", Layout(((8, 2), (4, 4)), ((8, 64), (1, 4))), 16, 64 * 4),
    ],
)
def test_isa_examples_k_major_tf32(mode, layout, lbo, sbo):
    want = _table(layout, 16, 16)
    for kb in range(2):  # the second wgmma's descriptor starts at the next pair of chunks
        step = 2 * (lbo if mode == "none" else 16) // 4
        got = _offsets(16, 8, 32, False, mode, lbo, sbo) + kb * step
        np.testing.assert_array_equal(got, want[:, 8 * kb : 8 * kb + 8])


@pytest.mark.parametrize(
    "mode, layout, lbo, sbo",
    [  # MN-major bf16 (T = 8): MN 16 or 32 (m = 2) x K 16 (k = 2)
        ("none", Layout(((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))), 128 * 2, 64 * 2),
        ("32B", Layout(((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256))), 128 * 2, 256 * 2),
        ("64B", Layout(((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512))), 256 * 2, 512 * 2),
    ],
)
def test_isa_examples_mn_major_bf16(mode, layout, lbo, sbo):
    mn = layout[0].size
    np.testing.assert_array_equal(_offsets(mn, 16, 16, True, mode, lbo, sbo), _table(layout, mn, 16))


# -- CuTe's GMMA smem atoms tiled over an operand, with make_gmma_desc's LBO / SBO --------------------------------

_B = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def _k_major_tile(mode: str, bits: int, rows: int, kcols: int) -> tuple[Layout, int, int]:
    """CuTe's Layout_K_<mode>_Atom (8 rows x span bits, row stride span) upcast to elements and tiled M-first over
    rows x kcols (tile_to_shape), and the LBO / SBO bytes make_gmma_desc reads from it."""
    span = max(16 << _B[mode], 16) * 8 // bits  # elements per atom row
    atoms_m = rows // 8
    layout = Layout(((8, atoms_m), (span, kcols // span)), ((span, 8 * span), (1, 8 * span * atoms_m)))
    sbo = 8 * span * bits // 8  # the stride between 8-row groups, in bytes
    lbo = 16 if mode != "none" else 8 * span * atoms_m * bits // 8  # none: the next chunk is the next atom column
    return layout, lbo, sbo


def _mn_major_tile(mode: str, bits: int, mn: int) -> tuple[Layout, int, int]:
    """CuTe's Layout_MN_<mode>_Atom (span bits of MN x 8 K rows) tiled MN-first over mn x 16 (two groups of K)."""
    span = max(16 << _B[mode], 16) * 8 // bits
    atoms = mn // span
    layout = Layout(((span, atoms), (8, 2)), ((1, 8 * span), (span, 8 * span * atoms)))
    if mode == "none":  # ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)): SBO the MN step, LBO the K step
        return layout, 8 * span * atoms * bits // 8, 8 * span * bits // 8
    return layout, 8 * span * bits // 8, 8 * span * atoms * bits // 8  # LBO the MN atom step, SBO the K step


@pytest.mark.parametrize("mode", ["none", "32B", "64B", "128B"])
@pytest.mark.parametrize("bits", [8, 16, 32])
@pytest.mark.parametrize("base", [0, 0x400, 0x2000])
def test_k_major_against_cute_atoms(mode, bits, base):
    k = 256 // bits  # one wgmma's K: two 16-byte chunks
    span = max(16 << _B[mode], 16) * 8 // bits
    kcols = max(span, 2 * k)
    layout, lbo, sbo = _k_major_tile(mode, bits, 64, kcols)
    eb = bits // 8
    whole = base + eb * _table(layout, 64, kcols)
    want_all = whole if mode == "none" else cute_swizzle(whole, _B[mode])
    for kb in range(kcols // k):  # each wgmma's descriptor: the address of its first element, as CUTLASS advances it
        start = int(base + eb * layout((0, kb * k)))
        d = L.MatrixDescriptor(start, lbo, sbo, 0, mode)
        np.testing.assert_array_equal(
            L.operand_addresses(d, 64, k, bits, False), want_all[:, kb * k : (kb + 1) * k], err_msg=f"k block {kb}"
        )


@pytest.mark.parametrize("mode", ["none", "32B", "64B", "128B"])
@pytest.mark.parametrize("mn", [64, 128, 256])
def test_mn_major_against_cute_atoms(mode, mn):
    layout, lbo, sbo = _mn_major_tile(mode, 16, mn)
    base = 0x800
    whole = base + 2 * _table(layout, mn, 16)
    want = whole if mode == "none" else cute_swizzle(whole, _B[mode])
    d = L.MatrixDescriptor(base, lbo, sbo, 0, mode)
    np.testing.assert_array_equal(L.operand_addresses(d, mn, 16, 16, True), want)


def test_base_offset_counts_the_pattern_from_its_start():
    """A 128B-swizzled matrix whose pattern starts 0x180 past a 1024-byte boundary, described with base offset 3,
    reads what the same data at an aligned address reads, shifted."""
    layout, lbo, sbo = _k_major_tile("128B", 16, 64, 64)
    aligned = L.operand_addresses(L.MatrixDescriptor(0x800, lbo, sbo, 0, "128B"), 64, 16, 16, False)
    shifted = L.operand_addresses(L.MatrixDescriptor(0x980, lbo, sbo, 3, "128B"), 64, 16, 16, False)
    np.testing.assert_array_equal(shifted - 0x180, aligned)
    assert L.descriptor_problem(L.MatrixDescriptor(0x980, lbo, sbo, 3, "128B")) is None
    assert "row 2" in L.descriptor_problem(L.MatrixDescriptor(0x980, lbo, sbo, 1, "128B"))
    assert L.descriptor_problem(L.MatrixDescriptor(0x990, 16, 1024, 0, "none")) is None


def test_base_offset_zero_takes_the_address_swizzle_in_any_row():
    """Base offset 0 at a start 3 rows into the 128B pattern (the H100 reads FlashAttention's CuTe-DSL forward's tiles
    so, bit for bit: tests/test_fa3_cute.py): the matrix reads the addresses the same data has as rows 3.. of a
    matrix whose pattern starts at the 1024-byte boundary, i.e. the swizzle of the address itself."""
    layout, lbo, sbo = _k_major_tile("128B", 16, 64, 64)
    assert L.descriptor_problem(L.MatrixDescriptor(0x980, lbo, sbo, 0, "128B")) is None
    aligned = L.operand_addresses(L.MatrixDescriptor(0x800, lbo, sbo, 0, "128B"), 64, 16, 16, False)
    shifted = L.operand_addresses(L.MatrixDescriptor(0x980, lbo, sbo, 0, "128B"), 64, 16, 16, False)
    # rows r of the shifted matrix and r + 3 of the aligned one sit in the same row of the pattern (r + 3 < 8 within
    # the first 8-row atom): the same chunk order, 0x180 apart
    np.testing.assert_array_equal(shifted[:5] - 0x980, aligned[3:8] - 0x800 - 0x180)


# -- register fragments against CuTe's GMMA TV layouts ------------------------------------------------------------
# CuTe maps (thread in 0..127, value) -> index m + 64 n (C, A over M x K likewise), column-major over the tile.


def _clayout(n: int) -> Layout:
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


A_LAYOUTS = {  # register-source A: ALayout_64x8 (32-bit), ALayout_64x16 (= CLayout_64x16), ALayout_64x32 (8-bit)
    8: Layout(((4, 8, 4), (2, 2)), ((64, 1, 16), (8, 256))),
    16: _clayout(16),
    32: Layout(((4, 8, 4), (4, 2, 2)), ((256, 1, 16), (64, 8, 1024))),
}


def _tv_tables(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    nv = layout.size // 128
    idx = layout.table().reshape(nv, 128).T  # [thread, value]
    return idx % 64, idx // 64


@pytest.mark.parametrize("n", [8, 16, 64, 96, 256])
@pytest.mark.parametrize("accum", ["f32", "f16"])
def test_d_fragments_against_cute(n, accum):
    rows, cols = _tv_tables(_clayout(n))
    fmap = L.d_map(accum)
    dtype = np.float32 if accum == "f32" else np.float16
    tile = np.arange(64 * n).reshape(1, 64, n).astype(dtype)  # exact in f16 too: at most 2048
    words = L.warpgroup_gather(tile, fmap)  # (1, 128, regs)
    values = words.view(dtype).reshape(128, -1)  # value v of thread t: element v of its fragment, low half first
    np.testing.assert_array_equal(values, tile[0][rows, cols])
    np.testing.assert_array_equal(L.warpgroup_scatter(words, fmap, dtype), tile)


@pytest.mark.parametrize("k, dtype", [(8, np.float32), (16, np.float16), (32, np.uint8)])
def test_a_fragments_against_cute(k, dtype):
    rows, cols = _tv_tables(A_LAYOUTS[k])
    tile = (np.arange(64 * k).reshape(1, 64, k) % (256 if dtype == np.uint8 else 4096)).astype(dtype)
    words = L.warpgroup_gather(tile, L.a_map(k))
    np.testing.assert_array_equal(words.view(dtype).reshape(128, -1), tile[0][rows, cols])
    np.testing.assert_array_equal(L.warpgroup_scatter(words, L.a_map(k), dtype), tile)


def test_per_warp_maps_are_mma_syncs():
    """The identity the module relies on: warp w's part of the wgmma fragments is mma.sync's m16n8 fragment on rows
    16w .. 16w + 15 (A of m16n8k16 / m16n8k32, C of m16n8k16 per n8 tile)."""
    rng = np.random.default_rng(1)
    for k, fmap in ((16, F.A), (32, F.A8)):
        tile = rng.integers(0, 255, (1, 64, k)).astype(np.uint8 if k == 32 else np.uint16)
        words = L.warpgroup_gather(tile, L.a_map(k)).reshape(4, 32, -1)
        for w in range(4):
            part = tile[0, 16 * w : 16 * w + 16]
            per = fmap.gather(part).astype(np.uint32)  # (32, elems)
            want = (per[:, 0::2] | per[:, 1::2] << 16) if k == 16 else F.pack8(part[fmap.row, fmap.col])
            np.testing.assert_array_equal(words[w], want)
    tile = rng.standard_normal((1, 64, 32)).astype(np.float32)
    words = L.warpgroup_gather(tile, L.d_map("f32")).reshape(4, 32, -1)
    for w in range(4):
        np.testing.assert_array_equal(words[w], F.c_fragment(tile[0, 16 * w : 16 * w + 16]))
