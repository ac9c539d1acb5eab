"""Blocks per SM and occupancy by the rules of CUDA's cuda_occupancy.h, written once for ints and sympy.

The rules (cuda_occupancy.h of CUDA 13.0: cudaOccMaxBlocksPerSMWarpsLimit, ...RegsLimit, ...SmemLimit,
cudaOccMaxBlocksPerMultiprocessor; the per-arch numbers in flashsim.arch come from the CUDA C++ Programming
Guide's compute-capability tables):

- warps:     floor(max_warps_per_sm / W), W = ceil(threads / 32)
- registers: a warp gets roundup(regs * 32, 256) registers; each of the 4 sub-partitions holds
             floor((regs_per_sm / 4) / regs_per_warp) warps, so blocks = floor(4 * that / W). A block whose
             warps, rounded up to a multiple of 4, need more than the 64 K registers of a block cannot launch.
- shared:    a block takes roundup(static + dynamic + reserved, 128) bytes; above the opt-in cap plus
             the reserved KB it cannot launch; otherwise floor(smem_per_sm / that).
- blocks:    the per-arch cap (flashsim.arch.Arch.max_blocks_per_sm).

blocks_per_sm is the minimum of the four; occupancy = blocks_per_sm * W / max_warps_per_sm. The barrier
limit of the header (16 named barriers per block slot) never binds for a kernel using one barrier, and
partitioned global caching (cc 5.2/6.x only) does not apply to any arch modelled here.

``limits(..., ops=INT)`` gives Python ints; ``limits(..., ops=SYM)`` the same rules as sympy expressions
(floor / ceiling / Min / Piecewise), so the symbolic model and the numbers cannot drift apart. The integer rules
need no sympy: SYM imports it when it is first used, so ``occupancy()`` stays cheap.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ..arch import Arch, get_arch

WARP = 32


class _IntOps:
    """Integer arithmetic of the occupancy rules."""

    @staticmethod
    def ceil_div(x, y):
        return -(-x // y)

    @staticmethod
    def floor_div(x, y):
        return x // y

    @staticmethod
    def minimum(*xs):
        return min(xs)

    @staticmethod
    def maximum(*xs):
        return max(xs)

    @staticmethod
    def zero_unless(cond, value):
        return value if cond else 0

    @staticmethod
    def all_of(*conds):
        return all(conds)

    @staticmethod
    def const(x):
        return x


class _SymOps:
    """The same rules as sympy expressions (sympy is imported on first use, not with this module)."""

    @property
    def sp(self):
        import sympy

        return sympy

    def ceil_div(self, x, y):
        return self.sp.ceiling(self.sp.Rational(1, 1) * x / y)

    def floor_div(self, x, y):
        return self.sp.floor(self.sp.Rational(1, 1) * x / y)

    def minimum(self, *xs):
        return self.sp.Min(*xs)

    def maximum(self, *xs):
        return self.sp.Max(*xs)

    def zero_unless(self, cond, value):
        return self.sp.Piecewise((value, cond), (0, True))

    def all_of(self, *conds):
        return self.sp.And(*conds)

    def const(self, x):
        return self.sp.Integer(x)


INT = _IntOps()
SYM = _SymOps()


def round_up(x, unit, ops=INT):
    return ops.ceil_div(x, unit) * unit


def limits(arch: Arch, threads, registers, smem_dynamic, smem_static=0, ops=INT) -> dict:
    """Blocks per SM allowed by each resource (name -> int or sympy expression) under ``arch``'s rules."""
    warps = ops.ceil_div(threads, WARP)
    # 0 registers (the header: no register limit) counts as 1, whose limit (>= 4 x max warps) never binds
    regs_per_warp = round_up(ops.maximum(registers, 1) * WARP, arch.reg_alloc_unit, ops)
    warps_per_subpartition = ops.floor_div(arch.regs_per_sm // arch.warp_alloc_sub_partitions, regs_per_warp)
    by_regs = ops.floor_div(warps_per_subpartition * arch.warp_alloc_sub_partitions, warps)
    regs_launchable = ops.all_of(
        regs_per_warp * round_up(warps, arch.warp_alloc_sub_partitions, ops) <= arch.regs_per_sm,
        registers <= arch.regs_per_thread_max,
    )
    smem_block = round_up(smem_static + smem_dynamic + arch.smem_reserved_per_block, arch.smem_alloc_unit, ops)
    smem_launchable = smem_block <= arch.smem_per_block_optin + arch.smem_reserved_per_block
    return {
        "warps": ops.floor_div(arch.max_warps_per_sm, warps),
        "registers": ops.zero_unless(regs_launchable, by_regs),
        "shared memory": ops.zero_unless(smem_launchable, ops.floor_div(arch.smem_per_sm, smem_block)),
        "block limit": ops.const(arch.max_blocks_per_sm),
    }


@dataclass(frozen=True)
class Occupancy:
    """Residency of one kernel launch shape on one arch."""

    arch: str
    threads: int
    registers: int
    smem_dynamic: int
    smem_static: int
    smem_per_block: int  # bytes one block occupies: rounded, reserved KB included
    regs_per_block: int  # registers one block occupies (per-warp allocation unit applied)
    limits: dict = field(repr=False)
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int

    @property
    def occupancy(self) -> float:
        """Resident warps / max warps per SM, 0..1."""
        return self.warps_per_sm / self.max_warps_per_sm

    @property
    def limiter(self) -> str:
        """The resource (or resources) that set blocks_per_sm."""
        return " = ".join(k for k, v in self.limits.items() if v == self.blocks_per_sm)


def occupancy(arch, threads: int, registers: int, smem_dynamic: int, smem_static: int = 0) -> Occupancy:
    """Blocks per SM and occupancy of a kernel with ``registers`` per thread and the given shared memory."""
    a = get_arch(arch)
    for name, value in (
        ("threads", threads),
        ("registers", registers),
        ("smem_dynamic", smem_dynamic),
        ("smem_static", smem_static),
    ):
        if not isinstance(value, (int,)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if not 1 <= threads <= 1024:
        raise ValueError(f"threads must be in 1..1024, got {threads}")
    lim = limits(a, threads, registers, smem_dynamic, smem_static, INT)
    blocks = min(lim.values())
    warps = INT.ceil_div(threads, WARP)
    return Occupancy(
        arch=a.name,
        threads=threads,
        registers=registers,
        smem_dynamic=smem_dynamic,
        smem_static=smem_static,
        smem_per_block=round_up(smem_static + smem_dynamic + a.smem_reserved_per_block, a.smem_alloc_unit),
        regs_per_block=round_up(registers * WARP, a.reg_alloc_unit) * warps,
        limits=lim,
        blocks_per_sm=blocks,
        warps_per_sm=blocks * warps,
        max_warps_per_sm=a.max_warps_per_sm,
    )


def occupancy_expressions(arch) -> dict:
    """The rules as sympy expressions in symbols threads, registers, smem_dynamic, smem_static (cached: read only)."""
    return _occupancy_expressions(get_arch(arch).name)


@functools.cache
def _occupancy_expressions(arch: str) -> dict:
    import sympy as sp

    a = get_arch(arch)
    t, r, sd, ss = sp.symbols("threads registers smem_dynamic smem_static", integer=True, nonnegative=True)
    lim = limits(a, t, r, sd, ss, SYM)
    blocks = sp.Min(*lim.values())
    return {
        "symbols": (t, r, sd, ss),
        "limits": lim,
        "blocks_per_sm": blocks,
        "occupancy": blocks * SYM.ceil_div(t, WARP) / a.max_warps_per_sm,
    }
