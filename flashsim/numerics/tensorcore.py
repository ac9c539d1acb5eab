"""Bit-exact model of ``mma.sync.aligned.m16n8k16.row.col`` (f16 / bf16 inputs): one routine for every engine.

The model (ANCHORS section 1; MMA-Sim, arXiv:2511.10909; Khattak & Mikaitis, arXiv:2512.07004), per output
element d[i, j] and per fused block of ``arch.mma_block_k`` products:

* every product a[i,k] * b[k,j] is exact; its exponent is ea + eb, where a subnormal input keeps its value
  and takes the format's minimum exponent (the product significand lies in [0, 4) and is not renormalised);
* c[i,j] joins as one more term (its own exponent, subnormals clamped to the minimum);
* a zero term (zero product or zero c) takes the architecture's zero exponent (``mma_zero_exponent_f32`` or
  ``_f16``, chosen by the accumulator type);
* E = the largest exponent of all terms; each term is truncated toward zero (sign-magnitude) to F =
  ``arch.mma_fraction_bits`` fraction bits relative to 2^E; the truncated terms are summed exactly;
* the sum is normalised once and rounded: f32 toward zero, f16 to nearest-even, subnormal results kept;
  a zero result is +0; an f32 result of magnitude >= 2^128 becomes inf (what the H200 does), f16 overflow
  rounds to inf as RNE does;
* NaN anywhere, 0 * inf, or +inf and -inf together give the canonical NaN (0x7FFFFFFF / 0x7FFF); otherwise an
  infinite product or c gives inf of its sign.

With ``mma_block_k == 8`` (sm_80/86/89) the k = 16 reduction runs as two chained blocks: block 1's rounded result
is block 2's c.  A kernel's loop of k16 steps chains the same way (``mma_chain``): step s's rounded result is step
s + 1's c.  The (m16, n8) tiling of the hardware does not change the arithmetic of an element, so the chain is
computed on whole matrices.

Entry points
------------
``mma_chain(a, b, c, arch)``: a (..., M, K) f16/bf16, b (..., K, N) of a's dtype, c (..., M, N) f32 (or f16 with
f16 inputs), M % 16 == N % 8 == K % 16 == 0, leading dimensions broadcast (numpy rules); returns d of c's dtype,
shape (broadcast batch) + (M, N).  Works on numpy arrays (eagerly) and on JAX arrays (eagerly or inside
``jax.jit``; static shapes, no Python branch on values).  JAX needs 64-bit types while it traces (int64 sums,
float64 bf16 products): wrap the tracing call in ``flashsim.numerics.xp.enable_x64()``; without it
``mma_chain`` raises RuntimeError rather than compute with silently narrowed types.
``mma_chain_generic``: the one generic routine (below), on any namespace; ``mma_chain`` runs it for JAX arrays
and runs the numpy engine's fast path (below) for numpy arrays.
``mma(a, b, c, arch, backend)``: the public single instruction, (..., 16, 16) x (..., 16, 8) + (..., 16, 8).

The generic routine (``mma_chain_generic``), written once against the array namespace ``xp``.  Each operand is
decoded once for the whole chain from its bits (integer operations only): an exact value (float32 for f16,
float64 for bf16, built as integer significand times a normal power of two; inf and NaN kept) and an exponent
(int8 / int16; subnormals clamped to the minimum, zero -> a sentinel so low that a product with a zero factor is
below every real product).  Per block and output: E = max(max over the products of ea + eb, exponent of c); the
products in units of 2^(E - F), ``t = trunc(a * b * 2^(F - E))`` (a float product times a power of two, cast to
an integer), summed in int32 (int64 if F or the block size could overflow it); c's term by integer shifts of its
significand; the exact integer total rounded once by ``rounding.round_scaled`` (f32 toward zero with |value| >=
2^128 -> inf, f16 to nearest even; zero -> +0); then the specials.  The k16 steps run in order, as a Python loop on
numpy and as one compiled step in a ``lax.fori_loop`` under JAX (see ``_fori``: structure only).

Why this is exact on numpy (IEEE, gradual underflow) and under XLA (flush-to-zero / denormals-are-zero on the
CPU, a * b + c contracted to an FMA) alike:
* inputs: every value is built from a normal power of two (f16: >= 2^-24 in float32; bf16: >= 2^-133 in float64),
  so DAZ never meets a subnormal operand;
* a * b is exact (22 significant bits in float32 with exponent >= -48; 16 bits in float64) and normal;
* a * b * 2^(F - E): a power-of-two scaling, exact unless the result leaves the normal range; a result below the
  normal range (flushed by FTZ or rounded by gradual underflow) comes only from a product below 2^(E - F - 126),
  whose truncation is 0 either way; the f32 scale is clamped at 2^125, reached only when every product is 0;
  |t| < 2^(F + 2), so the float -> int cast (truncation toward zero) is exact;
* nothing in the value path is a + b * c (the products go through an integer cast before any addition), so FMA
  contraction has nothing to fuse; XLA does not reassociate float multiplies;
* inf / NaN: the plain float sum of c and the products (one add per product) is NaN exactly when a product is NaN
  (NaN input, 0 * inf), c is NaN, or +inf and -inf meet, and +-inf exactly when infinities of one sign occur:
  finite terms cannot overflow it (|products| <= 2^32 for f16, <= 2^256 in float64 for bf16; c + 2^36 rounds to
  at most FLT_MAX), in any order, fused into FMAs or not, and whatever FTZ does to small terms.

The numpy engine's fast path (``_chain_fast``, taken by ``mma_chain`` / ``mma`` for numpy arrays): the same
arithmetic, laid out for numpy. Outputs are cut into (16, 8) tiles whose index is the innermost axis of every array
((K, 16, n) for A, (K, 8, n) for B, (16, 8, n) for d), so that every ufunc runs over long contiguous rows; a chunk
of batch elements is transposed (as 2-D transposes of the raw bits) and decoded once, A is used in place for every
n8 column block and B repeated over the m16 row blocks. Values are float32 (f16 by a bit trick that relies on
gradual underflow; bf16 chunks whose exponents all lie within +-X, X = (125 - F) // 2 = 50 on sm_90, so that
products >= 2^-100 and the scale <= 2^125 stay normal; other bf16 chunks use float64 products); exponents int8
(f16) / int16 (bf16); the sum of the truncated products is int32 (16 * (2^27 - 2^17) < 2^31 at F = 25; int64 past
that); c's term is trunc(c * 2^(F - E)) in float32 (exact: < 2^(F + 1), or below 1); the total (< 2^(F + 7)) and
value = total * 2^(E - F) are exact in float64; outputs without a non-zero product (where the float32 scale could
overflow) take c itself, which is what the model gives there (c has at most 24 <= F significant bits). The one
rounding is done on that exact float64: f32 toward zero by clearing the low 29 bits of the significand (below
2^-126: truncation to a multiple of 2^-149), after which the float32 cast is exact or gives inf exactly for |value|
>= 2^128; f16 by rint of the significand at the value's f16 exponent. Between blocks and k16 steps the accumulator
stays a float32 array (f16 values are exact in it) and is never re-decoded from bits; checks for subnormal and
overflowing results run only when the block's range of E allows one (a non-zero value lies in [2^(E - F), 2^(E +
7))), and the inf / NaN pass only for chunks that hold an inf or NaN. Every one of these steps is checked bit for
bit against the generic routine in tests/test_tensorcore_engines.py.

Checked against: the Fraction oracle (numerics.reference.mma_ref), mmasim on every arch it knows, and an H200
capture of 6.6 million outputs (tests/test_mma_silicon.py, both engines), which also refutes every neighbouring
model.

Measured (``python3 benchmarks/bench_mma.py --engines``: AMD EPYC, 2 shared cores with AVX-512, numpy 2.4.6, jax
0.10.2 on the CPU; the emulator's chains for 64 CUDA blocks of 128 query rows, d = 128, kv_tile 64; ns per
product = CPU time / (outputs x K), best of 3-5, the range over four runs on the shared machine; "before" is the
previous numpy code: one flashsim.mma per k16 step on broadcast (16, 16) x (16, 8) tiles, re-decoding both
operands every step):

    chain             numpy before   numpy fast path   numpy generic   jax generic (jit, CPU)
    S = Q K^T, f32        1.23          0.74-0.78         4.0-4.2        0.21-0.26 (wall 0.12-0.15, 2 threads)
    O += P V, f32         1.23          0.70-0.80         3.9-4.0        0.20-0.23
    O += P V, f16         1.38          0.89-0.94         5.0-5.8        0.22-0.24

Single instructions (``flashsim.mma`` on 8192 independent mmas; one k16 step, so per-output work weighs more):
before 1.17 / 1.37 / 1.26 ns per product (f32.f16 / f16.f16 / f32.bf16), now 1.08 / 1.31 / 1.13.

The fast path pays 5-6x over the generic routine on numpy, so numpy keeps it.  Where its time goes (S = Q K^T):
about 0.6 ns per product in the block loop (per product six numpy passes: two int8 passes for E, the product,
the scaling, the cast and the integer sum; per output and block about twenty more), 0.05 in the transposes, 0.04
in decoding.  Under JAX (CPU time, one core): E 0.025, the products 0.09, round_scaled 0.03, the rest (c, the
inf / NaN sum, E's assembly) 0.08.
"""
from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

from ..arch import Arch, get_arch
from . import formats, rounding
from . import xp as X

__all__ = ["mma", "mma_chain", "mma_chain_generic", "mma_unchecked", "mma_type", "MMA_TYPES"]

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

# (input dtype, accumulator dtype) -> PTX type string d.a.b.c
MMA_TYPES = {
    (F16, F32): "f32.f16.f16.f32",
    (F16, F16): "f16.f16.f16.f16",
    (BF16, F32): "f32.bf16.bf16.f32",
}

_CHUNK = 1024         # (16, 8) output tiles per chunk of the numpy fast path
_ZERO_F16 = -64       # exponent of a zero f16 input (int8): ea + eb of a zero product <= -48 < -28
_ZERO_BF16 = -1000    # exponent of a zero bf16 input (int16): ea + eb of a zero product <= -872 < -252


def mma_type(a_dtype, c_dtype) -> str:
    """PTX type string ("f32.f16.f16.f32", ...) for input dtype ``a_dtype`` and accumulator ``c_dtype``."""
    key = (np.dtype(a_dtype), np.dtype(c_dtype))
    if key not in MMA_TYPES:
        raise ValueError(f"no mma.sync m16n8k16 for inputs {key[0]} with accumulator {key[1]}; "
                         f"supported: {', '.join(MMA_TYPES.values())}")
    return MMA_TYPES[key]


# ---------------------------------------------------------------------------------------------------------
# public entry points


def _check_array(name: str, x, dtypes: tuple, shape: tuple) -> None:
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a numpy array, got {type(x).__name__}")
    if x.dtype not in dtypes:
        raise ValueError(f"{name} must have dtype {' or '.join(str(d) for d in dtypes)}, got {x.dtype}")
    if x.ndim < 2 or x.shape[-2:] != shape:
        raise ValueError(f"{name} must have shape (..., {shape[0]}, {shape[1]}), got {x.shape}")


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90", backend: str = "numpy") -> np.ndarray:
    """d = a @ b + c as ``mma.sync.aligned.m16n8k16.row.col`` computes it on ``arch``, bit for bit.

    a: (..., 16, 16) float16 or bfloat16 (row-major M x K); b: (..., 16, 8) of a's dtype (K x N); c: (..., 16, 8)
    float32, or float16 with float16 inputs.  Returns d with c's dtype and shape.  The leading (batch) dimensions of
    a and b must broadcast to c's batch shape (numpy rules), so that one B can serve many A's; d always has c's shape.
    Nothing is cast: a wrong dtype, shape or arch raises ValueError naming the argument.
    backend: "numpy" (default) or "jax" (the same generic routine as every engine, ``mma_chain_generic``, compiled
    by jax.jit once per arch and type; needs jax; returns a numpy array too).
    """
    if backend not in ("numpy", "jax"):
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
    spec = get_arch(arch)
    _check_array("a", a, (F16, BF16), (16, 16))
    _check_array("b", b, (a.dtype,), (16, 8))
    _check_array("c", c, (F32, F16), (16, 8))
    mma_type(a.dtype, c.dtype)
    batch = c.shape[:-2]
    for name, x in (("a", a), ("b", b)):
        try:
            ok = np.broadcast_shapes(x.shape[:-2], batch) == batch
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{name}'s batch dimensions {x.shape[:-2]} do not broadcast to c's batch "
                             f"dimensions {batch}")
    if backend == "jax":
        try:
            import jax.numpy as jnp
        except ImportError as e:
            raise ValueError(f"backend='jax' needs jax: pip install 'flashsim[jax]' ({e})") from None
        with X.enable_x64():
            d = _jitted_chain(spec)(jnp.asarray(a), jnp.asarray(b), jnp.asarray(c))
            return np.asarray(d)
    return _chain_fast(a, b, c, spec)


_JITTED: dict = {}


def _jitted_chain(spec: Arch):
    """``mma_chain_generic`` for ``spec`` under jax.jit, one per set of tensor-core parameters (sm_80, sm_86 and sm_89
    share one; jit itself then caches one compilation per shapes and dtypes).  Call it under xp.enable_x64()."""
    key = (spec.mma_block_k, spec.mma_fraction_bits, spec.mma_zero_exponent_f32, spec.mma_zero_exponent_f16)
    fn = _JITTED.get(key)
    if fn is None:
        import jax
        fn = _JITTED[key] = jax.jit(functools.partial(mma_chain_generic, arch=spec))
    return fn


def mma_unchecked(a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90",
                  out: np.ndarray | None = None) -> np.ndarray:
    """``mma`` on numpy arrays without validation: a (n,16,16), b (n,16,8), c (n,16,8) -> (n,16,8).

    The caller guarantees the dtypes of ``MMA_TYPES`` and the shapes; ``out`` (n,16,8) of c's dtype may be given.
    """
    d = _chain_fast(a, b, c, get_arch(arch))
    if out is None:
        return d
    out[...] = d
    return out


def _check_chain(a, b, c) -> tuple:
    """Validate mma_chain's operands (static properties only: works on tracers); returns the output shape."""
    for name, x in (("a", a), ("b", b), ("c", c)):
        if not hasattr(x, "dtype") or not hasattr(x, "shape") or len(x.shape) < 2:
            raise ValueError(f"{name} must be an array with at least 2 dimensions, got {type(x).__name__}")
    a_dt, b_dt, c_dt = np.dtype(a.dtype), np.dtype(b.dtype), np.dtype(c.dtype)
    if a_dt not in (F16, BF16):
        raise ValueError(f"a must have dtype float16 or bfloat16, got {a_dt}")
    if b_dt != a_dt:
        raise ValueError(f"b must have a's dtype {a_dt}, got {b_dt}")
    if c_dt not in (F32, F16):
        raise ValueError(f"c must have dtype float32 or float16, got {c_dt}")
    mma_type(a_dt, c_dt)
    m, k = a.shape[-2:]
    kb, n = b.shape[-2:]
    if m % 16 or k % 16:
        raise ValueError(f"a must have shape (..., M, K) with M and K multiples of 16, got {tuple(a.shape)}")
    if kb != k or n % 8:
        raise ValueError(f"b must have shape (..., {k}, N) with N a multiple of 8, got {tuple(b.shape)}")
    if tuple(c.shape[-2:]) != (m, n):
        raise ValueError(f"c must have shape (..., {m}, {n}), got {tuple(c.shape)}")
    try:
        batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2]))
    except ValueError:
        raise ValueError(f"the batch dimensions of a {tuple(a.shape[:-2])}, b {tuple(b.shape[:-2])} and c "
                         f"{tuple(c.shape[:-2])} do not broadcast") from None
    return batch + (m, n)


def mma_chain(a, b, c, arch: str | Arch = "sm_90"):
    """The kernel's loop of mma.sync.m16n8k16 on whole matrices: for each k16 step s in order, every (m16, n8) tile
    of d gets d = mma(a_tile[:, 16s:16s+16], b_tile[16s:16s+16, :], d), starting from d = c.

    a (..., M, K) float16 / bfloat16 (row-major), b (..., K, N) of a's dtype (row-major K x N, e.g. K^T as a view),
    c (..., M, N) float32, or float16 with float16 inputs; M % 16 == 0, N % 8 == 0, K % 16 == 0; leading dimensions
    broadcast.  Returns d: c's dtype, shape (broadcast batch) + (M, N), bit for bit the hardware's.
    numpy arrays run the numpy engine's fast path; JAX arrays (or tracers) run ``mma_chain_generic`` (inside
    jax.jit, trace under ``flashsim.numerics.xp.enable_x64()``).  A wrong dtype or shape raises ValueError.
    """
    spec = get_arch(arch)
    _check_chain(a, b, c)
    xp = X.namespace(a, b, c)
    if X.is_numpy(xp):
        return _chain_fast(np.asarray(a), np.asarray(b), np.asarray(c), spec)
    return _chain_generic(xp, a, b, c, spec)


def mma_chain_generic(a, b, c, arch: str | Arch = "sm_90"):
    """``mma_chain`` computed by the one generic routine, whatever the namespace (numpy or JAX): the definition
    every engine's fast path is tested against."""
    spec = get_arch(arch)
    _check_chain(a, b, c)
    return _chain_generic(X.namespace(a, b, c), a, b, c, spec)


# ---------------------------------------------------------------------------------------------------------
# the generic routine


def _acc_int_dtype(xp, spec: Arch, is_bf16: bool):
    """int32 when a block's sum of truncated products provably fits (each |t| <= (2^p - 1)^2 * 2^(F - 2 (p - 1)),
    p = 11 (f16) or 8 (bf16) significand bits: 16 * 2^27 * (1 - 2^-10) < 2^31 at F = 25), int64 otherwise."""
    mbits = 7 if is_bf16 else 10
    max_term = ((1 << (mbits + 1)) - 1) ** 2 << max(spec.mma_fraction_bits - 2 * mbits, 0)
    return xp.int32 if spec.mma_block_k * max_term < (1 << 31) else xp.int64


def _pow2(xp, e, dtype):
    """2.0**e from the bits, e an integer array inside the normal range of ``dtype`` (float32 or float64)."""
    if np.dtype(dtype) == F32:
        return X.bitcast(X.shl(xp.astype(e, xp.int32) + 127, 23), np.float32)
    return X.bitcast(X.shl(xp.astype(e, xp.int64) + 1023, 52), np.float64)


def _decode_generic(xp, x, is_bf16: bool):
    """f16 / bf16 array -> (exact values: float32 for f16, float64 for bf16, inf / NaN kept; exponents: int8 for
    f16, int16 for bf16, subnormals at the format minimum, zeros at the sentinel)."""
    u = xp.astype(X.bitcast(x, np.uint16), xp.int32)
    if is_bf16:
        field, m, bias, mbits, top, vdt, edt, zero = (u >> 7) & 0xFF, u & 0x7F, 127, 7, 0xFF, xp.float64, \
            xp.int16, _ZERO_BF16
    else:
        field, m, bias, mbits, top, vdt, edt, zero = (u >> 10) & 0x1F, u & 0x3FF, 15, 10, 0x1F, xp.float32, \
            xp.int8, _ZERO_F16
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.maximum(field, 1) - bias
    exp = xp.astype(xp.where(sig == 0, zero, e), edt)
    val = xp.astype(sig, vdt) * _pow2(xp, e - mbits, vdt)
    val = xp.where(field == top, xp.where(m == 0, xp.asarray(np.inf, dtype=vdt), xp.asarray(np.nan, dtype=vdt)),
                   val)
    val = xp.where(u >= 0x8000, -val, val)
    return val, exp


def _decode_acc_generic(xp, c_bits, acc16: bool, e_zero: int):
    """Accumulator bits (uint32 f32 / uint16 f16) -> (negative, significand int64, exponent of its last bit,
    exponent taking part in E: subnormals at the minimum, zero -> e_zero)."""
    c = xp.astype(c_bits, xp.int64)
    if acc16:
        field, m, bias, mbits, sbit = (c >> 10) & 0x1F, c & 0x3FF, 15, 10, 15
    else:
        field, m, bias, mbits, sbit = (c >> 23) & 0xFF, c & 0x7FFFFF, 127, 23, 31
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.astype(xp.maximum(field, 1) - bias, xp.int32)
    return (c >> sbit) == 1, sig, e - mbits, xp.where(sig == 0, xp.asarray(e_zero, dtype=xp.int32), e)


def _chain_generic(xp, a, b, c, spec: Arch):
    X.require_x64(xp)
    is_bf16 = np.dtype(a.dtype) == BF16
    acc16 = np.dtype(c.dtype) == F16
    out_shape = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2])) + \
        (a.shape[-2], b.shape[-1])
    A = _decode_generic(xp, a, is_bf16)
    B = _decode_generic(xp, b, is_bf16)
    ubits = np.uint16 if acc16 else np.uint32
    d = xp.broadcast_to(X.bitcast(c, ubits), out_shape)
    kb = spec.mma_block_k

    def step(i, d):             # k16 step i: columns 16 i .. 16 i + 15 of A, the same rows of B
        As = tuple(_k_slice(xp, x, 16 * i, 16, -1) for x in A)
        Bs = tuple(_k_slice(xp, x, 16 * i, 16, -2) for x in B)
        for k0 in range(0, 16, kb):
            d = _block_generic(xp, As, Bs, k0, kb, d, acc16, spec, is_bf16)
        return d
    with X.errstate():      # numpy: inf / NaN products cast to int are garbage by design (overwritten)
        d = _fori(xp, a.shape[-1] // 16, step, d)
    return X.bitcast(d, np.float16 if acc16 else np.float32)


def _fori(xp, n: int, body, init):
    """``for i in range(n): x = body(i, x)``: a Python loop on numpy, ``lax.fori_loop`` on JAX.

    Structure, not arithmetic (the bits are the body's).  XLA fuses the whole unrolled chain into one loop over the
    outputs, and past about 7 k16 steps that loop stops being vectorised (measured, CPU time, one core: K = 112
    unrolled 0.5 ns per product, K = 128 2.1 ns); one compiled step per iteration runs at 0.21 ns for any K (two
    or four steps per iteration: 0.26, 0.28)."""
    if X.is_numpy(xp) or n <= 1:
        x = init
        for i in range(n):
            x = body(i, x)
        return x
    from jax import lax
    return lax.fori_loop(0, n, body, init)


def _k_slice(xp, x, start, size: int, axis: int):
    """x[..., start:start + size] along ``axis`` (-1 or -2); ``start`` a Python int or (JAX) a traced index."""
    if isinstance(start, (int, np.integer)):
        return x[..., start:start + size] if axis == -1 else x[..., start:start + size, :]
    from jax import lax
    return lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim + axis)


def _block_generic(xp, A, B, k0: int, kb: int, c_bits, acc16: bool, spec: Arch, is_bf16: bool):
    """One fused block of ``kb`` products (columns k0.. of A, rows k0.. of B) for every output: c bits -> d bits."""
    F = spec.mma_fraction_bits
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    av, ae = A
    bv, be = B
    c_neg, c_sig, c_x, ec = _decode_acc_generic(xp, c_bits, acc16, e_zero)
    # E: the largest exponent of the non-zero products (a zero factor's sentinel keeps its product below), then c
    e0 = None
    for k in range(k0, k0 + kb):
        ek = ae[..., :, k, None] + be[..., k, None, :]
        e0 = ek if e0 is None else xp.maximum(e0, ek)
    e0 = xp.astype(e0, xp.int32)
    min_product_exp = 2 * (-126 if is_bf16 else -14)
    E = xp.where(e0 < min_product_exp, ec, xp.maximum(e0, ec))
    # the products in units of 2^(E - F), truncated toward zero by the cast, summed exactly; the plain float sum of
    # c and the products tells inf and NaN (see the module docstring)
    vdt = av.dtype
    if np.dtype(vdt) == F32:
        scale = _pow2(xp, xp.minimum(F - E, 125), np.float32)
    else:
        scale = _pow2(xp, F - E, np.float64)
    idt = _acc_int_dtype(xp, spec, is_bf16)
    fsum = xp.astype(X.bitcast(c_bits, np.float16 if acc16 else np.float32), vdt)
    acc = None
    for k in range(k0, k0 + kb):
        prod = av[..., :, k, None] * bv[..., k, None, :]
        t = xp.astype(prod * scale, idt)
        acc = t if acc is None else acc + t
        fsum = fsum + prod
    # c in the same units (integer shifts of its significand: truncation toward zero of the magnitude)
    sh = c_x - (E - F)
    tc = xp.where(sh >= 0, X.shl(c_sig, xp.clip(sh, 0, 62)), X.shr(c_sig, xp.clip(-sh, 0, 62)))
    total = xp.astype(acc, xp.int64) + xp.where(c_neg, -tc, tc)
    if idt == xp.int64:     # an inf / NaN product's int64 cast is arbitrary: keep the (overwritten) total small
        total = xp.where(xp.isfinite(fsum), total, xp.zeros_like(total))
    # one rounding: f32 toward zero with |value| >= 2^128 -> inf (the H200), f16 to nearest even; zero -> +0
    fmt = formats.get_format("f16" if acc16 else "f32")
    ut = xp.uint16 if acc16 else xp.uint32
    d = X.bitcast(rounding.round_scaled(total, E - F, fmt, "rne" if acc16 else "rz", overflow="inf",
                                        signed_zero=False), fmt.uint)
    inf_bits = xp.where(fsum < 0, xp.asarray(fmt.inf_bits | fmt.sign_mask, dtype=ut),
                        xp.asarray(fmt.inf_bits, dtype=ut))
    d = xp.where(xp.isinf(fsum), inf_bits, d)
    return xp.where(xp.isnan(fsum), xp.asarray(fmt.canonical_nan, dtype=ut), d)


# ---------------------------------------------------------------------------------------------------------
# the numpy engine's fast path


def _chain_fast(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch) -> np.ndarray:
    """``mma_chain`` for numpy arrays (shapes and dtypes already checked).

    Output (16, 8) tiles are indexed (nt, mt, batch element); a chunk of n batch elements is transposed and decoded
    once (A as (K, 16, MT * n), B as (K, NT, 8, n)); then for each nt the MT * n tiles of that column block run as
    one chain, with A used in place and B's column block repeated over mt (a copy with long contiguous rows).
    """
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    M, K = a.shape[-2:]
    N = b.shape[-1]
    out = np.empty(batch + (M, N), c.dtype)
    if out.size == 0:
        return out
    if K == 0:
        out[...] = c
        return out
    rounding.check_fp_environment()         # the float32 tricks below need gradual underflow (no FTZ / DAZ)
    nb = math.prod(batch)
    MT, NT = M // 16, N // 8
    is_bf16 = a.dtype == BF16
    a3, ia = _flat_batch(a, batch)          # a3 (nba, M, K), ia (nb,) row of a3 for each batch element
    b3, ib = _flat_batch(b, batch)
    c3, ic = _flat_batch(c, batch)
    out3 = out.reshape(nb, M, N)
    step = max(1, _CHUNK // MT)
    with np.errstate(all="ignore"):
        for s in range(0, nb, step):
            e = min(nb, s + step)
            n = e - s
            # bits, batch last: (n, M, K) -> (M, K, n) -> (K, 16, MT, n); (n, K, N) -> (K, NT, 8, n)
            ua = _batch_last(_take(a3, ia, s, e).view(np.uint16))
            ua = ua.reshape(MT, 16, K, n).transpose(2, 1, 0, 3) if MT > 1 else ua.reshape(16, K, n).swapaxes(0, 1)
            ua = np.ascontiguousarray(ua)
            ub = _batch_last(_take(b3, ib, s, e).view(np.uint16)).reshape(K, NT, 8, n)
            pdt = _product_dtype((ua, ub), is_bf16, spec.mma_fraction_bits)
            av, ea, sa = _inputs(ua, is_bf16, pdt)
            av, ea = av.reshape(K, 16, MT * n), ea.reshape(K, 16, MT * n)
            bv, eb, sb = _inputs(ub, is_bf16, pdt)
            cc = _batch_last(_take(c3, ic, s, e)).reshape(MT, 16, NT, 8, n)
            dd = np.empty((MT, 16, NT, 8, n), c.dtype)
            for nt in range(NT):
                if MT == 1:
                    bvn, ebn = bv[:, nt], eb[:, nt]
                else:
                    bvn = np.broadcast_to(bv[:, nt, :, None], (K, 8, MT, n)).reshape(K, 8, MT * n)
                    ebn = np.broadcast_to(eb[:, nt, :, None], (K, 8, MT, n)).reshape(K, 8, MT * n)
                ct = np.ascontiguousarray(cc[:, :, nt].transpose(1, 2, 0, 3)).reshape(16, 8, MT * n)
                d = _chain_tiles(av, ea, sa, bvn, ebn, sb, ct, spec, is_bf16)
                dd[:, :, nt] = d.reshape(16, 8, MT, n).transpose(2, 0, 1, 3)
            out3[s:e] = dd.reshape(M * N, n).T.reshape(n, M, N)
    return out


def _batch_last(x: np.ndarray) -> np.ndarray:
    """(n, R, C) -> (R, C, n), contiguous: a 2-D transpose (several times faster in numpy than the same permutation
    written as one strided copy of a 3-D view)."""
    n = x.shape[0]
    return np.ascontiguousarray(x.reshape(n, -1).T).reshape(x.shape[1:] + (n,))


def _flat_batch(x: np.ndarray, batch: tuple):
    """x (bx..., R, C) with bx broadcasting to ``batch`` -> (x3 (prod(bx), R, C), index (prod(batch),) into x3),
    or (x3, None) when bx == batch (the identity)."""
    bx = x.shape[:-2]
    x3 = x.reshape((-1,) + x.shape[-2:]) if x.ndim > 2 else x[None]
    if bx == batch:
        return x3, None
    pad = (1,) * (len(batch) - len(bx)) + bx
    idx = np.broadcast_to(np.arange(math.prod(bx)).reshape(pad), batch).ravel()
    return x3, idx


def _take(x3: np.ndarray, idx, s: int, e: int) -> np.ndarray:
    return x3[s:e] if idx is None else x3[idx[s:e]]


def _product_dtype(bits: tuple, is_bf16: bool, F: int):
    """float32 products, or float64 for bf16 operands with an exponent outside +-X, X = (125 - F) // 2 (there
    float32 products could leave the normal range, or the scale 2^(F - E) overflow)."""
    if not is_bf16:
        return F32
    x = (125 - F) // 2
    lo, hi = (127 - x) << 7, (127 + x) << 7
    for u in bits:
        mag = u & 0x7FFF
        if ((mag != 0) & ((mag < lo) | (mag >= hi + 128))).any():
            return F64
    return F32


def _chain_tiles(av, ea, sa, bv, eb, sb, c, spec: Arch, is_bf16: bool) -> np.ndarray:
    """The chain on one chunk of tiles: decoded A (K, 16, n), B (K, 8, n) (values, exponents, any non-finite),
    c (16, 8, n) of the accumulator's dtype -> d (16, 8, n) of that dtype.

    Between blocks the accumulator is a float32 array holding the rounded value exactly (f16 values are f32
    values), with ec its exponent as the next block's E needs it."""
    K = av.shape[0]
    F = spec.mma_fraction_bits
    acc16 = c.dtype == F16
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    # a zero c must take e_zero unless every non-zero product's exponent (>= -28 for f16) is above the format's
    # minimum anyway (f16 inputs, f32 accumulation: then min(-126, e_zero) never wins)
    zero_fix = acc16 or is_bf16
    c32 = _f16_to_f32(c) if acc16 else c          # c is a private array of _chain_fast
    sc = bool((~np.isfinite(c32)).any())
    ec = _accumulator_terms(c32, acc16, e_zero, zero_fix)
    min_product_exp = 2 * (-126 if is_bf16 else -14)
    block = spec.mma_block_k
    idt = _acc_int_dtype(np, spec, is_bf16)
    for k0 in range(0, K, block):
        ks = slice(k0, k0 + block)
        value, lo, hi = _block(av[ks], bv[ks], ea[ks], eb[ks], c32, ec, F, min_product_exp, idt)
        if sa or sb or sc:
            _specials(av[ks], bv[ks], c32, value)
            sc = True                       # the accumulator may now hold inf / NaN
        # bounds from E: a non-zero |value| lies in [2^(E - F), 2^(E + 7)) (|total| < 17 * 2^(F + 2))
        big = hi + 7 > (15 if acc16 else 127)
        c32 = _round(value, acc16, tiny=lo - F < (-25 if acc16 else -126), big=big)
        if not sc and big:
            sc = bool(np.isinf(c32).any())
        ec = _accumulator_terms(c32, acc16, e_zero, zero_fix)
    if acc16:
        return _f32_to_f16_exact(c32, sc)
    if sc:
        c32.view(np.uint32)[np.isnan(c32)] = 0x7FFFFFFF
    return c32


# decoding (integer bit tricks: numpy's float16 -> float32 cast is slow on many builds)

_TWO_112 = np.float32(2.0 ** 112)


def _inputs(x16: np.ndarray, is_bf16: bool, pdt):
    """f16/bf16 bits (any shape, contiguous) -> (values in pdt, exponents, any non-finite).

    Values are exact, inf and NaN included.  Exponents: subnormals clamped to the format minimum; zeros get a
    sentinel so low that a product with a zero factor is below every product of non-zero factors (int8 -64 for
    f16, int16 -1000 for bf16).
    """
    u = x16.astype(np.uint32)
    if is_bf16:
        u <<= 16
        vals = u.view(F32)
        field = (u >> 23) & 0xFF
        e = (np.maximum(field, _full(1, field)) - 127).astype(np.int16)
        e[(u & 0x7FFFFFFF) == 0] = _ZERO_BF16
        special = bool((field == 0xFF).any())
        if pdt == F64:
            vals = vals.astype(F64)
        return vals, e, special
    # f16: the magnitude bits shifted into a float32 are the value times 2^-112, subnormals included
    mag = u & 0x7FFF
    field = mag >> 10
    e = (np.maximum(field, _full(1, field)).view(np.int32) - 15).astype(np.int8)
    e[mag == 0] = _ZERO_F16
    top = field == 0x1F
    special = bool(top.any())
    if special:
        nan = top & (mag != 0x7C00)
    u ^= mag                   # the sign bit alone
    u <<= 16
    mag <<= 13
    u |= mag
    vals = u.view(F32)
    vals *= _TWO_112
    if special:
        vals[top] = np.copysign(np.float32(np.inf), vals[top])
        vals[nan] = np.nan
    return vals, e, special


def _accumulator_terms(c32: np.ndarray, acc16: bool, e_zero: int, zero_fix: bool) -> np.ndarray:
    """The exponent with which c (float32 array of exact f32 / f16 values) joins E: its own, clamped to the
    format's minimum for subnormals (-126 / -14); e_zero for zero if ``zero_fix`` (else the clamp value)."""
    e = (c32.view(np.int32) >> 23) & 0xFF
    e -= 127
    np.maximum(e, _full(-14 if acc16 else -126, e), out=e)
    if zero_fix:
        e[c32 == 0] = e_zero
    return e


_CONSTANTS: dict = {}


def _full(value: int, like: np.ndarray) -> np.ndarray:
    """A cached constant array shaped like ``like``: numpy's maximum / minimum against a scalar take a slow loop
    (about ten times the instructions of the array-array loop)."""
    key = (value, like.shape, like.dtype.str)
    arr = _CONSTANTS.get(key)
    if arr is None:
        if len(_CONSTANTS) > 64:
            _CONSTANTS.clear()
        arr = _CONSTANTS[key] = np.full(like.shape, value, like.dtype)
        arr.flags.writeable = False
    return arr


def _block(av, bv, ea, eb, c32, ec, F, min_product_exp, idt):
    """One fused block: (the exact float64 value of the sum of truncated products and truncated c, before
    rounding; min E; max E)."""
    nk = av.shape[0]
    shape = c32.shape
    # E = max over the terms' exponents
    emax = np.empty(shape, ea.dtype)
    tmp = np.empty(shape, ea.dtype)
    np.add(ea[0, :, None, :], eb[0, None, :, :], out=emax)
    for k in range(1, nk):
        np.add(ea[k, :, None, :], eb[k, None, :, :], out=tmp)
        np.maximum(emax, tmp, out=emax)
    none = emax.min() < min_product_exp           # some output has no non-zero product: E = ec there
    E = emax.astype(np.int32)
    if none:
        nop = E < min_product_exp
        E[nop] = -(1 << 20)
    np.maximum(E, ec, out=E)
    lo, hi = int(E.min()), int(E.max())
    # products scaled to units of 2^(E - F), truncated toward zero (float -> int cast), summed in idt.  Only
    # outputs without a non-zero product can push 2^(F - E) past float32's range; they take c's value below
    if av.dtype == F32:
        S = (F + 127) - E
        if none:
            np.minimum(S, _full(252, S), out=S)
        S <<= 23
        scale = S.view(F32)
    else:
        scale = _pow2_f64(F - E)
    acc = np.empty(shape, idt)
    prod = np.empty(shape, av.dtype)
    term = np.empty(shape, idt)
    for k in range(nk):
        np.multiply(av[k, :, None, :], bv[k, None, :, :], out=prod)
        np.multiply(prod, scale, out=prod)
        if k == 0:
            np.copyto(acc, prod, casting="unsafe")      # float -> int truncates toward zero
        else:
            np.copyto(term, prod, casting="unsafe")
            np.add(acc, term, out=acc)
    # c in the same units: c * 2^(F - E) < 2^(F + 1) is exact (or below 1, truncating to 0 anyway), trunc; the
    # total (< 2^(F + 7)) and total * 2^(E - F) are exact in float64
    if av.dtype == F32:
        tc = c32 * scale
        np.trunc(tc, out=tc)
        unit = scale.astype(F64)
    else:
        tc = c32 * scale
        np.trunc(tc, out=tc)
        unit = scale
    total = acc.astype(F64)
    total += tc
    total /= unit
    if none:                   # no non-zero product: the result is c (exact at F >= 23 bits), -0 -> +0
        total[nop] = c32[nop] + np.float32(0.0)
    return total, lo, hi


def _round(v: np.ndarray, acc16: bool, tiny: bool = True, big: bool = True) -> np.ndarray:
    """Round the exact float64 values v once (v is consumed): f32 toward zero with |v| >= 2^128 -> inf, f16 to
    nearest even (overflow -> inf); a zero result is +0; inf and NaN pass.  Returns float32 (f16 values are exact
    in it).  ``tiny`` (f32) / ``big`` (f16): whether some |v| may lie in the f32 subnormal range / round past the
    f16 range (False: skip that check; the f32 overflow needs none)."""
    if not acc16:
        v.view(np.int64)[...] &= ~np.int64((1 << 29) - 1)      # 24 significant bits, toward zero
        if tiny:
            small = np.abs(v) < 2.0 ** -126
            if small.any():                                     # f32 subnormal range: multiples of 2^-149
                v[small] = np.trunc(v[small] * 2.0 ** 149) * 2.0 ** -149 + 0.0
        return v.astype(F32)                    # exact, or inf for |v| >= 2^128 (still >= 2^128 after the mask)
    # f16: m = rint(|v| * 2^(10 - e)) at the value's f16 exponent e (>= -14), then m * 2^(e - 10)
    a = np.abs(v)
    e = (a.view(np.int64) >> 52) - 1023
    np.maximum(e, _full(-14, e), out=e)
    m = a * ((1033 - e) << 52).view(F64)
    np.rint(m, out=m)
    m *= ((e + 1013) << 52).view(F64)
    if big:
        m[m >= 65536.0] = np.inf
    np.copysign(m, v, out=m)
    m += 0.0
    return m.astype(F32)


def _pow2_f64(e: np.ndarray) -> np.ndarray:
    """2.0**e for int arrays with -1022 <= e <= 1023, built from the bits (np.ldexp is slow)."""
    return ((e.astype(np.int64) + 1023) << 52).view(F64)


def _f16_to_f32(h: np.ndarray) -> np.ndarray:
    """float16 -> float32 exactly, through the bits (numpy's own cast is a slow scalar loop): the magnitude bits
    shifted into a float32 are the value times 2^-112 (subnormals included, by gradual underflow); inf / NaN
    patched."""
    u = h.view(np.uint16).astype(np.uint32)
    mag = u & 0x7FFF
    out = ((u ^ mag) << 16) | (mag << 13)
    v = out.view(F32)
    v *= _TWO_112
    top = mag >= 0x7C00
    if top.any():
        v[top & (mag == 0x7C00)] = np.copysign(np.float32(np.inf), v[top & (mag == 0x7C00)])
        v[mag > 0x7C00] = np.nan
    return v


def _f32_to_f16_exact(x: np.ndarray, special: bool) -> np.ndarray:
    """float32 values exactly representable in f16 (or inf / NaN when ``special``) -> float16, through the bits:
    normal f16 values re-biased, subnormal ones m * 2^-24 with m = |x| * 2^24; NaN -> 0x7FFF."""
    b = x.view(np.uint32)
    field = (b >> 23) & 0xFF
    bits = ((field - 112) << 10) | ((b >> 13) & 0x3FF)
    sub = field < 113
    if sub.any():
        bits[sub] = (np.abs(x[sub]) * np.float32(2.0 ** 24)).astype(np.uint32)
    if special:
        bits[field == 0xFF] = 0x7C00
        bits[np.isnan(x)] = 0x7FFF
    bits |= (b >> 16) & 0x8000
    return bits.astype(np.uint16).view(F16)


def _specials(av, bv, c32, value) -> None:
    """Overwrite the values of outputs touched by inf / NaN with NaN or the signed inf (float64 products)."""
    shape = value.shape
    nan = np.isnan(c32)
    pinf = c32 == np.inf
    ninf = c32 == -np.inf
    p = np.empty(shape, F64)
    for k in range(av.shape[0]):
        np.multiply(av[k, :, None, :], bv[k, None, :, :], out=p, dtype=F64)
        nan |= np.isnan(p)
        pinf |= p == np.inf
        ninf |= p == -np.inf
    nan |= pinf & ninf
    value[pinf] = np.inf
    value[ninf] = -np.inf
    value[nan] = np.nan
