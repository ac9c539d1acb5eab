"""Float64 reference attention: the mathematics the kernel approximates, computed plainly."""

from __future__ import annotations

import numpy as np

from ..masking import key_visible
from ..problem import check_reference_memory, prepare, to_bhnd


def reference_attention(
    q, k, v, *, causal=None, softmax_scale=None, window_size=None, softcap=None, layout=None, pv_accum=None, config=None
):
    """softmax(s) v in float64 with s = q k^T * scale (or softcap * tanh(q k^T * scale / softcap)); returns
    (o float64 like q, lse float64 (B, Hq, Nq), natural log). Same arguments and checks as flashsim.attention
    (GQA, layout, window; pv_accum and config are only checked: the mathematics has no accumulator).

    Masks are aligned bottom-right (flashsim.masking). Rows with no visible key get o = 0 and lse = +inf, as the
    kernel does. A problem whose float64 score arrays would not fit in memory is refused first
    (flashsim.problem.check_reference_memory)."""
    p = prepare(
        q,
        k,
        v,
        causal=causal,
        softmax_scale=softmax_scale,
        window_size=window_size,
        softcap=softcap,
        layout=layout,
        pv_accum=pv_accum,
        config=config,
    )
    check_reference_memory(p)
    q64, k64, v64 = (np.asarray(to_bhnd(x, p.layout), dtype=np.float64) for x in (q, k, v))
    k64, v64 = (p.per_query_head(x) for x in (k64, v64))
    s = np.einsum("bhid,bhjd->bhij", q64, k64) * float(p.softmax_scale)
    if p.config.softcap:
        c = float(p.lse_scale)  # the softcap as the kernel's float32
        s = c * np.tanh(s / c)
    visible = key_visible(np.arange(p.nq)[:, None], np.arange(p.nk)[None, :], p.nq, p.nk, p.config.causal, p.window)
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(m) & (m < 0)
    m_safe = np.where(empty, 0.0, m)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s - m_safe)
        l = e.sum(axis=-1, keepdims=True)
        o = np.einsum("bhij,bhjd->bhid", e, v64) / np.where(l == 0, 1.0, l)
        lse = np.where(l == 0, np.inf, m_safe + np.log(np.where(l == 0, 1.0, l)))[..., 0]
    return np.ascontiguousarray(to_bhnd(o, p.layout)), lse


U16 = 2.0**-11  # half an f16 ulp, relative
U_BF16 = 2.0**-8  # half a bf16 ulp, relative


def error_bound(o_ref, v, nk: int, kv_tile: int, pv_accum: str, dtype: str = "f16"):
    """Per-element bound on |O_kernel - O_float64| derived from the kernel's program (tests/test_emulator.py has
    the derivation): with V = max_j |v_j| per column, f32 P@V: 2u V + u |O*| + Nk 2^-25 V (P rounded to f16,
    O rounded to f16, subnormal p); f16 P@V: (Nk/16 + 2 n_tiles + 2) u V + u |O*| (one f16 rounding of the
    unnormalised O per k16 step, two per tile); f16x2: the f32 bound plus (kv_tile/16) u V (one f16 rounding of a
    tile's partial sum, at most l_tile V, per k16 step of the tile; summed over tiles and divided by l) and
    n_tiles 2^-23 V (the f32 addition of each tile). bf16 (``dtype``, P and O rounded to bf16, f32 P@V only):
    u = 2^-8 and the subnormal term 2^-133 (bf16 has f32's range). ``o_ref`` and ``v`` (B, H, N, d) with v's heads
    those of o (repeat K / V heads for GQA first)."""
    if dtype == "bf16":
        vmax = np.abs(np.asarray(v, dtype=np.float64)).max(axis=2, keepdims=True)
        return 2 * U_BF16 * vmax + U_BF16 * np.abs(o_ref) + nk * 2.0**-133 * vmax
    vmax = np.abs(np.asarray(v, dtype=np.float64)).max(axis=2, keepdims=True)  # (B, H, 1, d)
    n_tiles = -(-nk // kv_tile)
    f32 = 2 * U16 * vmax + U16 * np.abs(o_ref) + nk * 2.0**-25 * vmax
    if pv_accum == "f32":
        return f32
    if pv_accum == "f16x2":
        return f32 + (kv_tile / 16) * U16 * vmax + n_tiles * 2.0**-23 * vmax
    return (nk / 16 + 2 * n_tiles + 2) * U16 * vmax + U16 * np.abs(o_ref)


E_P = 1e-5  # a p's relative error through the FFMA and ex2 (tests/test_emulator.py's derivation)


def split_error_bound(o_ref, v, lse_ref, nk: int, kv_tile: int, pv_accum: str, num_splits: int, dtype: str = "f16"):
    """``error_bound`` for split-KV (num_splits parts, then the combine), derived from the program
    (tests/test_serving_emulator.py has the derivation): each part's O_s = (its sum of p v) / l_s stays f32, so it
    carries the single pass's error without the final rounding, and the combine's weighted mean of the parts keeps
    that bound (weights sum to 1; the subnormal-p term summed over parts is at most the single pass's Nk 2^-25 V).
    The combine adds the error of its normalised weights w_s / W, twice the relative error of one weight,
    delta_w = 2 (E_P + Nk 2^-24) + 2^-22 (|LSE| + 4) (each part's LSE: its l's sum and the ex2 / ln of the p's, one
    f32 rounding of |LSE|, ex2's 2 ulps), times V, and its num_splits f32 fma's, num_splits 2^-24 V. ``lse_ref``
    (B, H, N) like o_ref's rows."""
    vmax = np.abs(np.asarray(v, dtype=np.float64)).max(axis=2, keepdims=True)
    single = error_bound(o_ref, v, nk, kv_tile, pv_accum, dtype)
    lse_abs = np.where(np.isfinite(lse_ref), np.abs(lse_ref), 0.0)[..., None]
    delta_w = 2 * (E_P + nk * 2.0**-24) + 2.0**-22 * (lse_abs + 4)
    return single + (2 * delta_w + num_splits * 2.0**-24) * vmax
