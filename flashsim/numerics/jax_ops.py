"""The emulator's numerics in jax.numpy, bit for bit equal to the numpy ones (flashsim.mma, flashsim.sfu.ex2,
flashsim.numerics.ieee32, the f16 conversions).

Why this module does not simply call jnp's float operators.  XLA does not run IEEE binary32 arithmetic the way
numpy does: on the CPU it executes with the flush-to-zero and denormals-are-zero modes on (a subnormal f32 input or
result becomes 0), and on CPU and GPU alike it contracts ``a * b + c`` into one fused multiply-add.  Either one
changes bits.  So every float32 operation here is done in a way neither can touch:

* format conversions use the hardware conversion only where FTZ/DAZ cannot touch it (normal numbers) and integer
  arithmetic on the bit patterns for the rest (subnormals); the f16 conversions are integer-only;
* add / sub / mul / div of float32 are computed in float64 from the exact float64 images of the operands, then
  rounded to float32 by integer operations.  A product of two float32 is exact in float64, so a contracted FMA
  gives the same result as a separate multiply and add; every float64 value that arises is a multiple of 2^-298
  and therefore normal (FTZ/DAZ cannot touch it); and rounding the correctly rounded float64 result once more to
  float32 is innocuous for +, -, *, / because 53 >= 2*24 + 2 (Figueroa, "When is double rounding innocuous?",
  SIGNUM 1995);
* fma: the exact product in float64, an error-free TwoSum, round-to-odd in the last float64 bit, then one rounding
  to float32 (round-to-odd at 53 >= 24 + 2 bits makes the second rounding correct: Boldo & Melquiond,
  "Emulation of FMA and correctly rounded sums", IEEE TC 2008);
* NaN results follow what the numpy backend uses at that step: numpy's float32 operators on x86-64 (the SSE
  rules: a NaN operand propagates quieted, the first NaN operand winning; an invalid operation gives the default
  NaN 0xFFC00000), or flashsim.numerics.ieee32's canonical NaN 0x7FFFFFFF (``nan="canonical"``, fma's default).

The tensor-core model is the one of flashsim.numerics.tensorcore (same arch parameters from flashsim.arch, same
proof of exactness for its float32 fast path: see that module's docstring), evaluated per output element with the
k products of a fused block unrolled, so XLA fuses each block into one loop over the outputs.

64-bit types are needed (int64 sums, float64 intermediates): every public function here runs under
``enable_x64()``, a context manager that switches jax_enable_x64 on for the duration of the call only.
"""
from __future__ import annotations

import contextlib

import numpy as np

try:
    import jax
    import jax.numpy as jnp
    from jax import lax
except ImportError as exc:          # the numpy backend never imports this module
    raise ImportError("backend='jax' needs jax: pip install 'flashsim[jax]'") from exc

from ..arch import Arch, get_arch

U16, U32, U64 = jnp.uint16, jnp.uint32, jnp.uint64
I32, I64 = jnp.int32, jnp.int64
F32, F64 = jnp.float32, jnp.float64

F32_DEFAULT_NAN = 0xFFC00000          # x86 SSE "real indefinite": the NaN an invalid operation produces
F32_QUIET = 0x00400000


def enable_x64():
    """Context manager turning jax_enable_x64 on for its body only (jax.enable_x64, or the older
    jax.experimental.enable_x64, or as a last resort the config flag set and restored around the body)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    try:
        from jax.experimental import enable_x64 as legacy   # jax < 0.6
        return legacy()
    except ImportError:
        return _config_x64()


@contextlib.contextmanager
def _config_x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


@contextlib.contextmanager
def _x64():
    with enable_x64():
        yield


# ---------------------------------------------------------------------------------------------------------------
# bit patterns

def bits(x):
    """The bit pattern of a float16/bfloat16/float32/float64 array as the unsigned integer of the same width."""
    return lax.bitcast_convert_type(x, {2: U16, 4: U32, 8: U64}[jnp.dtype(x.dtype).itemsize])


def f32_from_bits(b):
    return lax.bitcast_convert_type(b.astype(U32), F32)


def f16_from_bits(b):
    return lax.bitcast_convert_type(b.astype(U16), jnp.float16)


def _bitlen64(m):
    """Bit length of a uint64 array (0 for 0)."""
    return (64 - lax.clz(m)).astype(I32)


def _shl(m, s):
    return lax.shift_left(m, jnp.asarray(s).astype(m.dtype))


def _shr(m, s):
    return lax.shift_right_logical(m, jnp.asarray(s).astype(m.dtype))


# (precision with the hidden bit, minimum normal exponent, exponent that overflows, inf bits)
_F32_FMT = (24, -126, 128, 0x7F800000)
_F16_FMT = (11, -14, 16, 0x7C00)


def round_magnitude(mag, x, fmt, mode):
    """Magnitude bits (uint32) of the value ``mag * 2**x`` rounded to the format ``fmt`` (``_F32_FMT`` or
    ``_F16_FMT``): ``mode`` "rne" (nearest even) or "rz" (toward zero); subnormal results kept; a result past the
    largest finite number is inf (for "rz" when the exact value reaches 2^emax, as the tensor cores do).

    ``mag``: uint64 < 2^62; ``x``: int32 exponent of its last bit, with mag * 2^x inside 2^-1100 .. 2^1100.
    """
    p, emin, emax, inf_bits = fmt
    mag = mag.astype(U64)
    bl = _bitlen64(mag)
    e_lead = x + bl - 1                                   # exponent of the leading bit
    normal = e_lead >= emin
    # bits to drop: down to p significant bits (normal) or to units of 2^(emin - p + 1) (subnormal)
    r = jnp.where(normal, bl - p, (emin - p + 1) - x)
    r_dn = jnp.clip(r, 0, 63)
    r_up = jnp.clip(-r, 0, 63)
    q = _shl(_shr(mag, r_dn), r_up)
    if mode == "rne":
        rem = mag & (_shl(jnp.ones_like(mag), r_dn) - 1)
        half = _shr(_shl(jnp.ones_like(mag), r_dn), 1)
        up = (r_dn > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
        q = q + up.astype(U64)
    elif mode != "rz":
        raise ValueError(f"mode must be 'rne' or 'rz', got {mode!r}")
    # a normal q includes the hidden bit: base = (biased exponent - 1) << (p - 1) lets a carry bump the exponent
    base = jnp.where(normal, (e_lead - emin).astype(I64) << (p - 1), 0)
    out = base + q.astype(I64)
    over = out >= inf_bits
    if mode == "rz":
        over = over | (normal & (e_lead >= emax))
    out = jnp.where(over, inf_bits, out)
    return jnp.where(mag == 0, 0, out).astype(U32)


# ---------------------------------------------------------------------------------------------------------------
# conversions between formats (exact, or rounded once to nearest even), through the bits

def f32_to_f64(x):
    """float32 -> float64, exact for every input whatever FTZ/DAZ say: subnormals are rebuilt from their integer
    significand (m * 2^-149), everything else goes through the hardware conversion (exact for normal numbers;
    NaN payloads may change, and nothing here depends on them)."""
    b = bits(x)
    sub = (b & 0x7FFFFF).astype(I32).astype(F64) * (2.0 ** -149)      # via int32: vectorisable
    sub = jnp.where((b >> 31) == 1, -sub, sub)
    return jnp.where(((b >> 23) & 0xFF) == 0, sub, x.astype(F64))


def f16_to_f64(h):
    """float16 -> float64 exactly (NaN payload kept as numpy's f16 -> f32 conversion keeps it)."""
    b = bits(h).astype(U64)
    sign = b >> 15
    field = (b >> 10) & 0x1F
    m = b & 0x3FF
    bl = _bitlen64(m)
    sub = jnp.where(m == 0, 0, (((bl - 1 - 24 + 1023).astype(U64)) << 52) | (_shl(m, (53 - bl).astype(U64))
                                                                          & ((1 << 52) - 1)))
    normal = ((field + (1023 - 15)) << 52) | (m << 42)
    special = (jnp.uint64(0x7FF) << 52) | (m << 42)
    out = jnp.where(field == 0, sub, jnp.where(field == 0x1F, special, normal))
    return lax.bitcast_convert_type(out | (sign << 63), F64)


def f16_to_f32(h):
    """float16 -> float32 exactly (every f16 is a normal f32 or zero); a NaN keeps its payload unquieted, as
    numpy's conversion does."""
    b = bits(h).astype(U32)
    sign = b >> 15
    field = (b >> 10) & 0x1F
    m = b & 0x3FF
    bl = (32 - lax.clz(m)).astype(I32)
    sub = jnp.where(m == 0, 0, (((bl - 1 - 24 + 127).astype(U32)) << 23) | (_shl(m, (24 - bl).astype(U32))
                                                                        & 0x7FFFFF))
    normal = ((field + (127 - 15)) << 23) | (m << 13)
    special = jnp.uint32(0x7F800000) | (m << 13)
    out = jnp.where(field == 0, sub, jnp.where(field == 0x1F, special, normal))
    return f32_from_bits(out | (sign << 31))


def _f64_parts(v):
    b = bits(v)
    sign = (b >> 63).astype(U32)
    field = ((b >> 52) & 0x7FF).astype(I32)
    m = b & ((1 << 52) - 1)
    sig = jnp.where(field == 0, m, m | (1 << 52))
    x = jnp.maximum(field, 1) - 1075
    return sign, field, m, sig, x


def f64_to_f32(v):
    """float64 -> float32 rounded to nearest even, subnormal results kept whatever FTZ says: below 2^-126 the
    result is rint(|v| * 2^149) units of 2^-149 (exact scaling, one rounding), above it the hardware conversion
    (one rounding, overflow to inf).  NaN stays NaN (payload unspecified: callers set NaN bits themselves)."""
    a = jnp.abs(v)
    q = jnp.rint(a * (2.0 ** 149)).astype(I32).astype(U32)   # only used below 2^-126: q <= 2^23
    sign = (bits(v) >> 63).astype(U32) << 31
    return jnp.where(a < 2.0 ** -126, f32_from_bits(q | sign), v.astype(F32))


def f64_to_f32_rz(v):
    """float64 -> float32 rounded toward zero; |v| >= 2^128 -> inf (the tensor cores' f32 overflow); a zero result
    is +0.  The hardware conversion (nearest) stepped back one ulp where it went away from zero; below 2^-126 the
    integer trunc(|v| * 2^149) in units of 2^-149 (FTZ cannot touch it)."""
    a = jnp.abs(v)
    r = jnp.abs(v.astype(F32))
    rb = bits(r) - (r.astype(F64) > a).astype(U32)
    rb = jnp.where(a < 2.0 ** -126, jnp.trunc(a * (2.0 ** 149)).astype(I32).astype(U32), rb)
    rb = jnp.where(a >= 2.0 ** 128, jnp.uint32(0x7F800000), rb)
    sign = (bits(v) >> 63).astype(U32) << 31
    return f32_from_bits(jnp.where(rb == 0, rb, rb | sign))


def f64_to_f16(v):
    """float64 -> float16 rounded to nearest even through the bits (subnormals kept, overflow to inf)."""
    sign, field, m, sig, x = _f64_parts(v)
    mag = round_magnitude(sig, x, _F16_FMT, "rne")
    nan_bits = 0x7C00 | (m >> 42).astype(U32)
    nan_bits = jnp.where(nan_bits == 0x7C00, 0x7C01, nan_bits)
    mag = jnp.where(field == 0x7FF, jnp.where(m == 0, jnp.uint32(0x7C00), nan_bits.astype(U32)), mag)
    return f16_from_bits(mag | (sign << 15))


def f32_to_f16(x):
    """float32 -> float16 rounded to nearest even (``cvt.rn.f16.f32``; numpy's astype), NaN as numpy does it:
    the top 10 payload bits, kept a NaN."""
    b = bits(x)
    sign = b >> 31
    field = (b >> 23) & 0xFF
    m = b & 0x7FFFFF
    sig = jnp.where(field == 0, m, m | 0x800000).astype(U64)
    xe = jnp.maximum(field.astype(I32), 1) - 150
    mag = round_magnitude(sig, xe, _F16_FMT, "rne")
    nan_bits = 0x7C00 | (m >> 13)
    nan_bits = jnp.where(nan_bits == 0x7C00, 0x7C01, nan_bits)
    mag = jnp.where(field == 0xFF, jnp.where(m == 0, jnp.uint32(0x7C00), nan_bits), mag)
    return f16_from_bits(mag | (sign << 15))


# ---------------------------------------------------------------------------------------------------------------
# IEEE binary32 arithmetic, correctly rounded (see the module docstring)

def _is_nan32(b):
    return (b & 0x7FFFFFFF) > 0x7F800000


def _nan_rule(result_bits, operands, nan):
    """NaN results: ``nan="x86"`` as numpy's float32 operators on x86-64 (the first NaN operand, quieted; else the
    default NaN 0xFFC00000), ``nan="canonical"`` as flashsim.numerics.ieee32 and the GPU (0x7FFFFFFF)."""
    is_nan = _is_nan32(result_bits)
    if nan == "canonical":
        return f32_from_bits(jnp.where(is_nan, jnp.uint32(0x7FFFFFFF), result_bits))
    if nan != "x86":
        raise ValueError(f"nan must be 'x86' or 'canonical', got {nan!r}")
    out = jnp.where(is_nan, jnp.uint32(F32_DEFAULT_NAN), result_bits)
    for ob in reversed(operands):
        out = jnp.where(_is_nan32(ob), ob | F32_QUIET, out)
    return f32_from_bits(out)


def add32(a, b, nan="x86"):
    """a + b, float32, correctly rounded (numpy's ``a + b``; nan="canonical": ieee32.add)."""
    r = f64_to_f32(f32_to_f64(a) + f32_to_f64(b))
    return _nan_rule(bits(r), (bits(a), bits(b)), nan)


def sub32(a, b, nan="x86"):
    """a - b, float32, correctly rounded (numpy's ``a - b``; nan="canonical": ieee32.sub)."""
    r = f64_to_f32(f32_to_f64(a) - f32_to_f64(b))
    return _nan_rule(bits(r), (bits(a), bits(b)), nan)


def mul32(a, b, nan="x86"):
    """a * b, float32, correctly rounded, the float64 product being exact (numpy's ``a * b``; nan="canonical":
    ieee32.mul)."""
    r = f64_to_f32(f32_to_f64(a) * f32_to_f64(b))
    return _nan_rule(bits(r), (bits(a), bits(b)), nan)


def div32(a, b, nan="x86"):
    """a / b, float32, correctly rounded (numpy's ``a / b``; nan="canonical": ieee32.div)."""
    r = f64_to_f32(f32_to_f64(a) / f32_to_f64(b))
    return _nan_rule(bits(r), (bits(a), bits(b)), nan)


def fma32(a, b, c, nan="canonical"):
    """a * b + c, float32, rounded once: flashsim.numerics.ieee32.fma (``fma.rn.f32``, canonical NaN).

    p = a*b is exact in float64; s = fl(p + c) and its error e (TwoSum, exact); if e != 0 the float64 s is
    replaced by the float64 next to the exact sum toward zero with its last bit set (round to odd), which
    rounds to float32 exactly as the exact sum does.  Non-finite operands take the plain float64 path.
    """
    a64, b64, c64 = f32_to_f64(a), f32_to_f64(b), f32_to_f64(c)
    p = a64 * b64
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    sb = bits(s)
    finite = jnp.isfinite(s) & jnp.isfinite(err)
    inexact = finite & (err != 0)
    toward_zero = (err < 0) != (s < 0)                  # exact |sum| below |s|: step the magnitude down
    odd = (sb - toward_zero.astype(U64)) | 1
    s = lax.bitcast_convert_type(jnp.where(inexact, odd, sb), F64)
    r = f64_to_f32(s)
    return _nan_rule(bits(r), (bits(a), bits(b), bits(c)), nan)


def mul16(a, b):
    """a * b, float16, correctly rounded (``mul.rn.f16``; numpy's float16 multiply: the f32 product of two f16 is
    exact, so its one rounding to f16 is the only one)."""
    r = f64_to_f16(f16_to_f64(a) * f16_to_f64(b))
    rb, ab, bb_ = bits(r), bits(a), bits(b)

    def is_nan(x):
        return (x & 0x7FFF) > 0x7C00
    out = jnp.where(is_nan(rb), jnp.uint16(0xFE00), rb)
    out = jnp.where(is_nan(ab), ab | 0x200, out)      # numpy's float16 multiply (measured): with two NaN
    out = jnp.where(is_nan(bb_), bb_ | 0x200, out)    # operands the second one propagates, quieted
    return f16_from_bits(out)


def f32_key(x):
    """Order-preserving uint32 key of float32 bits (NaN maps to the key of -inf: fmax ignores NaN)."""
    b = bits(x)
    b = jnp.where(_is_nan32(b), jnp.uint32(0xFF800000), b)
    return jnp.where((b >> 31) == 1, ~b, b | 0x80000000)


def f32_from_key(k):
    return f32_from_bits(jnp.where((k >> 31) == 1, k & 0x7FFFFFFF, ~k))


def fmax_reduce(x, axis):
    """np.fmax.reduce(x, axis, initial=-inf) for float32, exact under any FTZ/DAZ mode."""
    return f32_from_key(jnp.max(f32_key(x), axis=axis, initial=jnp.uint32(0x007FFFFF)))


def fmax32(a, b):
    """np.fmax for float32 (NaN ignored; both NaN -> -inf, as only -inf-initialised reductions use it here)."""
    return f32_from_key(jnp.maximum(f32_key(a), f32_key(b)))


# ---------------------------------------------------------------------------------------------------------------
# the tensor-core model

_ZERO_EXP = -1000


class _Operand:
    """A decoded f16/bf16 operand: values (float32 for f16, float64 for bf16: every product of two must be exact;
    inf and NaN inputs keep their value) and exponents (subnormals clamped to the format minimum, zeros
    -> _ZERO_EXP so a zero product never sets the block exponent)."""

    def __init__(self, b16, is_bf16):
        b = b16.astype(I32)
        if is_bf16:
            field, m, bias, mbits, vdt, top = (b >> 7) & 0xFF, b & 0x7F, 127, 7, F64, 0xFF
        else:
            field, m, bias, mbits, vdt, top = (b >> 10) & 0x1F, b & 0x3FF, 15, 10, F32, 0x1F
        sig = jnp.where(field == 0, m, m | (1 << mbits))
        e = jnp.maximum(field, 1) - bias
        self.exp = jnp.where(sig == 0, _ZERO_EXP, e).astype(jnp.int16)   # int16: twice the SIMD lanes
        val = sig.astype(vdt) * _pow2(e - mbits, vdt)
        val = jnp.where(field == top, jnp.where(m == 0, jnp.inf, jnp.nan), val).astype(vdt)
        self.val = jnp.where(((b >> 15) & 1) == 1, -val, val)


def _pow2(e, dtype):
    """2.0**e built from the bits; e must lie in the normal range of ``dtype``."""
    if dtype == F32:
        return lax.bitcast_convert_type(((e.astype(I32) + 127) << 23).astype(U32), F32)
    return lax.bitcast_convert_type(((e.astype(I64) + 1023) << 52).astype(U64), F64)


def _acc_terms(c_bits, acc16, e_zero):
    """Accumulator c (bits) -> (negative, significand, exponent of its last bit, exponent in E)."""
    c = c_bits.astype(I64)
    if acc16:
        field, m, bias, mbits = (c >> 10) & 0x1F, c & 0x3FF, 15, 10
        sign = (c >> 15) & 1
    else:
        field, m, bias, mbits = (c >> 23) & 0xFF, c & 0x7FFFFF, 127, 23
        sign = (c >> 31) & 1
    sig = jnp.where(field == 0, m, m | (1 << mbits))
    e = (jnp.maximum(field, 1) - bias).astype(I32)
    return sign == 1, sig, e - mbits, jnp.where(sig == 0, e_zero, e)


def _block(A: _Operand, B: _Operand, c_bits, acc16, spec: Arch, is_bf16):
    """One fused block of the model on whole matrices: A (..., M, K), B (..., K, N), c bits (..., M, N).

    Per output: E = max(exponents of the non-zero products, exponent of c); every product truncated toward zero
    in units of 2^(E - F) (float product times 2^(F - E), cast to int: exact, see tensorcore.py), summed in int;
    c truncated the same way with integer shifts; the exact total rounded once (f32 RZ / f16 RNE).

    Inf and NaN (tensorcore._specials): the plain float sum of the products and c is NaN exactly when a product is
    NaN (NaN input, 0 * inf), c is NaN, or +inf and -inf meet, and +-inf exactly when only infinities of one sign
    occur (finite terms cannot overflow it: |products| <= 2^36 for f16, <= 2^256 in float64 for bf16, and c is
    finite), in any order of summation and under FTZ: it costs one add per product and no branch.
    """
    F = spec.mma_fraction_bits
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    nk = A.val.shape[-1]
    c_neg, c_sig, c_x, ec = _acc_terms(c_bits, acc16, e_zero)
    # E: largest exponent of the non-zero products, then c joins
    e0 = None
    for k in range(nk):
        ek = A.exp[..., :, k, None] + B.exp[..., None, k, :]
        e0 = ek if e0 is None else jnp.maximum(e0, ek)
    min_product_exp = 2 * (-126 if is_bf16 else -14)
    e0 = e0.astype(I32)
    E = jnp.where(e0 < min_product_exp, ec, jnp.maximum(e0, ec))
    # products in units of 2^(E - F), truncated by the float -> int cast, summed exactly in int32
    vdt = A.val.dtype
    scale = _pow2(jnp.minimum(F - E, 125), F32) if vdt == F32 else _pow2(F - E, F64)
    acc = fsum = None
    for k in range(nk):
        prod = A.val[..., :, k, None] * B.val[..., None, k, :]
        t = (prod * scale).astype(I32)
        acc = t if acc is None else acc + t
        fsum = prod if fsum is None else fsum + prod
    if acc16:
        # c in the same units: sig * 2^(c_x - (E - F)), truncated toward zero; the total rounded by integer ops
        sh = c_x - (E - F)
        tc = _shl(_shr(c_sig.astype(U64), jnp.clip(-sh, 0, 63)), jnp.clip(sh, 0, 63)).astype(I64)
        total = acc.astype(I64) + jnp.where(c_neg, -tc, tc)
        d = round_magnitude(jnp.abs(total).astype(U64), E - F, _F16_FMT, "rne")
        d = jnp.where((total < 0) & (d != 0), d | 0x8000, d)
    else:
        # the same in float64, where every step is exact: c * 2^(F - E) (a power-of-two scaling) and its trunc,
        # the total (|total| < 2^34), and total * 2^(E - F) (E - F >= -158); then one rounding toward zero
        tc = jnp.trunc(f32_to_f64(lax.bitcast_convert_type(c_bits, F32)) * _pow2(F - E, F64))
        d = bits(f64_to_f32_rz((acc.astype(F64) + tc) * _pow2(E - F, F64)))
    # inf / NaN
    c_val = lax.bitcast_convert_type(c_bits, jnp.float16 if acc16 else F32).astype(vdt)
    st = fsum + c_val
    inf_bits, nan_bits, sign_bit = (0x7C00, 0x7FFF, 0x8000) if acc16 else (0x7F800000, 0x7FFFFFFF, 0x80000000)
    d = jnp.where(jnp.isinf(st), jnp.where(st < 0, jnp.uint32(inf_bits | sign_bit), jnp.uint32(inf_bits)), d)
    d = jnp.where(jnp.isnan(st), jnp.uint32(nan_bits), d)
    return d.astype(U16 if acc16 else U32)


def decode(b16, is_bf16=False) -> _Operand:
    """Decode f16 / bf16 bits (uint16 array) once, for several ``mma_k16`` calls."""
    return _Operand(b16, is_bf16)


def mma_k16(A: _Operand, B: _Operand, c_bits, acc16, spec: Arch, is_bf16=False):
    """D = A B + C for one k16 step on whole matrices: A (..., M, 16), B (..., 16, N) decoded operands, c bits
    (..., M, N) uint32 (f32) or uint16 (f16). Runs 16 // arch.mma_block_k chained blocks, as the hardware does."""
    kb = spec.mma_block_k
    d = c_bits
    for k0 in range(0, 16, kb):
        Ak = _sub_operand(A, slice(k0, k0 + kb), -1)
        Bk = _sub_operand(B, slice(k0, k0 + kb), -2)
        d = _block(Ak, Bk, d, acc16, spec, is_bf16)
    return d


def mma_chain(A: _Operand, B: _Operand, c_bits, acc16, spec: Arch, is_bf16=False):
    """The kernel's chain of k16 steps, in order: A (..., M, 16 n), B (..., 16 n, N), C bits (..., M, N); step s
    multiplies A[..., 16s:16s+16] by B[..., 16s:16s+16, :] and accumulates into the previous result.  A
    fori_loop, so the block is compiled once whatever n is."""
    steps = A.val.shape[-1] // 16
    if steps == 1:
        return mma_k16(A, B, c_bits, acc16, spec, is_bf16)

    def body(s, d):
        k0 = s * 16
        return mma_k16(_dyn_operand(A, k0, -1), _dyn_operand(B, k0, -2), d, acc16, spec, is_bf16)
    return lax.fori_loop(0, steps, body, c_bits)


_FIELDS = ("exp", "val")


def _dyn_operand(op: _Operand, k0, axis: int) -> _Operand:
    out = object.__new__(_Operand)
    for name in _FIELDS:
        x = getattr(op, name)
        setattr(out, name, lax.dynamic_slice_in_dim(x, k0, 16, axis=x.ndim + axis))
    return out


def _sub_operand(op: _Operand, ks: slice, axis: int) -> _Operand:
    if ks == slice(0, op.val.shape[axis]):
        return op
    out = object.__new__(_Operand)
    index = (Ellipsis, ks) if axis == -1 else (Ellipsis, ks, slice(None))
    for name in _FIELDS:
        setattr(out, name, getattr(op, name)[index])
    return out


def mma(a, b, c, arch="sm_90"):
    """flashsim.mma in jnp: a (..., 16, 16) and b (..., 16, 8) float16 or bfloat16, c (..., 16, 8) float32 or
    float16 (numpy or jax arrays, batch shapes equal); returns a jax array of c's dtype and shape, bit for bit
    what flashsim.numerics.tensorcore.mma returns."""
    spec = get_arch(arch)
    a_dt, c_dt = np.dtype(a.dtype), np.dtype(c.dtype)
    from .tensorcore import mma_type
    mma_type(a_dt, c_dt)
    if np.dtype(b.dtype) != a_dt:
        raise ValueError(f"b must have a's dtype {a_dt}, got {np.dtype(b.dtype)}")
    for name, x, shape in (("a", a, (16, 16)), ("b", b, (16, 8)), ("c", c, (16, 8))):
        if tuple(x.shape[-2:]) != shape or tuple(x.shape[:-2]) != tuple(c.shape[:-2]):
            raise ValueError(f"{name} must have shape {tuple(c.shape[:-2]) + shape}, got {tuple(x.shape)}")
    with _x64():
        return _mma_jit(jnp.asarray(a), jnp.asarray(b), jnp.asarray(c), spec)


def _mma_body(a, b, c, spec):
    is_bf16 = a.dtype == jnp.bfloat16
    acc16 = c.dtype == jnp.float16
    d = mma_k16(decode(bits(a), is_bf16), decode(bits(b), is_bf16), bits(c), acc16, spec, is_bf16)
    return lax.bitcast_convert_type(d, c.dtype)


_mma_jit = jax.jit(_mma_body, static_argnums=3)


# ---------------------------------------------------------------------------------------------------------------
# ex2.approx.ftz.f32 (flashsim.numerics.sfu.Ex2Model.bits, and its correctly rounded fallback)

_MASK23 = (1 << 23) - 1
_POS_INF = 0x7F800000
_ROUND = {"rz": jnp.trunc, "rd": jnp.floor, "ru": jnp.ceil, "rn": jnp.rint}


def ex2_table_bits(xb, table, params):
    """Ex2Model.bits in jnp: input bits (uint32) -> result bits (uint32). ``table``: the model's ``pos`` table, with
    its ``neg`` table appended in "signmag" mode (one gather per element, where numpy reads both and selects);
    ``params``: the model's params dict."""
    xb = xb.astype(U32)
    e = (xb >> 23) & 0xFF
    special = e == 255
    # float32 is exact here (and 8 lanes wide): x is normal or 0 (ftz), |x| * 2^23 <= 255 * 2^23 < 2^31 is a
    # power-of-two scaling, and trunc/floor/ceil/rint of a float32 are exact
    x = f32_from_bits(jnp.where((e == 0) | special, jnp.uint32(0), xb))
    x = jnp.clip(x, jnp.float32(-255.0), jnp.float32(255.0))
    rnd = _ROUND[params["rounding"]]
    if params["neg_mode"] == "twos":
        n = rnd(x * jnp.float32(1 << 23)).astype(I32)
        k, f = n >> 23, n & _MASK23
        r = table[f].astype(I64) + (k.astype(I64) << 23)
    else:
        n = rnd(jnp.abs(x) * jnp.float32(1 << 23)).astype(I32)
        k, f = (n >> 23).astype(I64), n & _MASK23
        negative = (xb >> 31) == 1
        g = table[f + jnp.where(negative, 1 << 23, 0)].astype(I64)
        r = jnp.where(negative, g - (k << 23), g + (k << 23))
    out = jnp.where(r < (1 << 23), params["underflow_bits"],
                    jnp.where(r >= _POS_INF, params["overflow_bits"], r)).astype(U32)
    nan = special & ((xb & _MASK23) != 0)
    out = jnp.where(special, jnp.where((xb >> 31) == 1, jnp.uint32(params["ninf_bits"]),
                                       jnp.uint32(params["pinf_bits"])), out)
    if params["nan_mode"] == "quiet":
        nan_bits = xb | F32_QUIET
    else:
        nan_bits = jnp.full_like(xb, params["nan_bits"])
    return jnp.where(nan, nan_bits, out)


# The fallback (no table): 2^x correctly rounded.  float64 exp2 of the fraction (XLA's, a few float64 ulps) and one
# rounding decide every result except those within HARD_ULPS float64 ulps of a float32 rounding midpoint; those
# few go to flashsim.sfu.ex2 itself on the host (a jax.pure_callback), so the bits are numpy's by construction.
HARD_ULPS = 1 << 12
HARD_SLOTS = 256        # hard cases resolved per call without shipping the whole array to the host


def _fallback_host(arch):
    from . import sfu

    def host(xb):
        xb = np.asarray(xb, dtype=np.uint32)
        return sfu.ex2(xb.view(np.float32), arch=arch).view(np.uint32)
    return host


def ex2_fallback_bits(xb, arch, hard_ulps=HARD_ULPS, hard_slots=HARD_SLOTS):
    """sfu's correctly rounded fallback (``_fallback_ex2``) in jnp, bit for bit (see HARD_ULPS)."""
    xb = xb.astype(U32)
    e = (xb >> 23) & 0xFF
    finite = e != 255
    x = f32_to_f64(f32_from_bits(jnp.where((e == 0) | ~finite, jnp.uint32(0), xb)))
    xs = jnp.clip(x, -200.0, 200.0)
    k = jnp.floor(xs)
    v = jnp.exp2(xs - k)                                 # xs - k is exact, in [0, 1)
    vb = bits(v).astype(I64) + (k.astype(I64) << 52)     # times 2^k, exact (normal range only is used)
    low = (vb & ((1 << 29) - 1)) - (1 << 28)
    r = bits(f64_to_f32(lax.bitcast_convert_type(vb.astype(U64), F64))).astype(I64)
    in_range = (xs >= -126) & (xs < 128)
    r = jnp.where(xs < -126, 0, jnp.where(xs >= 128, _POS_INF, r))
    r = jnp.where(r < (1 << 23), 0, jnp.minimum(r, _POS_INF))
    nan = ~finite & ((xb & _MASK23) != 0)
    r = jnp.where(~finite, jnp.where((xb >> 31) == 1, 0, _POS_INF), r)
    r = jnp.where(nan, 0x7FFFFFFF, r).astype(U32)
    hard = finite & in_range & (jnp.abs(low) < hard_ulps)
    host = _fallback_host(arch)
    flat_x, flat_r, flat_h = xb.reshape(-1), r.reshape(-1), hard.reshape(-1)
    count = jnp.sum(flat_h)
    slots = min(hard_slots, flat_x.shape[0])

    n = flat_x.shape[0]

    def few(rr):
        idx = jnp.nonzero(flat_h, size=slots, fill_value=n)[0]          # unused slots point past the end
        fixed = jax.pure_callback(host, jax.ShapeDtypeStruct((slots,), U32), flat_x[jnp.minimum(idx, n - 1)])
        return rr.at[idx].set(fixed, mode="drop")

    def all_(rr):
        return jax.pure_callback(host, jax.ShapeDtypeStruct(rr.shape, U32), flat_x)

    flat_r = lax.cond(count == 0, lambda rr: rr, lambda rr: lax.cond(count <= slots, few, all_, rr), flat_r)
    return flat_r.reshape(xb.shape)


class Ex2:
    """flashsim.sfu.ex2 for one architecture, usable inside jit: ``Ex2(arch)(x)`` on float32 jnp arrays.

    With calibration tables it takes the very arrays sfu loaded (``arrays`` are passed to jit as arguments, not
    baked in as constants); without, the correctly rounded fallback (see ``ex2_fallback_bits``).  Creating it
    goes through sfu once, so the same warnings are shown as for the numpy backend.
    """

    def __init__(self, arch="sm_90", model=None):
        from . import sfu
        self.arch = get_arch(arch).name
        sfu.ex2(np.zeros(1, np.float32), arch=self.arch)   # the same calibration warnings as numpy
        if model is None:
            tables = sfu.load_tables(self.arch)
            model = None if tables is None else tables.ex2
        self.model = model
        if model is None:
            self.static = ("fallback", self.arch, HARD_ULPS, HARD_SLOTS)
            self.arrays = ()
        else:
            p = model.params
            self.static = ("table", tuple(sorted(p.items())))
            parts = [model.pos] + ([model.neg] if p["neg_mode"] == "signmag" else [])
            self.arrays = (np.concatenate([np.asarray(t, np.uint32) for t in parts]),)

    @staticmethod
    def apply(static, arrays, x):
        """ex2 on float32 ``x`` given ``static`` and the (device) ``arrays`` of an Ex2 instance."""
        if static[0] == "fallback":
            return f32_from_bits(ex2_fallback_bits(bits(x), *static[1:]))
        return f32_from_bits(ex2_table_bits(bits(x), arrays[0], dict(static[1])))

    def __call__(self, x):
        with _x64():
            arrays = tuple(jnp.asarray(a) for a in self.arrays)
            return _ex2_jit(self.static, arrays, jnp.asarray(x))


_ex2_jit = jax.jit(Ex2.apply, static_argnums=0)
