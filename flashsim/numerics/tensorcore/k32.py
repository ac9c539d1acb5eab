"""mma.sync.m16n8k32 with 8-bit inputs: s8 (exact, wrapped) and FP8 (e4m3 / e5m2, mixed too).

A native FP8 block runs on the generic block routine with the arch's FP8 parameters (sm_89, sm_120: MMA-Sim's); where
the silicon has no FP8 mma (sm_90) the model is ptxas's lowering onto the arch's f16 m16n8k16 model, which
reproduces every FP8 output of the H200 captures (docs/tensorcore.md).
"""

from __future__ import annotations

import numpy as np

from ...arch import Arch, get_arch
from .. import formats, ieee32, rounding
from .. import xp as X
from ..target import PLAIN, Target
from . import fast
from .blockscale import decode_codes
from .generic import block, sum_int_dtype
from .types import E4M3, F16, FP8_FIELDS, ZERO_FP8, k32_type


class _Fp8Block:
    """The FP8 parameters ``generic.block`` takes for m16n8k32 on an arch (flashsim.arch: mma8_*)."""

    def __init__(self, spec: Arch, a_dt, b_dt):
        ea, ma, ba = FP8_FIELDS[a_dt]
        eb, mb, bb = FP8_FIELDS[b_dt]
        self.F = spec.mma8_fraction_bits
        self.block = spec.mma8_block_k
        self.f32_result_frac_bits = spec.mma8_f32_result_frac_bits
        self.min_product_exp = (1 - ba) + (1 - bb)  # the two formats' smallest exponents
        self.fraction_bits = (ma, mb)

    def int_dtype(self, xp):
        return sum_int_dtype(xp, self.block, self.F, *self.fraction_bits)


def _decode_fp8(xp, x, dt):
    """FP8 array -> (exact values as float32, inf / NaN kept; exponents int8, subnormals at the format minimum,
    zeros at the sentinel): the one decode of the element formats (``blockscale.decode_codes``) on the array's bytes.
    e4m3fn has no inf: S.1111.111 is NaN; e5m2 is IEEE-like."""
    fmt = formats.code_format("e4m3" if dt == E4M3 else "e5m2")
    return decode_codes(xp, X.bitcast(x, np.uint8), fmt, np.float32, np.int8, ZERO_FP8)


# ptxas's lowering of an FP8 mma.sync.m16n8k32 onto the f16 mma (sm_90, ``Arch.mma8_on_f16_mma``): the column order
# of its two HMMA.16816, the low halves of the lane's 8-bit registers (k % 4 in {0, 1}) in the first, the high
# halves (k % 4 in {2, 3}) in the second (tools/sass_ops.py, tests/test_sass.py)
_F16_MMA_K_ORDER = tuple(k for k in range(32) if k % 4 < 2) + tuple(k for k in range(32) if k % 4 >= 2)


def _k32_on_f16_mma(xp, a, b, c, spec: Arch, target: Target):
    """FP8 m16n8k32 steps (a (..., M, K), b (..., K, N), K a multiple of 32; each step's d the next step's c) as
    ptxas lowers them where the silicon has no FP8 mma (``Arch.mma8_on_f16_mma``, sm_90): the inputs unpacked to
    f16 (exact), each step's 32 columns in ``_F16_MMA_K_ORDER`` through the arch's f16 m16n8k16 model
    (two HMMA.16816, the second on the first's result) from +0, then the step's c added with one rounding to
    nearest (FADD / HADD2). On numpy the f16 chain runs the compiled kernel."""
    K = a.shape[-1]
    order = xp.asarray((np.arange(0, K, 32)[:, None] + np.asarray(_F16_MMA_K_ORDER)[None, :]).ravel())
    a16 = formats.fp8_to_f16(xp.take(a, order, axis=-1))
    b16 = formats.fp8_to_f16(xp.take(b, order, axis=-2))
    zero = xp.zeros(tuple(c.shape[-2:]), dtype=c.dtype)
    d = c
    for s in range(0, K, 32):
        d16 = fast.chain(a16[..., s : s + 32], b16[..., s : s + 32, :], zero, spec, target)
        d = _add_c_last(xp, d16, d, target)
    return d


def _add_c_last(xp, d, c, target: Target):
    """The lowering's last instruction: c added to the HMMA result d with one rounding to nearest in the
    accumulator's type (f16, HADD2: the sum of two f16 values is exact in float64, then one rounding; f32: FADD,
    an IEEE add). d and c broadcast together."""
    shape = np.broadcast_shapes(tuple(d.shape), tuple(c.shape))
    d, c = xp.broadcast_to(d, shape), xp.broadcast_to(c, shape)
    with X.errstate():
        if np.dtype(d.dtype) == F16:
            return rounding.f64_to_f16(xp.astype(d, xp.float64) + xp.astype(c, xp.float64), target=target)
        return ieee32.add(d, c, target=target)


def mma_k32(a, b, c, arch: str | Arch = "sm_90", target: Target = PLAIN):
    """``mma.sync.aligned.m16n8k32.row.col`` with 8-bit inputs, bit for bit where flashsim has a model.

    a (..., 16, 32), b (..., 32, 8), c (..., 16, 8), leading dimensions broadcast (numpy or JAX arrays):
    * int8 x int8 + int32: the exact dot product plus c, wrapped to 32 bits (what the PTX ISA specifies without
      .satfinite; the H200 does exactly this on all 90,112 captured outputs, tests/data/mma_k32_sm90.npz);
    * float8_e4m3fn / float8_e5m2 (a and b may differ) + float32 / float16: sm_89 and sm_120, the fused-block
      model with the arch's FP8 parameters (flashsim.arch: ``mma8_*``, from MMA-Sim, checked against ``mmasim``;
      on numpy the compiled kernel, ``chain_k32_fast``, where it applies, tested bit for bit against the generic
      routine); sm_90, which has no FP8 mma in silicon, ptxas's lowering onto its f16 m16n8k16 model
      (``_k32_on_f16_mma``; every FP8 output of the H200 captures). An arch without an FP8 model (sm_80 / 86: no
      FP8 mma; sm_100) raises ValueError with the reason.
    Returns d with c's dtype."""
    spec = get_arch(arch)
    for name, x in (("a", a), ("b", b), ("c", c)):
        if not hasattr(x, "dtype") or not hasattr(x, "shape") or len(x.shape) < 2:
            raise ValueError(f"{name} must be an array with at least 2 dimensions, got {type(x).__name__}")
    ptx = k32_type(a.dtype, b.dtype, c.dtype)
    for name, x, shape in (("a", a, (16, 32)), ("b", b, (32, 8)), ("c", c, (16, 8))):
        if tuple(x.shape[-2:]) != shape:
            raise ValueError(f"{name} must have shape (..., {shape[0]}, {shape[1]}) for m16n8k32, got {tuple(x.shape)}")
    xp = X.namespace(a, b, c)
    X.require_x64(xp)
    if ptx == "s32.s8.s8.s32":  # exact and wrapped: one k32 step of the chain
        return mma_chain_s8(a, b, c)
    if not spec.has_fp8_model:
        raise ValueError(f"no model of mma.sync m16n8k32 {ptx} on {spec.name}: {spec.mma8_source}")
    whole = _fp8_chain_whole(xp, a, b, c, spec, target)
    return whole if whole is not None else _k32_fp8_generic(xp, a, b, c, spec, target)


def _fp8_chain_whole(xp, a, b, c, spec: Arch, target: Target):
    """FP8 k32 steps (K a multiple of 32) computed on whole operands where the arch's model allows it, else None
    (the caller runs ``_k32_fp8_generic`` one step and tile at a time): sm_90's lowering onto the f16 mma, or on
    numpy the compiled kernel of a native FP8 block. The one place ``mma_k32`` and ``mma_chain_k32`` choose."""
    if spec.mma8_on_f16_mma:
        return _k32_on_f16_mma(xp, a, b, c, spec, target)
    if X.is_numpy(xp) and spec.mma8_block_k is not None:
        return fast.chain_k32_fast(a, b, c, spec, target.mma_threads)
    return None


def _k32_fp8_generic(xp, a, b, c, spec: Arch, target: Target):
    """One FP8 mma.sync.m16n8k32 of a native FP8 block (``mma8_block_k``) on any array namespace (shapes and dtypes
    checked by ``mma_k32``): the 32 products in order through the arch's fused blocks, c in the first."""
    a_dt, b_dt = np.dtype(a.dtype), np.dtype(b.dtype)
    acc16 = np.dtype(c.dtype) == F16
    P = _Fp8Block(spec, a_dt, b_dt)
    A = tuple(X.pieces(x, 1, -1, target) for x in _decode_fp8(xp, a, a_dt))
    B = tuple(X.pieces(x, 1, -2, target) for x in _decode_fp8(xp, b, b_dt))
    out_shape = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2])) + (16, 8)
    bits = np.uint16 if acc16 else np.uint32
    d = xp.broadcast_to(X.bitcast(c, bits), out_shape)
    with X.errstate():
        for k0 in range(0, 32, P.block):
            d = block(
                xp,
                tuple(x[k0 : k0 + P.block] for x in A),
                tuple(x[k0 : k0 + P.block] for x in B),
                d,
                acc16,
                spec,
                False,
                target,
                params=P,
            )
    return X.bitcast(d, np.float16 if acc16 else np.float32)


def mma_chain_k32(a, b, c, arch: str | Arch = "sm_90", target: Target = PLAIN):
    """The kernel's loop of mma.sync.m16n8k32 with FP8 inputs on whole matrices: for each k32 step s in order, every
    (m16, n8) tile of d gets d = mma_k32(a_tile[:, 32s:32s+32], b_tile[32s:32s+32, :], d), starting from d = c.
    a (..., M, K) and b (..., K, N) float8 (e4m3 / e5m2), c (..., M, N) float32 or float16; M % 16, N % 8, K % 32
    == 0. The k order inside a step is the operands' (the caller puts its keys in the fragment's slot order). Whole
    matrices where ``_fp8_chain_whole`` can (sm_90's lowering; a native block on numpy), else one ``mma_k32`` per
    step and tile."""
    xp = X.namespace(a, b, c)
    M, K = a.shape[-2], a.shape[-1]
    N = b.shape[-1]
    if b.shape[-2] != K or K % 32 or M % 16 or N % 8:
        raise ValueError(
            f"mma_chain_k32: shapes (..., M, K) x (..., K, N) with M % 16, K % 32, N % 8 == 0 expected, "
            f"got {tuple(a.shape)} x {tuple(b.shape)}"
        )
    spec = get_arch(arch)
    if k32_type(a.dtype, b.dtype, c.dtype) != "s32.s8.s8.s32":
        whole = _fp8_chain_whole(xp, a, b, c, spec, target)
        if whole is not None:
            return whole
    lead = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2]))
    at = xp.reshape(xp.broadcast_to(a, lead + (M, K)), lead + (M // 16, 1, 16, K))
    bt = xp.swapaxes(xp.reshape(xp.broadcast_to(b, lead + (K, N)), lead + (1, K, N // 8, 8)), -3, -2)
    d = xp.swapaxes(xp.reshape(xp.broadcast_to(c, lead + (M, N)), lead + (M // 16, 16, N // 8, 8)), -3, -2)
    for s in range(0, K, 32):
        d = mma_k32(at[..., s : s + 32], bt[..., s : s + 32, :], d, spec, target)
    return xp.reshape(xp.swapaxes(d, -3, -2), lead + (M, N))


def mma_chain_s8(a, b, c):
    """The kernel's loop of mma.sync.m16n8k32 s32.s8.s8.s32 on whole matrices: a (..., M, K) int8, b (..., K, N)
    int8, c (..., M, N) int32, K % 32 == 0 -> d int32, bit for bit.

    Each mma adds its exact dot product to c and wraps to 32 bits (``mma_k32``, all 90,112 H200 outputs), and
    wrapping commutes with addition modulo 2^32, so the chain equals the exact c + a @ b wrapped once, in any order
    of the k32 steps. Computed as a float64 matmul, exact while K * 127 * 128 < 2^53 (checked), so BLAS (numpy)
    or XLA (JAX, inside enable_x64) does the work. tests/test_quant.py checks it against ``mma_k32`` step by step."""
    xp = X.namespace(a, b, c)
    for name, x, dt in (("a", a, np.int8), ("b", b, np.int8), ("c", c, np.int32)):
        if np.dtype(x.dtype) != np.dtype(dt):
            raise ValueError(f"mma_chain_s8: {name} must be {np.dtype(dt).name}, got {x.dtype}")
    K = a.shape[-1]
    if b.shape[-2] != K or K % 32 or a.shape[-2] % 16 or b.shape[-1] % 8:
        raise ValueError(
            f"mma_chain_s8: shapes (..., M, K) x (..., K, N) with M % 16, K % 32, N % 8 == 0 expected, "
            f"got {tuple(a.shape)} x {tuple(b.shape)}"
        )
    if K * 128 * 128 >= 1 << 53:
        raise ValueError(f"mma_chain_s8: K={K} is too long for an exact float64 sum")
    X.require_x64(xp)
    total = xp.matmul(xp.astype(a, xp.float64), xp.astype(b, xp.float64))
    total = xp.astype(total, xp.int64) + xp.astype(c, xp.int64)
    return X.bitcast(xp.astype(total & 0xFFFFFFFF, xp.uint32), np.int32)
