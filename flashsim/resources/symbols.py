"""The symbolic resource model: shared memory per buffer and accumulator registers as sympy expressions.

Shared memory is ``flashsim.config.smem_buffers`` evaluated on symbols, the very function the kernel launch
evaluates on ints, so the formula exists once. Registers cannot be derived exactly (ptxas allocates them);
what can is the register footprint of the fragments the kernel must hold, per thread, from the mma.m16n8k16
fragment sizes (PTX ISA, "Matrix fragments for mma.m16n8k16"): a warp's 16 x n tile of 32-bit accumulators is
16 * n / 32 registers per lane, f16 accumulators half that (two per .f16x2 register).
"""

from __future__ import annotations

import sympy as sp

from ..config import KernelConfig, smem_buffers
from ..constants import F16_BYTES, MMA_M

# The configuration as symbols: warps (w), m16 tiles per warp (m_t), KV tile Bc, head dim d, ring stages,
# element bytes (of the inputs; of Q and K in shared memory: e_qk, 1 with INT8, 1/2 with NVFP4; of V there: e_v, 1 with
# FP8 P@V), s_k, the block-scale bytes per key in the K ring (d / 16 with NVFP4, else 0), and W_s, the warps that share
# the block's rows, each with its own K / V ring (KernelConfig.warp_split, else 1).
warps, m_tiles, kv_tile, head_dim, stages = sp.symbols("w m_t B_c d stages", integer=True, positive=True)
elem_bytes, acc_bytes, v_bytes = sp.symbols("e_in e_acc e_v", integer=True, positive=True)
qk_bytes = sp.Symbol("e_qk", rational=True, positive=True)
k_scale_bytes = sp.Symbol("s_k", integer=True, nonnegative=True)
ring_mbarrier = sp.Symbol(
    "r_mb", integer=True, nonnegative=True
)  # 1: the ring's mbarriers (KernelConfig.ring_mbarrier)
warp_split = sp.Symbol("W_s", integer=True, positive=True)  # KernelConfig.warp_split: rings, warps sharing rows
block_m = MMA_M * m_tiles * warps / warp_split  # B_r: 16 query rows per m16 tile, m_t tiles per warp (shared by W_s)
SYMBOLS = (
    warps,
    m_tiles,
    kv_tile,
    head_dim,
    stages,
    elem_bytes,
    acc_bytes,
    qk_bytes,
    v_bytes,
    ring_mbarrier,
    k_scale_bytes,
    warp_split,
)

REG_BYTES = 4  # one 32-bit register
LANES = 32


def values(config: KernelConfig) -> dict:
    """Symbol -> number for one configuration."""
    return {
        warps: config.warps,
        m_tiles: config.m_tiles,
        kv_tile: config.kv_tile,
        head_dim: config.head_dim,
        stages: config.stages,
        elem_bytes: F16_BYTES,
        acc_bytes: 2 if config.o_f16 else 4,  # f16x2 keeps an f32 O
        qk_bytes: sp.Rational(config.qk_bytes),
        v_bytes: config.v_bytes,
        ring_mbarrier: int(config.ring_mbarrier),
        k_scale_bytes: config.k_scale_bytes,
        warp_split: config.warp_split,
    }


def smem_expressions() -> dict:
    """Buffer name -> bytes, as sympy expressions (from config.smem_buffers)."""
    return dict(
        smem_buffers(
            block_m, kv_tile, head_dim, stages, elem_bytes, qk_bytes, v_bytes, ring_mbarrier, k_scale_bytes, warp_split
        )
    )


def sp_buffer_expression():
    """Bytes of the S/P shared-memory buffer the seed's table assumes (B_r x B_c in f16); our kernel has none."""
    return block_m * kv_tile * elem_bytes


def _per_lane(rows, cols, bytes_per_elem):
    """Registers per lane for a warp-owned rows x cols tile of bytes_per_elem elements."""
    return rows * cols * bytes_per_elem / REG_BYTES / LANES


def fragment_register_expressions() -> dict:
    """Registers per thread the kernel's live fragments need at least (a floor, not ptxas's count).

    Q stays in registers only with one m16 tile per warp (sp.Piecewise); with two it is re-read from shared memory.
    """
    rows = MMA_M * m_tiles
    return {
        "O accumulator": _per_lane(rows, head_dim, acc_bytes),  # 16 m_t x d, f32 or f16x2
        "S accumulator (f32)": _per_lane(rows, kv_tile, 4),  # 16 m_t x Bc scores
        "Q fragments": sp.Piecewise(
            (_per_lane(MMA_M, head_dim, qk_bytes), sp.Eq(m_tiles, 1)), (0, True)
        ),  # A operand of Q K^T, kept for the loop
        "row max, row sum": 2 * 2 * m_tiles,  # m and l of the lane's 2 m_t rows
    }


def evaluate(expressions: dict, config: KernelConfig) -> dict:
    """Evaluate name -> expression at ``config`` to ints."""
    vals = values(config)
    out = {}
    for name, expr in expressions.items():
        v = sp.sympify(expr).subs(vals)
        if not v.is_Integer:
            raise ValueError(f"{name} does not evaluate to an integer at {config.describe()}: {v}")
        out[name] = int(v)
    return out
