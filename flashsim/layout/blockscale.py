"""Where sm_120a's kind::f8f6f4 and block-scaled mma.sync find their element codes and scale factors in the warp's
registers: the 8-bit containers of the 4- and 6-bit codes, and the scale-factor selectors {byte-id, thread-id}.

Element containers (PTX ISA, mma: "When .kind is either of .kind::mxf8f6f4 or .kind::f8f6f4, the individual 4-bit
and the 6-bit floating point type elements must be packed in an 8-bit container"): an e2m1 code sits in bits 2..5 of
its byte ("central 4 bits ... padding in the upper 2 bits and lower 2 bits"), an e2m3 / e3m2 code in bits 0..5
("lower 6 bits ... padding in the upper 2 bits"); e4m3 / e5m2 fill the byte. The bytes go four to a register as the
8-bit m16n8k32 fragments (fragments.a8_coord / b8_coord). kind::mxf4 / mxf4nvf4 pack e2m1 two to a byte, eight to a
register (fragments.a4_coord / b4_coord, pack4), with no padding. CUTLASS agrees (cute/atom/mma_traits_sm120.hpp:
``fp4_shift_A`` / ``fp4_shift_B`` shift the e2m1 bytes ``ldmatrix ... .b4x16_p64`` leaves in bits 0..3 left by two
before a kind::f8f6f4 mma).

Open bits, and the reading flashsim takes: neither the ISA nor CUTLASS says what the tensor core does with a padding
bit that is set (the ISA calls them padding; ldmatrix's ``.b6x16_p32`` / ``.b4x16_p64`` leave them zero). flashsim
reads the code's bits alone and ignores the padding, as mmasim does (it masks the byte with 0x3F, then takes e2m1 from
bits 2..5); likewise a ue4m3 scale byte's bit 7 ("MSB bit padded with zero", PTX ISA 5.2.3) is ignored, as mmasim
clears it. A silicon capture could settle both; none exists here.

Scale selectors (PTX ISA, "Block Scaling for mma.sync", Figures 43-45 and Table 37): each lane gives one .b32
``scale-a-data`` / ``scale-b-data``; ``thread-id-a`` (0, 1) picks the thread pair of each quad holding SF_A (lanes
with lane % 4 in {0, 1}, or {2, 3}), ``thread-id-b`` (0..3) the one thread of each quad holding SF_B (lane % 4 ==
thread-id-b); ``byte-id`` the byte(s): 1X one byte (0..3), 2X the byte pair starting at 0 or 2, 4X all four (0). So

    SF_A[m, j] (row m = 0..15, chunk j = 0..scale_vec-1): byte byte_id_a + j of lane 4 (m % 8) + 2 thread_id_a + m // 8
    SF_B[j, n] (column n = 0..7):                         byte byte_id_b + j of lane 4 n + thread_id_b

Which lane of the pair holds rows 8..15 is in Figure 43 alone (an image): flashsim takes the second (m // 8), as CuTe's
SM120 SFALayout states it (``Shape<Shape<_2,_2,_8>,_64>, Stride<Stride<_8,_0,_1>,_16>``: the lane's lowest bit is
m's 8, checked in tests/test_layout_block_scale.py) and as the chunk order within a pair / word follows CuTe's recast
of a thread's K / scale_vec scale bytes into one uint32 (chunk j in byte j). Other selector values are undefined
behaviour in the ISA and refused by ptxas when immediate (Table 37): ``check_selectors`` raises ValueError.
"""

from __future__ import annotations

import numpy as np

from ..numerics import formats

LANES = 32
# Table 37: the valid values of (byte-id-a, thread-id-a, byte-id-b, thread-id-b) per scale_vec
SELECTORS = {
    1: ((0, 1, 2, 3), (0, 1), (0, 1, 2, 3), (0, 1, 2, 3)),
    2: ((0, 2), (0, 1), (0, 2), (0, 1, 2, 3)),
    4: ((0,), (0, 1), (0,), (0, 1, 2, 3)),
}
# the bits of a code in its 8-bit container (f8f6f4 kinds): (shift, mask)
CONTAINERS = {"e2m1": (2, 0xF), "e2m3": (0, 0x3F), "e3m2": (0, 0x3F), "e4m3": (0, 0xFF), "e5m2": (0, 0xFF)}
SCALE_BITS = {"ue8m0": 0xFF, "ue4m3": 0x7F}  # the bits of a scale byte read; ue4m3's bit 7 is padding


def to_container(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Codes of ``fmt`` (uint8) -> their 8-bit containers of the f8f6f4 kinds (padding bits zero)."""
    shift, mask = CONTAINERS[fmt]
    return ((np.asarray(codes, np.uint8) & mask) << shift).astype(np.uint8)


def from_container(xp, bytes_, fmt: str):
    """8-bit containers (any unsigned integer array, numpy or JAX) -> the codes of ``fmt``, padding ignored."""
    shift, mask = CONTAINERS[fmt]
    return (bytes_ >> shift) & mask


def sfa_lane(row, thread_id):
    """The lane whose scale-a-data holds SF_A of ``row`` (0..15) under ``thread_id`` (0, 1)."""
    return 4 * (row % 8) + 2 * thread_id + row // 8


def sfb_lane(col, thread_id):
    """The lane whose scale-b-data holds SF_B of ``col`` (0..7) under ``thread_id`` (0..3)."""
    return 4 * col + thread_id


def check_selectors(scale_vec: int, byte_a: int, thread_a: int, byte_b: int, thread_b: int) -> None:
    """ValueError naming the selector outside Table 37's valid values for ``scale_vec`` (1, 2, 4)."""
    valid = SELECTORS[scale_vec]
    for name, value, ok in zip(
        ("byte-id-a", "thread-id-a", "byte-id-b", "thread-id-b"), (byte_a, thread_a, byte_b, thread_b), valid
    ):
        if int(value) not in ok:
            raise ValueError(
                f"{name} = {int(value)} with scale_vec::{scale_vec}X (valid: {', '.join(map(str, ok))}; PTX ISA "
                "Table 37: any other value is undefined behaviour)"
            )


def select_scales(words: np.ndarray, operand: str, scale_vec: int, byte_id, thread_id) -> np.ndarray:
    """The scale codes an mma reads: words (W, 32) uint32 (each lane's scale-a-data or scale-b-data), byte_id /
    thread_id ints or (W,) arrays (one selector per warp) -> SF_A (W, 16, scale_vec) for operand "a", SF_B (W,
    scale_vec, 8) for "b", uint8 bytes as the register holds them."""
    W = words.shape[0]
    byte_id, thread_id = np.broadcast_to(byte_id, (W,)), np.broadcast_to(thread_id, (W,))
    raw = np.ascontiguousarray(words, np.uint32).view("<u4").view(np.uint8).reshape(W, LANES, 4)
    j = np.arange(scale_vec)
    w = np.arange(W)[:, None, None]
    if operand == "a":
        lanes = sfa_lane(np.arange(16)[None, :, None], thread_id[:, None, None])  # (W, 16, 1)
        return raw[w, lanes, byte_id[:, None, None] + j[None, None, :]]
    lanes = sfb_lane(np.arange(8)[None, None, :], thread_id[:, None, None])  # (W, 1, 8)
    return raw[w, lanes, byte_id[:, None, None] + j[None, :, None]]


def scale_words(scales: np.ndarray, operand: str, byte_id: int, thread_id: int, fill: int = 0) -> np.ndarray:
    """The inverse of select_scales for one selector: SF_A (W, 16, n) or SF_B (W, n, 8) uint8 -> (W, 32) uint32
    scale registers holding them where the selectors read (every other byte ``fill``)."""
    scales = np.asarray(scales, np.uint8)
    W = scales.shape[0]
    raw = np.full((W, LANES, 4), fill, np.uint8)
    if operand == "a":
        n = scales.shape[2]
        lanes = sfa_lane(np.arange(16), thread_id)
        raw[:, lanes[:, None], byte_id + np.arange(n)[None, :]] = scales
    else:
        n = scales.shape[1]
        lanes = sfb_lane(np.arange(8), thread_id)
        raw[:, lanes[None, :], byte_id + np.arange(n)[:, None]] = scales
    return raw.reshape(W, LANES * 4).view("<u4").reshape(W, LANES).astype(np.uint32)


def scale_codes(bytes_, scale_format: str):
    """Scale bytes -> codes of ``scale_format`` (ue4m3's padding bit 7 ignored)."""
    formats.code_format(scale_format)
    return bytes_ & SCALE_BITS[scale_format]
