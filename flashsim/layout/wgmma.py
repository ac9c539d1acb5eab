"""Layouts of Hopper's warpgroup MMA (wgmma.mma_async): the shared-memory matrix descriptor, the canonical
shared-memory layouts it describes, and the register fragments of A and D over a warpgroup's 128 threads.

Sources: PTX ISA 8.x/9.0, "Register Fragments and Shared Memory Matrix Layouts" for wgmma (9.7.15.5.1): the
"Matrix Descriptor Format", the "Leading / Stride Dimension Byte Offset" definitions and the "Canonical Layouts"
table, which states each layout in CuTe's notation, in units of T = 128 / element bits elements (one 16-byte chunk):

    K-major,  no swizzle : ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
    K-major,  W-chunk swizzle (W = 2, 4, 8 for 32B, 64B, 128B) : ((8,m),(T,2k)) : ((WT,SBO),(1,T))
    MN-major, no swizzle : ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
    MN-major, W-chunk swizzle : ((T,W,m),(8,k)) : ((1,T,LBO),(WT,SBO))

(first mode: the M or N index, second: the K index), composed with the swizzle of flashsim.layout.swizzle on the
byte address. So LBO is the K-direction step between core matrices for K-major without swizzle (unused when
swizzled) and for MN-major without swizzle, and the MN-direction step between swizzle atoms for MN-major swizzled;
SBO is the step between 8-row groups along M / N for K-major and MN-major without swizzle, and between 8-row groups
along K for MN-major swizzled. One wgmma reads 2 chunks of K for K-major (k16 f16 / bf16, k8 tf32, k32 8-bit) and 2
groups of 8 K rows for MN-major (only f16 / bf16 may be transposed).

The swizzle works on the byte address (CuTe's ``Swizzle<b,4,3> o smem_ptr``, as TMA writes it). The descriptor's
base offset says where the repeating pattern starts when that is not on its 256 / 512 / 1024-byte boundary (the
ISA: base offset = (pattern start >> 7) & 7): the XOR's row phase is counted from the pattern start, i.e. the
physical address of logical address ``a`` is ``swizzle(a - 128 base) + 128 base``. With base offset 0 (what CUTLASS,
Triton and DeepGEMM write) that is the plain address swizzle. The ISA ignores the base offset without swizzle.

Register fragments (ISA figures for wgmma .m64nNk16 / k8 / k32 A and D; CuTe's ALayout_64x8 / 64x16 / 64x32 and
CLayout_64xN): warp w of the warpgroup holds rows 16w .. 16w + 15, with the per-warp maps of mma.sync's m16n8
fragments (flashsim.layout.fragments): D is the m16n8 C layout repeated over N / 8 column tiles (f32 and s32 one
element per register, f16 two), A is m16n8k16's A (f16 / bf16), m16n8k32's A8 (8-bit) or m16n8k8's tf32 A (below).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np

from . import fragments as F
from .swizzle import DESCRIPTOR_SWIZZLE, repeat_bytes, span_bytes, swizzle

__all__ = [
    "MatrixDescriptor",
    "decode_descriptor",
    "encode_descriptor",
    "canonical_offsets",
    "operand_addresses",
    "descriptor_problem",
    "A_TF32",
    "a_map",
    "d_map",
    "warpgroup_gather",
    "warpgroup_scatter",
    "WARPGROUP_THREADS",
]

WARPGROUP_THREADS = 128
_FIELD = 0x3FFF  # the 14-bit address / offset fields, in 16-byte units
_ENCODE = {v: k for k, v in DESCRIPTOR_SWIZZLE.items()}


@dataclass(frozen=True)
class MatrixDescriptor:
    """A decoded wgmma matrix descriptor: byte values (the 14-bit fields times 16), the 3-bit base offset and the
    swizzle mode ("none", "32B", "64B", "128B")."""

    start: int
    lbo: int
    sbo: int
    base_offset: int = 0
    swizzle: str = "none"

    @property
    def bits(self) -> int:
        return encode_descriptor(self)


def decode_descriptor(bits: int) -> MatrixDescriptor:
    """The fields of a 64-bit descriptor: start address bits 0-13, leading-dimension byte offset 16-29,
    stride-dimension byte offset 32-45 (each >> 4), base offset 49-51, swizzle 62-63 (the other bits are unused)."""
    bits = int(bits) & (2**64 - 1)
    return MatrixDescriptor(
        start=(bits & _FIELD) << 4,
        lbo=((bits >> 16) & _FIELD) << 4,
        sbo=((bits >> 32) & _FIELD) << 4,
        base_offset=(bits >> 49) & 7,
        swizzle=DESCRIPTOR_SWIZZLE[(bits >> 62) & 3],
    )


def encode_descriptor(d: MatrixDescriptor) -> int:
    """The inverse of decode_descriptor: the ISA's matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4 per field."""
    enc = lambda x: (int(x) & 0x3FFFF) >> 4  # noqa: E731
    fields = enc(d.start) | enc(d.lbo) << 16 | enc(d.sbo) << 32
    return fields | (int(d.base_offset) & 7) << 49 | _ENCODE[d.swizzle] << 62


@cache
def canonical_offsets(mn: int, k: int, elem_bits: int, mn_major: bool, mode: str, lbo: int, sbo: int) -> np.ndarray:
    """(mn, k) int64: the byte offset from the start address of element (i, j) of an M x K (A) or N x K (B^T)
    operand in the canonical layout of ``mode`` (before the swizzle; the module docstring's table)."""
    T = 128 // elem_bits
    eb = elem_bits // 8
    W = max(span_bytes(mode) // 16, 1)
    i = np.arange(mn, dtype=np.int64)[:, None]
    j = np.arange(k, dtype=np.int64)[None, :]
    if not mn_major:
        row = (i % 8) * (16 * W) + (i // 8) * sbo
        col = (j // T) * (lbo if mode == "none" else 16) + (j % T) * eb
    elif mode == "none":
        row = (i % T) * eb + (i // T) * sbo
        col = (j % 8) * 16 + (j // 8) * lbo
    else:
        row = (i % T) * eb + ((i // T) % W) * 16 + (i // (T * W)) * lbo
        col = (j % 8) * (16 * W) + (j // 8) * sbo
    out = row + col
    out.setflags(write=False)
    return out


@lru_cache(maxsize=1024)  # one per distinct descriptor of the kernels run (stages x K steps x operands): bounded
def operand_addresses(desc: MatrixDescriptor, mn: int, k: int, elem_bits: int, mn_major: bool) -> np.ndarray:
    """(mn, k) int64 shared-memory byte addresses of the operand elements a descriptor describes (A: mn = 64
    rows of M; B: mn = N, the table's transpose is B's K x N), swizzled as the module docstring says."""
    logical = desc.start + canonical_offsets(mn, k, elem_bits, mn_major, desc.swizzle, desc.lbo, desc.sbo)
    if desc.swizzle == "none":
        out = logical
    else:
        shift = 128 * desc.base_offset
        out = swizzle(logical - shift, desc.swizzle) + shift
    out = np.ascontiguousarray(out)
    out.setflags(write=False)
    return out


def descriptor_problem(desc: MatrixDescriptor) -> str | None:
    """Why a descriptor does not describe a layout the tensor cores read as flashsim reads it, or None.

    Base offset 0 is taken at any start address: the swizzle then follows the address bits (physical = swizzle of the
    address, the pattern TMA writes), whichever row of its repeating pattern the matrix starts in. Measured on an
    H100: FlashAttention's CuTe-DSL Hopper forward (flash-attn 2.8.3.post2) puts its Q / K / V tiles 128 bytes past
    a 1024-byte boundary with base offset 0, and its outputs are the GPU's bit for bit when read so
    (benchmarks/experiments/fa3_cute/, tests/test_fa3_cute.py). A non-zero base offset must be the one the ISA gives
    for the start, (start >> 7) modulo the pattern's rows, since nothing here measured what another one reads: a
    mismatch is refused."""
    if desc.swizzle == "none" or desc.base_offset == 0:
        return None
    rows = repeat_bytes(desc.swizzle) // 128
    phase = ((desc.start >> 7) - desc.base_offset) % rows
    if phase:
        return (
            f"{desc.swizzle} swizzle: start address {desc.start:#x} lies in row {phase} of its {rows}-row repeating "
            f"pattern as base offset {desc.base_offset} places it (a non-zero base offset must be (start >> 7) & "
            f"{rows - 1} = {(desc.start >> 7) % rows}; base offset 0 takes the address's own swizzle)"
        )
    return None


# ---- register fragments -----------------------------------------------------------------------------------------


def _a_tf32_coord(g, t, i: int):
    """(row, col) in the 16 x 8 tf32 A tile of element a_i of a warp (m16n8k8 .tf32 and wgmma m64nNk8 A)."""
    return g + 8 * (i & 1), t + 4 * (i >> 1)


A_TF32 = F.FragmentMap.build("A (16x8 row, tf32)", 16, 8, 1, _a_tf32_coord, 4)

_A_MAPS = {16: F.A, 8: A_TF32, 32: F.A8}  # by K: the per-warp A map on rows 16w .. 16w + 15


def a_map(k: int) -> F.FragmentMap:
    """The per-warp A fragment map of wgmma m64nNk``k`` (k 16: f16 / bf16, 8: tf32, 32: 8-bit types)."""
    return _A_MAPS[k]


def d_map(accum: str) -> F.FragmentMap:
    """The per-warp, per-n8-tile D map: "f32" and "s32" one element per register, "f16" two."""
    return F.C_F16 if accum == "f16" else F.C_F32


def warpgroup_scatter(words: np.ndarray, fmap: F.FragmentMap, dtype) -> np.ndarray:
    """Registers (G, 128, regs) uint32 of G warpgroups -> tiles (G, 64, n cols) of ``dtype``: warp w's lanes fill
    rows 16w .. 16w + 15 through ``fmap`` repeated over n = regs / fmap.regs column tiles."""
    G, lanes, regs = words.shape
    n = regs // fmap.regs
    per = np.dtype(f"u{32 // fmap.per_reg // 8}")
    elems = np.ascontiguousarray(words).view(per).reshape(G * 4, -1)  # (G * 4 warps, 32 * n * elems)
    tiles = np.take(elems, F._flat_tables(fmap, n)[1], axis=1)  # (G * 4, 16, n * cols)
    return tiles.reshape(G, 64, n * fmap.cols).view(dtype)


def warpgroup_gather(tiles: np.ndarray, fmap: F.FragmentMap) -> np.ndarray:
    """The inverse of warpgroup_scatter: tiles (G, 64, n cols) -> registers (G, 128, regs) uint32."""
    G, rows, cols = tiles.shape
    n = cols // fmap.cols
    per = np.dtype(f"u{32 // fmap.per_reg // 8}")
    flat = np.ascontiguousarray(tiles).view(per).reshape(G * 4, 16 * cols)
    vals = np.take(flat, F._flat_tables(fmap, n)[0], axis=1)  # (G * 4, 32, n * elems)
    return np.ascontiguousarray(vals).view(np.uint32).reshape(G, 128, -1)
