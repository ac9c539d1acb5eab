"""Register-level layout of mma.sync.m16n8k16 (and the 8-bit m16n8k32 fragments): fragment maps, ldmatrix, the warp register file, shuffles,
and the S -> P repack. Everything is an integer numpy table computed once and applied by fancy indexing.

Conventions (details in fragments.py): lanes 0..31, groupID g = lane >> 2, tid t = lane & 3; registers
are raw uint32 words, shape (..., 32, R); 16-bit pairs hold the lower-indexed element in bits 0..15;
tiles wider than one instruction tile number their registers tile by tile (reg = tile*regs_per_tile + r).
"""
from .cute import Layout
from .fragments import (A, A8, B, B8, C_F16, C_F32, CUTE_A, CUTE_A8, CUTE_B, CUTE_B8, CUTE_C, LANES, FragmentMap,
                        Location, a8_coord, b8_coord, pack8,
                        a_coord, a_fragment, a_tile, b_coord, b_fragment, b_tile, c_coord, c_fragment,
                        c_map, c_tile, cute_coords, describe_c, locate_a, locate_b, locate_c, pack16,
                        unpack16)
from . import ldmatrix
from .regfile import (GROUP_ID, THREAD_IN_GROUP, RegFile, quad_allreduce, shfl_down, shfl_idx,
                      shfl_source_lanes, shfl_sync, shfl_up, shfl_xor, width_c)
from .repack import cvt_rn, cvt_rn_x2, repack_s_to_p, repack_sources

__all__ = [
    "Layout", "A", "A8", "B", "B8", "C_F16", "C_F32", "CUTE_A", "CUTE_A8", "CUTE_B", "CUTE_B8", "CUTE_C", "LANES",
    "FragmentMap", "Location", "a8_coord", "b8_coord", "pack8",
    "a_coord", "a_fragment", "a_tile", "b_coord", "b_fragment", "b_tile", "c_coord", "c_fragment", "c_map",
    "c_tile", "cute_coords", "describe_c", "locate_a", "locate_b", "locate_c", "pack16", "unpack16",
    "ldmatrix",
    "GROUP_ID", "THREAD_IN_GROUP", "RegFile", "quad_allreduce", "shfl_down", "shfl_idx",
    "shfl_source_lanes", "shfl_sync", "shfl_up", "shfl_xor", "width_c",
    "cvt_rn", "cvt_rn_x2", "repack_s_to_p", "repack_sources",
]
