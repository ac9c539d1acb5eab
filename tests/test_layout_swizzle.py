"""The async proxy's swizzles (flashsim.layout.swizzle) against CuTe's definition of Swizzle<B, 4, 3>, stated
independently here as a permutation of 16-byte chunks inside 8-row atoms."""

import numpy as np
import pytest

from flashsim.layout import swizzle as S


@pytest.mark.parametrize("mode", ["32B", "64B", "128B"])
def test_swizzle_permutes_chunks_within_each_row_by_the_row_index(mode):
    span = S.span_bytes(mode)
    rows = S.repeat_bytes(mode) // span
    assert rows == 8
    addr = np.arange(4 * S.repeat_bytes(mode), dtype=np.int64)
    phys = S.swizzle(addr, mode)
    row, chunk, byte = addr // span, (addr % span) // 16, addr % 16
    # chunk c of row r lands in chunk c ^ x of the same row, bytes in order, where x counts the 128-byte lines
    # (the row for 128B, every second row for 64B, every fourth for 32B) modulo the chunks of a row
    x = (row * span // 128) % (span // 16)
    want = row * span + ((chunk ^ x) * 16) + byte
    assert np.array_equal(phys, want)
    assert np.array_equal(S.swizzle(phys, mode), addr)  # an involution
    assert sorted(phys.tolist()) == addr.tolist()  # a permutation


def test_swizzle_scalar_matches_array_and_none_is_identity():
    for mode in S.MODES:
        for a in (0, 16, 128, 1040, 4095, 70000):
            assert S.swizzle(a, mode) == int(S.swizzle(np.array([a], np.uint32), mode)[0])
    assert S.swizzle(12345, "none") == 12345


def test_encodings():
    assert [S.from_tensor_map(i) for i in range(4)] == ["none", "32B", "64B", "128B"]
    assert [S.from_descriptor(i) for i in range(4)] == ["none", "128B", "64B", "32B"]
    with pytest.raises(ValueError, match="tensor map swizzle 4"):
        S.from_tensor_map(4)
    with pytest.raises(ValueError, match="swizzle mode"):
        S.swizzle(0, "16B")
