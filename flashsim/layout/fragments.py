"""Element <-> (lane, register, half) maps of the mma.m16n8k16 operands A, B and C/D.

Source: PTX ISA, "Matrix fragments for mma.m16n8k16". With ``g = lane >> 2``
(groupID) and ``t = lane % 4`` (thread in group), element i of a lane's fragment sits at

    A (16 x 16, M x K, row)    a0..a7:  row = g + 8*((i>>1)&1)   col = 2t + (i&1) + 8*(i>>2)
    B (16 x 8,  K x N, col)    b0..b3:  row = 2t + (i&1) + 8*(i>>1)   col = g
    C/D (16 x 8, M x N)        c0..c3:  row = g + 8*(i>>1)        col = 2t + (i&1)

Registers. 16-bit elements go two to a 32-bit register, the lower-indexed one in bits 0..15:
element i is in register i >> 1, half i & 1 (A: 4 registers, B: 2, C as f16x2: 2). f32 C/D has one
element per register: element i is register i (4 registers), and its ``half`` is reported as 0.

Wide tiles. A tile that is several instruction tiles side by side along the columns (the O accumulator
16 x d of a warp, the S accumulator 16 x Bc, P as 16 x Bc) maps tile by tile, registers concatenated
in the same order: register = tile * regs_per_tile + r. So for O with n8 tiles, f32: reg = ntile*4 + i;
f16x2: reg = ntile*2 + (i >> 1), half i & 1. A's k16 slices: reg = kslice*4 + r.

The PTX formulas are written once (``a_coord``, ``b_coord``, ``c_coord``); they work on numpy ints and
on sympy symbols alike, so proofs/prove_repack.py reasons about exactly the maps used here. CuTe's
thread-value layouts (``CUTE_A``, ``CUTE_B``, ``CUTE_C``) are a second, independent statement of the
same maps, compared with these tables in the tests.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache
from typing import NamedTuple

import ml_dtypes
import numpy as np

from .cute import Layout

LANES = 32
MMA_M, MMA_N, MMA_K = 16, 8, 16

_F16_TYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.uint16))


# ---- the PTX formulas (one place) --------------------------------------------------------------


def a_coord(g, t, i: int):
    """(row, col) in the 16x16 A tile of element a_i of the lane with groupID g, thread-in-group t."""
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def b_coord(g, t, i: int):
    """(row k, col n) in the 16x8 B tile (K x N) of element b_i."""
    return 2 * t + (i & 1) + 8 * (i >> 1), g


def c_coord(g, t, i: int):
    """(row, col) in the 16x8 C/D tile of element c_i."""
    return g + 8 * (i >> 1), 2 * t + (i & 1)


# mma.m16n8k32 with 8-bit inputs (PTX ISA, "Matrix fragments for mma.m16n8k32"): four elements per register, the
# lowest-indexed in the lowest byte; C / D as m16n8k16 (c_coord).
#   A (16 x 32, row)   a0..a15: row = g + 8*((i>>2)&1)        col = 4t + (i&3) + 16*(i>>3)
#   B (32 x 8, col)    b0..b7:  row = 4t + (i&3) + 16*(i>>2)   col = g
def a8_coord(g, t, i: int):
    """(row, col) in the 16x32 A tile of 8-bit element a_i (m16n8k32)."""
    return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)


def b8_coord(g, t, i: int):
    """(row k, col n) in the 32x8 B tile (K x N) of 8-bit element b_i (m16n8k32)."""
    return 4 * t + (i & 3) + 16 * (i >> 2), g


# mma.m16n8k64 with 4-bit inputs (PTX ISA, "Matrix fragments for mma.m16n8k64": .e2m1 of kind::mxf4 / mxf4nvf4, as
# .u4 / .s4): eight elements per register, the lowest-indexed in the lowest nibble; C / D as m16n8k16 (c_coord).
#   A (16 x 64, row)   a0..a31: row = g + 8*((i>>3)&1)        col = 8t + (i&7) + 32*(i>>4)
#   B (64 x 8, col)    b0..b15: row = 8t + (i&7) + 32*(i>>3)   col = g
# The f8f6f4 kinds (m16n8k32, any of e2m1 / e2m3 / e3m2 / e4m3 / e5m2) keep one element per byte: a8_coord, b8_coord,
# the codes in their 8-bit containers (flashsim.layout.blockscale).
def a4_coord(g, t, i: int):
    """(row, col) in the 16x64 A tile of 4-bit element a_i (m16n8k64)."""
    return g + 8 * ((i >> 3) & 1), 8 * t + (i & 7) + 32 * (i >> 4)


def b4_coord(g, t, i: int):
    """(row k, col n) in the 64x8 B tile (K x N) of 4-bit element b_i (m16n8k64)."""
    return 8 * t + (i & 7) + 32 * (i >> 3), g


# ---- CuTe's thread-value layouts (cutlass include/cute/atom/mma_traits_sm80.hpp) -----------------
# Convention: the layout maps (thread, value) -> linear index of the element in the operand tile,
# column-major: A over M x K (index = m + 16 k), B over N x K (index = n + 8 k), C over M x N
# (index = m + 16 n). Thread index = lane; its mode (4,8) splits it as t + 4 g. The value index v is
# the fragment element number i (colexicographic over the value modes).
CUTE_A = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
CUTE_B = Layout(((4, 8), (2, 2)), ((16, 1), (8, 64)))
CUTE_C = Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))
# m16n8k32 with 8-bit inputs (the same source's 16x8x32 integer traits): A over M x K (index = m + 16 k), B over
# N x K (index = n + 8 k); C is CUTE_C
CUTE_A8 = Layout(((4, 8), (4, 2, 2)), ((64, 1), (16, 8, 256)))
CUTE_B8 = Layout(((4, 8), (4, 2)), ((32, 1), (8, 128)))


def cute_coords(layout: Layout, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(first, second) coordinate tables (32, values) of a CuTe TV layout over a column-major tile.

    ``rows`` is the extent of the first (fastest) coordinate: 16 for A (m, k) and C (m, n), 8 for B
    (n, k). Entry [lane, v] of the result is the coordinate of value v of that lane.
    """
    nvals = layout.size // LANES
    idx = layout.table().reshape(nvals, LANES).T  # index = lane + 32 v, colexicographic
    return idx % rows, idx // rows


# ---- fragment maps as integer tables ------------------------------------------------------------


class Location(NamedTuple):
    """Where an element lives: lane, register, half (0 = bits 0..15; always 0 for 32-bit elements)."""

    lane: np.ndarray
    reg: np.ndarray
    half: np.ndarray


@dataclass(frozen=True, eq=False)
class FragmentMap:
    """One operand's map, as numpy tables computed once.

    row[lane, i], col[lane, i]: tile coordinate of element i of a lane.
    lane_of[r, c], elem_of[r, c]: the inverse, over the rows x cols tile.
    per_reg: elements per 32-bit register (2 for 16-bit types, 1 for f32).
    """

    name: str
    rows: int
    cols: int
    per_reg: int
    row: np.ndarray
    col: np.ndarray
    lane_of: np.ndarray
    elem_of: np.ndarray

    @property
    def elems(self) -> int:
        return self.row.shape[1]

    @property
    def regs(self) -> int:
        return self.elems // self.per_reg

    @classmethod
    def build(cls, name, rows, cols, per_reg, coord, elems) -> FragmentMap:
        lane = np.arange(LANES)
        g, t = lane >> 2, lane & 3
        rc = [coord(g, t, i) for i in range(elems)]
        row = np.stack([np.broadcast_to(r, (LANES,)) for r, _ in rc], axis=1).astype(np.int64)
        col = np.stack([np.broadcast_to(c, (LANES,)) for _, c in rc], axis=1).astype(np.int64)
        lane_of = np.full((rows, cols), -1, np.int64)
        elem_of = np.full((rows, cols), -1, np.int64)
        lane_of[row, col] = lane[:, None]
        elem_of[row, col] = np.arange(elems)[None, :]
        if (lane_of < 0).any():
            raise AssertionError(f"{name}: the PTX formulas do not cover the tile")  # a broken formula, not input
        for arr in (row, col, lane_of, elem_of):
            arr.setflags(write=False)
        return cls(name, rows, cols, per_reg, row, col, lane_of, elem_of)

    # -- wide tiles: ``n`` instruction tiles side by side along the columns ----------------------
    def wide_tables(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """row, col tables (32, n*elems) of n tiles side by side; element k*elems + i is tile k's i."""
        return _wide_tables(self, n)

    def gather(self, tile: np.ndarray) -> np.ndarray:
        """tile (..., rows, n*cols) -> element values (..., 32, n*elems), same dtype."""
        n = _ntiles(tile, self, "tile")
        flat = tile.reshape(tile.shape[:-2] + (-1,))
        return np.take(flat, _flat_tables(self, n)[0], axis=-1)

    def scatter(self, values: np.ndarray) -> np.ndarray:
        """element values (..., 32, n*elems) -> tile (..., rows, n*cols): the inverse of gather."""
        if values.ndim < 2 or values.shape[-2] != LANES or values.shape[-1] % self.elems:
            raise ValueError(f"values must have shape (..., 32, n*{self.elems}) for {self.name}, got {values.shape}")
        n = values.shape[-1] // self.elems
        flat = values.reshape(values.shape[:-2] + (-1,))
        return np.take(flat, _flat_tables(self, n)[1], axis=-1)

    def locate(self, row, col) -> Location:
        """(lane, reg, half) of tile element (row, col); vectorised; col may run over wide tiles."""
        row, col = np.asarray(row), np.asarray(col)
        if row.dtype.kind not in "iu" or col.dtype.kind not in "iu":
            raise ValueError(f"row and col must be integers, got {row.dtype} and {col.dtype}")
        if ((row < 0) | (row >= self.rows)).any() or (col < 0).any():
            raise ValueError(f"row must be in 0..{self.rows - 1} and col >= 0 for {self.name}")
        k, c = np.divmod(col, self.cols)
        lane = self.lane_of[row, c]
        elem = self.elem_of[row, c]
        reg = k * self.regs + elem // self.per_reg
        half = elem % self.per_reg
        return Location(lane, reg, half)

    def element(self, lane, reg, half=0) -> tuple[np.ndarray, np.ndarray]:
        """The inverse of locate: (row, col) held by (lane, reg, half); vectorised."""
        lane, reg, half = np.asarray(lane), np.asarray(reg), np.asarray(half)
        if ((lane < 0) | (lane >= LANES)).any():
            raise ValueError("lane must be in 0..31")
        if ((half < 0) | (half >= self.per_reg)).any() or (reg < 0).any():
            raise ValueError(f"reg must be >= 0 and half in 0..{self.per_reg - 1} for {self.name}")
        k, r = np.divmod(reg, self.regs)
        elem = r * self.per_reg + half
        return self.row[lane, elem], self.col[lane, elem] + k * self.cols


@cache
def _wide_tables(fmap: FragmentMap, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Computed once per (map, n): the emulator gathers through them on every tile."""
    row = np.tile(fmap.row, (1, n))
    col = (fmap.col[:, None, :] + fmap.cols * np.arange(n)[None, :, None]).reshape(LANES, -1)
    row.setflags(write=False)
    col.setflags(write=False)
    return row, col


@cache
def _flat_tables(fmap: FragmentMap, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(gather, scatter) index tables of n tiles side by side, flattened: np.take along one axis is the
    fastest numpy gather. gather (32, n*elems) indexes the flat tile; scatter (rows, n*cols) indexes the
    flat (lane, element) values, its inverse permutation."""
    row, col = _wide_tables(fmap, n)
    gather = row * (n * fmap.cols) + col
    scatter = np.empty(fmap.rows * n * fmap.cols, np.int64)
    scatter[gather.ravel()] = np.arange(gather.size)
    scatter = scatter.reshape(fmap.rows, n * fmap.cols)
    gather.setflags(write=False)
    scatter.setflags(write=False)
    return gather, scatter


def _ntiles(tile, fmap: FragmentMap, argname: str) -> int:
    if not isinstance(tile, np.ndarray) or tile.ndim < 2:
        raise ValueError(
            f"{argname} must be a numpy array (..., {fmap.rows}, n*{fmap.cols}), got {type(tile).__name__}"
        )
    if tile.shape[-2] != fmap.rows or tile.shape[-1] % fmap.cols or tile.shape[-1] == 0:
        raise ValueError(
            f"{argname} must have shape (..., {fmap.rows}, n*{fmap.cols}) for {fmap.name}, got {tile.shape}"
        )
    return tile.shape[-1] // fmap.cols


A = FragmentMap.build("A (16x16 row)", MMA_M, MMA_K, 2, a_coord, 8)
B = FragmentMap.build("B (16x8 col)", MMA_K, MMA_N, 2, b_coord, 4)
C_F32 = FragmentMap.build("C/D f32 (16x8)", MMA_M, MMA_N, 1, c_coord, 4)
C_F16 = FragmentMap.build("C/D f16x2 (16x8)", MMA_M, MMA_N, 2, c_coord, 4)
A8 = FragmentMap.build("A (16x32 row, 8-bit)", MMA_M, 32, 4, a8_coord, 16)
B8 = FragmentMap.build("B (32x8 col, 8-bit)", 32, MMA_N, 4, b8_coord, 8)
A4 = FragmentMap.build("A (16x64 row, 4-bit)", MMA_M, 64, 8, a4_coord, 32)
B4 = FragmentMap.build("B (64x8 col, 4-bit)", 64, MMA_N, 8, b4_coord, 16)


def pack8(values: np.ndarray) -> np.ndarray:
    """(..., 32, 4k) 8-bit element values (any 1-byte dtype) -> (..., 32, k) uint32 registers, element 4r + j in
    byte j of register r (the lowest-indexed element in the lowest byte)."""
    v = np.ascontiguousarray(values).view(np.uint8).astype(np.uint32)
    v = v.reshape(v.shape[:-1] + (-1, 4))
    return v[..., 0] | (v[..., 1] << 8) | (v[..., 2] << 16) | (v[..., 3] << 24)


def pack4(values: np.ndarray) -> np.ndarray:
    """(..., 32, 8k) 4-bit codes (uint8, 0..15) -> (..., 32, k) uint32 registers, element 8r + j in bits 4j .. 4j + 3
    of register r (the lowest-indexed element in the lowest nibble)."""
    v = (np.asarray(values).astype(np.uint32) & 0xF).reshape(values.shape[:-1] + (-1, 8))
    return np.bitwise_or.reduce(v << (4 * np.arange(8, dtype=np.uint32)), axis=-1)


def unpack4(regs: np.ndarray) -> np.ndarray:
    """The inverse of pack4: uint32 registers (..., k) -> 4-bit codes (..., 8k) uint8."""
    nib = (_as_words(regs, "regs")[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF
    return nib.astype(np.uint8).reshape(regs.shape[:-1] + (-1,))


def unpack8(regs: np.ndarray) -> np.ndarray:
    """The inverse of pack8: uint32 registers (..., k) -> bytes (..., 4k) uint8, byte j of register r at 4r + j."""
    return np.ascontiguousarray(_as_words(regs, "regs")).view("<u4").view(np.uint8).reshape(regs.shape[:-1] + (-1,))


# ---- packing ----------------------------------------------------------------------------------

_LITTLE = sys.byteorder == "little"


def pack16(values: np.ndarray) -> np.ndarray:
    """16-bit elements (..., 2r) -> uint32 registers (..., r); element 2j in bits 0..15.

    On a little-endian host a contiguous pair of uint16 already is that word: a view, no arithmetic.
    """
    bits = np.ascontiguousarray(values).view(np.uint16)
    if bits.ndim == 0 or bits.shape[-1] % 2:
        raise ValueError(f"values must have an even last dimension (pairs), got shape {bits.shape}")
    if _LITTLE:
        return bits.view(np.uint32)
    wide = bits.astype(np.uint32)
    return wide[..., 0::2] | (wide[..., 1::2] << 16)


def unpack16(regs: np.ndarray, dtype=np.float16) -> np.ndarray:
    """uint32 registers (..., r) -> 16-bit elements (..., 2r) of ``dtype`` (float16, bfloat16, uint16)."""
    regs = _as_words(regs, "regs")
    dt = _dtype16(dtype)
    if _LITTLE:
        return np.ascontiguousarray(regs).view(np.uint16).view(dt)
    lo = (regs & 0xFFFF).astype(np.uint16)
    hi = (regs >> 16).astype(np.uint16)
    return np.stack([lo, hi], axis=-1).reshape(regs.shape[:-1] + (-1,)).view(dt)


def _as_words(regs, argname) -> np.ndarray:
    if not isinstance(regs, np.ndarray) or regs.dtype != np.uint32:
        raise ValueError(
            f"{argname} must be a numpy uint32 array of raw register words, got "
            f"{getattr(regs, 'dtype', type(regs).__name__)}"
        )
    return regs


def _dtype16(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in _F16_TYPES:
        raise ValueError(f"dtype must be float16, bfloat16 or uint16, got {dt}")
    return dt


def _check16(tile, argname) -> None:
    dt = getattr(tile, "dtype", None)
    if dt is None or np.dtype(dt) not in _F16_TYPES:
        raise ValueError(
            f"{argname} must be a float16 or bfloat16 numpy array, got {dt if dt is not None else type(tile).__name__}"
        )


def _check_regs(regs, argname, per_tile) -> np.ndarray:
    regs = _as_words(regs, argname)
    if regs.ndim < 2 or regs.shape[-2] != LANES or regs.shape[-1] % per_tile or regs.shape[-1] == 0:
        raise ValueError(f"{argname} must have shape (..., 32, n*{per_tile}), got {regs.shape}")
    return regs


# ---- operand fragments: tile <-> registers ----------------------------------------------------


def a_fragment(tile: np.ndarray) -> np.ndarray:
    """A tile (..., 16, 16k) of float16 / bfloat16 -> registers (..., 32, 4k) uint32 (reg = kslice*4 + r)."""
    _check16(tile, "tile")
    return pack16(A.gather(tile))


def a_tile(regs: np.ndarray, dtype=np.float16) -> np.ndarray:
    """Inverse of a_fragment: registers (..., 32, 4k) -> tile (..., 16, 16k) of ``dtype``."""
    return A.scatter(unpack16(_check_regs(regs, "regs", 4), dtype))


def b_fragment(tile: np.ndarray) -> np.ndarray:
    """B tile (..., 16, 8n) given as K x N, float16 / bfloat16 -> registers (..., 32, 2n) (reg = ntile*2 + r)."""
    _check16(tile, "tile")
    return pack16(B.gather(tile))


def b_tile(regs: np.ndarray, dtype=np.float16) -> np.ndarray:
    """Inverse of b_fragment: registers (..., 32, 2n) -> K x N tile (..., 16, 8n)."""
    return B.scatter(unpack16(_check_regs(regs, "regs", 2), dtype))


def c_fragment(tile: np.ndarray) -> np.ndarray:
    """C/D tile (..., 16, 8n) -> registers: float32 gives (..., 32, 4n) (reg = ntile*4 + i), float16
    gives f16x2 registers (..., 32, 2n) (reg = ntile*2 + (i >> 1), half i & 1)."""
    dt = getattr(tile, "dtype", None)
    if dt == np.float32:
        return np.ascontiguousarray(C_F32.gather(tile)).view(np.uint32)
    if dt == np.float16:
        return pack16(C_F16.gather(tile))
    raise ValueError(f"tile must be float32 or float16 (the accumulator types), got {dt}")


def c_tile(regs: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Inverse of c_fragment: registers -> C/D tile (..., 16, 8n) of float32 (4 regs per n8 tile) or
    float16 (2 regs per n8 tile)."""
    dt = np.dtype(dtype)
    if dt == np.float32:
        return C_F32.scatter(np.ascontiguousarray(_check_regs(regs, "regs", 4)).view(np.float32))
    if dt == np.float16:
        return C_F16.scatter(unpack16(_check_regs(regs, "regs", 2), np.float16))
    raise ValueError(f"dtype must be float32 or float16, got {dt}")


def c_map(accum: str = "f32") -> FragmentMap:
    """The C/D map for an accumulator type, "f32" or "f16"."""
    if accum == "f32":
        return C_F32
    if accum == "f16":
        return C_F16
    raise ValueError(f"accum must be 'f32' or 'f16', got {accum!r}")


# ---- locators for reports --------------------------------------------------------------------


def locate_a(row, col) -> Location:
    """(lane, reg, half) of P/Q element (row, col) in a 16 x 16k A operand (reg = kslice*4 + r)."""
    return A.locate(row, col)


def locate_b(k, n) -> Location:
    """(lane, reg, half) of element (k, n) of a K x 8n B operand (reg = ntile*2 + r)."""
    return B.locate(k, n)


def locate_c(row, col, accum: str = "f32") -> Location:
    """(lane, reg, half) of element (row, col) of a 16 x 8n accumulator (S or O of one warp).

    f32: reg = ntile*4 + i, half 0. f16 (f16x2): reg = ntile*2 + (i >> 1), half = i & 1. Vectorised.
    """
    return c_map(accum).locate(row, col)


def describe_c(row: int, col: int, accum: str = "f32") -> str:
    """A readable name for one accumulator element, e.g. for the first mismatch of a diff report."""
    loc = locate_c(row, col, accum)
    lane, reg, half = int(loc.lane), int(loc.reg), int(loc.half)
    where = f"lane {lane} (groupID {lane >> 2}, tid {lane & 3}), register {reg}"
    return where + (f" {'high' if half else 'low'} half" if accum == "f16" else "")
