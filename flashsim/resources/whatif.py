"""The seed's what-ifs: a deeper K/V ring, an S/P buffer in shared memory, two blocks per SM."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..arch import get_arch
from ..config import SUPPORTED_STAGES, KernelConfig
from . import symbols
from .model import Budget, budget
from .occupancy import limits

WHAT_IFS = ("3-stage", "f16-sp", "two-blocks")


@dataclass(frozen=True)
class WhatIf:
    name: str
    question: str
    answer: str
    budgets: tuple  # the budgets that answer it, the first one is the what-if itself

    def __str__(self) -> str:
        body = "\n\n".join(b.table() for b in self.budgets)
        return f"what-if {self.name}: {self.question}\n{self.answer}\n\n{body}"


def _three_stage(base: KernelConfig, arch, registers) -> WhatIf:
    cfg = base.with_(stages=3)
    b = budget(cfg, arch, registers=registers, label="3-stage K/V ring")
    verdict = "fits" if b.fits else f"does not fit: {b.smem_bytes} B > cap {b.cap_bytes} B"
    return WhatIf(
        "3-stage",
        f"does a 3-stage K/V ring fit ({base.describe()})?",
        f"3 stages need {b.smem_bytes / 1024:.1f} KB of shared memory per block: {verdict}.",
        (b,),
    )


def _f16_sp(base: KernelConfig, arch, registers) -> WhatIf:
    extra = {"S/P buffer (f16)": symbols.sp_buffer_expression()}
    b = budget(base, arch, registers=registers, extra_buffers=extra, label="with an f16 S/P shared-memory buffer")
    sp_bytes = b.breakdown["S/P buffer (f16)"]
    verdict = "fits" if b.fits else f"does not fit: {b.smem_bytes} B > cap {b.cap_bytes} B"
    return WhatIf(
        "f16-sp",
        "what if S/P went through shared memory in f16, as the seed's table assumes?",
        f"an f16 S/P buffer of B_r x B_c = {sp_bytes / 1024:.1f} KB brings the block to "
        f"{b.smem_bytes / 1024:.1f} KB: {verdict}. The kernel repacks S into P in registers and has no "
        f"such buffer.",
        (b,),
    )


def two_block_candidates(base: KernelConfig, arch, registers="estimate") -> list[Budget]:
    """Configurations of base's head_dim / pv_accum / causal with at least 2 blocks per SM, best occupancy
    first (then larger tiles)."""
    out = []
    for warps, kv_tile, stages in itertools.product((2, 4, 8), (16, 32, 64, 128), SUPPORTED_STAGES):
        cfg = base.with_(warps=warps, kv_tile=kv_tile, stages=stages)
        b = budget(cfg, arch, registers=registers, label=f"2 blocks/SM: warps={warps} B_c={kv_tile} stages={stages}")
        if b.fits and b.blocks_per_sm >= 2:
            out.append(b)
    out.sort(key=lambda b: (-b.occupancy, -b.config.block_m * b.config.kv_tile, -b.config.stages))
    return out


def _two_blocks(base: KernelConfig, arch, registers) -> WhatIf:
    a = get_arch(arch)
    b = budget(base, arch, registers=registers, label="base configuration")
    rules = lambda regs, smem: limits(a, base.threads, regs, smem)  # noqa: E731 (the cuda_occupancy rules)
    smem_for_two = max(
        (s for s in range(0, a.smem_per_block_optin + 1, a.smem_alloc_unit) if rules(1, s)["shared memory"] >= 2),
        default=0,
    )
    regs_for_two = max((r for r in range(1, a.regs_per_thread_max + 1) if rules(r, 0)["registers"] >= 2), default=0)
    need = (
        f"two blocks of {base.warps} warps need <= {smem_for_two} B of shared memory and <= "
        f"{regs_for_two} registers per thread each; this configuration has "
        f"{b.smem_bytes} B and {b.registers} registers: {b.blocks_per_sm} block(s)/SM "
        f"(limited by {b.occ.limiter})."
    )
    cands = two_block_candidates(base, arch)
    if not cands:
        return WhatIf(
            "two-blocks",
            "can two blocks share an SM?",
            need + " No configuration of this head dim reaches 2 blocks/SM.",
            (b,),
        )
    best = [budget(c.config, arch, registers=registers, label=c.label) for c in cands[:2]]
    listing = "; ".join(
        f"warps={c.config.warps} B_c={c.config.kv_tile} stages={c.config.stages} "
        f"({c.smem_bytes / 1024:.0f} KB, {c.blocks_per_sm} blocks, {100 * c.occupancy:.0f}%)"
        for c in cands[:6]
    )
    fits = [c for c in best if c.blocks_per_sm >= 2]
    tail = (
        f" With registers from {best[0].registers_source.split(':')[0]} for the best candidates: "
        + ", ".join(
            f"warps={c.config.warps} B_c={c.config.kv_tile} stages={c.config.stages} "
            f"({c.registers} registers): {c.blocks_per_sm} blocks/SM"
            for c in best
        )
        + "."
    )
    return WhatIf(
        "two-blocks",
        "can two blocks share an SM?",
        need
        + f" Configurations with >= 2 blocks/SM (registers estimated): {listing}."
        + tail
        + ("" if fits else " None of them keeps 2 blocks/SM with counted registers."),
        (b, *best),
    )


def what_if(name: str, config: KernelConfig | None = None, arch="sm_120", registers="auto") -> WhatIf:
    """Answer one of WHAT_IFS for ``config`` (default: the design note's block, flashsim.config.seed_config)."""
    from ..config import seed_config

    get_arch(arch)
    base = seed_config() if config is None else config
    table = {"3-stage": _three_stage, "f16-sp": _f16_sp, "two-blocks": _two_blocks}
    if name not in table:
        raise ValueError(f"what-if must be one of {', '.join(WHAT_IFS)}, got {name!r}")
    return table[name](base, arch, registers)
