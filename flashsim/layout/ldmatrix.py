"""ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16, as vectorised gathers; and (below) the 8-bit forms of
sm_100a / sm_120a, ldmatrix.m8n16 / .m16n16 and stmatrix.m16n8, with their packed 4- / 6-bit source rows.

Semantics (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): each of the 8*num address-giving lanes points at
one
16-byte row of eight b16 elements; lanes 8j..8j+7 give rows 0..7 of matrix j. Destination register d_j
of lane l holds matrix j's row l >> 2, columns 2(l % 4) and 2(l % 4) + 1 (the lower column in bits
0..15). ``.trans`` delivers the transposed matrix: row 2(l % 4) + {0, 1}, column l >> 2.
``load_rows`` takes the rows the lanes point at; ``load_smem`` gathers them from a flat shared-memory
image through per-lane addresses, as the instruction does.

The address helpers below give the per-lane row addresses that the attention kernel uses for its three
operands; the tests state that each yields exactly the mma fragment it is meant to:
  a_x4:        16x16 row-major A tile            -> A fragment (4 regs)
  kt_x2/kt_x4: K rows (keys x d, row-major)      -> B fragment of K^T for Q @ K^T (1 or 2 n8 tiles)
  v_x2t/v_x4t: V rows (keys x d, row-major), .trans -> B fragment of V for P @ V (1 or 2 n8 tiles)
"""

from __future__ import annotations

import numpy as np

from .fragments import _F16_TYPES, LANES, pack16

_NUMS = (1, 2, 4)
_lane = np.arange(LANES)
# element (row, col) of its matrix read by (lane, half), without and with .trans
_ROW = np.stack([_lane >> 2, _lane >> 2], axis=1)
_COL = np.stack([2 * (_lane & 3), 2 * (_lane & 3) + 1], axis=1)


def load_rows(rows: np.ndarray, *, trans: bool = False) -> np.ndarray:
    """Registers (..., 32, num) uint32 from the rows the lanes point at.

    rows: (..., 8*num, 8) of 16-bit elements (float16, bfloat16 or uint16), num in {1, 2, 4}; row
    8j + r is the row that lane 8j + r addresses (row r of matrix j).
    """
    if (
        not isinstance(rows, np.ndarray)
        or rows.ndim < 2
        or rows.shape[-1] != 8
        or rows.shape[-2] not in tuple(8 * n for n in _NUMS)
    ):
        raise ValueError(
            f"rows must be a numpy array (..., 8*num, 8) with num in {_NUMS}, "
            f"got {getattr(rows, 'shape', type(rows).__name__)}"
        )
    if rows.dtype not in _F16_TYPES:
        raise ValueError(f"rows must hold 16-bit elements (float16, bfloat16, uint16), got {rows.dtype}")
    num = rows.shape[-2] // 8
    mats = rows.reshape(rows.shape[:-2] + (num, 8, 8))
    r, c = (_COL, _ROW) if trans else (_ROW, _COL)
    # values (..., num, 32, 2): matrix j, lane l, half h
    vals = mats[..., :, r, c]
    vals = np.moveaxis(vals, -3, -2)  # (..., 32, num, 2)
    return pack16(vals.reshape(vals.shape[:-2] + (2 * num,)))


def load_smem(smem: np.ndarray, addresses, *, num: int, trans: bool = False) -> np.ndarray:
    """ldmatrix from a flat shared-memory image.

    smem: (..., S) 16-bit elements; addresses: (32,) element offsets of the row each lane gives (only
    lanes 0 .. 8*num-1 are read, as on the GPU). Each address must be 16-byte aligned (a multiple of 8
    elements) with its 8 elements inside smem. Returns (..., 32, num) uint32.
    """
    if num not in _NUMS:
        raise ValueError(f"num must be one of {_NUMS}, got {num!r}")
    if not isinstance(smem, np.ndarray) or smem.ndim < 1:
        raise ValueError("smem must be a numpy array (..., S) of 16-bit elements")
    addr = np.asarray(addresses)
    if addr.shape != (LANES,) or addr.dtype.kind not in "iu":
        raise ValueError(f"addresses must be 32 integer element offsets, got shape {addr.shape} dtype {addr.dtype}")
    used = addr[: 8 * num].astype(np.int64)
    if (used % 8).any() or (used < 0).any() or (used + 8 > smem.shape[-1]).any():
        raise ValueError(
            f"addresses of lanes 0..{8 * num - 1} must be multiples of 8 (16 bytes) with "
            f"8 elements inside smem of {smem.shape[-1]} elements"
        )
    rows = smem[..., used[:, None] + np.arange(8)]
    return load_rows(rows, trans=trans)


# ---- the kernel's address patterns (element offsets into a row-major tile with leading dim ld) ----


def _offsets(row, col, ld):
    if not (isinstance(ld, (int, np.integer)) and ld >= 16 and ld % 8 == 0):
        raise ValueError(f"ld must be an int >= 16 and a multiple of 8 (16-byte rows), got {ld!r}")
    return (row * ld + col).astype(np.int64)


def a_x4(ld: int = 16) -> np.ndarray:
    """A 16x16 tile: lane l -> row l % 16, column 8 (l // 16). d0..d3 = the A fragment's 4 registers."""
    return _offsets(_lane % 16, 8 * (_lane // 16), ld)


def kt_x2(ld: int = 16) -> np.ndarray:
    """K rows (8 keys x 16 d): lanes 0..15 -> key l % 8, column 8 ((l // 8) % 2). d0, d1 = B of K^T."""
    return _offsets(_lane % 8, 8 * ((_lane // 8) % 2), ld)


def kt_x4(ld: int = 16) -> np.ndarray:
    """K rows (16 keys x 16 d): key l % 8 + 8 (l // 16), column 8 ((l // 8) % 2).

    d0, d1 = B of K^T for keys 0..7 (n8 tile 0); d2, d3 = keys 8..15 (n8 tile 1).
    """
    return _offsets(_lane % 8 + 8 * (_lane // 16), 8 * ((_lane // 8) % 2), ld)


def v_x2t(ld: int = 16) -> np.ndarray:
    """V rows (16 keys x 8 d), with .trans: lanes 0..15 -> key l % 16, column 0. d0, d1 = B of V."""
    return _offsets(_lane % 16, 0 * _lane, ld)


def v_x4t(ld: int = 16) -> np.ndarray:
    """V rows (16 keys x 16 d), with .trans: key l % 16, column 8 (l // 16).

    d0, d1 = B of V[:, 0:8] (n8 tile 0); d2, d3 = B of V[:, 8:16] (n8 tile 1).
    """
    return _offsets(_lane % 16, 8 * (_lane // 16), ld)


# ---- the sm_100a / sm_120a forms: 8-bit elements in 16-byte rows ----------------------------------------------------
#
# ldmatrix.m8n16 (.x1 / .x2 / .x4; .b8x16 from .b4x16_p64 or .b6x16_p32), ldmatrix.m16n16 (.x1 / .x2, .trans always;
# .b8, or .b8x16 from either packed format) and stmatrix.m16n8 (.x1 / .x2 / .x4, .trans always, .b8): PTX ISA 8.6+,
# "ldmatrix" Figures 105 / 106 and "stmatrix". Lane i gives the address of row i (16 bytes; .m16n16: 16 rows per
# matrix, so lanes 16m .. 16m + 15 give the rows of matrix m; .m8n16 / .m16n8: lanes 8m .. 8m + 7). Each register holds
# four 8-bit elements, byte k at bits 8k .. 8k + 7. With g = lane // 4 and q = lane % 4:
#   m8n16,        register m, byte k:          row 8m + g,                      element 4q + k
#   m16n16.trans, register 2m + h, byte k:     row 16m + 4q + (k & 1) + 2h,     element g + 8 (k >> 1)
#   m16n8.trans,  register m, byte k:          row 8m + 2q + (k & 1),           element g + 8 (k >> 1)
# i.e. m16n16.trans gives each lane four consecutive columns (4q .. 4q + 3) of rows g and g + 8 of the transposed
# 16 x 16 matrix (the ISA's words), and m16n8.trans stores an m16n8 fragment laid out as the mma accumulator (row g,
# columns 2q, 2q + 1 in bytes 0, 1; row g + 8 in bytes 2, 3) transposed into 8 rows of 16 bytes. The tests hold these
# maps to CuTe's SM100 copy atoms (copy_traits_sm100.hpp: SM100_U8x8_LDSM_T, SM100_U8x16_LDSM_T,
# SM100_SU4_DU8x16_x*_LDSM_N, SM100_SU6_DU8x16_x*_LDSM_N, SM100_U8x*_STSM_T).
#
# The packed source rows (PTX ISA "Optional Decompression", the formats TMA's 16U4_ALIGN16B / 16U6_ALIGN16B write):
# .b4x16_p64 is 16 4-bit codes packed into bytes 0-7 (element 2i in the low nibble of byte i), bytes 8-15 padding;
# .b6x16_p32 is 16 6-bit codes packed little-endian into bytes 0-11 (element e in bits 6e .. 6e + 5), bytes 12-15
# padding. The padding is never read. Each code lands in the low bits of its destination byte (a 4-bit code in bits
# 0-3, a 6-bit code in bits 0-5), the other bits zero. The ISA draws this only in figures; CUTLASS states the 4-bit
# case in the comment of fp4_shift_A / fp4_shift_B (cute/atom/mma_traits_sm120.hpp): ldmatrix .b4x16_p64 leaves each
# FP4 code in the low four bits of its byte, so a kernel shifts e2m1 bytes left by two before a kind::f8f6f4 mma,
# whose container holds e2m1 in bits 2-5, and FP6 needs no such shift. No sm_120 GPU here
# has confirmed it: CONTAINER_SHIFT is the one place this reading lives.

FORMAT_BITS = {".b8": 8, ".b6x16_p32": 6, ".b4x16_p64": 4}  # source element bits of each source format
CONTAINER_SHIFT = {".b8": 0, ".b6x16_p32": 0, ".b4x16_p64": 0}  # where a code sits in its destination byte
B8_NUMS = {"m8n16": (1, 2, 4), "m16n16": (1, 2), "m16n8": (1, 2, 4)}
_q, _g, _k = (_lane % 4)[:, None], (_lane // 4)[:, None], np.arange(4)[None, :]


def b8_map(shape: str, num: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, element), each (32, registers, 4): the addressed row and the element of it that byte k of register r of
    each lane holds (ldmatrix) or gives (stmatrix), for ``shape`` "m8n16", "m16n16" (.trans) or "m16n8" (.trans)."""
    if shape not in B8_NUMS or num not in B8_NUMS[shape]:
        raise ValueError(f"{shape} takes num in {B8_NUMS.get(shape, ())}, got {num!r}")
    rows, elems = [], []
    for m in range(num):
        for h in (0, 1) if shape == "m16n16" else (0,):
            if shape == "m8n16":
                rows.append(8 * m + _g + 0 * _k)
                elems.append(4 * _q + _k)
            else:
                base = 16 * m + 2 * h if shape == "m16n16" else 8 * m
                step = 4 if shape == "m16n16" else 2
                rows.append(base + step * _q + (_k & 1))
                elems.append(_g + 8 * (_k >> 1))
    return np.stack(rows, axis=1).astype(np.int64), np.stack(elems, axis=1).astype(np.int64)


def row_lanes(shape: str, num: int) -> int:
    """How many lanes give a row address: 16 per 16 x 16 matrix, 8 per 8 x 16 or 16 x 8 one."""
    return (16 if shape == "m16n16" else 8) * num


def unpack_rows(rows: np.ndarray, fmt: str) -> np.ndarray:
    """Rows (..., 16) uint8 as read from shared memory -> their 16 elements (..., 16) uint8, each in its 8-bit
    container (CONTAINER_SHIFT), the padding of the packed formats not read."""
    bits = FORMAT_BITS[fmt]
    if bits == 8:
        return np.asarray(rows, np.uint8)
    packed = np.unpackbits(np.ascontiguousarray(rows[..., : 2 * bits], np.uint8), axis=-1, bitorder="little")
    codes = packed.reshape(packed.shape[:-1] + (16, bits)) @ (1 << np.arange(bits, dtype=np.uint16))
    return (codes.astype(np.uint8) << np.uint8(CONTAINER_SHIFT[fmt])).astype(np.uint8)


def load_b8(rows: np.ndarray, shape: str, num: int, fmt: str = ".b8") -> np.ndarray:
    """Registers (W, 32, registers) uint32 of ldmatrix.``shape``.x``num`` from the rows (W, row_lanes, 16) uint8 the
    lanes point at (row i: lane i's), the source format ``fmt`` (".b8", ".b6x16_p32", ".b4x16_p64")."""
    row, elem = b8_map(shape, num)
    elements = unpack_rows(rows, fmt)
    out = elements[:, row, elem]  # (W, 32, registers, 4) bytes
    return np.ascontiguousarray(out).view(np.uint32)[..., 0]


def store_b8(regs: np.ndarray, shape: str, num: int) -> np.ndarray:
    """The inverse for stmatrix.m16n8.x``num``.trans.b8: registers (W, 32, num) uint32 -> the rows (W, 8 num, 16)
    uint8 the lanes' addresses receive."""
    row, elem = b8_map(shape, num)
    W = regs.shape[0]
    rows = np.empty((W, row_lanes(shape, num), 16), np.uint8)
    rows[:, row, elem] = np.ascontiguousarray(regs, np.uint32).view(np.uint8).reshape(W, 32, -1, 4)
    return rows
