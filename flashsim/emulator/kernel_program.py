"""The kernel of kernel/flash_fwd.cu, emulated step for step on the CPU, every warp of every block at once.

Each numbered step below is the same step of the CUDA source, with the same operation order and the same
roundings: Q K^T and P V through the tensor-core model (flashsim.mma, k16 steps chained in the kernel's
order), masking to -inf, the lane-local then quad row max, the -inf guard, alpha and p through the SFU model
(flashsim.sfu.ex2) with the scale folded into one FMA (ieee32.fma), the lane-partial row sums added in the
lane's own column order and quad-reduced in the epilogue, the per-tile rescale of O, P rounded to f16, and the
epilogue's IEEE reciprocal, f16 conversion and LSE.

Vectorisation: the state of all query blocks of all heads lives in arrays with a leading "unit" axis
(one unit = one CUDA block); the only Python loops are over KV tiles and over the kernel's k16 steps, as in
the kernel. The fragment layout does not change the arithmetic of an element, so tiles are kept as matrices;
flashsim.layout maps an element back to (lane, register) for reports.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ..numerics import ieee32, sfu
from ..numerics.tensorcore import mma
from ..problem import Problem
from .kernel_math import log_exact_ops

F16, F32 = np.float16, np.float32


def _pad_rows(x: np.ndarray, rows: int) -> np.ndarray:
    """(BH, N, d) -> (BH, rows, d), zero rows appended: the kernel's cp.async zero-fill past N."""
    bh, n, d = x.shape
    out = np.zeros((bh, rows, d), dtype=x.dtype)
    out[:, :n] = x
    return out


def _mma_chain(a_tiles, b_tiles, c, arch):
    """D = A B + C over k16 steps in order: a_tiles (..., M, K) f16, b_tiles (..., K, N) f16, c (..., M, N).

    The kernel's loops: for each k16 step, every (m16, n8) tile; here (m16 = warp, n8 = tile) are batch axes.
    Shapes: a (U, W, 16, K), b (U, K, N) -> c (U, W, N//8, 16, 8).
    """
    k = a_tiles.shape[-1]
    u, w = a_tiles.shape[:2]
    nt = b_tiles.shape[-1] // 8
    for ks in range(k // 16):
        a = a_tiles[:, :, :, ks * 16:(ks + 1) * 16][:, :, None]                       # (U, W, 1, 16, 16)
        b = b_tiles[:, ks * 16:(ks + 1) * 16].reshape(u, 16, nt, 8).transpose(0, 2, 1, 3)[:, None]  # (U,1,NT,16,8)
        a = np.broadcast_to(a, (u, w, nt, 16, 16))
        b = np.broadcast_to(b, (u, w, nt, 16, 8))
        c = mma(a, b, c, arch=arch)
    return c


def _tiles_to_rows(x):
    """(U, W, NT, 16, 8) -> (U, W*16, NT*8): accumulator tiles back to the block's row-major matrix."""
    u, w, nt = x.shape[:3]
    return x.transpose(0, 1, 3, 2, 4).reshape(u, w * 16, nt * 8)


def run(q, k, v, prob: Problem, progress: bool | None = None):
    """Emulate the kernel on f16 numpy q (B,H,Nq,d), k, v (B,H,Nk,d); returns (o f16, lse f32)."""
    cfg, arch = prob.config, prob.arch
    B, H, nq, nk, d = prob.batch, prob.heads, prob.nq, prob.nk, prob.head_dim
    # W counts m16 row tiles of a block (warps x m_tiles): each is emulated like a one-tile warp, since a warp's
    # second m16 tile runs the same per-row program on its own rows.
    W, BM, BC = cfg.block_m // 16, cfg.block_m, cfg.kv_tile
    pv_f16 = cfg.pv_accum == "f16"
    nqb = prob.q_blocks
    tiles_per_block = prob.kv_tiles()                     # (nqb,)
    max_tiles = int(tiles_per_block.max(initial=0))

    qh = _pad_rows(np.ascontiguousarray(q).reshape(B * H, nq, d), nqb * BM)
    kh = _pad_rows(np.ascontiguousarray(k).reshape(B * H, nk, d), max(max_tiles, 1) * BC)
    vh = _pad_rows(np.ascontiguousarray(v).reshape(B * H, nk, d), max(max_tiles, 1) * BC)

    # units = (bh, q block), in the order of the CUDA grid's flattening (x fastest)
    U = B * H * nqb
    unit_bh = np.repeat(np.arange(B * H), nqb)
    unit_qb = np.tile(np.arange(nqb), B * H)
    unit_tiles = tiles_per_block[unit_qb]
    q_units = qh.reshape(B * H, nqb, W, 16, d).reshape(U, W, 16, d)
    rows = unit_qb[:, None] * BM + np.arange(BM)[None, :]          # (U, BM) global query row

    sl2 = prob.scale_log2
    m_run = np.full((U, BM), -np.inf, dtype=F32)
    l_lane = np.zeros((U, BM, 4), dtype=F32)                      # per row, per lane of the quad (t4)
    o_acc = np.zeros((U, W, d // 8, 16, 8), dtype=F16 if pv_f16 else F32)

    show = progress if progress is not None else None
    t_start = time.monotonic()
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        for t in range(max_tiles):
            act = np.nonzero(unit_tiles > t)[0]
            full = act.size == U
            sel = slice(None) if full else act
            bh = unit_bh[sel]
            kt = kh[bh, t * BC:(t + 1) * BC]                             # (A, BC, d)
            vt = vh[bh, t * BC:(t + 1) * BC]
            a_cnt = U if full else act.size

            # 1. S = Q K^T, f32 accumulators from zero
            s = np.zeros((a_cnt, W, BC // 8, 16, 8), dtype=F32)
            s = _mma_chain(q_units[sel], kt.transpose(0, 2, 1), s, arch)
            s = _tiles_to_rows(s)                                         # (A, BM, BC)

            # 2. mask keys past nk and (causal) after the diagonal
            cols = t * BC + np.arange(BC)
            r = rows[sel]
            masked = cols[None, None, :] >= nk
            if cfg.causal:
                masked = masked | (cols[None, None, :] > (r[:, :, None] + nk - nq))
            s = np.where(masked, F32(-np.inf), s)

            # 3. row max (fmax ignores NaN; order-free), guard, alpha, scaled max
            mt = np.fmax.reduce(s, axis=-1, initial=-np.inf).astype(F32)
            m_old = m_run[sel]
            m_new = np.fmax(m_old, mt)
            m_safe = np.where(m_new == -np.inf, F32(0), m_new)
            alpha = sfu.ex2((m_old - m_safe) * sl2, arch=arch)
            m_scaled = m_safe * sl2
            m_run[sel] = m_new

            # 4. p = ex2(fma(s, scale_log2, -m_scaled))
            p = sfu.ex2(ieee32.fma(s, np.full_like(s, sl2), np.broadcast_to(-m_scaled[..., None], s.shape)),
                        arch=arch)

            # 5. lane-partial row sums: l = l*alpha, then + p over the lane's columns in (n, e) order
            lq = l_lane[sel] * alpha[..., None]
            p_lane = p.reshape(a_cnt, BM, BC // 8, 4, 2)                  # [..., n, t4, e]
            for n in range(BC // 8):
                for e in range(2):
                    lq = lq + p_lane[:, :, n, :, e]
            l_lane[sel] = lq

            # 6. rescale O per row, in the accumulator's type
            o = o_acc[sel]
            a_rows = alpha.reshape(a_cnt, W, 1, 16, 1)                   # per row of each warp
            if pv_f16:
                o = o * a_rows.astype(F16)
            else:
                o = o * a_rows

            # 7. O += P V, P rounded to f16 (the register repack), k16 slices in order
            pf = p.astype(F16).reshape(a_cnt, W, 16, BC)
            o = _mma_chain(pf, vt, o, arch)
            o_acc[sel] = o
            if show is None and time.monotonic() - t_start > 1.0:
                show = True
            if show:
                _progress(t + 1, max_tiles, t_start)
    if show:
        sys.stderr.write("\n")

    # 8. epilogue
    o_out, lse = epilogue(l_lane, _tiles_to_rows(o_acc), m_run, prob.softmax_scale)

    o_out = o_out.reshape(B * H, nqb * BM, d)[:, :nq].reshape(B, H, nq, d)
    lse = lse.astype(F32).reshape(B * H, nqb * BM)[:, :nq].reshape(B, H, nq)
    return o_out, lse


def epilogue(l_lane, o_rows, m_run, softmax_scale):
    """Step 8 on the final state (shared by the numpy and JAX backends): quad-reduce l as (l0 + l1) + (l2 + l3),
    O * (1/l) rounded to f16, LSE. l_lane (..., 4) f32, o_rows (..., d) f32 or f16, m_run (...) f32."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        l = (l_lane[..., 0] + l_lane[..., 1]) + (l_lane[..., 2] + l_lane[..., 3])
        empty = (l == 0) | np.isnan(l)
        inv = np.where(empty, F32(1), F32(1) / np.where(empty, F32(1), l))
        # cvt.rn.f16x2.f32 turns every NaN into 0x7FFF (seen on the H200, tests/data/layout_sm90.npz); numpy's
        # astype would keep the sign and payload of x86's default NaN
        o_out = ieee32.cvt_f32_to_f16(o_rows.astype(F32) * inv[..., None])
        ln = log_exact_ops(np.where(empty, F32(1), l))
        lse = np.where(empty, F32(np.inf), ieee32.fma(m_run, np.full_like(m_run, softmax_scale), ln))
    return o_out, lse


_last_draw = [0.0]


def _progress(done, total, t0):
    """Redraw the progress bar at most 4 times a second (and at the end), so logs stay short."""
    now = time.monotonic()
    if done < total and now - _last_draw[0] < 0.25:
        return
    _last_draw[0] = now
    width = 30
    frac = done / max(total, 1)
    bar = "#" * int(width * frac) + "." * (width - int(width * frac))
    sys.stderr.write(f"\r  emulating KV tiles [{bar}] {done}/{total}  {now - t0:5.1f}s")
    sys.stderr.flush()
