"""The m16n8k16 fragment maps: PTX formulas vs CuTe's layouts, bijections, inverses, locators."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.layout import fragments as F
from flashsim.layout.cute import Layout

SETTINGS = settings(max_examples=60, deadline=None)
MAPS = [F.A, F.B, F.C_F32, F.C_F16]


def bits16(rng, shape, dtype=np.float16):
    return rng.integers(0, 1 << 16, size=shape, dtype=np.uint16).view(dtype)


def bits32(rng, shape):
    return rng.integers(0, 1 << 32, size=shape, dtype=np.uint32)


# ---- two oracles agree -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fmap, cute, rows, swap",
    [
        (F.A, F.CUTE_A, 16, False),  # (m, k) of M x K
        (F.B, F.CUTE_B, 8, True),  # (n, k) of N x K; the PTX table is (k, n)
        (F.C_F32, F.CUTE_C, 16, False),  # (m, n) of M x N
        (F.C_F16, F.CUTE_C, 16, False),
    ],
)
def test_ptx_formulas_equal_cute_layouts(fmap, cute, rows, swap):
    first, second = F.cute_coords(cute, rows)
    row, col = (second, first) if swap else (first, second)
    assert np.array_equal(row, fmap.row) and np.array_equal(col, fmap.col)


def test_cute_composed_with_row_major_storage_gives_smem_offsets():
    """(row-major 16x16 storage) o CUTE_A = the smem offset of every (lane, value), from the PTX table."""
    row_major = Layout((16, 16), (16, 1))  # column-major index m + 16 k -> offset 16 m + k
    offsets = row_major.compose(F.CUTE_A).table().reshape(8, 32).T
    assert np.array_equal(offsets, 16 * F.A.row + F.A.col)


def test_cute_right_inverse_is_the_inverse_map():
    """CuTe's right inverse of a TV layout maps each element index back to (lane + 32 * value)."""
    for fmap, cute, rows in [(F.A, F.CUTE_A, 16), (F.C_F32, F.CUTE_C, 16)]:
        inv = cute.right_inverse().table()  # element index (m + rows * col) -> lane + 32 v
        m, c = np.divmod(np.arange(inv.size), rows)[::-1]
        assert np.array_equal(inv % 32, fmap.lane_of[m, c])
        assert np.array_equal(inv // 32, fmap.elem_of[m, c])


# ---- bijection and inverses ------------------------------------------------------------


@pytest.mark.parametrize("fmap", MAPS, ids=lambda m: m.name)
def test_map_is_a_bijection(fmap):
    assert fmap.row.shape == (32, fmap.elems) and 32 * fmap.elems == fmap.rows * fmap.cols
    flat = fmap.row * fmap.cols + fmap.col
    assert np.array_equal(np.sort(flat.ravel()), np.arange(fmap.rows * fmap.cols))
    lanes = np.broadcast_to(np.arange(32)[:, None], fmap.row.shape)
    elems = np.broadcast_to(np.arange(fmap.elems)[None, :], fmap.row.shape)
    assert np.array_equal(fmap.lane_of[fmap.row, fmap.col], lanes)
    assert np.array_equal(fmap.elem_of[fmap.row, fmap.col], elems)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.sampled_from([np.float16, ml_dtypes.bfloat16]))
def test_a_and_b_round_trip_bits(seed, n, dtype):
    rng = np.random.default_rng(seed)
    a = bits16(rng, (2, 16, 16 * n), dtype)
    regs = F.a_fragment(a)
    assert regs.shape == (2, 32, 4 * n) and regs.dtype == np.uint32
    assert np.array_equal(F.a_tile(regs, dtype).view(np.uint16), a.view(np.uint16))
    assert np.array_equal(F.a_fragment(F.a_tile(regs, dtype)), regs)
    b = bits16(rng, (3, 1, 16, 8 * n), dtype)
    regs = F.b_fragment(b)
    assert regs.shape == (3, 1, 32, 2 * n)
    assert np.array_equal(F.b_tile(regs, dtype).view(np.uint16), b.view(np.uint16))
    assert np.array_equal(F.b_fragment(F.b_tile(regs, dtype)), regs)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 16))
def test_c_round_trip_bits(seed, n):
    rng = np.random.default_rng(seed)
    c32 = bits32(rng, (2, 16, 8 * n)).view(np.float32)  # NaN payloads included
    regs = F.c_fragment(c32)
    assert regs.shape == (2, 32, 4 * n)
    assert np.array_equal(F.c_tile(regs, np.float32).view(np.uint32), c32.view(np.uint32))
    assert np.array_equal(F.c_fragment(F.c_tile(regs, np.float32)), regs)
    c16 = bits16(rng, (16, 8 * n))
    regs = F.c_fragment(c16)
    assert regs.shape == (32, 2 * n)
    assert np.array_equal(F.c_tile(regs, np.float16).view(np.uint16), c16.view(np.uint16))


def test_register_contents_follow_the_ptx_text():
    """Spot the packing rule on a value-encoding tile: a0 (low half of reg 0) of lane 5 is A[1, 2]."""
    a = np.arange(256, dtype=np.float16).reshape(16, 16)  # value = 16 row + col, exact
    regs = F.a_fragment(a)
    lo, hi = (regs & 0xFFFF).astype(np.uint16).view(np.float16), (regs >> 16).astype(np.uint16).view(np.float16)
    assert lo[5, 0] == 16 * 1 + 2 and hi[5, 0] == 16 * 1 + 3  # a0, a1: row g, cols 2t, 2t+1
    assert lo[5, 1] == 16 * 9 + 2 and lo[5, 2] == 16 * 1 + 10 and hi[5, 3] == 16 * 9 + 11
    c = np.arange(128, dtype=np.float32).reshape(16, 8)
    assert F.c_fragment(c).view(np.float32)[31].tolist() == [7 * 8 + 6, 7 * 8 + 7, 15 * 8 + 6, 15 * 8 + 7]


# ---- locators --------------------------------------------------------------------------


@pytest.mark.parametrize("accum, per_tile", [("f32", 4), ("f16", 2)])
def test_locate_c_convention_for_wide_accumulators(accum, per_tile):
    """O of a warp, d = 128: lane = 4 (row % 8) + (col % 8) // 2; reg = ntile * per_tile + index in tile."""
    row, col = np.meshgrid(np.arange(16), np.arange(128), indexing="ij")
    loc = F.locate_c(row, col, accum)
    i = 2 * (row // 8) + (col % 2)  # c_i, inverted from the PTX text by hand
    assert np.array_equal(loc.lane, 4 * (row % 8) + (col % 8) // 2)
    if accum == "f32":
        assert np.array_equal(loc.reg, (col // 8) * 4 + i) and not loc.half.any()
    else:
        assert np.array_equal(loc.reg, (col // 8) * 2 + i // 2) and np.array_equal(loc.half, i % 2)


@pytest.mark.parametrize("fmap", MAPS, ids=lambda m: m.name)
def test_locate_and_element_are_inverse_and_match_gather(fmap):
    n = 3
    row, col = np.meshgrid(np.arange(fmap.rows), np.arange(n * fmap.cols), indexing="ij")
    loc = fmap.locate(row, col)
    r2, c2 = fmap.element(loc.lane, loc.reg, loc.half)
    assert np.array_equal(r2, row) and np.array_equal(c2, col)
    tile = (np.arange(row.size).reshape(row.shape)).astype(np.float32 if fmap.per_reg == 1 else np.float16)
    vals = fmap.gather(tile)  # (32, n * elems)
    assert np.array_equal(vals[loc.lane, loc.reg * fmap.per_reg + loc.half], tile)


def test_locate_a_and_b():
    assert tuple(int(x) for x in F.locate_a(9, 27)) == (4 * 1 + 1, 4 + 3, 1)  # kslice 1, a7: row g+8, col 2t+9
    assert tuple(int(x) for x in F.locate_b(10, 13)) == (4 * 5 + 1, 2 + 1, 0)  # ntile 1, b2: k = 2t + 8, n = g


def test_describe_c():
    assert F.describe_c(9, 13, "f16") == "lane 6 (groupID 1, tid 2), register 3 high half"
    assert F.describe_c(0, 0) == "lane 0 (groupID 0, tid 0), register 0"


# ---- the quad structure the kernel's row reductions rely on --------------------------------


def test_a_and_c_rows_of_a_lane_agree():
    """A lane holds rows g and g+8 of A, of C and (so) of every row statistic: no shuffle across quads."""
    assert np.array_equal(np.unique(F.A.row, axis=1), np.unique(F.C_F32.row, axis=1))
    for g in range(8):
        quad = slice(4 * g, 4 * g + 4)
        assert set(F.C_F32.row[quad].ravel()) == {g, g + 8}
        assert sorted(F.C_F32.col[quad][:, :2].ravel()) == list(range(8))  # a quad covers a whole row


# ---- bad input ---------------------------------------------------------------------------


def test_bad_input():
    with pytest.raises(ValueError, match="float16 or bfloat16"):
        F.a_fragment(np.zeros((16, 16), np.float32))
    with pytest.raises(ValueError, match=r"\(\.\.\., 16, n\*16\)"):
        F.a_fragment(np.zeros((16, 8), np.float16))
    with pytest.raises(ValueError, match=r"\(\.\.\., 16, n\*8\)"):
        F.b_fragment(np.zeros((8, 8), np.float16))
    with pytest.raises(ValueError, match="float32 or float16"):
        F.c_fragment(np.zeros((16, 8), np.float64))
    with pytest.raises(ValueError, match="uint32"):
        F.c_tile(np.zeros((32, 4), np.int32))
    with pytest.raises(ValueError, match=r"\(\.\.\., 32, n\*4\)"):
        F.a_tile(np.zeros((32, 3), np.uint32))
    with pytest.raises(ValueError, match="accum"):
        F.locate_c(0, 0, "bf16")
    with pytest.raises(ValueError, match="row must be"):
        F.locate_c(16, 0)
    with pytest.raises(ValueError, match="integers"):
        F.locate_c(0.5, 0)


def test_m16n8k32_8bit_maps_match_cute_and_cover_the_tiles():
    """The PTX formulas of the 8-bit m16n8k32 fragments (a8_coord, b8_coord) against CuTe's 16x8x32 integer TV
    layouts, an independent statement; every element of each tile is held once; four bytes per register, the
    lowest-indexed element in the lowest byte (pack8). The H200 check is tests/test_mma_k32_silicon.py."""
    from flashsim.layout import A8, B8, CUTE_A8, CUTE_B8, cute_coords, pack8

    r, c = cute_coords(CUTE_A8, 16)
    assert np.array_equal(r, A8.row) and np.array_equal(c, A8.col)
    n, k = cute_coords(CUTE_B8, 8)
    assert np.array_equal(k, B8.row) and np.array_equal(n, B8.col)
    for fmap, shape in ((A8, (16, 32)), (B8, (32, 8))):
        assert fmap.regs * fmap.per_reg == fmap.elems and (fmap.lane_of >= 0).all()
        tile = np.arange(shape[0] * shape[1], dtype=np.int64).reshape(shape)
        assert np.array_equal(fmap.scatter(fmap.gather(tile)), tile)
    words = pack8(np.array([[1, 2, 3, 4, 5, 6, 7, 8]], np.uint8))
    assert words.tolist() == [[0x04030201, 0x08070605]]
