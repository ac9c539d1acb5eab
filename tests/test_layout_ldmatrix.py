"""ldmatrix: the kernel's address patterns deliver exactly the mma fragments they feed."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.layout import fragments as F
from flashsim.layout import ldmatrix as L  # the module

SETTINGS = settings(max_examples=40, deadline=None)


def smem_image(seed, rows, ld):
    """A row-major tile of random bit patterns (NaNs included), leading dimension ld, in a flat image."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 1 << 16, size=(2, rows * ld), dtype=np.uint16).view(np.float16)


def sub(image, r0, c0, nrows, ncols, ld):
    return image.reshape(image.shape[:-1] + (-1, ld))[..., r0 : r0 + nrows, c0 : c0 + ncols]


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([16, 64, 136]), st.integers(0, 3), st.integers(0, 3))
def test_x4_of_the_four_quadrants_is_the_a_fragment(seed, ld, tr, tc):
    img = smem_image(seed, 64, ld)
    r0, c0 = 16 * tr, 8 * tc * (ld > 16)
    regs = L.load_smem(img, L.a_x4(ld) + r0 * ld + c0, num=4)
    assert np.array_equal(regs, F.a_fragment(np.ascontiguousarray(sub(img, r0, c0, 16, 16, ld))))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([16, 64, 136]), st.integers(0, 3))
def test_k_rows_without_trans_give_the_b_fragment_of_k_transposed(seed, ld, tr):
    img = smem_image(seed, 64, ld)
    base = 16 * tr * ld
    k = sub(img, 16 * tr, 0, 16, 16, ld)  # 16 keys x 16 head-dim columns
    kt = np.ascontiguousarray(np.swapaxes(k, -1, -2))  # K^T: 16 (d) x 16 (keys) = B of Q @ K^T
    assert np.array_equal(L.load_smem(img, L.kt_x2(ld) + base, num=2), F.b_fragment(kt[..., :8]))
    assert np.array_equal(L.load_smem(img, L.kt_x4(ld) + base, num=4), F.b_fragment(kt))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([16, 64, 136]), st.integers(0, 3))
def test_v_rows_with_trans_give_the_b_fragment_of_v(seed, ld, tr):
    img = smem_image(seed, 64, ld)
    base = 16 * tr * ld
    v = np.ascontiguousarray(sub(img, 16 * tr, 0, 16, 16, ld))  # 16 keys x 16 d = B of P @ V
    assert np.array_equal(L.load_smem(img, L.v_x2t(ld) + base, num=2, trans=True), F.b_fragment(v[..., :8]))
    assert np.array_equal(L.load_smem(img, L.v_x4t(ld) + base, num=4, trans=True), F.b_fragment(v))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 2, 4]))
def test_trans_is_the_transpose_of_each_matrix_and_xn_is_n_times_x1(seed, num):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 1 << 16, size=(3, 8 * num, 8), dtype=np.uint16)
    mats = rows.reshape(3, num, 8, 8)
    transposed = np.swapaxes(mats, -1, -2).reshape(3, 8 * num, 8)
    assert np.array_equal(L.load_rows(rows, trans=True), L.load_rows(transposed))
    each = [L.load_rows(np.ascontiguousarray(mats[:, j]))[..., 0] for j in range(num)]
    assert np.array_equal(L.load_rows(rows), np.stack(each, axis=-1))


def test_x2_of_a_16x8_tile_is_the_f16_accumulator_fragment():
    """Without .trans an 8x8 matrix lands as an f16x2 C fragment: x2 of rows 0..15 = C f16 of the tile."""
    rng = np.random.default_rng(7)
    tile = rng.integers(0, 1 << 16, size=(16, 8), dtype=np.uint16).view(np.float16)
    assert np.array_equal(L.load_rows(tile), F.c_fragment(tile))


def test_only_the_address_lanes_of_num_matrices_are_read():
    img = smem_image(1, 16, 16)
    addr = L.a_x4(16).copy()
    ref = L.load_smem(img, addr, num=2)
    addr[16:] = 10**6 + 3  # lanes 16..31 give no address for .x2
    assert np.array_equal(L.load_smem(img, addr, num=2), ref)


def test_bad_input():
    img = smem_image(0, 16, 16)
    with pytest.raises(ValueError, match="num"):
        L.load_smem(img, L.a_x4(16), num=3)
    with pytest.raises(ValueError, match="multiples of 8"):
        L.load_smem(img, L.a_x4(16) + 4, num=4)
    with pytest.raises(ValueError, match="multiples of 8"):
        L.load_smem(img, L.a_x4(16) + 256, num=4)
    with pytest.raises(ValueError, match="32 integer"):
        L.load_smem(img, np.zeros(16, np.int64), num=1)
    with pytest.raises(ValueError, match="16-bit"):
        L.load_rows(np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match="8\\*num"):
        L.load_rows(np.zeros((24, 8), np.float16))
    with pytest.raises(ValueError, match="ld"):
        L.a_x4(12)
