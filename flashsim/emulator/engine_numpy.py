"""The numpy engine: kernel_program's steps run eagerly, every CUDA block of a chunk at once.

One unit = one CUDA block (one q block of one head), in the CUDA grid's order. Units are taken in chunks whose
score tile (units x BM x BC f32) stays under ``max_tile_elems`` elements, so memory is bounded whatever the
problem size (a chunk runs from the initial state through the epilogue); within a chunk the only Python loop is
over KV tiles (and, inside the steps, the kernel's own k16 and lane-column loops). Causal blocks that are done
drop out of a step (their state is left as it is). A block starts at its first KV tile (a sliding window skips
the tiles left of it, as the kernel does) and reads its K / V head (GQA: one head per group of query heads).
"""

from __future__ import annotations

import numpy as np

from ..constants import FP4_BLOCK
from ..numerics.target import Target
from ..numerics.xp import errstate
from ..problem import Problem
from ..settings import EngineOptions
from . import kernel_program as K
from .progress import Progress
from .quantize import per_row, quantized_operands

DEFAULT_MAX_TILE_ELEMS = 1 << 22  # score elements per step (~200 MB of float64/int temporaries at most)


def pad_rows(x: np.ndarray, rows: int) -> np.ndarray:
    """(BH, N, d) -> (BH, rows, d), zero rows appended: the kernel's cp.async zero-fill past N."""
    bh, n, d = x.shape
    out = np.zeros((bh, rows, d), dtype=x.dtype)
    out[:, :n] = x
    return out


def step_options(prob: Problem) -> dict:
    """The keyword options of kernel_program.scores for ``prob`` (mask and soft-cap). The JAX engine passes the same
    values into its compiled program as scalars (engine_jax._steps)."""
    cfg = prob.config
    return dict(causal=cfg.causal, window=prob.window, cap_scale=prob.cap_scale if cfg.softcap else None)


def run(
    q,
    k,
    v,
    prob: Problem,
    progress: bool | None = None,
    max_tile_elems: int | None = None,
    options: EngineOptions | None = None,
):
    """Emulate the kernel on numpy q (B,Hq,Nq,d), k, v (B,Hkv,Nk,d) (f16 or bf16, layout (B, H, N, d)); returns
    (o like q, lse f32, Rows). ``options``: the engine options (flashsim.settings; the tensor-core kernel's threads)."""
    options = options if options is not None else EngineOptions.from_environment()
    target = Target(mma_threads=options.mma_threads)
    cfg, arch = prob.config, prob.arch
    B, H, nq, nk, d = prob.batch, prob.heads, prob.nq, prob.nk, prob.head_dim
    BM, BC = cfg.block_m, cfg.kv_tile
    nqb = prob.q_blocks
    first_tile, tiles_per_block = prob.kv_tile_range()  # (nqb,) each
    T = prob.kv_span()
    Hk = prob.heads_kv
    out_dtype = v.dtype
    q, k, v, quant = quantized_operands(q, k, v, cfg, prob.group)  # kernel/quantize.cu's pass, with a quant
    if quant is not None:
        q_sc = per_row(quant.q_scale, nqb * BM).reshape(B * H * nqb, BM)
        k_sc = per_row(quant.k_scale, T * BC).reshape(B * Hk, T * BC)
        corr = pad_rows(quant.corr.reshape(B * H, nq, 1), nqb * BM).reshape(B * H * nqb, BM)
    if cfg.nvfp4:  # the block-scale codes, rows padded with zeros (the kernel's padded rows are masked or not stored)
        nsf = d // FP4_BLOCK
        q_sf = pad_rows(quant.q_sf.reshape(B * H, -1, nsf), nqb * BM).reshape(B * H * nqb, BM, nsf)
        k_sf = pad_rows(quant.k_sf.reshape(B * Hk, -1, nsf), T * BC)

    qh = pad_rows(np.ascontiguousarray(q).reshape(B * H, nq, d), nqb * BM).reshape(B * H * nqb, BM, d)
    kh = pad_rows(np.ascontiguousarray(k).reshape(B * Hk, nk, d), T * BC)
    vh = pad_rows(np.ascontiguousarray(v).reshape(B * Hk, v.shape[2], d), T * BC)

    U = B * H * nqb  # units, x (q block) fastest
    unit_bh = np.repeat(np.arange(B * H), nqb)
    unit_kv = (unit_bh // H) * Hk + (unit_bh % H) // prob.group  # the K / V head a unit reads (GQA)
    unit_qb = np.tile(np.arange(nqb), B * H)
    unit_tiles = tiles_per_block[unit_qb]
    unit_t0 = first_tile[unit_qb]
    rows_all = unit_qb[:, None] * BM + np.arange(BM)[None, :]  # (U, BM) global query rows
    opts = step_options(prob)
    scale_opts: dict = {}

    # Chunks of units, each run from the initial state to the epilogue before the next: memory is bounded by the
    # chunk (its state and temporaries) plus the outputs, whatever the problem size. (Running chunks on threads was
    # measured slower on the 2-core development machine: benchmarks/RESULTS.md.)
    chunk = max(1, int(max_tile_elems or DEFAULT_MAX_TILE_ELEMS) // (BM * BC))
    o_out = np.empty((U, BM, d), out_dtype)
    lse = np.empty((U, BM), np.float32)
    l_out = np.empty((U, BM), np.float32)
    flag = np.empty((U, BM), bool)
    bar = Progress(int(unit_tiles.sum()), progress)
    done = 0
    with errstate():
        for c0 in range(0, U, chunk):
            units = np.arange(c0, min(U, c0 + chunk))
            m, l, o = K.initial_state(np, (units.size,), BM, d, cfg.o_f16)
            for t in range(int(unit_tiles[units].max(initial=0))):
                act = np.nonzero(unit_tiles[units] > t)[0]  # chunk-local indices of busy units
                u = units[act]
                kv = unit_kv[u]
                cols = (unit_t0[u] + t)[:, None] * BC + np.arange(BC)[None, :]  # (A, BC) global key indices
                kt = kh[kv[:, None], cols]  # (A, BC, d)
                vt = vh[kv[:, None], cols]
                if quant is not None:
                    scale_opts = dict(q_scale=q_sc[u], k_scale=k_sc[kv[:, None], cols])
                if cfg.nvfp4:
                    scale_opts.update(q_sf=q_sf[u], k_sf=k_sf[kv[:, None], cols])
                s, m_new, alpha, neg_m = K.scores(
                    qh[u],
                    kt,
                    m[act],
                    rows_all[u],
                    cols,
                    nq,
                    nk,
                    prob.scale_log2,
                    arch=arch,
                    **opts,
                    **scale_opts,
                    target=target,
                )
                p = K.probabilities(s, neg_m, prob.scale_log2, arch=arch, target=target)
                l[act], o[act] = K.accumulate(
                    l[act],
                    o[act],
                    p,
                    alpha,
                    vt,
                    arch=arch,
                    two_level=cfg.pv_accum == "f16x2",
                    group_keys=cfg.fp8_group_keys,
                    target=target,
                )
                m[act] = m_new
                done += act.size
                bar.update(done)
            o_out[units], lse[units], l_out[units], flag[units] = K.epilogue(
                l,
                o,
                m,
                prob.lse_scale,
                out_dtype,
                corr=None if quant is None else corr[units],
                v_deq=quant.v_deq.reshape(B * Hk, d)[unit_kv[units]] if cfg.fp8_pv else None,
            )
    bar.close()
    rows = (B * H, nqb * BM)
    o_out = o_out.reshape(B * H, nqb * BM, d)[:, :nq].reshape(B, H, nq, d)
    lse, l_out, flag = (x.reshape(rows)[:, :nq].reshape(B, H, nq) for x in (lse, l_out, flag))
    return o_out, lse, Rows(l_out, flag)


class Rows:
    """Per-row values an engine returns beside (o, lse): l (the softmax denominator) and the overflow flag of
    kernel_program.epilogue, both (B, H, Nq)."""

    __slots__ = ("l", "flag")

    def __init__(self, l, flag):
        self.l, self.flag = l, flag


# The numpy engine's temporaries, measured with tracemalloc on engine_numpy.py (sm_90 default configurations and
# the extreme tiles BM=16 with BC=16 and BC=256; the estimate is 1.0-1.5 times the measured peak, and
# tests/test_problem_checks.py checks that it stays above a measured peak):
CHUNK_BYTES_PER_SCORE = 60  # one KV step of a chunk, per score element (chunk units x BM x BC) ...
CHUNK_BYTES_PER_SCORE_D_BM = 25  # ... plus this times d / BM (each block's K and V tiles gathered and decoded)
CHUNK_SCRATCH = 16 << 20  # the tensor-core model's own chunked scratch
EPILOGUE_BYTES_PER_OUT = 56  # kernel_program.epilogue on a chunk's blocks: per padded output element
EPILOGUE_CHUNK_LEFT = 0.5  # part of the last chunk's temporaries still alive during the epilogue


def host_bytes(prob: Problem) -> tuple[int, int, int]:
    """(the caller's f16 q, k, v; those padded to whole tiles; o f16 and lse f32 as returned), in bytes: what any
    engine holds on the host (engine_jax.peak_bytes too)."""
    cfg = prob.config
    bh, d, bm, bc = prob.batch * prob.heads, prob.head_dim, cfg.block_m, cfg.kv_tile
    rows = bh * prob.q_blocks * bm  # padded query rows
    inputs = 2 * bh * (prob.nq + 2 * prob.nk) * d
    padded = 2 * (rows * d + 2 * bh * prob.kv_span() * bc * d)  # pad_rows
    outputs = 2 * bh * prob.nq * d + 4 * bh * prob.nq
    return inputs, padded, outputs


def peak_bytes(prob: Problem, max_tile_elems: int | None = None) -> int:
    """Estimated peak memory of this engine on ``prob``: ``host_bytes``, a chunk's state (m, l, O), and the larger of
    the engine's two phases on a chunk: a KV step (its temporaries grow with the chunk's score elements, at most
    ``max_tile_elems``) or the epilogue. An estimate: 1.0 to 1.5 times the measured peak
    (tests/test_problem_checks.py)."""
    cfg = prob.config
    d, bm, bc = prob.head_dim, cfg.block_m, cfg.kv_tile
    units = prob.batch * prob.heads * prob.q_blocks
    rows = units * bm
    inputs, padded, outputs = host_bytes(prob)
    max_tile_elems = DEFAULT_MAX_TILE_ELEMS if max_tile_elems is None else max_tile_elems
    # chunks of units (each at most max_tile_elems score elements), one after the other, each from its initial state
    # through its epilogue; the outputs of every block are allocated up front
    chunk_units = min(units, max(1, int(max_tile_elems) // (bm * bc)))
    chunk_rows = chunk_units * bm
    state = chunk_rows * (4 + 16 + 8) + chunk_rows * d * (2 if cfg.pv_accum == "f16" else 4) + 24 * units
    padded_out = 2 * rows * d + 4 * rows  # the engine's padded o and lse
    per_chunk = (CHUNK_BYTES_PER_SCORE + CHUNK_BYTES_PER_SCORE_D_BM * d / bm) * chunk_rows * bc
    step_phase = per_chunk + min(CHUNK_SCRATCH, per_chunk)
    epilogue_phase = EPILOGUE_CHUNK_LEFT * per_chunk + EPILOGUE_BYTES_PER_OUT * chunk_rows * d
    return int(inputs + padded + padded_out + state + outputs + max(step_phase, epilogue_phase))
