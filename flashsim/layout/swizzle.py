"""The shared-memory swizzles of Hopper's async proxy, on byte addresses: what a TMA copy writes and what a wgmma
matrix descriptor reads, written once for both.

A swizzle of span S bytes (32, 64 or 128) permutes the 16-byte chunks of each S-byte row of an 8-row atom: chunk
bits [4, 4 + b) of a shared-memory byte address are XORed with bits [7, 7 + b), b = log2(S / 16). This is CuTe's
``Swizzle<b, 4, 3>`` (cute/swizzle.hpp), the PTX ISA's "Shared Memory Matrix Layout" swizzling modes for wgmma and
the tensor map's CU_TENSOR_MAP_SWIZZLE_{32B,64B,128B}. It is a function of the address itself, which is why TMA
destinations of a swizzled box must be aligned to the pattern's repeat (256, 512, 1024 bytes) unless a wgmma
descriptor's base offset says where in the pattern a matrix starts.

Encodings: CUDA's CUtensorMapSwizzle enum (0 none, 1 32B, 2 64B, 3 128B; CUDA 12.8's 128B_ATOM_* forms are
sm_100's) and the wgmma matrix descriptor's 2-bit field (bits 62-63: 0 none, 1 128B, 2 64B, 3 32B).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MODES",
    "span_bytes",
    "repeat_bytes",
    "swizzle",
    "box_chunks",
    "from_tensor_map",
    "from_descriptor",
    "TENSOR_MAP_SWIZZLE",
    "DESCRIPTOR_SWIZZLE",
]

MODES = ("none", "32B", "64B", "128B")
_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}  # b: how many chunk bits are XORed

TENSOR_MAP_SWIZZLE = {0: "none", 1: "32B", 2: "64B", 3: "128B"}  # CUtensorMapSwizzle
DESCRIPTOR_SWIZZLE = {0: "none", 1: "128B", 2: "64B", 3: "32B"}  # wgmma matrix descriptor bits 62-63


def _bits(mode: str) -> int:
    if mode not in _BITS:
        raise ValueError(f"swizzle mode must be one of {', '.join(MODES)}, got {mode!r}")
    return _BITS[mode]


def span_bytes(mode: str) -> int:
    """Bytes of one swizzled row (the box's inner dimension may not exceed it): 32, 64, 128; 0 for none."""
    b = _bits(mode)
    return 16 << b if b else 0


def repeat_bytes(mode: str) -> int:
    """Bytes after which the pattern repeats (8 rows of the span): 256, 512, 1024; 16 for none (a chunk)."""
    b = _bits(mode)
    return 128 << b if b else 16


def swizzle(addr, mode: str):
    """The physical shared-memory byte address of logical address ``addr`` (an int or an integer numpy array) under
    ``mode``. An involution: swizzle(swizzle(a)) == a."""
    b = _bits(mode)
    if b == 0:
        return addr
    mask = ((1 << b) - 1) << 4
    if isinstance(addr, np.ndarray):
        a = addr.astype(np.int64, copy=False) if addr.dtype.kind == "u" and addr.dtype.itemsize < 8 else addr
        return a ^ ((a >> a.dtype.type(3)) & a.dtype.type(mask))
    return addr ^ ((addr >> 3) & mask)


def box_chunks(row_bytes: int, rows: int, mode: str) -> np.ndarray:
    """Logical byte offsets, from the copy's shared address, of the 16-byte chunks of a TMA box of ``rows`` rows of
    ``row_bytes`` (the inner dimension; a multiple of 16), row after row: dense without a swizzle; under a swizzle
    every row starts a new span, so a row narrower than the span leaves the rest of its span as padding that the copy
    neither writes nor reads (measured on the H100: tests/data/ptx_tma/tma_sm90.npz, the *_narrow cases, whose
    padding keeps the kernel's sentinel bytes and whose mbarrier completes on the box's unpadded bytes)."""
    pitch = max(row_bytes, span_bytes(mode))
    per_row = row_bytes // 16
    return (np.arange(rows, dtype=np.int64)[:, None] * pitch + 16 * np.arange(per_row, dtype=np.int64)).reshape(-1)


def from_tensor_map(code: int) -> str:
    """The mode of a CUtensorMapSwizzle value (ValueError for the sm_100 atom forms and anything else)."""
    if code not in TENSOR_MAP_SWIZZLE:
        raise ValueError(f"tensor map swizzle {code} is not one of 0 (none), 1 (32B), 2 (64B), 3 (128B)")
    return TENSOR_MAP_SWIZZLE[code]


def from_descriptor(code: int) -> str:
    """The mode of a wgmma matrix descriptor's 2-bit swizzle field."""
    return DESCRIPTOR_SWIZZLE[int(code) & 3]
