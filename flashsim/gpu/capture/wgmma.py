"""Capture Hopper's ``wgmma.mma_async`` on the GPU at hand and judge flashsim.wgmma: ``python3 -m
flashsim.gpu.capture.wgmma --out DIR`` (an sm_90 GPU; about a minute).

Every dense sm_90a form (f32 / f16 .f16.f16, f32.bf16.bf16, f32.tf32.tf32, the four FP8 pairs to f32 and f16, the
four s8 / u8 pairs to s32 with and without .satfinite) runs at N = 8, 64 and 256, the f16 / bf16 forms with A from
shared memory (a matrix descriptor) and from registers, some forms with imm-scale-a / imm-scale-b = -1, every mma
with scale-d from a per-mma flag (0 in the ``scale_d0`` category and in a quarter of ``normal``). The kernels
(kernel/capture/wgmma.cu, written by ``kernel_source`` below and checked against it by tests/test_wgmma_silicon.py)
run one warpgroup per wgmma: A and B staged in shared memory in the no-swizzle K-major canonical layout (core matrices
of 8 rows x 16 bytes, 128 bytes apart along K (LBO), 256 bytes apart along M / N (SBO)), the accumulator registers
loaded and stored with the PTX ISA's wgmma D fragment (``fragment_maps``), one inline-PTX block of wgmma.fence,
wgmma.mma_async, commit_group and wait_group 0.

Categories (generated from a seed, frozen as flashsim.gpu.capture.mma's generator is): normal, wide exponent spread,
large c, exact cancellation, one or two products, subnormals, near overflow, inf / NaN, random bit patterns, final
rounding (products at c's last bit), the accumulation width (one big product and many small ones 2^-g below it, the
probe of F: DeepSeek-V3's FP8 accumulation width), scale-d = 0 with tiny products and any c, and for tf32 inputs whose
low 13 bits would round up. The integer forms: random bits, extremes, c at the int32 limits (wrap / saturate),
scale-d = 0.

Compact storage as flashsim.gpu.capture.mma's: inputs regenerated from the stored seed (SHA-256 checked), D stored
as the difference from a fixed float64 predictor, its SHA-256 checked; DIR/wgmma_sm90.npz (a few MB) and
DIR/wgmma_sm90_summary.json with the mismatches of flashsim.wgmma per variant and category and those of the
alternative models ``HYPOTHESES`` (F = 24 / 26, FP8 F = 12 / 14 / 25, blocks of 16 or 8 bytes, f32 results to
nearest, FP8 f32 results kept to 23 bits, other zero exponents, tf32 inputs rounded, scale-d = 0 without a zero
term): the fitted model should be the only one with no mismatch.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import pathlib
import platform
import sys
import time
from dataclasses import dataclass

import numpy as np

from ... import provenance
from ...arch import get_arch
from ...numerics import ieee, rounding
from ...numerics.formats import BF16, E4M3, E5M2, F16, F32, Format
from ...numerics.tensorcore import generic
from ...numerics.tensorcore import warpgroup as W
from ...numerics.tensorcore.warpgroup import WGMMA_TYPES, wgmma_generic, wgmma_unchecked
from . import verdict
from .mma import Rand, _bits, band, hash_seed, input_digest, special_values, subnormals

GENERATOR_VERSION = 1
SUPPORTED_VERSIONS = (1,)
DEFAULT_SEED = 20261206
THREADS = 128  # one warpgroup per block, one wgmma per loop trip
KERNEL = "capture/wgmma.cu"
PROVENANCE_NAME = "wgmma_capture"
BUILD_ARCH = "sm_90a"  # wgmma exists on sm_90a alone
N_VALUES = (8, 64, 256)

# ------------------------------------------------------------------------------------------------------ forms

_FMT = {
    W.F16: F16,
    W.BF16: BF16,
    W.TF32: F32,  # tf32 operands are full 32-bit words: the low 13 bits are random, the model ignores them
    W.E4M3: E4M3,
    W.E5M2: E5M2,
    W.F32: F32,
}
INT32_FMT = Format("s32", 8, 23, np.dtype(np.int32), np.uint32)  # only its width is used


@dataclass(frozen=True)
class Form:
    """One wgmma type: PTX d.a.b, operand dtypes, K, element sizes."""

    name: str
    a_dtype: np.dtype
    b_dtype: np.dtype
    c_dtype: np.dtype
    K: int

    @property
    def integer(self) -> bool:
        return self.c_dtype == np.int32

    @property
    def fa(self) -> Format:
        return _FMT[self.a_dtype]

    @property
    def fb(self) -> Format:
        return _FMT[self.b_dtype]

    @property
    def fc(self) -> Format:
        return _FMT.get(self.c_dtype, INT32_FMT)

    @property
    def fp8(self) -> bool:
        return self.a_dtype in (W.E4M3, W.E5M2)

    @property
    def c_uint(self):
        return np.uint16 if self.c_dtype == np.float16 else np.uint32


FORMS = {name: Form(name, *key, k) for key, (name, k) in WGMMA_TYPES.items()}


@dataclass(frozen=True)
class Variant:
    """One capture kernel: a form at one N, A from shared memory or registers, the imm-scale pair, .satfinite."""

    form: str
    N: int
    a_regs: bool = False
    scale_a: int = 1
    scale_b: int = 1
    satfinite: bool = False

    @property
    def key(self) -> str:
        f = self.form.replace(".", "_")
        extra = (
            ("_ra" if self.a_regs else "") + ("_na" if self.scale_a < 0 else "") + ("_nb" if self.scale_b < 0 else "")
        )
        return f"wgmma_{f}_n{self.N}{extra}{'_sat' if self.satfinite else ''}"

    @property
    def f(self) -> Form:
        return FORMS[self.form]


def _variants() -> tuple:
    out = []
    for name, f in FORMS.items():
        for n in N_VALUES:
            if n not in (W.N_INT if f.integer else W.N_FLOAT):
                continue
            out.append(Variant(name, n))
            if f.a_dtype in (W.F16, W.BF16):
                out.append(Variant(name, n, a_regs=True))
        if f.integer:
            out.append(Variant(name, 64, satfinite=True))
    for name, regs in (("f32.f16.f16", True), ("f32.bf16.bf16", False), ("f32.tf32.tf32", False)):
        out += [Variant(name, 64, regs, -1, 1), Variant(name, 64, regs, 1, -1)]
    out += [Variant("f32.e4m3.e5m2", 64, False, -1, 1), Variant("f16.e5m2.e4m3", 64, False, 1, -1)]
    return tuple(out)


VARIANTS = _variants()


# ------------------------------------------------------------------------------------------- the CUDA kernels


def fragment_maps(N: int):
    """(row, col) of accumulator element i of thread t (128 threads, N / 2 elements each) in wgmma's D fragment, and
    of register-A element i (8 per thread, f16 / bf16) in its A fragment (PTX ISA, "Register Fragments" of wgmma):
    each warp w of the warpgroup owns rows 16 w .. 16 w + 15, laid out as mma.m16n8's fragments, column blocks of 8
    one after the other. The kernel's formulas (``kernel_source``) are these; the tests compare them with
    flashsim.layout's m16n8k16 maps."""
    t = np.arange(THREADS)[:, None]
    w, g, q = t >> 5, (t & 31) >> 2, t & 3
    i = np.arange(N // 2)[None, :]
    d = (16 * w + g + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * q + (i & 1))
    j = np.arange(8)[None, :]
    a = (16 * w + g + 8 * ((j >> 1) & 1), 2 * q + (j & 1) + 8 * (j >> 2))
    return d, a


def smem_offset(row, kbyte):
    """Byte offset of (row, byte kbyte of K) of a K-major operand in the no-swizzle canonical layout: 8 x 16-byte
    core matrices, LBO = 128 bytes between the two core matrices along K, SBO = 256 bytes between 8-row groups."""
    return (row >> 3) * 256 + (kbyte >> 4) * 128 + (row & 7) * 16 + (kbyte & 15)


LBO, SBO = 128, 256

_HEADER = """\
// Capture kernels for Hopper's wgmma.mma_async (sm_90a), driven by flashsim/gpu/capture/wgmma.py, which writes this
// file (kernel_source) and checks it is unchanged (tests/test_wgmma_silicon.py). Do not edit by hand.
//
// Memory (raw bit patterns, one wgmma after the other): A n x 64 x K (row-major M x K), B n x K x N (row-major),
// C, D n x 64 x N (32-bit f32 / s32 or 16-bit f16 words), S n bytes (scale-d of each wgmma).
// One warpgroup (128 threads) per block takes wgmma m = block, block + grid, ...: A and B are copied into shared
// memory in the no-swizzle K-major canonical layout (byte (r, kb) at (r / 8) * 256 + (kb / 16) * 128 + (r % 8) * 16
// + kb % 16: 8 x 16-byte core matrices, LBO = 128, SBO = 256), every thread loads its accumulator registers with the
// wgmma D fragment (element i of thread t: row 16 (t / 32) + (t % 32) / 4 + 8 ((i / 2) % 2), column 8 (i / 4)
// + 2 (t % 4) + i % 2; f16: element pairs in one register, the lower column in the low half), the A registers of the
// register-A kernels with the A fragment (element j: row 16 (t / 32) + (t % 32) / 4 + 8 ((j / 2) % 2), column
// 2 (t % 4) + j % 2 + 8 (j / 4)), then one inline-PTX block: wgmma.fence, wgmma.mma_async, commit_group,
// wait_group 0; D is stored the way C was loaded. Values travel as bits only.

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ u32 smem_offset(u32 r, u32 kb) {
    return (r >> 3) * 256u + (kb >> 4) * 128u + (r & 7u) * 16u + (kb & 15u);
}

__device__ __forceinline__ u64 descriptor(const void* p) {  // start address, LBO, SBO; base offset 0, no swizzle
    const u32 a = (u32)__cvta_generic_to_shared(p);
    return (u64)((a & 0x3FFFFu) >> 4) | ((u64)(128u >> 4) << 16) | ((u64)(256u >> 4) << 32);
}

// A (64 x 32 bytes) and B (N rows of 32 bytes: column n of B, K-major) into the canonical layout; B's element
// (k, n) of ES bytes is global byte (k * N + n) * ES + j
__device__ __forceinline__ void stage(u8* sa, u8* sb, const u8* a, const u8* b, int N, int es) {
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) sa[smem_offset(i >> 5, i & 31)] = a[i];
    for (int i = threadIdx.x; i < N * 32; i += blockDim.x) {
        const int n = i >> 5, kb = i & 31, k = kb / es, j = kb % es;
        sb[smem_offset(n, kb)] = b[(k * N + n) * es + j];
    }
}

__device__ __forceinline__ int d_row(int t, int i) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1); }
__device__ __forceinline__ int d_col(int t, int i) { return 8 * (i >> 2) + 2 * (t & 3) + (i & 1); }
__device__ __forceinline__ int a_row(int t, int j) { return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((j >> 1) & 1); }
__device__ __forceinline__ int a_col(int t, int j) { return 2 * (t & 3) + (j & 1) + 8 * (j >> 2); }
"""


def _kernel(v: Variant) -> str:
    """The CUDA source of one capture kernel."""
    f = v.f
    es = np.dtype(f.a_dtype).itemsize
    acc16 = f.c_dtype == np.float16
    nreg = v.N // 4 if acc16 else v.N // 2
    word = "u16" if acc16 else "u32"
    shape = f"m64n{v.N}k{f.K}"
    sat = ".satfinite" if v.satfinite else ""
    if f.integer:
        opcode = f"wgmma.mma_async.sync.aligned.{shape}{sat}.{f.name}"
    else:
        opcode = f"wgmma.mma_async.sync.aligned.{shape}.{f.name}"
    dlist = ", ".join(f"%{i}" for i in range(nreg))
    x = nreg  # the next operand number
    if v.a_regs:
        a_operand = "{" + ", ".join(f"%{x + i}" for i in range(4)) + "}"
        x += 4
    else:
        a_operand = f"%{x}"
        x += 1
    b_operand, pred = f"%{x}", f"%{x + 1}"
    if f.integer:
        imm = ""
    elif f.a_dtype in (W.F16, W.BF16):
        imm = f", {v.scale_a}, {v.scale_b}" + (", 0" if v.a_regs else ", 0, 0")
    else:
        imm = f", {v.scale_a}, {v.scale_b}"
    outs = ", ".join(f'"+r"(d[{i}])' for i in range(nreg))
    ins = (", ".join(f'"r"(ra[{i}])' for i in range(4)) + ", ") if v.a_regs else '"l"(da), '
    ins += '"l"(db), "r"(scale_d)'
    if acc16:
        load = (
            f"        for (int r = 0; r < {nreg}; ++r)\n"
            f"            d[r] = (u32)c[d_row(t, 2 * r) * {v.N} + d_col(t, 2 * r)]\n"
            f"                 | ((u32)c[d_row(t, 2 * r + 1) * {v.N} + d_col(t, 2 * r + 1)] << 16);\n"
        )
        store = (
            f"        for (int r = 0; r < {nreg}; ++r) {{\n"
            f"            dd[d_row(t, 2 * r) * {v.N} + d_col(t, 2 * r)] = (u16)(d[r] & 0xFFFFu);\n"
            f"            dd[d_row(t, 2 * r + 1) * {v.N} + d_col(t, 2 * r + 1)] = (u16)(d[r] >> 16);\n"
            f"        }}\n"
        )
    else:
        load = f"        for (int i = 0; i < {nreg}; ++i) d[i] = c[d_row(t, i) * {v.N} + d_col(t, i)];\n"
        store = f"        for (int i = 0; i < {nreg}; ++i) dd[d_row(t, i) * {v.N} + d_col(t, i)] = d[i];\n"
    descs = (
        "        const u64 db = descriptor(sb);\n"
        if v.a_regs
        else "        const u64 da = descriptor(sa), db = descriptor(sb);\n"
    )
    regs_a = ""
    if v.a_regs:  # two 16-bit elements per register, the lower column in the low half
        regs_a = (
            "        u32 ra[4];\n"
            "        const u16* a16 = (const u16*)a;\n"
            '        _Pragma("unroll") for (int r = 0; r < 4; ++r)\n'
            f"            ra[r] = (u32)a16[a_row(t, 2 * r) * {f.K} + a_col(t, 2 * r)]\n"
            f"                  | ((u32)a16[a_row(t, 2 * r + 1) * {f.K} + a_col(t, 2 * r + 1)] << 16);\n"
        )
    return f"""
extern "C" __global__ void __launch_bounds__(128) {v.key}(const u8* __restrict__ A, const u8* __restrict__ B,
        const {word}* __restrict__ C, {word}* __restrict__ D, const u8* __restrict__ S, int n) {{
    __shared__ __align__(1024) u8 sa[64 * 32];
    __shared__ __align__(1024) u8 sb[{v.N} * 32];
    const int t = threadIdx.x;
    for (int m = blockIdx.x; m < n; m += gridDim.x) {{
        const u8* a = A + (size_t)m * {64 * f.K * es};
        const {word}* c = C + (size_t)m * {64 * v.N};
        {word}* dd = D + (size_t)m * {64 * v.N};
        __syncthreads();  // the previous wgmma has read shared memory (every thread waited for it)
        stage(sa, sb, a, B + (size_t)m * {f.K * v.N * es}, {v.N}, {es});
        u32 d[{nreg}];
        _Pragma("unroll")
{load}{regs_a}        const u32 scale_d = S[m];
{descs}        asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");  // generic-proxy writes -> async proxy
        __syncthreads();
        asm volatile(
            "{{\\n"
            ".reg .pred p;\\n"
            "setp.ne.b32 p, {pred}, 0;\\n"
            "wgmma.fence.sync.aligned;\\n"
            "{opcode} {{{dlist}}}, {a_operand}, {b_operand}, p{imm};\\n"
            "wgmma.commit_group.sync.aligned;\\n"
            "wgmma.wait_group.sync.aligned 0;\\n"
            "}}\\n"
            : {outs}
            : {ins}
            : "memory");
        _Pragma("unroll")
{store}    }}
}}
"""


def kernel_source() -> str:
    """The text of kernel/capture/wgmma.cu: the header and one kernel per ``VARIANTS`` entry."""
    return _HEADER + "".join(_kernel(v) for v in VARIANTS)


# --------------------------------------------------------------------------------------- frozen input generator


def _shapes(f: Form, N: int, n: int):
    return (n, 64, f.K), (n, f.K, N), (n, 64, N)


def _pow2_bits(fm: Format, e, sign=0, frac=0):
    """Bits of +-(1 + frac) 2^e (e clipped to the normal range)."""
    e = np.clip(np.asarray(e, np.int64), fm.emin, fm.emax if fm is not E4M3 else fm.bias)
    return _bits(fm, sign, e + fm.bias, frac)


def cat_normal(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    s = r.coin(0.25, (n,))  # a quarter of them with scale-d = 0
    return band(r, f.fa, sa, -3, 2, 0.02), band(r, f.fb, sb, -3, 2, 0.02), band(r, f.fc, sc, -3, 3, 0.02), ~s


def cat_wide(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    fa, fb, fc = f.fa, f.fb, f.fc
    lo_a, hi_a = fa.emin, min(fa.emax, 63)
    lo_b, hi_b = fb.emin, min(fb.emax, 63)
    c = band(r, fc, sc, fc.emin, min(fc.emax, 60), 0.05)
    return band(r, fa, sa, lo_a, hi_a, 0.05), band(r, fb, sb, lo_b, hi_b, 0.05), c, None


def cat_large_c(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    hi = min(30, f.fc.emax)
    c = np.where(r.coin(0.5, (n, 1, 1)), band(r, f.fc, sc, 8, hi), band(r, f.fc, sc, -2, 5))
    return band(r, f.fa, sa, -2, 2), band(r, f.fb, sb, -2, 2), c, None


def cat_cancel(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    a = band(r, f.fa, sa, -3, 3)
    b = band(r, f.fb, sb, -3, 3)
    a[:, :, 1::2] = a[:, :, 0::2] ^ f.fa.sign_mask  # product k + 1 = -product k
    b[:, 1::2, :] = b[:, 0::2, :]
    near = r.coin(0.5, (n, 1, 1))  # or a residue of one last bit
    a[:, :, 1::2] = np.where(near, a[:, :, 1::2] ^ (1 << (13 if f.fa is F32 else 0)), a[:, :, 1::2])
    c = np.where(
        r.coin(0.5, sc),
        r.ints(0, 1, sc) << (f.fc.bits - 1),
        np.where(r.coin(0.5, sc), band(r, f.fc, sc, -30, -12), band(r, f.fc, sc, -3, 3)),
    )
    return a, b, c, None


def cat_one_two(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    a = band(r, f.fa, sa, -4, 4)
    keep = r.ints(1, 2, (n, 64, 1))
    k1, k2 = r.ints(0, f.K - 1, (n, 64, 1)), r.ints(0, f.K - 1, (n, 64, 1))
    col = np.arange(f.K)[None, None, :]
    mask = (col == k1) | ((keep == 2) & (col == k2))
    a = np.where(mask, a, r.ints(0, 1, sa) << (f.fa.bits - 1))
    c = np.where(r.coin(0.3, sc), 0, band(r, f.fc, sc, -8, 8))
    return a, band(r, f.fb, sb, -4, 4), c, None


def cat_subnormal(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    a = np.where(r.coin(0.6, sa), subnormals(r, f.fa, sa, 0.1), band(r, f.fa, sa, f.fa.emin, f.fa.emin + 2))
    b = np.where(r.coin(0.6, sb), subnormals(r, f.fb, sb, 0.1), band(r, f.fb, sb, f.fb.emin, f.fb.emin + 2))
    fc = f.fc
    opts = [r.ints(0, 1, sc) << (fc.bits - 1), subnormals(r, fc, sc), band(r, fc, sc, fc.emin, fc.emin + 3)]
    which = r.ints(0, 2, sc)
    c = np.select([which == 0, which == 1], opts[:2], opts[2])
    return a, b, c, None


def cat_overflow(r, f, N, n):
    """Products and sums near the accumulator's largest binade (as near as the inputs reach: FP8 and f16 products
    stay far below f32's), same signs in half the wgmmas; c near its largest value or ordinary."""
    sa, sb, sc = _shapes(f, N, n)
    fa, fb, fc = f.fa, f.fb, f.fc

    def top(fm):  # the largest exponent ``band`` draws (e4m3's top binade holds its NaN)
        return min(fm.emax, fm.exp_field_max - 1 - fm.bias)

    ta = min(top(fa), fc.emax // 2)
    tb = min(top(fb), fc.emax - 1 - ta - int(np.log2(f.K)))  # the sum of K products up to about 2^(emax + 1)
    a = band(r, fa, sa, ta - 2, ta)
    b = band(r, fb, sb, tb - 2, tb)
    same = r.coin(0.5, (n, 1, 1))
    a = np.where(same, a & ~fa.sign_mask, a)
    b = np.where(same, b & ~fb.sign_mask, b)
    c = np.where(r.coin(0.5, sc), band(r, fc, sc, fc.emax - 2, fc.emax), band(r, fc, sc, -4, 4))
    return a, b, c, None


def cat_special(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    a = band(r, f.fa, sa, -3, 3, 0.1)
    b = band(r, f.fb, sb, -3, 3, 0.1)
    c = band(r, f.fc, sc, -3, 3, 0.1)
    a = np.where(r.coin(0.03, sa), r.pick(special_values(f.fa), sa), a)
    b = np.where(r.coin(0.03, sb), r.pick(special_values(f.fb), sb), b)
    c = np.where(r.coin(0.05, sc), r.pick(special_values(f.fc), sc), c)
    return a, b, c, None


def cat_random_bits(r, f, N, n):
    sa, sb, sc = _shapes(f, N, n)
    return (
        r.ints(0, (1 << f.fa.bits) - 1, sa),
        r.ints(0, (1 << f.fb.bits) - 1, sb),
        r.ints(0, (1 << f.fc.bits) - 1, sc),
        None,
    )


def cat_rounding(r, f, N, n):
    """c = +-1.x 2^ec; up to three products that are powers of two at, or next to, c's last bit and half bit, the
    others zero: the final rounding (toward zero for f32, to nearest even for f16) and the truncation of the terms."""
    sa, sb, sc = _shapes(f, N, n)
    fa, fb, fc = f.fa, f.fb, f.fc
    ec = r.ints(-2, 2, (n, 1, 1))
    c = _bits(fc, r.ints(0, 1, sc), ec + fc.bias, r.ints(0, (1 << fc.frac_bits) - 1, sc))
    c = np.where(r.coin(0.1, sc), 0, c)
    target = ec - fc.frac_bits + r.ints(-3, 1, sa)  # exponent of product (i, k) relative to c's last bit
    ea = np.clip(target // 2, fa.emin, fa.emax)
    a = _bits(fa, r.ints(0, 1, sa), ea + fa.bias, 0)
    a = np.where(r.coin(3 / f.K, sa), a, 0)
    eb = np.clip(np.median(target - ea).astype(np.int64) + r.ints(-1, 1, sb), fb.emin, fb.emax)
    b = _bits(fb, 0, eb + fb.bias, np.where(r.coin(0.2, sb), 1 << (fb.frac_bits - 1), 0))
    return a, b, c, None


def cat_width(r, f, N, n):
    """The accumulation width: product 0 = +-2^e0 (c = 0 or tiny), the other K - 1 products 2^-g below it, g in a
    band around the expected F (FP8 6..18, others 18..30), one sign per row or random: the sum of the small ones
    survives only above the truncation grid 2^(e0 - F), which pins F (and the block length: a second block would
    restart the grid at the small products)."""
    sa, sb, sc = _shapes(f, N, n)
    fa, fb, fc = f.fa, f.fb, f.fc
    lo, hi = (6, 18) if f.fp8 else (18, 30)
    e0a = r.ints(0, 2, (n, 64, 1))
    big_a = _pow2_bits(fa, e0a, r.ints(0, 1, (n, 64, 1)))
    g = r.ints(lo, hi, (n, 64, f.K))
    ga = np.minimum(g, np.maximum(0, e0a - fa.emin))  # what a can carry; b carries the rest
    a = _bits(fa, r.ints(0, 1, sa) * r.coin(0.5, (n, 64, 1)), np.clip(e0a - ga, fa.emin, fa.emax) + fa.bias, 0)
    a = np.where(np.arange(f.K)[None, None, :] == 0, big_a, a)
    k = np.arange(f.K)[None, :, None]
    gb = r.ints(0, max(0, min(hi - lo, -fb.emin - 1)), (n, 1, N))  # b[k > 0] = 2^-gb: more spread per column
    b = np.where(k == 0, _pow2_bits(fb, 0), _pow2_bits(fb, -gb, 0, r.ints(0, (1 << fb.frac_bits) - 1, sb)))
    b = np.broadcast_to(b, sb)
    c = np.where(r.coin(0.7, sc), 0, band(r, fc, sc, -hi - 4, -lo))
    return a, b, c, None


def _pow2_any(fm: Format, e, sign=0, frac=0):
    """Bits of +-(1 + frac) 2^e, subnormal where e is below the normal range (then frac is dropped), e clipped to
    what the format holds (tf32 words: subnormals only down to 2^-136, where the tf32 bits end)."""
    lowest = fm.emin - (10 if fm is F32 else fm.frac_bits)
    top = fm.emax if fm is not E4M3 else fm.bias
    e = np.clip(np.asarray(e, np.int64), lowest, top)
    normal = _bits(fm, sign, np.maximum(e, fm.emin) + fm.bias, frac)
    sub = _bits(fm, sign, 0, np.int64(1) << np.clip(e - (fm.emin - fm.frac_bits), 0, 62))
    return np.where(e >= fm.emin, normal, sub)


def cat_zero_exp(r, f, N, n):
    """Two products per output next to the accumulator's zero exponent (-133 f32, -21 f16), the others zero: P and
    Q = 1.x 2^q far below it; c = +-0, a tiny subnormal, or (half the wgmmas) any bits with scale-d = 0. Q survives
    only above the truncation grid 2^(E - F), E the larger of P's exponent and the zero exponent, and it shows in the
    result: f32 (toward zero), P = +-2^p on the result's grid and Q of the other sign mostly; f16 (to nearest), P =
    2^-25, half the smallest subnormal, a tie that Q breaks. This pins the zero exponent, and whether scale-d = 0
    keeps a zero term (the mma.sync capture's f16acc_zero_exp_tie, generalised)."""
    sa, sb, sc = _shapes(f, N, n)
    fa, fb, fc = f.fa, f.fb, f.fc
    if fc is F32:
        pa = r.ints(-78, -59, (n, 64, 1))
        pb = r.ints(-78, -59, (n, 1, N))
        g = r.ints(8, 30, (n, 64, 1))
    else:
        pa = np.broadcast_to(r.ints(-14, -9, (n, 1, 1)), (n, 64, 1))
        pb = np.broadcast_to(-25 - pa[:, :1, :], (n, 1, N))
        g = r.ints(3, 13, (n, 64, 1)) if f.fp8 else r.ints(15, 25, (n, 64, 1))
    qa = pa - g // 2 - r.ints(0, 1, (n, 64, 1))
    qb = pb - (g.max() + 1) // 2 + r.ints(0, 2, (n, 1, N))
    sign = r.ints(0, 1, (n, 64, 1))
    other = np.where(r.coin(0.8 if fc is F32 else 0.5, (n, 64, 1)), 1 - sign, sign)
    k = np.arange(f.K)
    a = np.where(k == 0, _pow2_any(fa, pa, sign), 0)
    a = np.where(k == 1, _pow2_any(fa, qa, other, r.ints(0, (1 << fa.frac_bits) - 1, (n, 64, 1))), a)
    kk = np.arange(f.K)[None, :, None]
    b = np.where(kk == 0, _pow2_any(fb, pb), 0)
    b = np.where(kk == 1, _pow2_any(fb, qb), b)
    s = r.coin(0.5, (n,))
    c = np.where(r.coin(0.7, sc), r.ints(0, 1, sc) << (fc.bits - 1), subnormals(r, fc, sc))
    c = np.where(s[:, None, None], c, r.ints(0, (1 << fc.bits) - 1, sc))
    return a, np.broadcast_to(b, sb), c, s


def cat_scale_d0(r, f, N, n):
    """scale-d = 0 (D = A * B): c any bits (NaN and inf too), products tiny (next to the zero exponent, where a
    dropped c term and a +0 term differ) or ordinary."""
    sa, sb, sc = _shapes(f, N, n)
    tiny = r.coin(0.5, (n, 1, 1))
    a = np.where(tiny, subnormals(r, f.fa, sa, 0.2), band(r, f.fa, sa, -3, 3, 0.1))
    b = np.where(tiny, band(r, f.fb, sb, f.fb.emin, f.fb.emin + 4, 0.1), band(r, f.fb, sb, -3, 3, 0.1))
    c = r.ints(0, (1 << f.fc.bits) - 1, sc)
    return a, b, c, np.zeros(n, bool)


def cat_tf32_low_bits(r, f, N, n):
    """tf32 inputs whose low 13 bits are 0x1000..0x1FFF (a rounding to tf32 would round them up) against c = 1.x:
    truncation and rounding differ on nearly every output."""
    sa, sb, sc = _shapes(f, N, n)
    a = band(r, f.fa, sa, -2, 2)
    b = band(r, f.fb, sb, -2, 2)
    a = (a & ~0x1FFF) | r.ints(0x1000, 0x1FFF, sa)
    b = (b & ~0x1FFF) | r.ints(0x1000, 0x1FFF, sb)
    return a, b, band(r, f.fc, sc, -1, 1), None


def _int_bits(r, dt, shape, kind):
    if kind == "extreme":
        lo, hi = (-128, 127) if dt == np.int8 else (0, 255)
        return np.where(r.coin(0.5, shape), lo, hi) & 0xFF
    return r.ints(0, 255, shape)


def cat_int(kind):
    def gen(r, f, N, n):
        sa, sb, sc = _shapes(f, N, n)
        a = _int_bits(r, f.a_dtype, sa, "extreme" if kind in ("extreme", "limits") else "bits")
        b = _int_bits(r, f.b_dtype, sb, "extreme" if kind in ("extreme", "limits") else "bits")
        c = r.ints(0, (1 << 32) - 1, sc)
        s = None
        if kind == "limits":  # c within 2^21 of INT32_MAX or INT32_MIN: the sum crosses the limit
            top = r.coin(0.5, sc)
            c = np.where(top, 0x7FFFFFFF - r.ints(0, 1 << 21, sc), 0x80000000 + r.ints(0, 1 << 21, sc))
        if kind == "scale_d0":
            s = np.zeros(n, bool)
        return a, b, c, s

    return gen


FLOAT_CATEGORIES = [
    ("normal", cat_normal),
    ("wide", cat_wide),
    ("large_c", cat_large_c),
    ("cancel", cat_cancel),
    ("one_two", cat_one_two),
    ("subnormal", cat_subnormal),
    ("overflow", cat_overflow),
    ("special", cat_special),
    ("random_bits", cat_random_bits),
    ("rounding", cat_rounding),
    ("width", cat_width),
    ("zero_exp", cat_zero_exp),
    ("scale_d0", cat_scale_d0),
]
TF32_CATEGORIES = [("tf32_low_bits", cat_tf32_low_bits)]
INT_CATEGORIES = [(k, cat_int(k)) for k in ("random_bits", "extreme", "limits", "scale_d0")]
WIDE_N_CATEGORIES = ("normal", "random_bits", "special", "width", "zero_exp", "scale_d0")  # the ones run at N = 256 too
MMAS_AT_N8 = 8  # per category: 8 wgmmas at N = 8, 1 at N = 64 (the same 4,096 outputs), 1 at N = 256


def categories(v: Variant) -> list:
    f = v.f
    if f.integer:
        cats = INT_CATEGORIES
    else:
        cats = FLOAT_CATEGORIES + (TF32_CATEGORIES if f.a_dtype == W.TF32 else [])
    if v.N > 64:
        cats = [c for c in cats if c[0] in WIDE_N_CATEGORIES]
    return cats


def generate(v: Variant, seed: int = DEFAULT_SEED, scale: float = 1.0, version: int = GENERATOR_VERSION) -> dict:
    """Inputs of one variant: dict with a, b, c (raw bits, uint8 / 16 / 32), scale_d (bool per wgmma), category
    (uint8 per wgmma), names and counts. Deterministic in (variant, seed, scale, version)."""
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"generator version {version} is not supported; known: {SUPPORTED_VERSIONS}")
    f = v.f
    parts, cats, names, counts = [], [], [], []
    for ci, (name, fn) in enumerate(categories(v)):
        n = max(1, int(round(MMAS_AT_N8 * 8 / v.N * scale)))
        r = Rand(hash_seed(seed, v.key, name, version=version))
        a, b, c, s = fn(r, f, v.N, n)
        shapes = _shapes(f, v.N, n)
        a, b, c = (np.broadcast_to(x, sh) for x, sh in zip((a, b, c), shapes))
        parts.append((a, b, c, np.ones(n, bool) if s is None else s))
        cats.append(np.full(n, ci, np.uint8))
        names.append(name)
        counts.append(n)
    ua = {1: np.uint8, 2: np.uint16, 4: np.uint32}
    return dict(
        a=np.concatenate([p[0] for p in parts]).astype(ua[np.dtype(f.a_dtype).itemsize]),
        b=np.concatenate([p[1] for p in parts]).astype(ua[np.dtype(f.b_dtype).itemsize]),
        c=np.concatenate([p[2] for p in parts]).astype(f.c_uint),
        scale_d=np.concatenate([p[3] for p in parts]),
        category=np.concatenate(cats),
        names=names,
        counts=counts,
    )


def _digest(gen: dict) -> str:
    return input_digest(
        gen["a"], gen["b"], np.concatenate([gen["c"].view(np.uint8).ravel(), gen["scale_d"].view(np.uint8)])
    )


# ------------------------------------------------------------------------------------------- D delta coding


def predict_bits(v: Variant, a, b, c, s) -> np.ndarray:
    """A fixed guess of D's bits (for compression only): the products in float64 summed in k order, plus c where
    scale-d, rounded to nearest f32 (then f16); NaN -> the canonical NaN; integers: the exact wrapped sum."""
    f = v.f
    if f.integer:  # exact in float64 (|sum| < 2^21), wrapped
        dot = np.matmul(a.view(f.a_dtype).astype(np.float64), b.view(f.b_dtype).astype(np.float64)).astype(np.int64)
        total = dot + np.where(s[:, None, None], c.view(np.int32).astype(np.int64), 0)
        return (total & 0xFFFFFFFF).astype(np.uint32)
    with np.errstate(all="ignore"):
        av = a.view(f.a_dtype).astype(np.float64)
        bv = b.view(f.b_dtype).astype(np.float64)
        acc = np.where(s[:, None, None], c.view(f.c_dtype).astype(np.float64), 0.0)
        for k in range(f.K):
            acc = acc + (v.scale_a * av[:, :, k, None]) * (v.scale_b * bv[:, k, None, :])
        x = acc.astype(np.float32)
        if f.c_dtype == np.float16:
            out = x.astype(np.float16).view(np.uint16).copy()
            out[np.isnan(x)] = 0x7FFF
        else:
            out = x.view(np.uint32).copy()
            out[np.isnan(x)] = 0x7FFFFFFF
    return out


def encode_d(v, gen, d) -> np.ndarray:
    pred = predict_bits(v, gen["a"], gen["b"], gen["c"], gen["scale_d"])
    return (d - pred).view(np.int16 if v.f.c_uint == np.uint16 else np.int32)


def decode_d(v, gen, delta) -> np.ndarray:
    return predict_bits(v, gen["a"], gen["b"], gen["c"], gen["scale_d"]) + delta.view(v.f.c_uint)


# ----------------------------------------------------------------------------------------------------- models


def model(v: Variant, gen: dict, arch="sm_90", generic: bool = False) -> np.ndarray:
    """flashsim's wgmma (``wgmma_unchecked``; ``generic``: always its generic routine) on a variant's inputs: D's
    bits."""
    f = v.f
    with np.errstate(all="ignore"):
        if generic:
            return np.asarray(
                wgmma_generic(
                    gen["a"].view(f.a_dtype),
                    gen["b"].view(f.b_dtype),
                    gen["c"].view(f.c_dtype),
                    arch,
                    gen["scale_d"],
                    v.scale_a,
                    v.scale_b,
                )
            ).view(f.c_uint)
        d = wgmma_unchecked(
            gen["a"].view(f.a_dtype),
            gen["b"].view(f.b_dtype),
            gen["c"].view(f.c_dtype),
            arch,
            gen["scale_d"],
            v.scale_a,
            v.scale_b,
            v.satfinite,
        )
    return np.asarray(d).view(f.c_uint)


def _arch_with(**changes):
    return dataclasses.replace(get_arch("sm_90"), **changes)


def _tf32_rounded(gen: dict) -> dict:
    """tf32 operands rounded to nearest (ties away, as cvt.rna.tf32.f32) instead of truncated."""
    return {**gen, **{k: ieee.tf32_rna_in_f32(gen[k]) for k in ("a", "b")}}


class _NearestF32:
    """Stands in for flashsim.numerics.rounding inside the generic block routine: f32 results rounded to nearest
    even instead of toward zero (the "f32 results to nearest" alternative)."""

    def __getattr__(self, name):
        return getattr(rounding, name)

    @staticmethod
    def round_scaled(m, e, fmt, mode="rne", **kw):
        return rounding.round_scaled(m, e, fmt, "rne", **kw)


# name -> (applies to the form?, the alternative's arch record or None, an input transformation, "scale_d0_only"
# (the alternative on the scale-d = 0 wgmmas only) or "nearest_f32" (f32 results to nearest), or None)
HYPOTHESES = {
    "F = 24": (lambda f: not f.fp8 and not f.integer, dict(wgmma_fraction_bits=24), None),
    "F = 26": (lambda f: not f.fp8 and not f.integer, dict(wgmma_fraction_bits=26), None),
    "FP8 F = 12": (lambda f: f.fp8, dict(wgmma8_fraction_bits=12), None),
    "FP8 F = 14": (lambda f: f.fp8, dict(wgmma8_fraction_bits=14), None),
    "FP8 F = 25 (the f16 width)": (lambda f: f.fp8, dict(wgmma8_fraction_bits=25), None),
    "FP8 f32 results kept to 23 bits": (
        lambda f: f.fp8 and f.c_dtype == np.float32,
        dict(wgmma8_f32_result_frac_bits=23),
        None,
    ),
    "chunk 16 bytes (two blocks)": (lambda f: not f.integer, dict(wgmma_chunk_bytes=16), None),
    "chunk 8 bytes (FP8: four blocks of 8)": (lambda f: f.fp8, dict(wgmma_chunk_bytes=8), None),
    "f32 zero exponent -132": (lambda f: f.c_dtype == np.float32, dict(mma_zero_exponent_f32=-132), None),
    "f32 zero exponent -134": (lambda f: f.c_dtype == np.float32, dict(mma_zero_exponent_f32=-134), None),
    "f16 zero exponent -20": (lambda f: f.c_dtype == np.float16, dict(mma_zero_exponent_f16=-20), None),
    "f16 zero exponent -22": (lambda f: f.c_dtype == np.float16, dict(mma_zero_exponent_f16=-22), None),
    "scale-d 0 without a zero term": (
        lambda f: not f.integer,
        dict(mma_zero_exponent_f32=-300, mma_zero_exponent_f16=-60),
        "scale_d0_only",
    ),
    "tf32 inputs rounded to nearest": (lambda f: f.a_dtype == W.TF32, None, _tf32_rounded),
    "f32 results rounded to nearest": (lambda f: f.c_dtype == np.float32, None, "nearest_f32"),
}


def hypothesis_mismatches(v: Variant, gen: dict, d: np.ndarray, name: str) -> int | None:
    """Outputs where the alternative model ``name`` differs from the captured D (None where it does not apply).
    "scale-d 0 without a zero term" changes only the wgmmas with scale-d = 0 (the others keep the fitted model)."""
    applies, arch_changes, transform = HYPOTHESES[name]
    f = v.f
    if not applies(f):
        return None
    arch = _arch_with(**arch_changes) if arch_changes else "sm_90"
    g = transform(gen) if callable(transform) else gen
    if transform == "nearest_f32":
        saved, generic.rounding = generic.rounding, _NearestF32()
        try:
            out = model(v, g, arch, generic=True)
        finally:
            generic.rounding = saved
    else:
        out = model(v, g, arch, generic=True)
    if transform == "scale_d0_only":
        out = np.where(gen["scale_d"][:, None, None], model(v, gen), out)
    return int(np.count_nonzero(out != d))


def compare(v: Variant, gen: dict, d: np.ndarray) -> dict:
    bad = model(v, gen) != d
    per_cat = {}
    for ci, name in enumerate(gen["names"]):
        sel = gen["category"] == ci
        per_cat[name] = [int(bad[sel].sum()), int(sel.sum()) * 64 * v.N]
    return {"per_category": per_cat, "total_bad": int(bad.sum()), "total": int(bad.size)}


# ------------------------------------------------------------------------------------------------ runners


def run_fake(v: Variant, gen: dict, corrupt: int = 0) -> np.ndarray:
    """Host stand-in for the GPU: the model, gathered and scattered through the kernel's D fragment formulas
    (``fragment_maps``), so that the host logic (storage, comparison) runs without a GPU."""
    d_model = model(v, gen)
    (dr, dc), _ = fragment_maps(v.N)
    d = np.zeros_like(d_model)
    d[:, dr, dc] = d_model[:, dr, dc]
    if corrupt:
        flat = d.reshape(-1)
        flat[np.linspace(0, flat.size - 1, corrupt).astype(np.int64)] ^= 1
    return d


class GpuRunner:
    """The capture kernels (kernel/capture/wgmma.cu) built for sm_90a through flashsim.gpu.build (NVRTC)."""

    def __init__(self):
        from .. import runtime as rt
        from ..build import compile_file

        self.rt = rt
        rt.require_gpu()
        self.arch = rt.current_arch()
        if self.arch != "sm_90":
            raise RuntimeError(f"wgmma needs an sm_90 GPU (Hopper), this one is {self.arch}")
        self.build = compile_file(KERNEL, arch=BUILD_ARCH, defines=provenance.build_defines(PROVENANCE_NAME))
        self.kernels = {v.key: rt.load(self.build, v.key) for v in VARIANTS}

    def device_info(self) -> dict:
        dev = self.rt.require_gpu()
        info = {"arch": self.arch, "build_arch": BUILD_ARCH}
        try:
            info["name"] = str(dev.name)
        except Exception as exc:  # informative only
            info["name"] = f"unknown ({exc})"
        return info

    def __call__(self, v: Variant, gen: dict) -> np.ndarray:
        rt = self.rt
        n = len(gen["category"])
        da, db, dc = rt.to_device(gen["a"]), rt.to_device(gen["b"]), rt.to_device(gen["c"])
        ds = rt.to_device(gen["scale_d"].astype(np.uint8))
        dd = rt.empty(gen["c"].shape, gen["c"].dtype)
        dd.zero_()
        rt.launch(self.kernels[v.key], (min(n, 1024),), (THREADS,), da, db, dc, dd, ds, np.int32(n))
        return dd.to_numpy()


# ----------------------------------------------------------------------------------------------- save / load


def save_capture(path, results: dict, meta: dict) -> None:
    arrays = {}
    meta = dict(meta)
    meta["variants"] = {}
    for key, (v, gen, d) in results.items():
        arrays[f"{key}__d_delta"] = encode_d(v, gen, d)
        meta["variants"][key] = {
            "variant": dataclasses.asdict(v),
            "names": gen["names"],
            "counts": gen["counts"],
            "input_sha256": _digest(gen),
            "d_sha256": hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest(),
        }
    arrays["meta_json"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    arrays["arch"] = np.array(BUILD_ARCH)  # what the kernels were built for (tools/stamp_captures.py reads it)
    if "provenance" in meta:
        arrays["provenance"] = np.array(provenance.to_json(meta["provenance"]))
    np.savez_compressed(path, **arrays)


def load_capture(path) -> dict:
    """{variant key: (Variant, inputs as ``generate`` gives them, D's bits)}; ValueError if the inputs do not
    regenerate bit for bit or D does not decode to its checksum."""
    path = pathlib.Path(path)
    with np.load(path) as z:
        meta = json.loads(bytes(z["meta_json"]).decode())
        stored = {k: z[k] for k in z.files}
    version = meta.get("generator_version")
    if version not in SUPPORTED_VERSIONS:
        raise ValueError(f"{path}: generator version {version}, this code reads {SUPPORTED_VERSIONS}: re-capture")
    out = {}
    for key, info in meta["variants"].items():
        v = Variant(**info["variant"])
        gen = generate(v, meta["seed"], meta["scale"], version)
        if gen["names"] != info["names"] or gen["counts"] != info["counts"] or _digest(gen) != info["input_sha256"]:
            raise ValueError(f"{path}: the inputs of {key} no longer regenerate bit for bit: re-capture")
        d = decode_d(v, gen, stored[f"{key}__d_delta"])
        if hashlib.sha256(np.ascontiguousarray(d).tobytes()).hexdigest() != info["d_sha256"]:
            raise ValueError(f"{path}: D of {key} does not decode to its checksum (predictor changed?)")
        out[key] = (v, gen, d)
    out_meta = {k: v for k, v in meta.items() if k != "variants"}
    return {"meta": out_meta, "variants": out}


# ------------------------------------------------------------------------------------------------------ main


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m flashsim.gpu.capture.wgmma", description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for wgmma_sm90.npz and wgmma_sm90_summary.json")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every category's wgmma count")
    p.add_argument("--only", default="", help="comma-separated substrings of variant keys to run (default: all)")
    p.add_argument("--fake", action="store_true", help="no GPU: the model through the fragment maps (testing)")
    p.add_argument("--fake-corrupt", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        if args.scale <= 0:
            raise ValueError("--scale must be > 0")
        wanted = [s for s in args.only.split(",") if s]
        variants = [v for v in VARIANTS if not wanted or any(s in v.key for s in wanted)]
        if not variants:
            raise ValueError(f"--only {args.only!r} matches no variant; e.g. {VARIANTS[0].key}")
        out_dir = pathlib.Path(args.out)
        out_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        if args.fake:
            info = {"arch": "sm_90", "name": "fake (flashsim.wgmma through the fragment maps)"}
            runner = lambda v, gen: run_fake(v, gen, args.fake_corrupt)  # noqa: E731
        else:
            runner = GpuRunner()
            info = runner.device_info()
            print(f"compiled {len(VARIANTS)} kernels for {BUILD_ARCH} in {time.time() - t0:.1f} s")
        print(f"device: {info}")
        results, verdicts, refuted = {}, {}, {}
        for v in variants:
            gen = generate(v, args.seed, args.scale)
            d = runner(v, gen)
            if d.shape != gen["c"].shape or d.dtype != gen["c"].dtype:
                raise RuntimeError(f"{v.key}: the run returned {d.shape} {d.dtype}, expected {gen['c'].shape}")
            results[v.key] = (v, gen, d)
            verdicts[v.key] = r = compare(v, gen, d)
            bad_cats = {k: b for k, (b, _) in r["per_category"].items() if b}
            print(f"{v.key:36s} {r['total_bad']:7d} / {r['total']:8d} differ" + (f"  {bad_cats}" if bad_cats else ""))
            for h in HYPOTHESES:
                m = hypothesis_mismatches(v, gen, d, h)
                if m is not None:
                    refuted.setdefault(h, [0, 0])
                    refuted[h][0] += m
                    refuted[h][1] += int(d.size)
        print(
            "\nalternative models (outputs that differ from the capture; 0 means the capture cannot tell them apart):"
        )
        for h, (m, tot) in refuted.items():
            print(f"  {h:42s} {m:9d} / {tot}")
        meta = {
            "generator_version": GENERATOR_VERSION,
            "seed": args.seed,
            "scale": args.scale,
            "device": info,
            "arch": info["arch"],
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
            "numpy": np.__version__,
            "python": platform.python_version(),
            "verdict": verdicts,
            "hypotheses": refuted,
            "provenance": provenance.fingerprint(PROVENANCE_NAME),
        }
        npz = out_dir / "wgmma_sm90.npz"
        save_capture(npz, results, meta)
        back = load_capture(npz)["variants"]
        for key, (_, _, d) in results.items():
            if not np.array_equal(back[key][2], d):
                raise RuntimeError(f"{npz}: D of {key} did not survive the save/load round trip")
        summary = out_dir / "wgmma_sm90_summary.json"
        summary.write_text(json.dumps(meta, indent=1))
        total_bad = sum(r["total_bad"] for r in verdicts.values())
        print(f"\nwrote {npz} ({npz.stat().st_size / 1e6:.2f} MB) and {summary} in {time.time() - t0:.1f} s")
        return verdict("flashsim.wgmma", total_bad)
    except Exception as exc:  # every failure: a message and exit status 1
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
