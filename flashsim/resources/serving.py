"""The budget of the serving kernels: the decode kernel (flash_fwd with the serving switches: GQA packed, split-KV)
and flash_combine, per arch, from one NVRTC build (ptxas counts each entry's registers and spills).

``decode_config(arch, head_dim, packed_rows)`` is the configuration a KV-cache call with that many packed rows per
K / V head runs by default (flashsim.tuning.decode_tiling, split on, paged or not); ``serving_budget(config,
arch)`` returns the two budgets: flash_fwd's as flashsim.budget gives it, and flash_combine's registers, its static
shared memory (the parts' LSEs and weights, per warp) and its occupancy by the same cuda_occupancy.h rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch import get_arch
from ..config import KernelConfig
from ..constants import COMBINE_WARPS
from ..tuning import decode_tiling
from .model import Budget, budget
from .occupancy import Occupancy, occupancy
from .registers import compile_kernel

COMBINE_ENTRY = "flash_combine"


def decode_config(arch, head_dim: int = 128, packed_rows: int = 4, *, dtype="bf16", paged=False, causal=False):
    """The default decode configuration (split-KV, GQA packed) for ``packed_rows`` rows per K / V head."""
    a = get_arch(arch).name
    warps, m_tiles, kv_tile, stages = decode_tiling(a, head_dim, packed_rows) or (4, 1, 64, 2)
    return KernelConfig(
        head_dim=head_dim,
        warps=warps,
        m_tiles=m_tiles,
        kv_tile=kv_tile,
        stages=stages,
        dtype=dtype,
        causal=causal,
        layout="bnhd",
        seqlens=True,
        paged=paged,
        pack_gqa=True,
        split=True,
    )


@dataclass(frozen=True)
class CombineBudget:
    """flash_combine's resources on one arch: registers and spills (ptxas), threads, static shared memory, occupancy."""

    arch: str
    registers: int
    spill_bytes: int
    threads: int
    smem_bytes: int
    occ: Occupancy

    @property
    def blocks_per_sm(self) -> int:
        return self.occ.blocks_per_sm

    def table(self) -> str:
        o = self.occ
        return (
            f"{self.arch} flash_combine: {self.threads} threads ({COMBINE_WARPS} rows per block), {self.registers} "
            f"registers/thread [ptxas (NVRTC, {self.arch})], {self.spill_bytes} B spill, {self.smem_bytes} B shared "
            "memory; "
            f"blocks/SM {o.blocks_per_sm} (limited by {o.limiter}), occupancy {o.warps_per_sm}/{o.max_warps_per_sm} "
            f"warps = {100 * o.occupancy:.1f}%"
        )


def serving_budget(config: KernelConfig, arch) -> tuple[Budget, CombineBudget | None]:
    """(flash_fwd's Budget, flash_combine's CombineBudget or None without splits) of ``config`` on ``arch``; both
    from ptxas (NVRTC is required: the serving kernels have no register estimate)."""
    a = get_arch(arch).name
    label = "decode kernel, index check fused" if config.fused else "decode kernel"
    main = budget(config, a, registers="compile", label=label)
    if not config.split:
        return main, None
    entry = compile_kernel(config, a).entry(COMBINE_ENTRY)
    threads = 32 * COMBINE_WARPS
    smem = int(entry.static_smem_bytes)
    occ = occupancy(a, threads, int(entry.registers), 0, smem)
    spills = int(entry.spill_stores + entry.spill_loads)
    return main, CombineBudget(a, int(entry.registers), spills, threads, smem, occ)
