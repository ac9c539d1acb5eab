"""The program of kernel/flash_fwd.cu, written once against an array namespace: every engine runs these functions.

Each numbered step is the same step of the CUDA source, with the same operation order and the same roundings:
Q K^T and P V through the tensor-core model (k16 steps chained in the kernel's order), masking to -inf, the
row max (lane-local then quad: order-free), the -inf guard, alpha and p through the SFU model with the scale
folded into one FMA, the lane-partial row sums added in the lane's own column order, the per-tile rescale of O in
the accumulator's type, P rounded to the element type (f16 or bf16) by the register repack (with pv_accum "f16x2"
each tile's P V through the f16 mma from zero, then added to the f32 O), and the epilogue's IEEE reciprocal,
conversion to the element type, LSE and overflow flag. Options: soft-capping (step 1, kernel_math.softcap_tanh) and
the causal / sliding-window mask (step 2, flashsim.masking); GQA and the (B, N, H, d) layout only change which
rows the engines hand in, never the arithmetic. Every float operation outside the tensor cores goes through
flashsim.numerics.ieee32 (exactly
rounded whatever the engine's float modes), every special function through flashsim.numerics.sfu.

Shapes: any leading batch axes ``...`` (the engines put CUDA blocks there: numpy the active blocks of a KV step,
JAX the slots of a step, per device); a block's rows are one axis of BM = warps x m_tiles x 16 rows (the m16
tiles of the warps, in order), a KV tile one axis of BC keys. The fragment layout does not change the arithmetic
of an element, so tiles stay matrices; flashsim.layout maps an element back to (warp, lane, register) for
reports. The state of a block between KV tiles is (m, l, o): the running row max (BM,), the lane-partial row sums
(BM, 4) (one per lane of the quad that owns the row) and the O accumulator (BM, d), f32 or f16.

Steps 1-3, 4 and 5-7 are separate functions so that an engine can keep their results apart (JAX puts an
optimisation barrier between them: fused into one program, XLA would recompute the row values and p for every
consumer). Where the kernel interleaves them (KernelConfig.exp_in_pv: step 6's rescale before step 4's exponentials,
which run k16 slice by slice inside step 7's loop), each value still sees the same operations in the same order: the
rescale reads only alpha and O, and the row sum still adds the n8 tiles in order, so one program serves both.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..constants import COMBINE_CONSTANTS, FP8_P_SCALE, MMA8_K
from ..masking import key_visible
from ..numerics import ieee32, sfu
from ..numerics.target import PLAIN, Target
from ..numerics.tensorcore import mma_chain, mma_chain_block_scale, mma_chain_k32, mma_chain_s8
from ..numerics.xp import bitcast, namespace, pieces
from .kernel_math import log_exact_ops, softcap_tanh
from .quantize import NVFP4_FORM, slot_keys, to_e4m3

__all__ = ["initial_state", "scores", "probabilities", "accumulate", "epilogue", "split_epilogue", "combine"]

NEG_INF_BITS = 0xFF800000
SIGN_BIT = 0x80000000


def initial_state(xp, lead: tuple, bm: int, d: int, pv_f16: bool):
    """The kernel's state before the first KV tile: m = -inf, l = 0, O = 0, for blocks of shape ``lead``."""
    m = xp.full(lead + (bm,), -np.inf, dtype=xp.float32)
    l = xp.zeros(lead + (bm, 4), dtype=xp.float32)
    o = xp.zeros(lead + (bm, d), dtype=xp.float16 if pv_f16 else xp.float32)
    return m, l, o


def _negate(x):
    """-x by flipping the sign bit (exact for every input; XLA's float negation would flush a subnormal)."""
    xp = namespace(x)
    return bitcast(bitcast(x, np.uint32) ^ xp.asarray(SIGN_BIT, dtype=xp.uint32), np.float32)


def scores(
    q,
    k,
    m_old,
    rows,
    cols,
    nq,
    nk,
    scale_log2,
    *,
    causal: bool,
    arch,
    window=None,
    cap_scale=None,
    q_scale=None,
    k_scale=None,
    q_sf=None,
    k_sf=None,
    target: Target = PLAIN,
):
    """Steps 1-3 of one KV tile: S = Q K^T, the soft-cap, the mask, the row max, the -inf guard, alpha.

    q (..., BM, d) and k (..., BC, d) f16 or bf16, or int8 (quant "int8", flashsim.emulator.quantize) with the
    f32 scale of each row ``q_scale`` (..., BM) and of each key ``k_scale`` (..., BC), or (quant "nvfp4") uint8 e2m1
    codes with those scales and the ue4m3 block-scale codes ``q_sf`` (..., BM, d / 16) and ``k_sf`` (..., BC, d / 16);
    m_old (..., BM) f32; rows
    (..., BM) and cols (..., BC) the global
    query and key indices; nq, nk, scale_log2 scalars; ``window`` a flashsim.masking.Window (config.local) or None;
    ``cap_scale`` (config.softcap) the f32 softmax_scale / softcap, or None. Returns (s (..., BM, BC), m_new, alpha,
    -m_new * scale_log2) with the -inf guard applied to the last (a row with no visible key yet subtracts 0).
    ``target``: the engine's (flashsim.numerics.target), passed to every numerics routine."""
    xp = namespace(q, k, m_old)
    mul, sub = partial(ieee32.mul, target=target), partial(ieee32.sub, target=target)
    # 1. S = Q K^T, f32 accumulators from zero, k16 steps over d in order (INT8: s32 accumulators, k32 steps, then
    #    s = float(s32) * (q_scale * k_scale); NVFP4: the block-scaled k64 mma's f32 chain from zero, then
    #    s = acc * (q_scale * k_scale)); soft-capping: s = tanh(s * cap_scale)
    if q_sf is not None:
        zeros = xp.zeros(q.shape[:-1] + (k.shape[-2],), dtype=xp.float32)
        kt, k_sft = xp.swapaxes(k, -1, -2), xp.swapaxes(k_sf, -1, -2)
        acc = mma_chain_block_scale(q, kt, zeros, q_sf, k_sft, **NVFP4_FORM, arch=arch, target=target)
        s = mul(acc, mul(q_scale[..., :, None], k_scale[..., None, :]))
    elif q.dtype == xp.int8:
        acc = mma_chain_s8(q, xp.swapaxes(k, -1, -2), xp.zeros(q.shape[:-1] + (k.shape[-2],), dtype=xp.int32))
        f = mul(q_scale[..., :, None], k_scale[..., None, :])
        s = mul(xp.astype(acc, xp.float32), f)  # cvt.rn.f32.s32: exact, |acc| <= 127^2 * 256 < 2^24
    else:
        zeros = xp.zeros(q.shape[:-1] + (k.shape[-2],), dtype=xp.float32)
        s = mma_chain(q, xp.swapaxes(k, -1, -2), zeros, arch, target)
    if cap_scale is not None:
        s = softcap_tanh(mul(s, xp.asarray(cap_scale, dtype=xp.float32)), arch, target)
    # 2. mask keys past nk, (causal) after the diagonal and (window) outside the window
    visible = key_visible(rows[..., :, None], cols[..., None, :], nq, nk, causal, window)
    s = xp.where(visible, s, xp.asarray(-np.inf, dtype=xp.float32))
    # 3. row max (fmax ignores NaN; order-free), the -inf guard, alpha, the scaled max
    m_new = ieee32.fmax(m_old, ieee32.fmax_reduce(s, axis=-1))
    no_key = bitcast(m_new, np.uint32) == xp.asarray(NEG_INF_BITS, dtype=xp.uint32)
    m_safe = xp.where(no_key, xp.asarray(0.0, dtype=xp.float32), m_new)
    sl2 = xp.asarray(scale_log2, dtype=xp.float32)
    alpha = sfu.ex2(mul(sub(m_old, m_safe), sl2), arch=arch, target=target)
    neg_m_scaled = _negate(mul(m_safe, sl2))
    return s, m_new, alpha, neg_m_scaled


def probabilities(s, neg_m_scaled, scale_log2, *, arch, target: Target = PLAIN):
    """Step 4: p = ex2(fma(s, scale_log2, -m * scale_log2)), one FFMA and the SFU per score."""
    xp = namespace(s)
    x = ieee32.fma(s, xp.asarray(scale_log2, dtype=xp.float32), neg_m_scaled[..., None], target=target)
    return sfu.ex2(x, arch=arch, target=target)


def accumulate(
    l_lane, o, p, alpha, v, *, arch, two_level: bool = False, group_keys: int = MMA8_K, target: Target = PLAIN
):
    """Steps 5-7 of one KV tile: l = l * alpha + the lane's p (in the lane's column order), O rescaled by alpha in
    the accumulator's type, then O += P V with P rounded to v's type, f16 or bf16 (the S -> P register repack: cvt.rn
    f16x2 / bf16x2), or with e4m3 v (FP8 P@V) P * FP8_P_SCALE to e4m3. ``two_level`` (pv_accum "f16x2", O f32): the
    tile's P V (FP8: each group of ``group_keys`` keys') is accumulated by the f16 mma from +0, then added to O in
    f32. Returns (l, o)."""
    xp = namespace(l_lane, o, p)
    add, mul = partial(ieee32.add, target=target), partial(ieee32.mul, target=target)
    bc = p.shape[-1]
    # 5. lane-partial row sums: a lane holds columns 8n + 2 t4 + e of each n8 tile; it adds them n-major, e-minor
    l_lane = mul(l_lane, alpha[..., None])
    for n8 in pieces(p, 8, -1, target):  # [..., BM, 8]: columns 2 t4 + e of n8 tile n
        for p_e in pieces(xp.reshape(n8, n8.shape[:-1] + (4, 2)), 1, -1, target):
            l_lane = add(l_lane, xp.reshape(p_e, p_e.shape[:-1]))
    # 6. rescale O per row, in the accumulator's type (f16: alpha rounded to f16, then mul.rn.f16x2)
    if o.dtype == xp.float16:
        o = ieee32.mul_f16(o, ieee32.cvt_f32_to_f16(alpha, target=target)[..., None], target=target)
    else:
        o = mul(o, alpha[..., None])
    # 7. O += P V, P rounded to v's type (cvt.rn.f16x2.f32 / bf16x2 of the S accumulator registers), k16 slices;
    #    FP8 (v e4m3, quant "int8-fp8"): P * 448 to e4m3, keys in the fragment's slot order, k32 slices.
    #    ``two_level``: per group of keys (the tile; FP8: ``group_keys``, config.fp8_group_keys), the f16 mma from +0
    #    over the group's slices, then added to the f32 O (the kernel's pv_two_level)
    if str(v.dtype) == "float8_e4m3fn":
        order = xp.asarray(slot_keys(bc))
        pv = xp.take(to_e4m3(mul(p, xp.asarray(np.float32(FP8_P_SCALE), dtype=xp.float32))), order, axis=-1)
        v, chain, group = xp.take(v, order, axis=-2), mma_chain_k32, group_keys
    else:
        pv, chain, group = ieee32.cvt_f32_to(p, v.dtype, target=target), mma_chain, bc
    if not two_level:
        return l_lane, chain(pv, v, o, arch, target)
    zeros = xp.zeros(o.shape, dtype=xp.float16)
    for pv_g, v_g in zip(pieces(pv, group, -1, target), pieces(v, group, -2, target)):
        o = add(o, ieee32.cvt_f16_to_f32(chain(pv_g, v_g, zeros, arch, target), target=target))
    return l_lane, o


def epilogue(l_lane, o, m, lse_scale, out_dtype=np.float16, corr=None, v_deq=None, target: Target = PLAIN):
    """Step 8 on the final state: l = (l0 + l1) + (l2 + l3) over the quad (shfl.xor 1, then 2), O * rcp.rn(l)
    rounded to ``out_dtype`` (f16 or bf16), LSE = fma(m, lse_scale, ln(l)) (lse_scale: softmax_scale, or softcap).
    Rows with l = 0 or NaN keep O (0 or NaN) and get +inf. ``corr`` (quant "int8"; (..., BM) f32): each row's
    q . mean(k), added back as LSE = fma(corr, lse_scale, LSE) (the smoothed scores are the true ones minus it).
    ``v_deq`` (FP8 P@V; (..., d) f32): O / l is multiplied by it per column (P's 448 and V's scale back).
    Returns (o, lse, l, flag): flag marks rows whose unnormalised O holds an inf or NaN while l is finite and
    non-zero (the kernel's overflow flag; it matters with an f16 P@V mma: flashsim.overflow)."""
    xp = namespace(l_lane, o, m)
    mul, fma = (partial(op, target=target) for op in (ieee32.mul, ieee32.fma))
    f32 = xp.float32
    l, empty, l_safe, inv, o32 = _row_totals(l_lane, o, target)
    o_scaled = mul(o32, inv[..., None])
    if v_deq is not None:
        o_scaled = mul(o_scaled, v_deq[..., None, :])
    o_out = ieee32.cvt_f32_to(o_scaled, out_dtype, target=target)
    lse = fma(m, xp.asarray(lse_scale, dtype=f32), log_exact_ops(l_safe, target))
    lse = xp.where(empty, xp.asarray(np.inf, dtype=f32), lse)
    if corr is not None:
        lse = fma(corr, xp.asarray(lse_scale, dtype=f32), lse)
    return o_out, lse, l, _overflow_flag(o32, empty)


def _row_totals(l_lane, o, target: Target):
    """The epilogue's first part, shared by the single pass and the splits: l = (l0 + l1) + (l2 + l3) (the quad's
    shfl.xor 1 then 2), whether the row is empty (l = 0 or NaN), l made safe (1 there), rcp.rn(l) (1 there) and O in
    f32. Returns (l, empty, l_safe, inv, o32)."""
    xp = namespace(l_lane, o)
    add = partial(ieee32.add, target=target)
    l = add(add(l_lane[..., 0], l_lane[..., 1]), add(l_lane[..., 2], l_lane[..., 3]))
    lb = bitcast(l, np.uint32)
    empty = ((lb & xp.asarray(0x7FFFFFFF, dtype=xp.uint32)) == 0) | xp.isnan(l)
    one = xp.asarray(1.0, dtype=xp.float32)
    l_safe = xp.where(empty, one, l)
    inv = xp.where(empty, one, ieee32.div(xp.ones_like(l), l_safe, target=target))  # rcp.rn.f32: IEEE 1 / l
    o32 = ieee32.cvt_f16_to_f32(o, target=target) if o.dtype == xp.float16 else o
    return l, empty, l_safe, inv, o32


def _overflow_flag(o32, empty):
    """The kernel's overflow flag: an inf or NaN in the unnormalised O of a row whose l is finite and non-zero."""
    xp = namespace(o32)
    o_bits = bitcast(o32, np.uint32) & xp.asarray(0x7F800000, dtype=xp.uint32)
    return xp.any(o_bits == xp.asarray(0x7F800000, dtype=xp.uint32), axis=-1) & ~empty


def split_epilogue(l_lane, o, m, lse_scale, target: Target = PLAIN):
    """Step 8 of one split of split-KV (KernelConfig.split): the single pass's l, rcp.rn(l) and O * (1 / l), but O
    stays f32 (the combine rounds once, at the end), and the part's LSE is fma(m, lse_scale, ln(l)), -inf where the
    part holds no visible key for the row (l = 0: the combine weighs it 0), NaN where l is NaN. Returns (o_part f32,
    lse_part, l, flag) with the overflow flag of ``epilogue``."""
    xp = namespace(l_lane, o, m)
    f32 = xp.float32
    l, empty, l_safe, inv, o32 = _row_totals(l_lane, o, target)
    o_part = ieee32.mul(o32, inv[..., None], target=target)
    lse = ieee32.fma(m, xp.asarray(lse_scale, dtype=f32), log_exact_ops(l_safe, target), target=target)
    none = (bitcast(l, np.uint32) & xp.asarray(0x7FFFFFFF, dtype=xp.uint32)) == 0
    lse = xp.where(empty, xp.where(none, xp.asarray(-np.inf, dtype=f32), l), lse)
    return o_part, lse, l, _overflow_flag(o32, empty)


def combine(lse_parts, o_parts, arch, out_dtype=np.float16, target: Target = PLAIN):
    """The combine of split-KV (flash_combine in kernel/flash_fwd.cu), per row over its S parts in split order:
    lse_parts (S, ...) and o_parts (S, ..., d) as ``split_epilogue`` wrote them. m = fmax of the parts' LSE (NaN
    ignored); base = m, or 0 where m = -inf (every part empty: the softmax's -inf guard); w_s = ex2((lse_s - base) *
    log2(e)) through the SFU model; W = ((w_0 + w_1) + w_2) + ...; O = fma(w_s * rcp.rn(W), O_s, O) from 0 in split
    order, rounded to ``out_dtype``; LSE = m + ln(W) (kernel_math.log_exact_ops). Where W is 0 or NaN, O is what the
    sum gives (0 or NaN) with rcp taken as 1, and LSE = +inf: the single pass's rule for a row without keys.
    Returns (o, lse)."""
    xp = namespace(lse_parts, o_parts)
    f32 = xp.float32
    add, sub, mul = (partial(op, target=target) for op in (ieee32.add, ieee32.sub, ieee32.mul))
    n_splits = lse_parts.shape[0]
    mx = xp.full(lse_parts.shape[1:], -np.inf, dtype=f32)
    for s in range(n_splits):
        mx = ieee32.fmax(mx, lse_parts[s])
    none = bitcast(mx, np.uint32) == xp.asarray(NEG_INF_BITS, dtype=xp.uint32)
    base = xp.where(none, xp.asarray(0.0, dtype=f32), mx)
    log2e = xp.asarray(COMBINE_CONSTANTS["LOG2E"], dtype=f32)
    weights = [sfu.ex2(mul(sub(lse_parts[s], base), log2e), arch=arch, target=target) for s in range(n_splits)]
    total = xp.zeros(mx.shape, dtype=f32)
    for w in weights:
        total = add(total, w)
    empty = ((bitcast(total, np.uint32) & xp.asarray(0x7FFFFFFF, dtype=xp.uint32)) == 0) | xp.isnan(total)
    one = xp.asarray(1.0, dtype=f32)
    safe = xp.where(empty, one, total)
    inv = xp.where(empty, one, ieee32.div(xp.ones_like(total), safe, target=target))
    acc = xp.zeros(o_parts.shape[1:], dtype=f32)
    for s, w in enumerate(weights):
        acc = ieee32.fma(mul(w, inv)[..., None], o_parts[s], acc, target=target)
    lse = xp.where(empty, xp.asarray(np.inf, dtype=f32), add(mx, log_exact_ops(safe, target)))
    return ieee32.cvt_f32_to(acc, out_dtype, target=target), lse
