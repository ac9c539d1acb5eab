"""The program of kernel/quantize.cu (INT8 attention's quantization pass), written once against an array namespace.

SageAttention's recipe, made exact: K is smoothed by its mean over tokens (``k_mean``: FS_MEAN_SLICES interleaved
partial sums in token order, the slices added in order, one IEEE division by nk), then K (smoothed) and Q are
quantized per block of QUANT_BLOCK keys / rows to symmetric INT8 with one f32 scale per block
(``quantize_blocks``), and each query row's q . mean(k) is kept for the LSE (``row_corrections``). Every float
operation goes through flashsim.numerics.ieee32, in the kernel's order, so numpy and JAX give the kernel's bits.

Inputs are (..., N, d) float16 / bfloat16 arrays (the leading axes: batch and heads). ``quantize`` returns the
Quantized operands the attention program reads (kernel_program.scores with int8 q and k).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..constants import E4M3_MAX, MEAN_SLICES, MMA8_K, QUANT_BLOCK, fp8_keys, v_scalars
from ..numerics import ieee32
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
]

INT8_MAX = 127


@dataclass
class Quantized:
    """The quantization pass's outputs, (B, H, ...) in (B, H, N, d) order: q8 (B, Hq, Nq, d) int8, q_scale
    (B, Hq, ceil(Nq / QUANT_BLOCK)) f32, k8 (B, Hkv, Nk, d) int8, k_scale (B, Hkv, ceil(Nk / QUANT_BLOCK)) f32,
    k_mean (B, Hkv, d) f32, corr (B, Hq, Nq) f32 (q . mean(k), added to the LSE times lse_scale); with FP8 P@V
    also v8 (B, Hkv, nkp, d) e4m3 in key order (nkp = Nk rounded up to 32, zeros past Nk) and v_deq (B, Hkv, d) f32."""

    q8: object
    q_scale: object
    k8: object
    k_scale: object
    k_mean: object
    corr: object
    v8: object = None
    v_deq: object = None


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


def row_corrections(q32, mean):
    """q . mean(k) per query row: q32 (..., Nq, d) f32, mean (..., d) f32 (one per row's K/V head, broadcast) ->
    (..., Nq): fma over the channels in order, from +0."""
    xp = namespace(q32, mean)
    acc = xp.zeros(q32.shape[:-1], dtype=xp.float32)
    for c in range(q32.shape[-1]):
        acc = ieee32.fma(q32[..., c], mean[..., None, c], acc)
    return acc


def quantize(q, k, group: int = 1, v=None, v_range: float = E4M3_MAX) -> Quantized:
    """The whole pass on q (B, Hq, Nq, d) and k (B, Hkv, Nk, d), float16 or bfloat16, (B, H, N, d) order;
    ``group`` = Hq / Hkv (query head h reads K/V head h // group); ``v`` (FP8 P@V): V's e4m3 form too, in the range
    ``v_range`` (config.fp8_v_range)."""
    xp = namespace(q, k)
    k32 = ieee32.cvt_to_f32(k)
    mean = k_mean(k32)
    ks = ieee32.sub(k32, mean[..., None, :])
    k8, k_scale = quantize_blocks(ks)
    q32 = ieee32.cvt_to_f32(q)
    q8, q_scale = quantize_blocks(q32)
    mean_q = xp.repeat(mean, group, axis=1) if group > 1 else mean
    corr = row_corrections(q32, mean_q)
    v8 = v_deq = None
    if v is not None:
        v8, v_deq = quantize_v(v, fp8_keys(v.shape[-2]), v_range)
    return Quantized(q8, q_scale, k8, k_scale, mean, corr, v8, v_deq)


def quantized_operands(q, k, v, config, group: int = 1):
    """What the attention program reads under ``config.quant``: (q, k, v, Quantized or None), q and k in s8 (INT8
    Q K^T) and v in e4m3 with its keys padded (FP8 P@V), or the inputs unchanged without quant. Both engines take
    their operands from here."""
    if not config.int8:
        return q, k, v, None
    quant = quantize(q, k, group, v if config.fp8_pv else None, config.fp8_v_range if config.fp8_pv else E4M3_MAX)
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
