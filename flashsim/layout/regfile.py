"""The warp register file and the warp shuffles, vectorised over any number of leading warp dims.

A ``RegFile`` is a numpy uint32 array (..., 32, R): the raw 32-bit words of R registers in each of the
32 lanes of one warp, for every warp of the leading dims. Values enter and leave it only as bit
patterns: f32 words, or f16x2 / bf16x2 pairs with the lower-indexed element in bits 0..15.

Shuffles follow the PTX ``shfl.sync`` semantics (PTX ISA, "shfl.sync"): with b the lane operand and c
the packed clamp (bits 0..4) and segment mask (bits 8..12),
    maxLane = (lane & segmask) | (clamp & ~segmask),  minLane = lane & segmask
    up: j = lane - b, valid iff j >= maxLane     down: j = lane + b, valid iff j <= maxLane
    bfly: j = lane ^ b, valid iff j <= maxLane   idx: j = minLane | (b & ~segmask), valid iff j <= maxLane
and an invalid j reads the lane's own value. CUDA's ``__shfl_*_sync(mask, v, b, width)`` passes
c = ((32 - width) << 8) | 0x1f (up: (32 - width) << 8). Only full-warp shuffles are modelled (every lane
participates, as in the attention kernel).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .fragments import LANES, FragmentMap, pack16, unpack16

LANE = np.arange(LANES)
GROUP_ID = LANE >> 2  # groupID: the quad a lane belongs to (its accumulator rows g, g + 8)
THREAD_IN_GROUP = LANE & 3  # tid: its position in the quad (its accumulator columns 2t, 2t + 1)

_MODES = ("up", "down", "bfly", "idx")
_WIDTHS = (1, 2, 4, 8, 16, 32)


def shfl_source_lanes(mode: str, b, c: int = 0x1F) -> tuple[np.ndarray, np.ndarray]:
    """(j, valid) for every lane: the lane each one reads (its own where invalid) and the predicate.

    b: an int or an int array (32,) (a per-lane operand); c: the packed clamp / segment-mask operand.
    """
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}, got {mode!r}")
    bval = np.broadcast_to(np.asarray(b, dtype=np.int64), (LANES,)) & 0x1F
    if not isinstance(c, (int, np.integer)):
        raise ValueError(f"c must be an int (clamp | segmask << 8), got {c!r}")
    cval, seg = int(c) & 0x1F, (int(c) >> 8) & 0x1F
    max_lane = (LANE & seg) | (cval & ~seg & 0x1F)
    min_lane = LANE & seg
    if mode == "up":
        j = LANE - bval
        valid = j >= max_lane
    elif mode == "down":
        j = LANE + bval
        valid = j <= max_lane
    elif mode == "bfly":
        j = LANE ^ bval
        valid = j <= max_lane
    else:
        j = min_lane | (bval & ~seg & 0x1F)
        valid = j <= max_lane
    return np.where(valid, j, LANE), valid


def shfl_sync(values: np.ndarray, mode: str, b, c: int = 0x1F, *, axis: int = -2) -> np.ndarray:
    """Every lane's value from its source lane; ``values`` has the lane axis (length 32) at ``axis``.

    Works on raw words or on any dtype (a shuffle moves bits and never changes them).
    """
    values = np.asarray(values)
    if values.ndim == 0 or values.shape[axis] != LANES:
        raise ValueError(f"values must have 32 lanes along axis {axis}, got shape {values.shape}")
    j, _ = shfl_source_lanes(mode, b, c)
    return np.take(values, j, axis=axis)


def width_c(width: int, mode: str = "bfly") -> int:
    """The c operand CUDA's __shfl_*_sync builds for a sub-warp width."""
    if width not in _WIDTHS:
        raise ValueError(f"width must be one of {_WIDTHS}, got {width!r}")
    return ((32 - width) << 8) | (0 if mode == "up" else 0x1F)


def shfl_xor(values, lane_mask: int, width: int = 32, *, axis: int = -2):
    """__shfl_xor_sync(0xffffffff, v, lane_mask, width)."""
    return shfl_sync(values, "bfly", lane_mask, width_c(width), axis=axis)


def shfl_idx(values, src_lane, width: int = 32, *, axis: int = -2):
    """__shfl_sync(0xffffffff, v, src_lane, width); src_lane an int or a per-lane array (32,)."""
    return shfl_sync(values, "idx", src_lane, width_c(width), axis=axis)


def shfl_up(values, delta: int, width: int = 32, *, axis: int = -2):
    """__shfl_up_sync(0xffffffff, v, delta, width)."""
    return shfl_sync(values, "up", delta, width_c(width, "up"), axis=axis)


def shfl_down(values, delta: int, width: int = 32, *, axis: int = -2):
    """__shfl_down_sync(0xffffffff, v, delta, width)."""
    return shfl_sync(values, "down", delta, width_c(width), axis=axis)


def quad_allreduce(values, op, *, axis: int = -2):
    """The kernel's row reduction over a quad: v = op(v, shfl_xor(v, 1)); v = op(v, shfl_xor(v, 2)).

    ``op`` is the exact binary operation the kernel uses (np.maximum / np.fmax for the row max,
    np.add on float32 for the row sum); the order of operations is the kernel's, so float sums agree
    bit for bit. Each lane ends with the reduction over its quad (lanes 4g .. 4g+3).
    """
    values = np.asarray(values)
    values = op(values, shfl_xor(values, 1, axis=axis))
    return op(values, shfl_xor(values, 2, axis=axis))


class RegFile:
    """Raw 32-bit registers of one or many warps: ``words`` is uint32 (..., 32, R)."""

    __slots__ = ("words",)

    def __init__(self, words: np.ndarray):
        if not isinstance(words, np.ndarray) or words.dtype != np.uint32:
            raise ValueError(f"words must be a numpy uint32 array, got {getattr(words, 'dtype', type(words).__name__)}")
        if words.ndim < 2 or words.shape[-2] != LANES:
            raise ValueError(f"words must have shape (..., 32, R), got {words.shape}")
        self.words = words

    # ---- construction ----------------------------------------------------------------------
    @classmethod
    def zeros(cls, regs: int, batch: tuple = ()) -> RegFile:
        if not (isinstance(regs, int) and regs >= 1):
            raise ValueError(f"regs must be a positive int, got {regs!r}")
        return cls(np.zeros(tuple(batch) + (LANES, regs), np.uint32))

    @classmethod
    def from_f32(cls, values: np.ndarray) -> RegFile:
        """float32 (..., 32, R): one value per register."""
        if not isinstance(values, np.ndarray) or values.dtype != np.float32:
            raise ValueError(
                f"values must be a float32 numpy array, got {getattr(values, 'dtype', type(values).__name__)}"
            )
        return cls(np.ascontiguousarray(values).view(np.uint32))

    @classmethod
    def from_pairs(cls, values: np.ndarray) -> RegFile:
        """16-bit values (..., 32, 2R) (float16 / bfloat16 / uint16): elements 2r, 2r+1 -> register r."""
        if not isinstance(values, np.ndarray) or values.dtype.itemsize != 2:
            raise ValueError("values must be a numpy array of 16-bit elements (float16, bfloat16, uint16)")
        if values.ndim < 2 or values.shape[-1] % 2:
            raise ValueError(f"values must have shape (..., 32, 2R), got {values.shape}")
        return cls(pack16(values))

    @classmethod
    def from_tile(cls, fmap: FragmentMap, tile: np.ndarray) -> RegFile:
        """Gather a tile (..., rows, n*cols) into registers through a fragment map."""
        vals = fmap.gather(tile)
        if fmap.per_reg == 1:
            if vals.dtype.itemsize != 4:
                raise ValueError(f"{fmap.name} holds 32-bit elements, got {vals.dtype}")
            return cls(np.ascontiguousarray(vals).view(np.uint32))
        return cls.from_pairs(vals)

    # ---- views -----------------------------------------------------------------------------
    @property
    def regs(self) -> int:
        return self.words.shape[-1]

    @property
    def batch(self) -> tuple:
        return self.words.shape[:-2]

    def f32(self) -> np.ndarray:
        return self.words.view(np.float32)

    def f16x2(self) -> np.ndarray:
        """(..., 32, 2R) float16: low half first."""
        return unpack16(self.words, np.float16)

    def bf16x2(self) -> np.ndarray:
        """(..., 32, 2R) bfloat16: low half first."""
        return unpack16(self.words, ml_dtypes.bfloat16)

    def to_tile(self, fmap: FragmentMap, dtype=np.float16) -> np.ndarray:
        """Scatter registers back into a tile through a fragment map (the inverse of from_tile)."""
        vals = self.words.view(np.dtype(dtype)) if fmap.per_reg == 1 else unpack16(self.words, dtype)
        return fmap.scatter(vals)

    def __getitem__(self, regs) -> RegFile:
        """A selection of registers (an int, slice or index list), kept as a RegFile."""
        idx = [regs] if isinstance(regs, (int, np.integer)) else regs
        return RegFile(self.words[..., idx])

    def concat(self, other: RegFile) -> RegFile:
        return RegFile(np.concatenate([self.words, other.words], axis=-1))

    # ---- shuffles --------------------------------------------------------------------------
    def shfl(self, mode: str, b, c: int = 0x1F) -> RegFile:
        return RegFile(shfl_sync(self.words, mode, b, c))

    def shfl_xor(self, lane_mask: int, width: int = 32) -> RegFile:
        return RegFile(shfl_xor(self.words, lane_mask, width))

    def shfl_idx(self, src_lane, width: int = 32) -> RegFile:
        return RegFile(shfl_idx(self.words, src_lane, width))

    def __eq__(self, other) -> bool:
        return isinstance(other, RegFile) and np.array_equal(self.words, other.words)

    __hash__ = None

    def __repr__(self) -> str:
        return f"RegFile(batch={self.batch}, lanes=32, regs={self.regs})"
