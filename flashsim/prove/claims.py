"""The eight claims of the seed design note (README, 'The seed's claims'), each checked by code, with a verdict
and the numbers behind it.

A claim that does not hold is a finding, not a failure: ``flashsim prove`` prints it and still exits 0 when
every proof holds. Verdicts: "holds", "does not hold", "holds under <condition>", "partly holds: ...",
"not checked: <why>".

Sources cited: the CUDA C++ Programming Guide, "Warp Matrix Functions" (class fragment: "the mapping of matrix
elements into fragment internal storage is unspecified and subject to change in future architectures");
the PTX ISA, "Matrix fragments for mma.m16n8k16" (the explicit C/D map, flashsim.layout); cuda_occupancy.h of
CUDA 13.0 (occupancy rules and sm_120's 24 blocks/SM).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .. import layout
from ..arch import get_arch
from ..config import KernelConfig, seed_config
from ..resources import symbols
from ..resources.model import budget
from ..resources.registers import BuildUnavailable, compile_kernel

KB = 1024
SEED_TOTAL_KB, SEED_CAP_KB, SEED_FREE_KB, SEED_3STAGE_KB = 97, 99, 2, 102
SEED_PART_BYTES = 32 * KB  # Q tile, K/V ring, scores (S/P): 32 KB each in the seed's figure


@dataclass(frozen=True)
class Claim:
    number: int
    statement: str
    verdict: str
    evidence: str

    def __str__(self) -> str:
        return f"claim {self.number}: {self.statement}\n  verdict: {self.verdict}\n  " + self.evidence.replace(
            "\n", "\n  "
        )


# ---- which configurations the seed's 32 / 32 / 32 KB figure implies ----------------------------------------
@dataclass(frozen=True)
class SeedReading:
    """One way to read the seed's figure: a ring of ``stages`` slots, each a K tile and a V tile (a ring of
    2k slots shared by K and V costs the same bytes as k stages), plus an S/P buffer of B_r x B_c."""

    head_dim: int
    block_m: int
    kv_tile: int
    stages: int
    sp_bytes_per_elem: int

    def total(self, stages: int | None = None) -> int:
        stages = self.stages if stages is None else stages
        return (
            self.block_m * self.head_dim * 2
            + stages * 2 * self.kv_tile * self.head_dim * 2
            + self.block_m * self.kv_tile * self.sp_bytes_per_elem
        )

    def __str__(self) -> str:
        return (
            f"d={self.head_dim}, B_r={self.block_m}, B_c={self.kv_tile}, {self.stages} stage(s), "
            f"S/P in {'f16' if self.sp_bytes_per_elem == 2 else 'f32'}"
        )


def seed_readings() -> list[SeedReading]:
    """Every (d, B_r, B_c, stages, S/P type) for which Q tile = K/V ring = S/P buffer = 32 KB."""
    out = []
    for d, warps, bc, stages, e in itertools.product((64, 128), range(1, 17), range(16, 257, 16), range(1, 5), (2, 4)):
        r = SeedReading(d, 16 * warps, bc, stages, e)
        if (
            r.block_m * d * 2 == SEED_PART_BYTES
            and stages * 2 * bc * d * 2 == SEED_PART_BYTES
            and r.block_m * bc * e == SEED_PART_BYTES
        ):
            out.append(r)
    return out


# ---- the claims --------------------------------------------------------------------------------------------
def claim1(proofs) -> Claim:
    r = proofs.get("online_softmax")
    if r is None:
        return Claim(
            1,
            "online softmax with the exp(m_old - m_new) rescale of l and O, then O / l, equals softmax",
            "not checked: proofs/prove_online_softmax.py not found",
            "",
        )
    return Claim(
        1,
        "online softmax with the exp(m_old - m_new) rescale of l and O, then O / l, equals softmax",
        "holds (proved)" if r.holds else "PROOF FAILED",
        "proofs/prove_online_softmax.py:\n" + r.details,
    )


def claim2() -> Claim:
    stmt = "WMMA cannot rescale the accumulator in registers; raw mma.sync exposes the register-to-row map"

    lines, ok = [], True
    for name, fmap in (("f32 C/D", layout.C_F32), ("f16x2 C/D", layout.C_F16)):
        lanes = np.arange(32)
        reg_of_elem = np.arange(4) // fmap.per_reg
        # each register holds elements of one row only, and that row is groupID or groupID + 8
        one_row = all(len(set(fmap.row[ln, reg_of_elem == r_])) == 1 for ln in lanes for r_ in range(4 // fmap.per_reg))
        rows_ok = all(set(fmap.row[ln]) == {ln >> 2, (ln >> 2) + 8} for ln in lanes)
        ok &= one_row and rows_ok
        lines.append(
            f"{name}: every register holds one row (row = lane>>2 + 8*(element>=2)): "
            f"{'yes' if one_row and rows_ok else 'NO'}"
        )
    # S (the scores, f32 C map) and O (the output, C map) give every lane the same two rows, so the row max
    # and row sum a lane computes from S (after the quad shuffle) are the factors of its own O registers
    same_rows = all(set(layout.C_F32.row[ln]) == set(layout.C_F16.row[ln]) for ln in range(32))
    ok &= same_rows
    lines.append(
        "S and O fragments: each lane owns the same rows (groupID, groupID + 8), so the rescale "
        f"is one multiply per register by a factor the lane already holds: {'yes' if same_rows else 'NO'}"
    )
    verdict = (
        "holds for portable WMMA code; raw mma.sync: the map is explicit (PTX ISA) and the rescale is register-local"
        if ok
        else "does not hold: the C map check failed"
    )
    lines.append(
        "WMMA: the CUDA C++ Programming Guide (Warp Matrix Functions, class fragment) leaves the mapping "
        "of matrix elements into a fragment unspecified and subject to change, so portable code cannot "
        "tell which x[i] belongs to which row. Not absolute: on a fixed arch the map is deterministic "
        "and can be recovered (e.g. the wmmae/wmma_extension library works on WMMA fragments in "
        "registers this way), at the price of arch-specific, undocumented behaviour."
    )
    return Claim(2, stmt, verdict, "\n".join(lines))


def claim3(ours) -> Claim:
    stmt = "one block: Q tile 32 KB, K/V ring 32 KB, scores (S/P) 32 KB, free 2 KB: 97 KB of a 99 KB cap"
    reads = seed_readings()
    a = get_arch("sm_120")
    ev = [
        f"seed figure: 3 x 32 KB = 96 KB dynamic; + {a.smem_reserved_per_block // KB} KB reserved per block = "
        f"97 KB allocated; the 99 KB cap (opt-in, sm_120) excludes the reserved KB, so the free space is "
        f"{(a.smem_per_block_optin - 3 * SEED_PART_BYTES) // KB} KB, not {SEED_FREE_KB} KB "
        f"(equivalently {a.smem_per_sm // KB} KB per SM - 97 KB = {(a.smem_per_sm - 97 * KB) // KB} KB).",
        "configurations that give exactly 32 / 32 / 32 KB: " + "; ".join(str(r) for r in reads) + ".",
        f"ours ({ours.config.describe()}): "
        + ", ".join(f"{k} {v // KB} KB" for k, v in ours.breakdown.items())
        + f" = {ours.smem_bytes // KB} KB, free {ours.free_bytes // KB} KB of {ours.cap_bytes // KB} KB: the same "
        "97 KB allocation, but the third 32 KB is the V half of a 2-stage ring, not an S/P buffer.",
        "with claim 6 (S/P never leaves registers) the S/P buffer is not needed; an f16 S/P buffer next to our "
        "ring would need 112 KB (what-if f16-sp).",
    ]
    verdict = (
        "partly holds: the 96 KB (+1 KB reserved = 97 KB) total and the fit hold for B_r=128, d=128, "
        "B_c=64; the free space is 3 KB, not 2 KB; the S/P buffer contradicts claim 6 and implies a "
        "single-stage K/V ring at B_c=64 with f32 S/P (d=128) or a 256-row block (d=64)"
    )
    return Claim(3, stmt, verdict, "\n".join(ev))


def claim4(ours, registers) -> Claim:
    stmt = "a three-stage pipeline would need about 102 KB, so it does not fit"
    three = budget(ours.config.with_(stages=3), "sm_120", registers=registers)
    seed3 = [(r, r.total(r.stages + 1), r.total(3)) for r in seed_readings() if r.stages < 3]
    fitting = [bc for bc in (16, 32, 48, 64) if ours.config.with_(stages=3, kv_tile=bc).fits("sm_120")]
    ev = [
        f"ours with 3 stages: {three.smem_bytes // KB} KB > {three.cap_bytes // KB} KB: "
        f"{'fits' if three.fits else 'does not fit'}.",
        "the seed's readings (those with fewer than 3 stages), one stage deeper / with 3 stages: "
        + "; ".join(f"{r}: {t1 // KB} / {t3 // KB} KB" for r, t1, t3 in seed3)
        + ".",
        f"no reading gives ~{SEED_3STAGE_KB} KB: a ring slot costs B_c x d x 2 B per tensor "
        f"({64 * 128 * 2 // KB} KB at B_c=64, d=128), so one more stage adds 16 or 32 KB, never 5 KB.",
        f"3 stages fit sm_120 with 8 warps and d={ours.config.head_dim} for B_c in {fitting} "
        "(proofs/prove_budget.py solves the fit inequality for B_c symbolically).",
    ]
    small = ours.config.with_(stages=3, kv_tile=max(fitting)) if fitting else None
    verdict = (
        "partly holds: a 3-stage ring does not fit at B_c=64 (ours: 128 KB, the seed's readings: "
        f"{min(t for _, t, _ in seed3) // KB}+ KB), but the figure ~102 KB does not hold"
        + (f"; with B_c={small.kv_tile} three stages fit ({small.smem_bytes // KB} KB)" if small else "")
    )
    return Claim(4, stmt, verdict, "\n".join(ev))


def claim5(ours) -> Claim:
    stmt = "the O accumulator costs 0 KB of shared memory (it lives in registers)"
    names = list(ours.breakdown)
    has_o = any(n.lower().startswith("o") for n in names)
    frag = symbols.evaluate(symbols.fragment_register_expressions(), ours.config)
    ev = (
        f"shared-memory buffers of the kernel (flashsim.config.smem_buffers): {', '.join(names)}; no O buffer. "
        + (
            "The epilogue passes O through the warp's own rows of the Q tile, done with by then (KernelConfig.stage_o:"
            " 16-byte global stores), so O takes no byte of its own. "
            if ours.config.stage_o
            else "The epilogue stores O from registers straight to global memory. "
        )
        + f"Its cost is registers: "
        f"{frag['O accumulator']} per thread ({ours.config.pv_accum}, d={ours.config.head_dim}: 16 x d / 32 lanes"
        f"{' / 2 for f16x2' if ours.config.pv_accum == 'f16' else ''})."
    )
    return Claim(5, stmt, "does not hold: an O buffer exists" if has_o else "holds", ev)


def claim6(proofs) -> Claim:
    stmt = "the S accumulator's column-to-lane map equals what the P@V A operand needs (no shared-memory round trip)"
    r = proofs.get("repack")
    if r is None:
        return Claim(6, stmt, "not checked: proofs/prove_repack.py not written yet", "")
    return Claim(6, stmt, "holds (proved)" if r.holds else "PROOF FAILED", "proofs/prove_repack.py:\n" + r.details)


def claim7(config: KernelConfig) -> Claim:
    stmt = "accumulating P@V in f16 halves the accumulator's register footprint; f16 for Q@K^T was slower"
    f32c, f16c = config.with_(pv_accum="f32"), config.with_(pv_accum="f16")
    acc32 = symbols.evaluate(symbols.fragment_register_expressions(), f32c)["O accumulator"]
    acc16 = symbols.evaluate(symbols.fragment_register_expressions(), f16c)["O accumulator"]
    ev = [
        f"O accumulator per thread at d={config.head_dim}: f32 {acc32} registers, f16x2 {acc16}: "
        f"{'halved' if 2 * acc16 == acc32 else 'NOT halved'} (16 x d elements per warp over 32 lanes)."
    ]
    verdict = "holds for the accumulator" if 2 * acc16 == acc32 else "does not hold"
    rows = []
    try:
        for arch in ("sm_120", "sm_90"):
            b32, b16 = compile_kernel(f32c, arch), compile_kernel(f16c, arch)
            o32 = budget(f32c, arch, registers=b32.registers)
            o16 = budget(f16c, arch, registers=b16.registers)
            rows.append(
                f"{arch}: ptxas f32 build {b32.registers} registers, f16 build {b16.registers} "
                f"({b32.registers - b16.registers} fewer, "
                f"{100 * (b32.registers - b16.registers) / b32.registers:.0f}%);"
                f" blocks/SM {o32.blocks_per_sm} -> {o16.blocks_per_sm}, occupancy "
                f"{100 * o32.occupancy:.1f}% -> {100 * o16.occupancy:.1f}%; spills {b32.spill_stores}/"
                f"{b16.spill_stores} B"
            )
        ev += rows
        verdict += (
            "; the whole kernel does not halve (see the ptxas counts) and the occupancy does not change on sm_120"
            if rows
            else ""
        )
    except BuildUnavailable as why:
        ev.append(f"compiled register counts: not checked: {why}")
    except Exception as e:  # noqa: BLE001 - a build that fails here is reported, the claims go on
        first = (str(e).strip().splitlines() or [""])[0][:160]
        ev.append(f"compiled register counts: not checked: the build failed ({type(e).__name__}: {first})")
    ev.append(
        "f16 for Q@K^T slower: not checked (a timing on an RTX 50xx; numerically an f16 S accumulator "
        "would also round the scores before the softmax, which this kernel does not do)."
    )
    return Claim(7, stmt, verdict, "\n".join(ev))


def claim8(ours, registers) -> Claim:
    stmt = "latency-bound at about 17% occupancy; two blocks per SM measured 24% slower"
    from ..resources.whatif import two_block_candidates

    a = get_arch("sm_120")
    ev = [
        f"ours on sm_120: {ours.blocks_per_sm} block(s) of {ours.config.warps} warps = {ours.occ.warps_per_sm}/"
        f"{a.max_warps_per_sm} warps = {100 * ours.occupancy:.1f}% (limited by {ours.occ.limiter}; "
        f"{ours.registers} registers [{ours.registers_source}], {ours.smem_bytes // KB} KB)."
    ]
    cands = two_block_candidates(ours.config, "sm_120")
    checked = [budget(c.config, "sm_120", registers=registers) for c in cands[:3]]
    two = [c for c in checked if c.blocks_per_sm >= 2]
    if two:
        ev.append(
            "two blocks per SM need smaller blocks: "
            + "; ".join(
                f"warps={c.config.warps} B_c={c.config.kv_tile} stages={c.config.stages}: {c.blocks_per_sm} blocks, "
                f"{c.registers} registers, {100 * c.occupancy:.1f}% occupancy"
                for c in two
            )
            + ". With the registers this kernel needs (> 168 per thread: <= 2 warps per sub-partition), 8 warps per SM"
            " is the ceiling, so two blocks of 4 warps give the same 17%."
        )
    ev.append(
        "two blocks of the 8-warp configuration cannot be resident: each would need <= 128 registers per "
        "thread (the live fragments alone need "
        f"{sum(symbols.evaluate(symbols.fragment_register_expressions(), ours.config).values())}) and <= 49 KB."
    )
    ev.append("'latency-bound' and '24% slower': not checked: they need an RTX 50xx (sm_120) to time; none here.")
    holds = abs(ours.occupancy - 0.17) < 0.01
    verdict = (
        (
            "holds for the occupancy (8/48 warps = 16.7% for our default configuration); the 24% slowdown is "
            "not checked (no RTX 50xx)"
        )
        if holds
        else f"does not hold for our configuration: {100 * ours.occupancy:.1f}% occupancy"
    )
    return Claim(8, stmt, verdict, "\n".join(ev))


def check_claims(proofs: dict | None = None, config: KernelConfig | None = None, registers="auto") -> list[Claim]:
    """Every claim for ``config`` (default: the design note's own block, flashsim.config.seed_config) on sm_120.

    ``proofs``: name -> flashsim.prove.runner.ProofResult (claims 1 and 6 reuse them; run here if None).
    """
    if proofs is None:
        from .runner import run_all

        proofs = run_all()
    config = config or seed_config()
    ours = budget(config, "sm_120", registers=registers, label="ours")
    return [
        claim1(proofs),
        claim2(),
        claim3(ours),
        claim4(ours, registers),
        claim5(ours),
        claim6(proofs),
        claim7(config),
        claim8(ours, registers),
    ]
