"""The program of kernel/quantize.cu (INT8 attention's quantization pass), written once against an array namespace.

SageAttention's recipe, made exact: K is smoothed by its mean over tokens (``k_mean``: FS_MEAN_SLICES interleaved
partial sums in token order, the slices added in order, one IEEE division by nk), then K (smoothed) and Q are
quantized per block of QUANT_BLOCK keys / rows to symmetric INT8 with one f32 scale per block
(``quantize_blocks``), and each query row's q . mean(k) is kept for the LSE (``row_corrections``). Every float
operation goes through flashsim.numerics.ieee32, in the kernel's order, so numpy and JAX give the kernel's bits.

NVFP4 (quant "nvfp4", kernel/quantize.cu's quantize_k_fp4 / quantize_q_fp4; SageAttention3's microscaling FP4,
arXiv 2505.11594): the same smoothing and 16-row blocks, each block's rows cut into FP4_BLOCK elements along d
(``quantize_fp4_blocks``): one ue4m3 scale and e2m1 codes per 16 elements, one f32 scale per 16 rows. Numpy only
(the e2m1 rounding is flashsim.numerics.microscaling's, which the PTX simulator's cvt runs too).

Inputs are (..., N, d) float16 / bfloat16 arrays (the leading axes: batch and heads). ``quantize`` returns the
Quantized operands the attention program reads (kernel_program.scores with int8 q and k, or with e2m1 codes and
their block scales).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..constants import (
    E4M3_MAX,
    FP4_BLOCK,
    MEAN_SLICES,
    MMA8_K,
    NVFP4_ROW_DIV,
    QUANT_BLOCK,
    fp8_keys,
    v_scalars,
)
from ..numerics import ieee32, microscaling
from ..numerics.formats import E2M1, F32
from ..numerics.xp import bitcast, namespace

__all__ = [
    "Quantized",
    "k_mean",
    "quantize_blocks",
    "row_corrections",
    "quantize",
    "quantized_operands",
    "per_row",
    "to_e4m3",
    "quantize_v",
    "slot_keys",
    "quantize_fp4_blocks",
    "NVFP4_FORM",
]

INT8_MAX = 127
# The NVFP4 Q K^T's mma form (kernel/flash_fwd.cu's mma_fp4: mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4
# .block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3), as flashsim.numerics.tensorcore.mma_chain_block_scale takes it
NVFP4_FORM = dict(kind="mxf4nvf4", scale_vec="4X", a_format="e2m1", b_format="e2m1", scale_format="ue4m3")


@dataclass
class Quantized:
    """The quantization pass's outputs, (B, H, ...) in (B, H, N, d) order: q8 (B, Hq, Nq, d) int8, q_scale
    (B, Hq, ceil(Nq / QUANT_BLOCK)) f32, k8 (B, Hkv, Nk, d) int8, k_scale (B, Hkv, ceil(Nk / QUANT_BLOCK)) f32,
    k_mean (B, Hkv, d) f32, corr (B, Hq, Nq) f32 (q . mean(k), added to the LSE times lse_scale); with FP8 P@V
    also v8 (B, Hkv, nkp, d) e4m3 in key order (nkp = Nk rounded up to 32, zeros past Nk) and v_deq (B, Hkv, d) f32.
    NVFP4: q8 / k8 hold e2m1 codes (uint8 0..15, one per element) and q_sf (B, Hq, ceil(Nq / 16) 16, d / 16) /
    k_sf (B, Hkv, ceil(Nk / 16) 16, d / 16) their ue4m3 block-scale codes (rows past N: 0)."""

    q8: object
    q_scale: object
    k8: object
    k_scale: object
    k_mean: object
    corr: object
    v8: object = None
    v_deq: object = None
    q_sf: object = None
    k_sf: object = None


def _amax_inv(x32, top):
    """(amax, inv) of quantization blocks along the last axis: amax = max(0, max |x|) (fmaxf ignores NaN, the max is
    order-free), inv = top / amax, 0 where amax is 0 (kernel/quantize.cu's quantize_rows and v_absmax)."""
    xp = namespace(x32)
    zero = xp.asarray(0.0, dtype=xp.float32)
    top = xp.asarray(np.float32(top), dtype=xp.float32)
    amax = ieee32.fmax(ieee32.fmax_reduce(ieee32.fabs(x32), axis=-1), zero)
    live = amax > zero
    return amax, xp.where(live, ieee32.div(top, xp.where(live, amax, top)), zero)


def k_mean(k32, slices: int = MEAN_SLICES):
    """Mean over tokens of k32 (..., N, d) float32 -> (..., d), as k_mean sums it: slice s adds tokens s, s + slices,
    ... in order from +0, then the slices are added in order 0, 1, ..., then divided by N (IEEE). The tokens are
    padded with +0 to whole rounds of ``slices``: acc + 0 == acc for every acc a sum from +0 can reach (never -0)."""
    xp = namespace(k32)
    n, d = k32.shape[-2], k32.shape[-1]
    rounds = -(-n // slices)
    pad = rounds * slices - n
    if pad:
        k32 = xp.concat([k32, xp.zeros(k32.shape[:-2] + (pad, d), dtype=xp.float32)], axis=-2)
    g = xp.reshape(k32, k32.shape[:-2] + (rounds, slices, d))
    acc = xp.zeros(k32.shape[:-2] + (slices, d), dtype=xp.float32)
    for i in range(rounds):
        acc = ieee32.add(acc, g[..., i, :, :])
    tot = acc[..., 0, :]
    for s in range(1, slices):
        tot = ieee32.add(tot, acc[..., s, :])
    return ieee32.div(tot, xp.asarray(np.float32(n), dtype=xp.float32))


def quantize_blocks(x32, block: int = QUANT_BLOCK):
    """Symmetric INT8 per block of ``block`` rows of x32 (..., N, d) float32 -> (int8 (..., N, d), scale
    (..., ceil(N / block)) f32): amax = max(0, max |x|) over the block (NaN ignored), scale = amax / 127,
    inv = 127 / amax (0 where amax is 0), x_q = round-half-even(x * inv) clamped to [-127, 127], NaN -> 0."""
    xp = namespace(x32)
    n, d = x32.shape[-2], x32.shape[-1]
    nb = -(-n // block)
    pad = nb * block - n
    xb = x32
    if pad:
        xb = xp.concat([x32, xp.zeros(x32.shape[:-2] + (pad, d), dtype=xp.float32)], axis=-2)
    xb = xp.reshape(xb, x32.shape[:-2] + (nb, block * d))
    amax, inv = _amax_inv(xb, INT8_MAX)
    scale = ieee32.div(amax, xp.asarray(np.float32(INT8_MAX), dtype=xp.float32))
    zero = xp.asarray(0.0, dtype=xp.float32)
    y = ieee32.mul(xb, inv[..., None])
    r = xp.where(xp.isnan(y), zero, xp.round(y))  # cvt.rni: half to even; NaN -> 0
    r = xp.clip(r, -float(INT8_MAX), float(INT8_MAX))
    xq = xp.reshape(xp.astype(r, xp.int8), x32.shape[:-2] + (nb * block, d))[..., :n, :]
    return xq, scale


def quantize_fp4_blocks(x32, block: int = QUANT_BLOCK):
    """NVFP4 per block of ``block`` rows of x32 (..., N, d) float32 -> (codes (..., N, d) uint8 e2m1, block scales
    (..., nb block, d / FP4_BLOCK) uint8 ue4m3, scale (..., nb) f32), nb = ceil(N / block); rows past N count as 0.

    Per row block (kernel/quantize.cu quantize_rows_fp4): A = max(0, max |x|) (NaN ignored), scale = A / 2688
    (NVFP4_ROW_DIV = 6 * 448), g = 448 / A and inv = 2688 / A (both 0 where A is 0). Per FP4_BLOCK elements of a row:
    a = max(0, max |x|), its scale code sf = e4m3(a * g) (cvt.rn.satfinite: a * g <= 448 up to rounding, so the
    codes span ue4m3's range), e = inv / sf (0 where sf is 0 or NaN), each code e2m1(x * e) (cvt.rn.satfinite: to
    nearest even, clamped to +-6). A value is then code * sf * scale: the mma multiplies the codes by their block
    scales, the attention program the sum by the rows' scales. Every float operation an IEEE one, in that order."""
    xp = np
    n, d = x32.shape[-2], x32.shape[-1]
    nb = -(-n // block)
    xb = x32
    if nb * block > n:
        xb = xp.concatenate([x32, xp.zeros(x32.shape[:-2] + (nb * block - n, d), dtype=np.float32)], axis=-2)
    xb = xb.reshape(x32.shape[:-2] + (nb, block, d))
    amax, inv = _amax_inv(xb.reshape(xb.shape[:-2] + (block * d,)), NVFP4_ROW_DIV)
    _, g = _amax_inv(xb.reshape(xb.shape[:-2] + (block * d,)), E4M3_MAX)
    scale = ieee32.div(amax, np.asarray(NVFP4_ROW_DIV, dtype=np.float32))
    chunks = xb.reshape(xb.shape[:-1] + (d // FP4_BLOCK, FP4_BLOCK))
    zero = np.float32(0.0)
    a = ieee32.fmax(ieee32.fmax_reduce(ieee32.fabs(chunks), axis=-1), zero)
    sf8 = to_e4m3(ieee32.mul(a, g[..., None, None]))
    sf, sfv = bitcast(sf8, np.uint8), sf8.astype(np.float32)  # the code; its value (exact)
    live = sfv > zero  # false for 0 and for the NaN code
    e = xp.where(live, ieee32.div(inv[..., None, None], xp.where(live, sfv, np.float32(1.0))), zero)
    y = ieee32.mul(chunks, e[..., None])
    codes = microscaling.to_element(y.view(np.uint32), F32, E2M1).reshape(xb.shape)
    codes = codes.reshape(x32.shape[:-2] + (nb * block, d))[..., :n, :]
    return codes, sf.reshape(x32.shape[:-2] + (nb * block, d // FP4_BLOCK)), scale


def row_corrections(q32, mean):
    """q . mean(k) per query row: q32 (..., Nq, d) f32, mean (..., d) f32 (one per row's K/V head, broadcast) ->
    (..., Nq): fma over the channels in order, from +0."""
    xp = namespace(q32, mean)
    acc = xp.zeros(q32.shape[:-1], dtype=xp.float32)
    for c in range(q32.shape[-1]):
        acc = ieee32.fma(q32[..., c], mean[..., None, c], acc)
    return acc


def quantize(q, k, group: int = 1, v=None, v_range: float = E4M3_MAX, fp4: bool = False) -> Quantized:
    """The whole pass on q (B, Hq, Nq, d) and k (B, Hkv, Nk, d), float16 or bfloat16, (B, H, N, d) order;
    ``group`` = Hq / Hkv (query head h reads K/V head h // group); ``v`` (FP8 P@V): V's e4m3 form too, in the range
    ``v_range`` (config.fp8_v_range); ``fp4``: Q and K in NVFP4 (``quantize_fp4_blocks``) instead of INT8."""
    xp = namespace(q, k)
    k32 = ieee32.cvt_to_f32(k)
    mean = k_mean(k32)
    ks = ieee32.sub(k32, mean[..., None, :])
    q32 = ieee32.cvt_to_f32(q)
    q_sf = k_sf = None
    if fp4:
        k8, k_sf, k_scale = quantize_fp4_blocks(ks)
        q8, q_sf, q_scale = quantize_fp4_blocks(q32)
    else:
        k8, k_scale = quantize_blocks(ks)
        q8, q_scale = quantize_blocks(q32)
    mean_q = xp.repeat(mean, group, axis=1) if group > 1 else mean
    corr = row_corrections(q32, mean_q)
    v8 = v_deq = None
    if v is not None:
        v8, v_deq = quantize_v(v, fp8_keys(v.shape[-2]), v_range)
    return Quantized(q8, q_scale, k8, k_scale, mean, corr, v8, v_deq, q_sf, k_sf)


def quantized_operands(q, k, v, config, group: int = 1):
    """What the attention program reads under ``config.quant``: (q, k, v, Quantized or None), q and k in s8 (INT8
    Q K^T) or as e2m1 codes (NVFP4; their block scales in the Quantized), v in e4m3 with its keys padded (FP8 P@V),
    or the inputs unchanged without quant. Both engines take their operands from here."""
    if not config.quantized:
        return q, k, v, None
    quant = quantize(
        q,
        k,
        group,
        v if config.fp8_pv else None,
        config.fp8_v_range if config.fp8_pv else E4M3_MAX,
        fp4=config.nvfp4,
    )
    return quant.q8, quant.k8, (quant.v8 if config.fp8_pv else v), quant


def per_row(scale, rows: int, block: int = QUANT_BLOCK):
    """Block scales (..., nb) -> one per row (..., rows), for rows 0 .. rows-1 padded past the data: row r takes
    block min(r // block, nb - 1), the kernel's clamped read (padded rows are never stored or are masked)."""
    xp = namespace(scale)
    idx = np.minimum(np.arange(rows) // block, scale.shape[-1] - 1)
    return xp.take(scale, xp.asarray(idx), axis=-1)


def to_e4m3(x32):
    """cvt.rn.satfinite.e4m3x2.f32 on float32 values: to nearest even e4m3, finite values past +-448 clamped to
    +-448, NaN -> 0x7F (the canonical NaN, whatever the sign). (Clamping first gives the same bits: every value in
    (448, 464) rounds to 448 anyway.)"""
    import ml_dtypes

    xp = namespace(x32)
    e4 = np.dtype(ml_dtypes.float8_e4m3fn)
    y = xp.clip(x32, -E4M3_MAX, E4M3_MAX)
    out = xp.astype(y, e4)
    canon = xp.asarray(np.uint8(0x7F), dtype=xp.uint8)
    return bitcast(xp.where(xp.isnan(x32), canon, bitcast(out, np.uint8)), e4)


def quantize_v(v, nkp: int, v_range: float = E4M3_MAX):
    """V (..., Nk, d) f16 -> (v8 (..., nkp, d) e4m3 in key order, zeros past Nk; v_deq (..., d) f32): amax = max |v|
    over the tokens (from 0: NaN ignored), v_inv = v_range / amax (0 where amax is 0), v8 = e4m3(v * v_inv),
    v_deq = amax / (FP8_P_SCALE * v_range) (the epilogue's factor: P was scaled by FP8_P_SCALE).
    kernel/quantize.cu v_absmax (which receives v_range and FP8_P_SCALE * v_range, ``v_scalars``) and quantize_v."""
    xp = namespace(v)
    v32 = ieee32.cvt_to_f32(v)
    v_range, deq_div = v_scalars(v_range)
    amax, inv = _amax_inv(xp.swapaxes(v32, -1, -2), v_range)  # per channel, over the tokens
    deq = ieee32.div(amax, xp.asarray(deq_div, dtype=xp.float32))
    v8 = to_e4m3(ieee32.mul(v32, inv[..., None, :]))
    n = v.shape[-2]
    if nkp > n:
        pad = xp.zeros(v8.shape[:-2] + (nkp - n, v8.shape[-1]), dtype=xp.uint8)
        v8 = bitcast(xp.concat([bitcast(v8, np.uint8), pad], axis=-2), v8.dtype)
    return v8, deq


def slot_keys(bc: int) -> np.ndarray:
    """The key each slot of flash_fwd's FP8 P fragments holds, for a KV tile of ``bc`` keys (a multiple of 32):
    slot s of each 32-key block holds key 16 (s / 16) + 8 ((s % 4) / 2) + 2 ((s % 16) / 4) + s % 2 of the block (what
    a lane's S registers give; kernel/quantize.cu stores V^T in this order)."""
    s = np.arange(MMA8_K)
    block = 16 * (s // 16) + 8 * ((s % 4) // 2) + 2 * ((s % 16) // 4) + s % 2
    return (np.arange(bc // MMA8_K)[:, None] * MMA8_K + block[None, :]).reshape(-1)
