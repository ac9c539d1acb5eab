"""The resource budget: the symbolic shared memory, the occupancy rules and the fit region, proved with sympy.

1. closed form   config.smem_buffers on symbols sums to Q + K + V + the ring's mbarriers
                 = e d (16 w / W_s + 2 W_s stages B_c) + 16 W_s stages r_mb bytes (W_s = warp_split: the warps
                 sharing the block's rows, each with its own ring; 1 otherwise), and it evaluates to
                 KernelConfig.smem_bytes (the integer path of the same function) for every supported configuration,
                 the decode's warp_split ones included;
2. fit region    on sm_120 (99 KB opt-in cap) with d = 128 and 8 warps, solving the inequality for B_c gives
                 B_c <= 2143/32 (66.97) for 2 stages and B_c <= 4285/96 (44.6) for 3 stages (the default's mbarrier
                 ring included): with B_c a multiple of 16, the
                 deepest ring at B_c = 64 is 2 stages and 3 stages need B_c <= 32;
3. occupancy     the sympy form of the cuda_occupancy.h rules (flashsim.resources.occupancy, SYM ops) equals the
                 integer form (INT ops) on a grid of threads x registers x shared memory for every arch, and
                 blocks/SM never increases with registers or shared memory (monotone);
4. registers     the O accumulator's registers per thread are d e_acc / 8: f16 is exactly half of f32 for every
                 d; the live-fragment floor of the default configuration is below 255;
5. default       KernelConfig.default(arch) fits its arch, for every arch in flashsim.arch.

Runnable alone (exit 0 iff it holds), collected by pytest (test_budget_proof), run by ``flashsim prove``.
"""

from __future__ import annotations

import itertools
import pathlib
import sys
from fractions import Fraction

try:
    import flashsim  # noqa: F401
except ImportError:  # run from a checkout without an install
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import sympy as sp

from flashsim.arch import ARCHS
from flashsim.config import NVFP4_HEAD_DIMS, SUPPORTED_HEAD_DIMS, SUPPORTED_STAGES, KernelConfig
from flashsim.constants import MBARRIER_BYTES
from flashsim.prove.runner import run_as_script, run_steps
from flashsim.resources import symbols as S
from flashsim.resources.occupancy import INT, SYM, limits

TITLE = "budget: symbolic shared memory = the kernel's, the fit region, occupancy rules (sympy = integer)"


def step_closed_form():
    total = sp.Add(*S.smem_expressions().values())
    rings = S.warp_split
    closed = (
        S.head_dim
        * (
            S.qk_bytes * (16 * S.m_tiles * S.warps / rings + rings * S.stages * S.kv_tile)
            + S.v_bytes * rings * S.stages * S.kv_tile
        )
        + 2 * MBARRIER_BYTES * rings * S.stages * S.ring_mbarrier
        + S.k_scale_bytes * rings * S.stages * S.kv_tile
    )  # a full and an empty mbarrier per ring slot; NVFP4's K block scales ride in the ring; a ring per warp_split warp
    if sp.simplify(total - closed) != 0:
        return False, f"smem total {total} != {closed}"
    # the symbolic total as Python code over exact fractions (sympy's subs per configuration is 20x slower)
    exact = sp.lambdify(S.SYMBOLS, total, modules=[{}])

    def symbolic_bytes(cfg):
        v = S.values(cfg)
        return exact(*(Fraction(int(sp.numer(v[x])), int(sp.denom(v[x]))) for x in S.SYMBOLS))

    count = 0
    for d, w, bc, st in itertools.product(SUPPORTED_HEAD_DIMS, range(2, 9), (16, 32, 64, 128), SUPPORTED_STAGES):
        cfg = KernelConfig(head_dim=d, warps=w, warp_split=w, kv_tile=bc, stages=st, layout="bnhd", seqlens=True,
                           pack_gqa=True)  # fmt: skip
        if symbolic_bytes(cfg) != cfg.smem_bytes:
            return False, f"symbolic {symbolic_bytes(cfg)} != smem_bytes {cfg.smem_bytes} at {cfg.describe()}"
        count += 1
    for d, w, mt, bc, st, quant in itertools.product(
        SUPPORTED_HEAD_DIMS,
        range(1, 17),
        (1, 2),
        range(16, 257, 16),
        SUPPORTED_STAGES,
        ("none", "int8", "int8-fp8", "nvfp4"),
    ):
        if quant in ("int8-fp8", "nvfp4") and bc % 32:
            continue  # FP8 P@V takes k32 slices of the KV tile
        if quant == "nvfp4" and d not in NVFP4_HEAD_DIMS:
            continue
        cfg = KernelConfig(head_dim=d, warps=w, m_tiles=mt, kv_tile=bc, stages=st, quant=quant)
        if symbolic_bytes(cfg) != cfg.smem_bytes:
            return False, f"symbolic {symbolic_bytes(cfg)} != smem_bytes {cfg.smem_bytes} at {cfg.describe()}"
        count += 1
    return True, (
        f"Q + K + V + barriers = d (e_qk (16 m_t w / W_s + W_s stages B_c) + e_v W_s stages B_c) + 16 W_s stages r_mb "
        f"+ s_k W_s stages B_c bytes (e_qk, e_v = e_in, or 1 with INT8 Q K^T, FP8 P@V, e_qk = 1/2 and s_k = d / 16 "
        f"with NVFP4; r_mb = 1 with the mbarrier ring; W_s = warp_split); equals "
        f"KernelConfig.smem_bytes on {count} configs"
    )


def step_fit_region():
    cap = ARCHS["sm_120"].smem_per_block_optin
    total = sp.Add(*S.smem_expressions().values())
    bc = sp.Symbol("B_c", positive=True)  # solved over the reals
    out, ok = [], True
    for stages, want in ((2, 64), (3, 32)):
        expr = total.subs(
            {
                S.head_dim: 128,
                S.warps: 8,
                S.m_tiles: 1,
                S.elem_bytes: 2,
                S.qk_bytes: 2,
                S.v_bytes: 2,
                S.stages: stages,
                S.ring_mbarrier: int(KernelConfig().ring_mbarrier),
                S.k_scale_bytes: 0,
                S.warp_split: 1,
            }
        ).subs(S.kv_tile, bc)
        bound = sp.solve(expr - cap, bc)[0]  # total is increasing in B_c: fits iff B_c <= bound
        largest = int(sp.floor(bound / 16) * 16)
        ok &= largest == want and all(
            KernelConfig(kv_tile=b, stages=stages).fits("sm_120") == (b <= bound) for b in range(16, 257, 16)
        )
        out.append(f"{stages} stages: B_c <= {bound} (largest multiple of 16: {largest})")
    return ok, "sm_120, d=128, 8 warps: " + "; ".join(out)


def step_occupancy_rules():
    checked = 0
    t, r, sd = sp.symbols("t r sd", integer=True, nonnegative=True)
    for arch in ARCHS.values():
        sym = limits(arch, t, r, sd, 0, SYM)
        fns = {k: sp.lambdify((t, r, sd), v, "sympy") for k, v in sym.items()}
        prev_blocks = None
        for threads, regs in itertools.product((32, 96, 128, 256, 512, 1024), (1, 32, 64, 96, 128, 168, 200, 255)):
            for smem in (0, 1000, 48 * 1024, 98304, 101376, 131072, 232448):
                ints = limits(arch, threads, regs, smem, 0, INT)
                syms = {k: int(f(threads, regs, smem)) for k, f in fns.items()}
                if ints != syms:
                    return False, f"{arch.name} threads={threads} regs={regs} smem={smem}: int {ints} != sympy {syms}"
                checked += 1
        # monotone: more registers or more shared memory never gives more blocks
        for threads in (128, 256):
            blocks = [
                [min(limits(arch, threads, rg, sm, 0, INT).values()) for sm in range(0, 240000, 4096)]
                for rg in range(1, 256, 7)
            ]
            for row in blocks:
                if any(a < b for a, b in zip(row, row[1:])):
                    return False, f"{arch.name}: blocks increase with shared memory"
            for col in zip(*blocks):
                if any(a < b for a, b in zip(col, col[1:])):
                    return False, f"{arch.name}: blocks increase with registers"
            prev_blocks = blocks
    return prev_blocks is not None, f"sympy rules = integer rules on {checked} points over {len(ARCHS)} archs; monotone"


def step_registers():
    o = S.fragment_register_expressions()["O accumulator"]
    half = sp.simplify(o.subs(S.acc_bytes, 2) / o.subs(S.acc_bytes, 4))
    floor = sum(S.evaluate(S.fragment_register_expressions(), KernelConfig()).values())
    ok = half == sp.Rational(1, 2) and sp.simplify(o - S.m_tiles * S.head_dim * S.acc_bytes / 8) == 0 and floor <= 255
    return ok, f"O accumulator = {o} registers per thread; f16 / f32 = {half}; default live-fragment floor {floor}"


def step_defaults():
    rows = []
    ok = True
    for name in ARCHS:
        cfg = KernelConfig.default(name)
        fits = cfg.fits(name)
        ok &= fits
        rows.append(
            f"{name}: {cfg.smem_bytes // 1024} KB of {ARCHS[name].smem_per_block_optin // 1024} KB"
            f"{'' if fits else ' DOES NOT FIT'}"
        )
    return ok, "default configurations: " + ", ".join(rows)


STEPS = (
    ("closed form = kernel's smem", step_closed_form),
    ("fit region (sm_120)", step_fit_region),
    ("occupancy rules", step_occupancy_rules),
    ("accumulator registers", step_registers),
    ("defaults fit", step_defaults),
)


def check():
    return run_steps(STEPS)


def test_budget_proof():
    holds, details = check()
    assert holds, details


if __name__ == "__main__":
    run_as_script(TITLE, check)
