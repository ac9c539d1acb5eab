"""Capture mma.sync.m16n8k16 on the GPU at hand and judge flashsim.mma: ``python3 -m flashsim.gpu.capture.mma --out
DIR``.

For each of f32.f16.f16.f32, f16.f16.f16.f16 and f32.bf16.bf16.f32 the tool generates mmas in categories
(those of MMA-Sim, arXiv:2511.10909, and Khattak & Mikaitis, arXiv:2512.07004, plus boundary, -0, zero-exponent and
truncation probes, plus a large varied bf16
subnormal set), runs them through kernel/capture/mma.cu (one warp per mma, fragments loaded with the PTX
formulas), runs flashsim.mma on the same inputs for the device's arch, prints the mismatching output elements
per type and category, and writes DIR/mma_sm90.npz and DIR/mma_sm90_summary.json (named after the arch; both
carry the build's provenance, flashsim.provenance: the source hash and defines that tests/test_drift.py checks).

Compact storage (the whole capture is a few MB).  Inputs are not stored: they are regenerated from the stored
seed by ``generate`` below, a counter-based splitmix64 generator and integer bit arithmetic only, so that
numpy versions cannot change them; the SHA-256 of every type's input bits is stored and checked on loading.
D is stored as the difference (mod 2^bits) between its bits and a fixed float64 predictor (exact products
summed in order, rounded to nearest): almost all differences are 0 or +-1 and compress to little.  The
SHA-256 of D is stored and checked too.  ``load_capture(path)`` gives back the inputs and outputs.
Changing the generator or the predictor invalidates existing captures (``GENERATOR_VERSION``).

The bf16 subnormal question (an earlier, unpublished report: 5 of 65,536 f32 subnormal results of
f32.bf16.bf16.f32 were 1 ulp off the published model; it did not reproduce here).  Hypotheses, each with a category
that isolates it:
  H1  a subnormal c enters the alignment with exponent -127 (its raw field) instead of the clamped -126
      (bf16_sub_out_csub, bf16_sub_single with subnormal c);
  H2  the zero exponent for f32 accumulation with bf16 inputs is not MMA-Sim's -133 (bf16_sub_out_c0,
      bf16_sub_mixed_zero, zero_exp);
  H3  subnormal results come from a second rounding to nearest after normalising toward zero (bf16_sub_single,
      bf16_sub_two: one or two terms, so the exact sum is known);
  H4  the rounding of negative subnormal sums is floor-like (two's complement) rather than toward zero (random
      signs everywhere, bf16_sub_out_cmin crosses zero);
  H5  bf16 subnormal inputs are normalised before the product, which moves E when such a product is the largest
      term (bf16_sub_x_big, bf16_sub_inputs_both).
What the first H200 capture (generator version 1, tests/data/mma_sm90.npz, 2026-11-29) says: flashsim.mma
(= the published model) reproduces all 6,586,368 outputs, 1.25 million of them f32 subnormal results of
f32.bf16.bf16.f32; the 5-in-65,536 effect did not appear.  Every hypothesis is refuted by the same data: the
model with H1 differs from silicon on 74,609 outputs, H3 on 408,548, H4 on 466,591, H5 on 202,358; f32 zero
exponent -132 / -134 / -140 on 693 / 329 / 527 (H2), F = 24 / 26 and two blocks of 8 on hundreds of thousands
(tests/test_mma_silicon.py keeps these refutations as tests).  So the published model is right on everything this
capture probes; whatever produced the five differences lies outside it (or was not silicon behaviour).  Not
pinned by version 1: the f16 zero exponent (-20, -21 and -22 all fit); version 2 adds f16acc_zero_exp_tie, which
separates them (about 1,300-2,000 differing outputs each), and bf16_sub_random, a looser random exploration.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import platform
import sys
import time
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ... import provenance
from ...layout import a_tile, b_tile, pack16
from ...numerics.formats import BF16, F16, F32, Format
from ...numerics.tensorcore import mma
from .. import runtime as rt
from ..build import compile_file
from . import verdict

GENERATOR_VERSION = 2  # new captures; every version in SUPPORTED_VERSIONS still loads
SUPPORTED_VERSIONS = (1, 2)
DEFAULT_SEED = 20261129
THREADS = 128  # 4 warps per block, one mma per warp per loop trip
KERNEL = "capture/mma.cu"
PROVENANCE_NAME = "mma_capture"  # flashsim.provenance: this kernel's define set and fingerprint


# -------------------------------------------------------------------------------------------- types

# The formats are flashsim.numerics.formats' records: pure functions of (exp_bits, frac_bits), so reusing them
# cannot change what the frozen generator produces (test_generator_is_frozen checks its sha256).
Fmt = Format


@dataclass(frozen=True)
class MmaType:
    name: str  # PTX d.a.b.c
    fin: Fmt
    fc: Fmt
    kernel: str

    @property
    def key(self) -> str:
        return self.name.replace(".", "_")

    @property
    def in_dtype(self):
        return np.dtype(ml_dtypes.bfloat16) if self.fin is BF16 else np.dtype(np.float16)

    @property
    def c_dtype(self):
        return np.dtype(np.float32) if self.fc is F32 else np.dtype(np.float16)


TYPES = {
    t.name: t
    for t in (
        MmaType("f32.f16.f16.f32", F16, F32, "mma_f32_f16_f16_f32"),
        MmaType("f16.f16.f16.f16", F16, F16, "mma_f16_f16_f16_f16"),
        MmaType("f32.bf16.bf16.f32", BF16, F32, "mma_f32_bf16_bf16_f32"),
    )
}


# ------------------------------------------------------------------------------- frozen generator

_M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    z = x + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class Rand:
    """Counter-based random numbers: word i of stream ``seed`` is splitmix64(splitmix64(seed) + i).

    Only integer arithmetic, so every numpy version on every machine gives the same words.
    """

    def __init__(self, seed: int):
        with np.errstate(over="ignore"):
            self.key = _splitmix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], np.uint64))[0]
        self.count = 0

    def u64(self, shape) -> np.ndarray:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        size = int(np.prod(shape, dtype=np.int64))
        idx = np.arange(self.count, self.count + size, dtype=np.uint64)
        self.count += size
        with np.errstate(over="ignore"):
            return _splitmix64(idx + self.key).reshape(shape)

    def ints(self, lo, hi, shape) -> np.ndarray:
        """Integers in [lo, hi] (inclusive; lo and hi may be arrays broadcasting to shape)."""
        lo = np.asarray(lo, np.int64)
        span = (np.asarray(hi, np.int64) - lo + 1).astype(np.uint64)
        return lo + (self.u64(shape) % span).astype(np.int64)

    def coin(self, p: float, shape) -> np.ndarray:
        threshold = np.uint64(int(p * (1 << 53)))
        return (self.u64(shape) >> np.uint64(11)) < threshold

    def pick(self, options, shape) -> np.ndarray:
        options = np.asarray(options, np.int64)
        return options[self.ints(0, len(options) - 1, shape)]


def _bits(f: Fmt, sign, field, frac) -> np.ndarray:
    return (
        (np.asarray(sign, np.int64) << (f.bits - 1))
        | (np.asarray(field, np.int64) << f.frac_bits)
        | np.asarray(frac, np.int64)
    )


def band(r: Rand, f: Fmt, shape, elo, ehi, p_zero=0.0, frac_keep=None, sign=None) -> np.ndarray:
    """Numbers with unbiased exponent uniform in [elo, ehi] (clamped to the normal range; a field below 1
    gives a subnormal with random fraction), random fraction (only the top ``frac_keep`` bits when given),
    random sign (or ``sign``), and signed zeros with probability p_zero."""
    e = r.ints(elo, ehi, shape)
    field = np.clip(e + f.bias, 0, f.exp_field_max - 1)
    frac = r.ints(0, (1 << f.frac_bits) - 1, shape)
    if frac_keep is not None:
        frac = (frac >> (f.frac_bits - frac_keep)) << (f.frac_bits - frac_keep)
    s = r.ints(0, 1, shape) if sign is None else np.broadcast_to(np.asarray(sign, np.int64), shape)
    out = _bits(f, s, field, frac)
    if p_zero:
        z = r.coin(p_zero, shape)
        out = np.where(z, r.ints(0, 1, shape) << (f.bits - 1), out)
    return out


def subnormals(r: Rand, f: Fmt, shape, p_zero=0.0) -> np.ndarray:
    out = _bits(f, r.ints(0, 1, shape), 0, r.ints(1, (1 << f.frac_bits) - 1, shape))
    if p_zero:
        out = np.where(r.coin(p_zero, shape), r.ints(0, 1, shape) << (f.bits - 1), out)
    return out


def special_values(f: Fmt) -> np.ndarray:
    """inf, -inf, the canonical NaN, quiet and signalling NaNs with payloads, negative NaNs."""
    q = 1 << (f.frac_bits - 1)
    inf, sign = f.inf_bits, f.sign_mask
    return np.array(
        [inf, inf | sign, sign - 1, inf | q, inf | 1, inf | q | 3, inf | sign | q, inf | sign | 5], np.int64
    )


def _shapes(n):
    return (n, 16, 16), (n, 16, 8), (n, 16, 8)


def _products_at(r: Rand, fin: Fmt, n, target_lo, target_hi, spread=2, p_zero=0.0):
    """A and B whose products a[i,k] * b[k,j] have exponents near a per-mma target in [target_lo, target_hi]:
    row exponents of A around base_a, of B around target - base_a."""
    sa, sb, _ = _shapes(n)
    emin, emax = 1 - fin.bias, fin.bias
    target = r.ints(target_lo, target_hi, (n, 1, 1))
    lo = np.maximum(emin, target - emax)
    hi = np.minimum(emax, target - emin)
    base_a = r.ints(lo, np.maximum(lo, hi), (n, 1, 1))
    base_b = target - base_a
    a = band(r, fin, sa, base_a - spread, base_a + spread, p_zero)
    b = band(r, fin, sb, base_b - spread, base_b + spread, p_zero)
    return a, b


def _c_mix(r: Rand, fc: Fmt, shape, kinds=("zero", "sub", "small", "band")) -> np.ndarray:
    """c drawn per element from: signed zero, subnormal, small normal (smallest binades), around 1."""
    options = {
        "zero": lambda: r.ints(0, 1, shape) << (fc.bits - 1),
        "sub": lambda: subnormals(r, fc, shape),
        "small": lambda: band(r, fc, shape, 1 - fc.bias, 4 - fc.bias),
        "band": lambda: band(r, fc, shape, -4, 4),
    }
    which = r.ints(0, len(kinds) - 1, shape)
    out = np.zeros(shape, np.int64)
    for i, k in enumerate(kinds):
        out = np.where(which == i, options[k](), out)
    return out


# --- categories: each returns (a, b, c) raw bits as int64 arrays of shapes (n,16,16), (n,16,8), (n,16,8)


def cat_normal(r, t, n):
    sa, sb, sc = _shapes(n)
    return band(r, t.fin, sa, -3, 2, 0.02), band(r, t.fin, sb, -3, 2, 0.02), band(r, t.fc, sc, -3, 3, 0.02)


def cat_wide(r, t, n):
    """Exponents spread over the whole range the accumulator can hold (products mostly finite)."""
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    lo, hi = (-fi.bias, fi.bias) if fi is F16 and fc is F32 else ((-14, 7) if fc is F16 else (-63, 63))
    return (band(r, fi, sa, lo, hi, 0.05), band(r, fi, sb, lo, hi, 0.05), band(r, fc, sc, -fc.bias, fc.bias, 0.05))


def cat_large_c(r, t, n):
    sa, sb, sc = _shapes(n)
    hi = min(30, t.fc.bias)
    far = band(r, t.fc, sc, 8, hi)
    near = band(r, t.fc, sc, -2, 5)
    c = np.where(r.coin(0.5, (n, 1, 1)), far, near)
    return band(r, t.fin, sa, -2, 2), band(r, t.fin, sb, -2, 2), c


def cat_cancel(r, t, n):
    sa, sb, sc = _shapes(n)
    a = band(r, t.fin, sa, -4, 4)
    b = band(r, t.fin, sb, -4, 4)
    a[:, :, 1::2] = a[:, :, 0::2] ^ t.fin.sign_mask  # product k+1 = -product k
    b[:, 1::2, :] = b[:, 0::2, :]
    near = r.coin(0.5, (n, 1, 1))  # or a residue of one last bit
    a[:, :, 1::2] = np.where(near, a[:, :, 1::2] ^ 1, a[:, :, 1::2])
    c = np.where(
        r.coin(0.5, sc),
        r.ints(0, 1, sc) << (t.fc.bits - 1),
        np.where(r.coin(0.5, sc), band(r, t.fc, sc, -30, -12), band(r, t.fc, sc, -3, 3)),
    )
    return a, b, c


def cat_one_two(r, t, n):
    sa, sb, sc = _shapes(n)
    a = band(r, t.fin, sa, -6, 6)
    keep = r.ints(1, 2, (n, 16, 1))
    k1 = r.ints(0, 15, (n, 16, 1))
    k2 = r.ints(0, 15, (n, 16, 1))
    col = np.arange(16)[None, None, :]
    mask = (col == k1) | ((keep == 2) & (col == k2))
    a = np.where(mask, a, r.ints(0, 1, sa) << (t.fin.bits - 1))
    c = np.where(r.coin(0.3, sc), 0, band(r, t.fc, sc, -8, 8))
    return a, band(r, t.fin, sb, -6, 6), c


def cat_subnormal(r, t, n):
    sa, sb, sc = _shapes(n)
    lo = 1 - t.fin.bias
    a = np.where(r.coin(0.6, sa), subnormals(r, t.fin, sa, 0.1), band(r, t.fin, sa, lo, lo + 2))
    b = np.where(r.coin(0.6, sb), subnormals(r, t.fin, sb, 0.1), band(r, t.fin, sb, lo, lo + 2))
    return a, b, _c_mix(r, t.fc, sc)


def cat_overflow(r, t, n):
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    lo = fi.bias - 3 if fi is F16 else 60
    a = band(r, fi, sa, lo, fi.bias)
    b = band(r, fi, sb, lo if fi is F16 else 30, fi.bias)
    same_sign = r.coin(0.5, (n, 1, 1))
    a = np.where(same_sign, a & ~fi.sign_mask, a)
    b = np.where(same_sign, b & ~fi.sign_mask, b)
    c = np.where(r.coin(0.5, sc), band(r, fc, sc, fc.bias - 2, fc.bias), band(r, fc, sc, -4, 4))
    return a, b, c


def cat_special(r, t, n):
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    a = band(r, fi, sa, -3, 3, 0.1)
    b = band(r, fi, sb, -3, 3, 0.1)
    c = band(r, fc, sc, -3, 3, 0.1)
    a = np.where(r.coin(0.04, sa), r.pick(special_values(fi), sa), a)
    b = np.where(r.coin(0.04, sb), r.pick(special_values(fi), sb), b)
    c = np.where(r.coin(0.05, sc), r.pick(special_values(fc), sc), c)
    return a, b, c


def cat_random_bits(r, t, n):
    sa, sb, sc = _shapes(n)
    return (
        r.ints(0, (1 << t.fin.bits) - 1, sa),
        r.ints(0, (1 << t.fin.bits) - 1, sb),
        r.ints(0, (1 << t.fc.bits) - 1, sc),
    )


def cat_boundary(r, t, n):
    """c = +-1.x; 1-3 products that are exact powers of two at, or next to, c's ulp and half ulp."""
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    c = _bits(fc, r.ints(0, 1, sc), fc.bias, r.ints(0, (1 << fc.frac_bits) - 1, sc))
    c = np.where(r.coin(0.15, sc), 0, c)
    ulp = -fc.frac_bits
    target = r.ints(ulp - 3, ulp + 1, sa)  # exponent of the product for (i, k)
    ea = np.clip(target // 2, 1 - fi.bias, fi.bias)
    a = _bits(fi, r.ints(0, 1, sa), ea + fi.bias, 0)
    eb_row = target - ea  # b[k, j] = 2^(target - ea) needs one b per (i, k):
    keep = r.coin(3 / 16, sa)  # keep ~3 products per row; b = 2^eb[k] per column
    a = np.where(keep, a, 0)
    eb = np.clip(r.ints(-1, 1, sb) + np.median(eb_row).astype(np.int64), 1 - fi.bias, fi.bias)
    b = _bits(fi, 0, eb + fi.bias, np.where(r.coin(0.2, sb), 1 << (fi.frac_bits - 1), 0))  # 1 or 1.5
    return a, b, c


def cat_negzero(r, t, n):
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    mode = r.ints(0, 3, (n, 16, 1))
    a_zero = r.ints(0, 1, sa) << (fi.bits - 1)  # +-0 everywhere
    a_cancel = band(r, fi, sa, -3, 3)
    a_cancel[:, :, 1::2] = a_cancel[:, :, 0::2] ^ fi.sign_mask
    tiny_e = -80 if fi is BF16 else -14
    a_tiny = band(r, fi, sa, tiny_e - 2, tiny_e, sign=1)  # negative, tiny
    a_mixed = band(r, fi, sa, -3, 3, p_zero=0.5)
    a = np.select([mode == 0, mode == 1, mode == 2], [a_zero, a_cancel, a_tiny], a_mixed)
    b = band(r, fi, sb, -3, 3)
    b[:, 1::2, :] = b[:, 0::2, :]
    b_tiny = band(r, fi, sb, tiny_e - 2, tiny_e, sign=0)
    b = np.where((mode == 2)[:, :1, :].repeat(16, 1)[:, :, :8] & r.coin(0.5, (n, 1, 1)), b_tiny, b)
    c = np.where(r.coin(0.8, sc), fc.sign_mask, 0)  # mostly -0
    return a, b, c


def cat_zero_exp(r, t, n):
    """Products whose exponents straddle the accumulator's zero exponent (-133 f32, -21 f16 on sm_90)."""
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    if fc is F16:
        lo, hi = -28, -14
    elif fi is BF16:
        lo, hi = -165, -120
    else:
        lo, hi = -28, -20  # f16 products cannot reach -133: the smallest ones, against c = 0
    a, b = _products_at(r, fi, n, lo, hi, spread=2, p_zero=0.25)
    c = _c_mix(r, fc, sc, ("zero", "zero", "sub", "small"))
    return a, b, c


def cat_trunc(r, t, n):
    """c = +-2^e and products 22..30 binades below it: terms straddle the truncation grid 2^(E-F)."""
    sa, sb, sc = _shapes(n)
    fi, fc = t.fin, t.fc
    ec = r.ints(-2, 2, (n, 1, 1)) if fc is F16 else r.ints(-4, 12, (n, 1, 1))
    c = _bits(fc, r.ints(0, 1, sc), ec + fc.bias, r.ints(0, (1 << fc.frac_bits) - 1, sc))
    a, b = _products_at(r, fi, n, -30 + int(ec.min()), -22 + int(ec.max()), spread=2)
    return a, b, c


# bf16 subnormal-heavy set


def _subnormal_result_products(r, t, n, p_zero=0.0):
    return _products_at(r, t.fin, n, -160, -120, spread=3, p_zero=p_zero)


def cat_bf16_sub_x_big(r, t, n):
    sa, sb, sc = _shapes(n)
    a = subnormals(r, t.fin, sa, 0.1)
    b = band(r, t.fin, sb, 100, 127)
    return a, b, band(r, t.fc, sc, -40, 0, 0.2)


def cat_bf16_sub_out_c0(r, t, n):
    a, b = _subnormal_result_products(r, t, n)
    return a, b, np.where(r.coin(0.5, _shapes(n)[2]), t.fc.sign_mask, 0)


def cat_bf16_sub_out_csub(r, t, n):
    a, b = _subnormal_result_products(r, t, n)
    return a, b, subnormals(r, t.fc, _shapes(n)[2])


def cat_bf16_sub_out_cmin(r, t, n):
    """c among the smallest f32 normals, one or two products of about its size: sums cross into subnormals."""
    sa, sb, sc = _shapes(n)
    a, b = _products_at(r, t.fin, n, -127, -123, spread=1)
    a = _keep_products(r, t, a, n, r.ints(1, 2, (n, 16, 1)))
    c = band(r, t.fc, sc, -126, -124)
    return a, b, c


def cat_bf16_sub_mixed_zero(r, t, n):
    a, b = _subnormal_result_products(r, t, n, p_zero=0.4)
    return a, b, _c_mix(r, t.fc, _shapes(n)[2], ("zero", "zero", "sub"))


def _keep_products(r, t, a, n, count):
    k1 = r.ints(0, 15, (n, 16, 1))
    k2 = r.ints(0, 15, (n, 16, 1))
    col = np.arange(16)[None, None, :]
    mask = (col == k1) | ((count == 2) & (col == k2))
    return np.where(mask, a, 0)


def cat_bf16_sub_single(r, t, n):
    sa, sb, sc = _shapes(n)
    a, b = _products_at(r, t.fin, n, -165, -120, spread=3)
    a = _keep_products(r, t, a, n, 1)
    return a, b, _c_mix(r, t.fc, sc, ("zero", "sub", "small"))


def cat_bf16_sub_two(r, t, n):
    sa, sb, sc = _shapes(n)
    a, b = _products_at(r, t.fin, n, -165, -120, spread=3)
    a = _keep_products(r, t, a, n, 2)
    return a, b, _c_mix(r, t.fc, sc, ("zero", "sub", "small"))


def cat_bf16_sub_inputs_both(r, t, n):
    sa, sb, sc = _shapes(n)
    a = np.where(r.coin(0.7, sa), subnormals(r, t.fin, sa, 0.05), band(r, t.fin, sa, -126, -120))
    b = band(r, t.fin, sb, -24, 2, 0.05)
    return a, b, _c_mix(r, t.fc, sc, ("zero", "zero", "sub", "small"))


GENERIC = [
    ("normal", cat_normal, 768),
    ("wide", cat_wide, 768),
    ("large_c", cat_large_c, 512),
    ("cancel", cat_cancel, 768),
    ("one_two", cat_one_two, 512),
    ("subnormal", cat_subnormal, 1024),
    ("overflow", cat_overflow, 512),
    ("special", cat_special, 512),
    ("random_bits", cat_random_bits, 768),
    ("boundary", cat_boundary, 768),
    ("negzero", cat_negzero, 512),
    ("zero_exp", cat_zero_exp, 768),
    ("trunc", cat_trunc, 768),
]
BF16_SUBNORMAL = [
    (name, fn, 3072)
    for name, fn in (
        ("bf16_sub_x_big", cat_bf16_sub_x_big),
        ("bf16_sub_out_c0", cat_bf16_sub_out_c0),
        ("bf16_sub_out_csub", cat_bf16_sub_out_csub),
        ("bf16_sub_out_cmin", cat_bf16_sub_out_cmin),
        ("bf16_sub_mixed_zero", cat_bf16_sub_mixed_zero),
        ("bf16_sub_single", cat_bf16_sub_single),
        ("bf16_sub_two", cat_bf16_sub_two),
        ("bf16_sub_inputs_both", cat_bf16_sub_inputs_both),
    )
]


# --- version 2 probes (after the first H200 capture matched the model on every bit; see the module docstring)


def _f16_pow2(e) -> np.ndarray:
    """f16 bits of 2^e for -24 <= e <= 15 (subnormal below -14)."""
    e = np.asarray(e, np.int64)
    return np.where(e >= -14, (e + 15) << 10, np.int64(1) << np.clip(e + 24, 0, 9))


def cat_f16acc_zero_exp_tie(r, t, n):
    """f16 accumulation, c = 0: eight products 2^-28 sum to 2^-25, half the smallest f16 subnormal (a tie), and one
    probe product 2^-q, q in 30..48, on either side. The probe breaks the tie only if it survives truncation at
    2^(e_zero - F): this pins the f16 zero exponent (-21 on sm_90 by MMA-Sim; -20 and -22 fit capture 1 too)."""
    sa, sb, sc = _shapes(n)
    kp = r.ints(8, 15, (n, 1, 1))  # the probe's k
    k = np.arange(16)[None, None, :]
    tie_sign = r.ints(0, 1, (n, 16, 1))
    x = r.ints(10, 24, (n, 16, 1))  # a[i, kp] = +-2^-x
    a = np.where(k < 8, _f16_pow2(-14) | (tie_sign << 15), 0)
    a = np.where(k == kp, _f16_pow2(-x) | (r.ints(0, 1, (n, 16, 1)) << 15), a)
    y = r.ints(20, 24, (n, 1, 8))  # b[kp, j] = 2^-y
    kk = np.arange(16)[None, :, None]
    b = np.where(kk < 8, _f16_pow2(-14), 0)
    b = np.where(kk == kp.reshape(n, 1, 1), _f16_pow2(-y), b)
    c = np.where(r.coin(0.8, sc), 0, _f16_pow2(-24) | (r.ints(0, 1, sc) << 15))
    return a, b, c


def cat_bf16_sub_random(r, t, n):
    """Loosely structured bf16: tiny a (fields 0..40, half subnormal), b with fields 88..112, c any
    f32 from zero through the smallest normals: random exploration around the f32 subnormal range."""
    sa, sb, sc = _shapes(n)
    fa = np.where(r.coin(0.5, sa), 0, r.ints(1, 40, sa))
    a = _bits(t.fin, r.ints(0, 1, sa), fa, r.ints(0, 127, sa))
    a = np.where(r.coin(0.1, sa), r.ints(0, 1, sa) << 15, a)
    b = _bits(t.fin, r.ints(0, 1, sb), r.ints(88, 112, sb), r.ints(0, 127, sb))
    c = _bits(t.fc, r.ints(0, 1, sc), np.where(r.coin(0.5, sc), 0, r.ints(1, 3, sc)), r.ints(0, (1 << 23) - 1, sc))
    c = np.where(r.coin(0.2, sc), r.ints(0, 1, sc) << 31, c)
    return a, b, c


V2_EXTRA = [("f16acc_zero_exp_tie", cat_f16acc_zero_exp_tie, 1024), ("bf16_sub_random", cat_bf16_sub_random, 4096)]


def categories(t: MmaType, version: int = GENERATOR_VERSION):
    """The (name, generator, count) list of a type; version 2 adds the probes of V2_EXTRA after version 1's."""
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"generator version {version} is not supported; known: {SUPPORTED_VERSIONS}")
    cats = GENERIC + (BF16_SUBNORMAL if t.fin is BF16 else [])
    if version >= 2:
        cats = cats + [
            c
            for c in V2_EXTRA
            if c[0].startswith(
                ("bf16_", "any_") if t.fin is BF16 else ("f16acc_", "any_") if t.fc is F16 else ("any_",)
            )
        ]
    return cats


def generate(type_name: str, seed: int = DEFAULT_SEED, scale: float = 1.0, version: int = GENERATOR_VERSION):
    """Inputs of one type: dict with a, b (uint16 bits), c (uint32/uint16 bits), category (uint8 per mma),
    names (category names) and counts.  Deterministic in (type, seed, scale, version)."""
    t = TYPES[type_name]
    parts, cats, names, counts = [], [], [], []
    for ci, (name, fn, count) in enumerate(categories(t, version)):
        n = max(1, int(round(count * scale)))
        r = Rand(hash_seed(seed, type_name, name, version=version))
        a, b, c = fn(r, t, n)
        parts.append((a, b, c))
        cats.append(np.full(n, ci, np.uint8))
        names.append(name)
        counts.append(n)
    a = np.concatenate([p[0] for p in parts]).astype(np.uint16)
    b = np.concatenate([p[1] for p in parts]).astype(np.uint16)
    c = np.concatenate([p[2] for p in parts]).astype(t.fc.uint)
    return dict(a=a, b=b, c=c, category=np.concatenate(cats), names=names, counts=counts)


def hash_seed(seed: int, *labels: str, version: int = GENERATOR_VERSION) -> int:
    h = hashlib.sha256(repr((seed, version) + labels).encode()).digest()
    return int.from_bytes(h[:8], "little")


def input_digest(a, b, c) -> str:
    h = hashlib.sha256()
    for x in (a, b, c):
        h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


# ------------------------------------------------------------------------------- D delta coding


def predict_bits(t: MmaType, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """A fixed, deterministic guess of D's bits: exact products summed in k order in float64, plus c, rounded
    to nearest f32 (then to f16 for f16 outputs); NaN -> the canonical NaN.  Only used to compress D."""
    with np.errstate(all="ignore"):
        av = a.view(t.in_dtype).astype(np.float64)
        bv = b.view(t.in_dtype).astype(np.float64)
        s = np.zeros(c.shape, np.float64)
        for k in range(16):
            s = s + av[:, :, k, None] * bv[:, k, None, :]
        s = s + c.view(t.c_dtype).astype(np.float64)
        f = s.astype(np.float32)
        if t.fc is F16:
            out = f.astype(np.float16).view(np.uint16).copy()
            out[np.isnan(f)] = 0x7FFF
        else:
            out = f.view(np.uint32).copy()
            out[np.isnan(f)] = 0x7FFFFFFF
    return out


def encode_d(t: MmaType, a, b, c, d) -> np.ndarray:
    pred = predict_bits(t, a, b, c)
    if t.fc is F16:
        return (d.astype(np.uint16) - pred).view(np.int16)
    return (d.astype(np.uint32) - pred).view(np.int32)


def decode_d(t: MmaType, a, b, c, delta) -> np.ndarray:
    pred = predict_bits(t, a, b, c)
    if t.fc is F16:
        return pred + delta.view(np.uint16)
    return pred + delta.view(np.uint32)


# ------------------------------------------------------------------------------------ runners


def lane_fragment_maps():
    """(row, col) index tables of the kernel's fragment formulas (kernel/capture/mma.cu), per lane and element:
    A (32, 8), B (32, 4), C (32, 4).  The fake GPU uses them; tests compare them with flashsim.layout."""
    lane = np.arange(32)[:, None]
    g, tid = lane >> 2, lane & 3
    i8, i4 = np.arange(8)[None, :], np.arange(4)[None, :]
    a = (g + 8 * ((i8 >> 1) & 1), tid * 2 + (i8 & 1) + 8 * (i8 >> 2))
    b = (tid * 2 + (i4 & 1) + 8 * (i4 >> 1), np.broadcast_to(g, (32, 4)))
    c = (g + 8 * (i4 >> 1), tid * 2 + (i4 & 1))
    return a, b, c


def run_fake(t: MmaType, a, b, c, arch="sm_90", corrupt: int = 0):
    """Host stand-in for the GPU: gathers every lane's fragments with the kernel's formulas, rebuilds the tiles
    with flashsim.layout (a second source of the maps), runs flashsim.mma, scatters D with the formulas.
    ``corrupt`` flips the low bit of that many outputs (to exercise the mismatch report)."""

    (ar, ac), (br, bc), (cr, cc) = lane_fragment_maps()
    ra = pack16(a[:, ar, ac].view(np.uint16))  # (n, 32, 4) registers
    rb = pack16(b[:, br, bc].view(np.uint16))  # (n, 32, 2)
    at = a_tile(ra, t.in_dtype)
    bt = b_tile(rb, t.in_dtype)
    ct = np.empty_like(c)
    ct[:, cr, cc] = c[:, cr, cc]
    d_tile = mma(at, bt, ct.view(t.c_dtype), arch=arch).view(t.fc.uint)
    d = np.zeros_like(c)
    d[:, cr, cc] = d_tile[:, cr, cc]
    if corrupt:
        flat = d.reshape(-1)
        flat[np.linspace(0, flat.size - 1, corrupt).astype(np.int64)] ^= 1
    return d


class CaptureRunner:
    """Runs capture kernels of the form ``kernel(A, B, C, D, n)`` (one warp per mma) on the current GPU through
    flashsim.gpu, every call checked: ``kernel_file`` built with ``provenance_name``'s defines, ``names`` maps a key
    to an extern "C" kernel name. Shared by the m16n8k16 and m16n8k32 capture tools."""

    def __init__(self, kernel_file: str, provenance_name: str, names: dict):

        self.rt = rt
        rt.require_gpu()
        self.arch = rt.current_arch()
        self.build = compile_file(kernel_file, arch=self.arch, defines=provenance.build_defines(provenance_name))
        self.kernels = {key: rt.load(self.build, kernel) for key, kernel in names.items()}

    def device_info(self) -> dict:
        dev = self.rt.require_gpu()
        try:
            info = {"arch": self.arch, "name": str(dev.name)}
        except Exception as exc:  # informative only
            info = {"arch": self.arch, "name": f"unknown ({exc})"}
        try:
            from cuda.bindings import driver

            err, ver = driver.cuDriverGetVersion()
            info["driver"] = int(ver)
        except Exception as exc:  # informative only
            info["driver"] = f"unknown ({exc})"
        return info

    def run(self, key, a, b, c):
        """D of the mmas (a, b, c) by kernel ``key``, as a numpy array shaped like c."""
        rt = self.rt
        n = a.shape[0]
        da, db, dc = rt.to_device(a), rt.to_device(b), rt.to_device(c)
        dd = rt.empty(c.shape, c.dtype)
        dd.zero_()
        blocks = max(1, min((n * 32 + THREADS - 1) // THREADS, 65535))
        rt.launch(self.kernels[key], (blocks,), (THREADS,), da, db, dc, dd, np.int32(n))
        return dd.to_numpy()


class GpuRunner(CaptureRunner):
    """The m16n8k16 capture kernels (kernel/capture/mma.cu), one per MmaType."""

    def __init__(self):
        super().__init__(KERNEL, PROVENANCE_NAME, {name: t.kernel for name, t in TYPES.items()})

    def __call__(self, t: MmaType, a, b, c):
        return self.run(t.name, a, b, c)


# --------------------------------------------------------------------------------- save / load


def save_capture(path: pathlib.Path, results: dict, meta: dict) -> None:
    arrays = {}
    for name, res in results.items():
        t = TYPES[name]
        k = t.key
        arrays[f"{k}__category"] = res["category"]
        arrays[f"{k}__d_delta"] = encode_d(t, res["a"], res["b"], res["c"], res["d"])
    meta = dict(meta)
    meta["types"] = {
        name: {
            "names": res["names"],
            "counts": res["counts"],
            "input_sha256": input_digest(res["a"], res["b"], res["c"]),
            "d_sha256": hashlib.sha256(np.ascontiguousarray(res["d"]).tobytes()).hexdigest(),
        }
        for name, res in results.items()
    }
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    if "provenance" in meta:  # also on its own, as in every capture file (tests/test_drift.py reads it)
        arrays["provenance"] = np.array(provenance.to_json(meta["provenance"]))
    np.savez_compressed(path, **arrays)


def load_capture(path) -> dict:
    """{type name: dict(a, b, c, d as raw bits, category, names, meta)}; ValueError if the file does not
    match this generator (inputs regenerated from the stored seed) or D does not decode to its checksum."""
    path = pathlib.Path(path)
    with np.load(path) as z:
        meta = json.loads(bytes(z["meta_json"]).decode())
        stored = {k: z[k] for k in z.files}
    version = meta.get("generator_version")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(
            f"{path}: captured with generator version {version}, this code reads "
            f"{SUPPORTED_VERSIONS}: regenerate the capture"
        )
    out = {}
    for name, info in meta["types"].items():
        t = TYPES[name]
        gen = generate(name, meta["seed"], meta["scale"], version)
        if (
            gen["names"] != info["names"]
            or gen["counts"] != info["counts"]
            or input_digest(gen["a"], gen["b"], gen["c"]) != info["input_sha256"]
        ):
            raise ValueError(
                f"{path}: the inputs of {name} no longer regenerate bit for bit (the generator "
                "changed): regenerate the capture"
            )
        d = decode_d(t, gen["a"], gen["b"], gen["c"], stored[f"{t.key}__d_delta"])
        if hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest() != info["d_sha256"]:
            raise ValueError(f"{path}: D of {name} does not decode to its checksum (predictor changed?)")
        out[name] = dict(
            a=gen["a"],
            b=gen["b"],
            c=gen["c"],
            d=d,
            category=stored[f"{t.key}__category"],
            names=info["names"],
            meta=meta,
        )
    return out


# ----------------------------------------------------------------------------------------- main


def compare(t: MmaType, res: dict, arch: str) -> dict:
    """Mismatching output elements of flashsim.mma against the captured D, per category."""

    model = mma(res["a"].view(t.in_dtype), res["b"].view(t.in_dtype), res["c"].view(t.c_dtype), arch=arch).view(
        t.fc.uint
    )
    bad = model != res["d"]
    per_cat = {}
    for ci, name in enumerate(res["names"]):
        sel = res["category"] == ci
        per_cat[name] = (int(bad[sel].sum()), int(sel.sum()) * 128)
    return {
        "per_category": per_cat,
        "total_bad": int(bad.sum()),
        "total": int(bad.size),
        "bad_mma_examples": [int(i) for i in np.flatnonzero(bad.any(axis=(1, 2)))[:20]],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m flashsim.gpu.capture.mma", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for mma_sm90.npz and mma_sm90_summary.json")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every category's mma count (tests: 0.02)")
    p.add_argument("--types", default=",".join(TYPES), help="comma-separated PTX types")
    p.add_argument("--fake", action="store_true", help="no GPU: run the host logic on flashsim.mma (testing)")
    p.add_argument("--fake-corrupt", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        names = [s.strip() for s in args.types.split(",") if s.strip()]
        for s in names:
            if s not in TYPES:
                raise ValueError(f"--types: unknown type {s!r}; known: {', '.join(TYPES)}")
        if args.scale <= 0:
            raise ValueError("--scale must be > 0")
        out_dir = pathlib.Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        if args.fake:
            arch, info = "sm_90", {"arch": "sm_90", "name": "fake (flashsim.mma through the fragment maps)"}
            runner = lambda t, a, b, c: run_fake(t, a, b, c, arch, args.fake_corrupt)
        else:
            gpu = GpuRunner()
            arch, info = gpu.arch, gpu.device_info()
            runner = gpu
        print(f"device: {info}")
        results, verdicts = {}, {}
        t0 = time.time()
        for name in names:
            t = TYPES[name]
            gen = generate(name, args.seed, args.scale)
            d = runner(t, gen["a"], gen["b"], gen["c"])
            if d.shape != gen["c"].shape or d.dtype != gen["c"].dtype:
                raise RuntimeError(
                    f"{name}: the run returned {d.shape} {d.dtype}, expected {gen['c'].shape} {gen['c'].dtype}"
                )
            res = dict(gen, d=d)
            results[name] = res
            verdicts[name] = v = compare(t, res, arch)
            n = len(gen["category"])
            print(f"\n{name}: {n} mmas, {v['total']} outputs, flashsim.mma(arch={arch!r}) differs on {v['total_bad']}")
            for cname, (bad, tot) in v["per_category"].items():
                print(f"  {cname:22s} {bad:8d} / {tot:8d} {'MISMATCH' if bad else 'ok'}")
            if v["bad_mma_examples"]:
                print(f"  first mismatching mma indices: {v['bad_mma_examples']}")
        meta = {
            "generator_version": GENERATOR_VERSION,
            "seed": args.seed,
            "scale": args.scale,
            "device": info,
            "arch": arch,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "numpy": np.__version__,
            "python": platform.python_version(),
            "verdict": verdicts,
            "provenance": provenance.fingerprint(PROVENANCE_NAME),
        }
        npz = out_dir / f"mma_{arch.replace('_', '')}.npz"
        save_capture(npz, results, meta)
        back = load_capture(npz)  # the file must reproduce what we saw
        for name, res in results.items():
            if not np.array_equal(back[name]["d"], res["d"]):
                raise RuntimeError(f"{npz}: D of {name} did not survive the save/load round trip")
        summary = out_dir / f"mma_{arch.replace('_', '')}_summary.json"
        summary.write_text(json.dumps({k: v for k, v in meta.items()}, indent=1))
        total_bad = sum(v["total_bad"] for v in verdicts.values())
        size = npz.stat().st_size
        print(f"\nwrote {npz} ({size / 1e6:.2f} MB) and {summary} in {time.time() - t0:.1f} s")
        return verdict("flashsim.mma", total_bad)
    except Exception as exc:  # every failure: a message and exit status 1
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
