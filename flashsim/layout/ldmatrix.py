"""ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16, as vectorised gathers.

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
