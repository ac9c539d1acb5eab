"""Bit-exact model of ``mma.sync.aligned.m16n8k16.row.col`` (f16 / bf16 inputs): one routine for every engine.

The model (MMA-Sim, arXiv:2511.10909; Khattak & Mikaitis, arXiv:2512.07004; tests/data/mma_sm90.npz), per output
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
numpy and as one compiled step in a ``lax.fori_loop`` under JAX (see ``_fori``: structure only); in a fused Triton
kernel (``xp.fused_kernel``) the step reads its columns of A and rows of B from the decoded operands staged in memory
(``xp.staged``: Triton cannot index a value by k), and where that kernel is compiled for the GPU with inline PTX
(``xp.ptx_on``, the default there) a term's cast is one cvt.rzi and an f32 result's rounding one cvt.rz.f32.f64 of
the exact float64 value (``_round_rz_ptx``), held equal to the integer forms on the GPU by
tests/test_engine_pallas.py.

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

The numpy engine's fast path (``_chain_fast``, taken by ``mma_chain`` / ``mma`` for numpy arrays): one compiled
kernel (flashsim/numerics/_tensorcore_numba.py, numba, ``cache=True``, ``nogil``) for a whole batch of chains, in
integer arithmetic only (no float operation touches a value, so no rounding mode, FTZ / DAZ or FMA contraction
can act on it).  Per batch element it decodes both operands from their bits into int32 pairs (signed significand
s, exponent e: value = s * 2^(e - p), p = 10 for f16, 7 for bf16; subnormals at the format minimum; zero and
inf / NaN as codes below every real exponent, with s = 0), then per output element and fused block, with the
arch's F:
* E = max(c's exponent (e_zero for zero c), max over k of ea + eb): exactly the generic routine's E (a product
  with a zero or special factor sits below every other term);
* each product's term t = sign * ((|sa * sb| << L) >> min(E - ea - eb + R, 31)), L = max(F - 2p, 0), R =
  max(2p - F, 0): |sa * sb| < 2^22 is exact, the shift is truncation toward zero of the magnitude at 2^(E - F),
  and a clamped shift gives 0 exactly where the unclamped one would (the shifted value is below 2^(22 + L) <=
  2^31); the block's terms are summed in int32 (int64 when ``_acc_int_dtype`` says int32 could overflow: F = 27
  in the tests), then in int64 with c's term, c's significand shifted to units of 2^(E - F) (toward zero);
* the one rounding from the exact int64 total: its bit length (count of leading zeros) gives the leading
  exponent; f32: the top 24 bits (or the bits above 2^-149) kept, |v| >= 2^128 -> inf; f16: to nearest even
  from the dropped bits against half; the carry moves into the exponent field by addition; a zero result is +0;
* outputs that meet inf or NaN (flagged per block from the codes, and from c's bits) are redone by the specials
  rule; the rounded bits are the next block's or k16 step's c, decoded again from the bits.
The batch's broadcast dimensions become index arrays (nothing is materialised; an operand shared by consecutive
batch elements is decoded once), a transposed view such as K^T is read through its C-contiguous base, and the
accumulator is bits (uint32 / uint16) throughout: besides the output, memory is a few (M, K) / (K, N) scratch
arrays per thread.  Layout for speed (AVX-512 on this machine): the loops over an output row's N columns run 16
int32 lanes wide, two rows at a time (they share B's loads) and four products per pass; narrow outputs (N < 16 <
M: single mmas) run as d^T = B^T A^T + c^T, the same arithmetic per element, so that the lanes run over M.
Batches with enough work are split over threads (FLASHSIM_MMA_THREADS, default the CPUs this process may use, at
most 8).  Block sizes other than 4, 8 and 16 (no preset has one) and a process without numba run the generic
routine on numpy instead (numba missing: with one RuntimeWarning).  Every case is checked bit for bit against the
generic routine in tests/test_tensorcore_engines.py (hypothesis on raw bits, categories, the kernel's own edges),
and the H200 capture through ``mma``.

Compilation: numba compiles the kernel (its decoder included) once per accumulator type (f32 / f16; an int64-sum
variant only for a fraction width past the presets) on first use and caches the machine code on disk (``__pycache__``
beside the module, or NUMBA_CACHE_DIR).  Measured on this machine with a fresh NUMBA_CACHE_DIR: the first f32 chain
of a process takes 3.3 s (importing numba 0.2 s, compiling 3.1 s), the first f16 chain after it 2.6 s; with the
cache, 0.30 s for the first call (importing numba and loading the cache) and 0.04 s for the other type.  So the
first ``flashsim emulate`` ever (its default problem runs both types) takes 6.6 s where the numpy code took 0.37 s,
and every later one 0.65 s.

Checked against: the Fraction oracle (numerics.reference.mma_ref), mmasim on every arch it knows, and an H200
capture of 7.2 million outputs (tests/test_mma_silicon.py, both engines), which also refutes every neighbouring
model.

Measured (``python3 benchmarks/bench_mma.py --engines``: AMD EPYC, 2 shared cores with AVX-512, numpy 2.4.6,
numba 0.68.1, jax 0.10.2 on the CPU; the emulator's chains for 64 CUDA blocks of 128 query rows, d = 128, kv_tile
64; ns per product = CPU time / (outputs x K), best of 5, best over 3-6 runs on the shared machine; "numpy passes"
is the previous fast path (six numpy passes per product: numpy's floor), run from the parent commit in the same
session; "2 threads" is wall time, when the second core happened to be free):

    chain             numpy passes   numba 1 thread   numba 2 threads (wall)   numpy generic   jax generic (jit)
    S = Q K^T, f32        0.76           0.16               0.083                   4.3            0.22
    O += P V, f32         0.73           0.13               0.068                   4.0            0.21
    O += P V, f16         0.90           0.15               0.074                   4.5            0.23

Per product the kernel spends about 0.08 ns on the products' terms (ten int32 operations per product, 16 lanes),
0.025 on E, 0.035-0.05 on the rounding (int64 lanes; f16's is dearer) and 0.02 on the rest.  Single instructions
(``python3 benchmarks/bench_mma.py --batch 8192``, ``flashsim.mma`` on 8192 independent mmas, the transposed
layout): 2.3 / 2.8 / 2.5 us per mma before (f32.f16 / f16.f16 / f32.bf16), now 1.25 / 1.28 / 1.23 on one thread and
0.65 / 0.67 / 0.63 on two.

End to end (``python benchmarks/bench_emulator.py --n 2048 --jax-n 0 --reps 3``: flashsim.attention, one head,
N = 2048, d = 128, against a plain float64 numpy attention in the same process, 0.042 s; best of 3 runs): before
1.35 s (f32 P@V, 30x) and 1.39 s (f16 P@V, 31x); now 0.26 s (6.0x) and 0.39 s (8.6x) with two threads, 0.34 s
(8.0x) and 0.38 s (9.0x) on one (FLASHSIM_MMA_THREADS=1).  The tensor cores are now about half of the time (0.17 s
of 0.35 on one thread); the rest is the SFU model's table lookups (random reads of 32 MB tables), the f16
conversions and the exact f32 ops (cProfile of flashsim.attention at that size).
"""

from __future__ import annotations

import functools
import math
import os
import warnings

import ml_dtypes
import numpy as np

from ..arch import Arch, get_arch
from . import formats, ieee32, rounding
from . import xp as X

__all__ = [
    "mma",
    "mma_chain",
    "mma_chain_generic",
    "mma_unchecked",
    "mma_type",
    "MMA_TYPES",
    "mma_k32",
    "k32_type",
    "mma_chain_s8",
    "mma_chain_k32",
]

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

_ZERO_F16 = -64  # exponent of a zero f16 input (int8): ea + eb of a zero product <= -48 < -28
_ZERO_BF16 = -1000  # exponent of a zero bf16 input (int16): ea + eb of a zero product <= -872 < -252


def mma_type(a_dtype, c_dtype) -> str:
    """PTX type string ("f32.f16.f16.f32", ...) for input dtype ``a_dtype`` and accumulator ``c_dtype``."""
    key = (np.dtype(a_dtype), np.dtype(c_dtype))
    if key not in MMA_TYPES:
        raise ValueError(
            f"no mma.sync m16n8k16 for inputs {key[0]} with accumulator {key[1]}; "
            f"supported: {', '.join(MMA_TYPES.values())}"
        )
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
    """d = a @ b + c as ``mma.sync.aligned.m16n8k16.row.col`` computes it on ``arch``, bit for bit (8-bit inputs:
    ``mma.sync.aligned.m16n8k32.row.col``, see ``mma_k32``: a (..., 16, 32) and b (..., 32, 8) int8 with c int32, or
    float8_e4m3fn / float8_e5m2 with c float32 / float16).

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
    if isinstance(a, np.ndarray) and a.dtype in (S8, E4M3, E5M2):  # 8-bit inputs: m16n8k32 (it checks them)
        for name, x in (("b", b), ("c", c)):
            if not isinstance(x, np.ndarray):
                raise ValueError(f"{name} must be a numpy array, got {type(x).__name__}")
        run = functools.partial(mma_k32, arch=spec)
        return _on_jax(run, a, b, c) if backend == "jax" else run(a, b, c)
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
            raise ValueError(
                f"{name}'s batch dimensions {x.shape[:-2]} do not broadcast to c's batch dimensions {batch}"
            )
    if backend == "jax":
        return _on_jax(_jitted_chain(spec), a, b, c)
    return _chain_fast(a, b, c, spec)


def _on_jax(fn, *arrays):
    """``fn`` on JAX copies of numpy ``arrays`` with 64-bit types, the result back as numpy (``mma``'s jax backend)."""
    try:
        import jax.numpy as jnp
    except ImportError as e:
        raise ValueError(f"backend='jax' needs jax: pip install 'flashsim[jax]' ({e})") from None
    with X.enable_x64():
        return np.asarray(fn(*(jnp.asarray(x) for x in arrays)))


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


def mma_unchecked(
    a: np.ndarray, b: np.ndarray, c: np.ndarray, arch: str | Arch = "sm_90", out: np.ndarray | None = None
) -> np.ndarray:
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
        raise ValueError(
            f"the batch dimensions of a {tuple(a.shape[:-2])}, b {tuple(b.shape[:-2])} and c "
            f"{tuple(c.shape[:-2])} do not broadcast"
        ) from None
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


def _sum_int_dtype(xp, block: int, F: int, ma: int, mb: int):
    """int32 when a block of ``block`` truncated products provably sums in it, int64 otherwise: each |t| <=
    (2^(ma+1) - 1)(2^(mb+1) - 1) 2^(F - ma - mb) for inputs of ma and mb fraction bits (f16: 16 terms of at most
    2^27 (1 - 2^-10) at F = 25 fit)."""
    max_term = ((1 << (ma + 1)) - 1) * ((1 << (mb + 1)) - 1) << max(F - ma - mb, 0)
    return xp.int32 if block * max_term < (1 << 31) else xp.int64


def _acc_int_dtype(xp, spec: Arch, is_bf16: bool):
    """``_sum_int_dtype`` for the arch's m16n8k16 blocks of f16 (10 fraction bits) or bf16 (7) products."""
    mbits = 7 if is_bf16 else 10
    return _sum_int_dtype(xp, spec.mma_block_k, spec.mma_fraction_bits, mbits, mbits)


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
        field, m, bias, mbits, top, vdt, edt, zero = (
            (u >> 7) & 0xFF,
            u & 0x7F,
            127,
            7,
            0xFF,
            xp.float64,
            xp.int16,
            _ZERO_BF16,
        )
    else:
        field, m, bias, mbits, top, vdt, edt, zero = (
            (u >> 10) & 0x1F,
            u & 0x3FF,
            15,
            10,
            0x1F,
            xp.float32,
            xp.int8,
            _ZERO_F16,
        )
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.maximum(field, 1) - bias
    exp = xp.astype(xp.where(sig == 0, zero, e), edt)
    val = xp.astype(sig, vdt) * _pow2(xp, e - mbits, vdt)
    val = xp.where(field == top, xp.where(m == 0, xp.asarray(np.inf, dtype=vdt), xp.asarray(np.nan, dtype=vdt)), val)
    val = xp.where(u >= 0x8000, -val, val)
    return val, exp


def _decode_acc_generic(xp, c_bits, acc16: bool, e_zero: int):
    """Accumulator bits (uint32 f32 / uint16 f16) -> (negative, significand int64, exponent of its last bit,
    exponent taking part in E: subnormals at the minimum, zero -> e_zero). The fields in int32 (the bits as
    unsigned values, so the shifts bring in zeros); only the significand is widened, for the shifts that align it."""
    c = xp.astype(c_bits, xp.uint32)
    if acc16:
        field, m, bias, mbits, sbit = (c >> 10) & 0x1F, c & 0x3FF, 15, 10, 15
    else:
        field, m, bias, mbits, sbit = (c >> 23) & 0xFF, c & 0x7FFFFF, 127, 23, 31
    field, m = xp.astype(field, xp.int32), xp.astype(m, xp.int32)
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.maximum(field, 1) - bias
    e_term = xp.where(sig == 0, xp.asarray(e_zero, dtype=xp.int32), e)
    return (c >> sbit) == 1, xp.astype(sig, xp.int64), e - mbits, e_term


def _chain_generic(xp, a, b, c, spec: Arch):
    X.require_x64(xp)
    is_bf16 = np.dtype(a.dtype) == BF16
    acc16 = np.dtype(c.dtype) == F16
    out_shape = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2])) + (
        a.shape[-2],
        b.shape[-1],
    )
    A = _decode_generic(xp, a, is_bf16)
    B = _decode_generic(xp, b, is_bf16)
    ubits = np.uint16 if acc16 else np.uint32
    d = xp.broadcast_to(X.bitcast(c, ubits), out_shape)
    kb = spec.mma_block_k
    if X.in_fused_kernel():  # Triton cannot index a value by k: the decoded operands are read back from memory,
        # exponents as int32 (the same values: Triton computes on int8 / int16 with a sign extension per operation)
        read_a, read_b = X.staged(*((v, xp.astype(e, xp.int32)) for v, e in (A, B)))

    def columns(i):  # k16 step i: the 16 columns of A (..., M, 1) and rows of B (..., 1, N), per array
        if X.in_fused_kernel():  # per k a tuple (value, exponent): regrouped per array
            return (
                list(zip(*(read_a(16 * i + j) for j in range(16)))),
                list(zip(*(read_b(16 * i + j) for j in range(16)))),
            )
        return (
            [X.pieces(_k_slice(xp, x, 16 * i, 16, -1), 1, -1) for x in A],
            [X.pieces(_k_slice(xp, x, 16 * i, 16, -2), 1, -2) for x in B],
        )

    def step(i, d):  # k16 step i: its fused blocks in order
        cols_a, rows_b = columns(i)
        for k0 in range(0, 16, kb):
            d = _block_generic(
                xp,
                tuple(c[k0 : k0 + kb] for c in cols_a),
                tuple(r[k0 : k0 + kb] for r in rows_b),
                d,
                acc16,
                spec,
                is_bf16,
            )
        return d

    with X.errstate():  # numpy: inf / NaN products cast to int are garbage by design (overwritten)
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
        return x[..., start : start + size] if axis == -1 else x[..., start : start + size, :]
    from jax import lax

    return lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim + axis)


def _over_k(xp, term, how: str, a, b, *per_output):
    """``how`` ("max" or "sum") over k of ``term(a[k], b[k], *per_output)`` for every output (..., M, N): a the
    block's columns of A, each (..., M, 1), b its rows of B, each (..., 1, N), ``per_output`` arrays (..., M, N).
    Structure only (the arithmetic is ``term``'s, and max and the integer sum are order-free): one (..., M, N) term
    per k, which XLA fuses into one loop over the outputs and a fused Triton kernel computes in registers from the
    columns and rows it loads (a broadcast over k cost it 2.7 times the instructions per emulated product:
    benchmarks/RESULTS.md, thirteenth round)."""
    out = None
    for a_k, b_k in zip(a, b):
        t = term(a_k, b_k, *per_output)
        out = t if out is None else (xp.maximum(out, t) if how == "max" else out + t)
    return out


def _block_generic(xp, A, B, c_bits, acc16: bool, spec: Arch, is_bf16: bool, fp8=None):
    """One fused block of products for every output: c bits -> d bits. A = (values, exponents) of the block's
    columns of A, each a list of kb arrays (..., M, 1); B the same of its rows of B, each (..., 1, N). ``fp8``
    (m16n8k32 with 8-bit float inputs, ``_Fp8Block``) replaces the m16n8k16 parameters (F, the smallest product
    exponent, the integer width) and may truncate f32 results further (Ada's 13 fraction bits)."""
    F = spec.mma_fraction_bits if fp8 is None else fp8.F
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    av, ae = A
    bv, be = B
    c_neg, c_sig, c_x, ec = _decode_acc_generic(xp, c_bits, acc16, e_zero)
    # E: the largest exponent of the non-zero products (a zero factor's sentinel keeps its product below), then c
    e0 = xp.astype(_over_k(xp, lambda ea, eb: ea + eb, "max", ae, be), xp.int32)
    min_product_exp = 2 * (-126 if is_bf16 else -14) if fp8 is None else fp8.min_product_exp
    E = xp.where(e0 < min_product_exp, ec, xp.maximum(e0, ec))
    # the products in units of 2^(E - F), truncated toward zero by the cast, summed exactly; the plain float sum of
    # c and the products tells inf and NaN (see the module docstring: in any order)
    vdt = av[0].dtype
    if np.dtype(vdt) == F32:
        scale = _pow2(xp, xp.minimum(F - E, 125), np.float32)
    else:
        scale = _pow2(xp, F - E, np.float64)
    idt = _acc_int_dtype(xp, spec, is_bf16) if fp8 is None else fp8.int_dtype(xp)
    acc = _over_k(xp, lambda va, vb, sc: X.trunc_to_int(va * vb * sc, idt), "sum", av, bv, scale)
    fsum = xp.astype(X.bitcast(c_bits, np.float16 if acc16 else np.float32), vdt) + _over_k(
        xp, lambda va, vb: va * vb, "sum", av, bv
    )
    # c in the same units (integer shifts of its significand: truncation toward zero of the magnitude)
    sh = c_x - (E - F)
    tc = xp.where(sh >= 0, X.shl(c_sig, xp.clip(sh, 0, 62)), X.shr(c_sig, xp.clip(-sh, 0, 62)))
    total = xp.astype(acc, xp.int64) + xp.where(c_neg, -tc, tc)
    if idt == xp.int64:  # an inf / NaN product's int64 cast is arbitrary: keep the (overwritten) total small
        total = xp.where(xp.isfinite(fsum), total, xp.zeros_like(total))
    # one rounding: f32 toward zero with |value| >= 2^128 -> inf (the H200), f16 to nearest even; zero -> +0
    fmt = formats.get_format("f16" if acc16 else "f32")
    ut = xp.uint16 if acc16 else xp.uint32
    if X.ptx_on() and not acc16 and fp8 is None:  # a GPU's own f32 rounding toward zero of the exact value
        d = _round_rz_ptx(xp, total, E - F)
    else:
        d = X.bitcast(
            rounding.round_scaled(total, E - F, fmt, "rne" if acc16 else "rz", overflow="inf", signed_zero=False),
            fmt.uint,
        )
    if fp8 is not None and not acc16 and fp8.f32_result_frac_bits < 23:  # toward zero again, to fewer bits
        keep = ~np.uint32((1 << (23 - fp8.f32_result_frac_bits)) - 1)
        d = xp.where((d & 0x7F800000) == 0x7F800000, d, d & xp.asarray(keep, dtype=ut))
    inf_bits = xp.where(
        fsum < 0, xp.asarray(fmt.inf_bits | fmt.sign_mask, dtype=ut), xp.asarray(fmt.inf_bits, dtype=ut)
    )
    d = xp.where(xp.isinf(fsum), inf_bits, d)
    return xp.where(xp.isnan(fsum), xp.asarray(fmt.canonical_nan, dtype=ut), d)


def _round_rz_ptx(xp, total, e):
    """f32 bits of total * 2^e rounded toward zero as the H200's tensor cores round (``round_scaled``'s "rz" with
    overflow "inf" and an unsigned zero), in a fused kernel compiled for the GPU: total (int64; below 2^33 in
    magnitude for every block of 16 f16 / bf16 products, far below 2^53) is exact in float64, and so is its product
    with 2^e (-158 <= e <= 230: normal); ``cvt.rz.f32.f64`` rounds that once, keeping subnormals; |value| >= 2^128
    becomes inf of its sign (the conversion gives the largest finite number) and -0 becomes +0."""
    v = xp.astype(total, xp.float64) * _pow2(xp, e, np.float64)
    d = X.bitcast(X.ptx("cvt.rz.f32.f64 $0, $1;", np.float32, v), np.uint32)
    inf = xp.where(v < 0, xp.asarray(0xFF800000, dtype=xp.uint32), xp.asarray(0x7F800000, dtype=xp.uint32))
    d = xp.where(xp.abs(v) >= xp.asarray(2.0**128, dtype=xp.float64), inf, d)
    return xp.where(d == xp.asarray(0x80000000, dtype=xp.uint32), xp.zeros_like(d), d)


# ---------------------------------------------------------------------------------------------------------
# mma.sync.m16n8k32 with 8-bit inputs: s8 (exact) and FP8 (e4m3 / e5m2, mixed too): a native FP8 block on the same
# generic block routine, or (sm_90) ptxas's lowering onto the f16 m16n8k16 model

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
S8, S32 = np.dtype(np.int8), np.dtype(np.int32)
_FP8_FIELDS = {E4M3: (4, 3, 7), E5M2: (5, 2, 15)}  # exponent bits, fraction bits, bias
_ZERO_FP8 = -64  # exponent of a zero FP8 input (int8): ea + eb of a zero product <= -64 + 15 < -28
_K32_NAMES = {E4M3: "e4m3", E5M2: "e5m2", F32: "f32", F16: "f16"}


def k32_type(a_dtype, b_dtype, c_dtype) -> str:
    """PTX type string of mma.sync.m16n8k32 for these operand dtypes ("s32.s8.s8.s32", "f32.e4m3.e5m2.f32", ...)."""
    a, b, c = (np.dtype(x) for x in (a_dtype, b_dtype, c_dtype))
    if a == S8 and b == S8 and c == S32:
        return "s32.s8.s8.s32"
    if a in _FP8_FIELDS and b in _FP8_FIELDS and c in (F32, F16):
        return f"{_K32_NAMES[c]}.{_K32_NAMES[a]}.{_K32_NAMES[b]}.{_K32_NAMES[c]}"
    raise ValueError(
        f"no mma.sync m16n8k32 for a {a}, b {b}, c {c}: int8 x int8 + int32, or float8_e4m3fn / "
        "float8_e5m2 (mixed allowed) + float32 / float16"
    )


class _Fp8Block:
    """The FP8 parameters ``_block_generic`` takes for m16n8k32 on an arch (flashsim.arch: mma8_*)."""

    def __init__(self, spec: Arch, a_dt, b_dt):
        ea, ma, ba = _FP8_FIELDS[a_dt]
        eb, mb, bb = _FP8_FIELDS[b_dt]
        self.F = spec.mma8_fraction_bits
        self.block = spec.mma8_block_k
        self.f32_result_frac_bits = spec.mma8_f32_result_frac_bits
        self.min_product_exp = (1 - ba) + (1 - bb)  # the two formats' smallest exponents
        self.fraction_bits = (ma, mb)

    def int_dtype(self, xp):
        return _sum_int_dtype(xp, self.block, self.F, *self.fraction_bits)


def _decode_fp8(xp, x, dt):
    """FP8 array -> (exact values as float32, inf / NaN kept; exponents int8, subnormals at the format minimum,
    zeros at the sentinel). e4m3fn has no inf: S.1111.111 is NaN; e5m2 is IEEE-like."""
    ebits, mbits, bias = _FP8_FIELDS[dt]
    u = xp.astype(X.bitcast(x, np.uint8), xp.int32)
    field, m = (u >> mbits) & ((1 << ebits) - 1), u & ((1 << mbits) - 1)
    sig = xp.where(field == 0, m, m | (1 << mbits))
    e = xp.maximum(field, 1) - bias
    exp = xp.astype(xp.where(sig == 0, _ZERO_FP8, e), xp.int8)
    val = xp.astype(sig, xp.float32) * _pow2(xp, e - mbits, np.float32)
    top = (1 << ebits) - 1
    if dt == E4M3:
        val = xp.where((field == top) & (m == (1 << mbits) - 1), xp.asarray(np.nan, dtype=xp.float32), val)
    else:
        val = xp.where(
            field == top,
            xp.where(m == 0, xp.asarray(np.inf, dtype=xp.float32), xp.asarray(np.nan, dtype=xp.float32)),
            val,
        )
    val = xp.where(u >= 0x80, -val, val)
    return val, exp


# ptxas's lowering of an FP8 mma.sync.m16n8k32 onto the f16 mma (sm_90, ``Arch.mma8_on_f16_mma``): the column order
# of its two HMMA.16816, the low halves of the lane's 8-bit registers (k % 4 in {0, 1}) in the first, the high
# halves (k % 4 in {2, 3}) in the second (tools/sass_ops.py, tests/test_sass.py)
_F16_MMA_K_ORDER = tuple(k for k in range(32) if k % 4 < 2) + tuple(k for k in range(32) if k % 4 >= 2)


def _k32_on_f16_mma(xp, a, b, c, spec: Arch):
    """FP8 m16n8k32 steps (a (..., M, K), b (..., K, N), K a multiple of 32; each step's d the next step's c) as
    ptxas lowers them where the silicon has no FP8 mma (``Arch.mma8_on_f16_mma``, sm_90): the inputs unpacked to
    f16 (exact), each step's 32 columns in ``_F16_MMA_K_ORDER`` through the arch's f16 m16n8k16 model
    (``mma_chain``: two HMMA.16816, the second on the first's result) from +0, then the step's c added with one
    rounding to nearest (FADD / HADD2). On numpy ``mma_chain`` runs the compiled kernel."""
    K = a.shape[-1]
    order = xp.asarray((np.arange(0, K, 32)[:, None] + np.asarray(_F16_MMA_K_ORDER)[None, :]).ravel())
    a16 = formats.fp8_to_f16(xp.take(a, order, axis=-1))
    b16 = formats.fp8_to_f16(xp.take(b, order, axis=-2))
    zero = xp.zeros(tuple(c.shape[-2:]), dtype=c.dtype)
    d = c
    for s in range(0, K, 32):
        d = _add_c_last(xp, mma_chain(a16[..., s : s + 32], b16[..., s : s + 32, :], zero, spec), d)
    return d


def _add_c_last(xp, d, c):
    """The lowering's last instruction: c added to the HMMA result d with one rounding to nearest in the
    accumulator's type (f16, HADD2: the sum of two f16 values is exact in float64, then one rounding; f32: FADD,
    an IEEE add). d and c broadcast together."""
    shape = np.broadcast_shapes(tuple(d.shape), tuple(c.shape))
    d, c = xp.broadcast_to(d, shape), xp.broadcast_to(c, shape)
    with X.errstate():
        if np.dtype(d.dtype) == F16:
            return rounding.f64_to_f16(xp.astype(d, xp.float64) + xp.astype(c, xp.float64))
        return ieee32.add(d, c)


def mma_k32(a, b, c, arch: str | Arch = "sm_90"):
    """``mma.sync.aligned.m16n8k32.row.col`` with 8-bit inputs, bit for bit where flashsim has a model.

    a (..., 16, 32), b (..., 32, 8), c (..., 16, 8), leading dimensions broadcast (numpy or JAX arrays):
    * int8 x int8 + int32: the exact dot product plus c, wrapped to 32 bits (what the PTX ISA specifies without
      .satfinite; the H200 does exactly this on all 90,112 captured outputs, tests/data/mma_k32_sm90.npz);
    * float8_e4m3fn / float8_e5m2 (a and b may differ) + float32 / float16: sm_89 and sm_120, the fused-block
      model with the arch's FP8 parameters (flashsim.arch: ``mma8_*``, from MMA-Sim, checked against ``mmasim``;
      on numpy the compiled kernel, ``_chain_k32_fast``, where it applies, tested bit for bit against the generic
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
    whole = _fp8_chain_whole(xp, a, b, c, spec)
    return whole if whole is not None else _k32_fp8_generic(xp, a, b, c, spec)


def _fp8_chain_whole(xp, a, b, c, spec: Arch):
    """FP8 k32 steps (K a multiple of 32) computed on whole operands where the arch's model allows it, else None
    (the caller runs ``_k32_fp8_generic`` one step and tile at a time): sm_90's lowering onto the f16 mma, or on
    numpy the compiled kernel of a native FP8 block. The one place ``mma_k32`` and ``mma_chain_k32`` choose."""
    if spec.mma8_on_f16_mma:
        return _k32_on_f16_mma(xp, a, b, c, spec)
    if X.is_numpy(xp) and spec.mma8_block_k is not None:
        return _chain_k32_fast(a, b, c, spec)
    return None


def _k32_fp8_generic(xp, a, b, c, spec: Arch):
    """One FP8 mma.sync.m16n8k32 of a native FP8 block (``mma8_block_k``) on any array namespace (shapes and dtypes
    checked by ``mma_k32``): the 32 products in order through the arch's fused blocks, c in the first."""
    a_dt, b_dt = np.dtype(a.dtype), np.dtype(b.dtype)
    acc16 = np.dtype(c.dtype) == F16
    P = _Fp8Block(spec, a_dt, b_dt)
    A = tuple(X.pieces(x, 1, -1) for x in _decode_fp8(xp, a, a_dt))
    B = tuple(X.pieces(x, 1, -2) for x in _decode_fp8(xp, b, b_dt))
    out_shape = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2])) + (16, 8)
    bits = np.uint16 if acc16 else np.uint32
    d = xp.broadcast_to(X.bitcast(c, bits), out_shape)
    with X.errstate():
        for k0 in range(0, 32, P.block):
            d = _block_generic(
                xp,
                tuple(x[k0 : k0 + P.block] for x in A),
                tuple(x[k0 : k0 + P.block] for x in B),
                d,
                acc16,
                spec,
                False,
                fp8=P,
            )
    return X.bitcast(d, np.float16 if acc16 else np.float32)


def mma_chain_k32(a, b, c, arch: str | Arch = "sm_90"):
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
        whole = _fp8_chain_whole(xp, a, b, c, spec)
        if whole is not None:
            return whole
    lead = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]), tuple(c.shape[:-2]))
    at = xp.reshape(xp.broadcast_to(a, lead + (M, K)), lead + (M // 16, 1, 16, K))
    bt = xp.swapaxes(xp.reshape(xp.broadcast_to(b, lead + (K, N)), lead + (1, K, N // 8, 8)), -3, -2)
    d = xp.swapaxes(xp.reshape(xp.broadcast_to(c, lead + (M, N)), lead + (M // 16, 16, N // 8, 8)), -3, -2)
    for s in range(0, K, 32):
        d = mma_k32(at[..., s : s + 32], bt[..., s : s + 32, :], d, spec)
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


# ---------------------------------------------------------------------------------------------------------
# the numpy engine's fast path: the compiled kernel of flashsim/numerics/_tensorcore_numba.py

_KERNEL = None  # the numba kernel module once imported; False when numba cannot be imported


def _numba_kernel():
    """flashsim.numerics._tensorcore_numba, or None (with one RuntimeWarning per process) if numba cannot be
    imported: ``mma_chain`` / ``mma`` on numpy arrays then run the generic routine (same bits, ~25x slower)."""
    global _KERNEL
    if _KERNEL is None:
        try:
            from . import _tensorcore_numba as kernel
        except ImportError as e:
            warnings.warn(
                f"numba cannot be imported ({e}): flashsim's tensor-core model on numpy arrays runs its "
                f"generic routine, about 25x slower (pip install 'numba>=0.60')",
                RuntimeWarning,
                stacklevel=3,
            )
            kernel = False
        _KERNEL = kernel
    return _KERNEL or None


_THREAD_MIN = 1 << 22  # products per thread below which the kernel runs on the calling thread alone


def _threads() -> int:
    """Threads for the kernel: FLASHSIM_MMA_THREADS, else the CPUs this process may use (at most 8)."""
    env = os.environ.get("FLASHSIM_MMA_THREADS", "").strip()
    if env:
        if not env.isdigit():
            raise ValueError(f"FLASHSIM_MMA_THREADS must be a positive integer, got {env!r}")
        return max(1, int(env))
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


_POOL: dict = {}


def _pool(n: int):
    """A pool of n threads for this process (keyed by pid: a forked child must not reuse its parent's)."""
    key = (os.getpid(), n)
    pool = _POOL.get(key)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = _POOL[key] = ThreadPoolExecutor(n, thread_name_prefix="flashsim-mma")
    return pool


def _chain_fast(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch) -> np.ndarray:
    """``mma_chain`` for numpy arrays (shapes and dtypes already checked): the compiled kernel, or the generic
    routine where numba is missing."""
    kernel = _numba_kernel()
    if kernel is None or spec.mma_block_k not in (4, 8, 16):  # the kernel fuses products four at a time
        return _chain_generic(np, a, b, c, spec)
    e_zero = spec.mma_zero_exponent_f16 if c.dtype == F16 else spec.mma_zero_exponent_f32
    return _run_kernel(
        kernel, a, b, c, spec.mma_fraction_bits, spec.mma_block_k, e_zero, _acc_int_dtype(np, spec, a.dtype == BF16)
    )


def _chain_k32_fast(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch):
    """``mma_chain_k32`` (K a multiple of 32; one step is ``mma_k32``) with FP8 inputs on numpy arrays, for an arch
    with a native FP8 block (``mma8_block_k``): the compiled kernel with the arch's FP8 parameters, as
    ``_k32_fp8_generic``. None where the kernel does not apply (numba missing, a block size that is not a multiple
    of 4, or Ada's shortened f32 results): the caller runs the generic routine."""
    kernel = _numba_kernel()
    acc16 = c.dtype == F16
    if kernel is None or spec.mma8_block_k % 4 or (not acc16 and spec.mma8_f32_result_frac_bits < 23):
        return None
    ma, mb = _FP8_FIELDS[np.dtype(a.dtype)][1], _FP8_FIELDS[np.dtype(b.dtype)][1]
    F, block = spec.mma8_fraction_bits, spec.mma8_block_k
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    return _run_kernel(kernel, a, b, c, F, block, e_zero, _sum_int_dtype(np, block, F, ma, mb))


def _run_kernel(
    kernel, a: np.ndarray, b: np.ndarray, c: np.ndarray, F: int, block: int, e_zero: int, sum_dtype
) -> np.ndarray:
    """The compiled chain on numpy operands (f16 / bf16 or FP8; shapes already checked) with fraction bits F, the
    block size, c's zero exponent and the products' sum type (np.int32 / np.int64, ``_sum_int_dtype``).

    The kernel reads the inputs' bits (a transposed view, such as K^T, is passed as its C-contiguous base with a
    flag rather than copied) and decodes each batch element's operands into its own scratch; broadcast batch
    dimensions become index arrays (nothing is materialised); the accumulators are bits (uint32 / uint16)
    throughout.  Batches with enough work are split over threads (the kernel releases the GIL)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    M, K = a.shape[-2:]
    N = b.shape[-1]
    out = np.empty(batch + (M, N), c.dtype)
    if out.size == 0:
        return out
    if K == 0:
        out[...] = c
        return out
    nb = math.prod(batch)
    ubits = np.uint16 if c.dtype == F16 else np.uint32
    a3, ia = _flat_batch(a, batch)
    b3, ib = _flat_batch(b, batch)
    c3, ic = _flat_batch(c, batch)
    ua, ta = _bits(a3)
    ub, tb = _bits(b3)
    cb = _plain(c3.view(ubits))
    ia, ib, ic = (np.arange(nb) if x is None else _plain(x) for x in (ia, ib, ic))
    out3 = out.reshape(nb, M, N).view(ubits)
    # the kernel vectorises over the columns of its right operand: with narrow outputs (N = 8: single mmas) it runs
    # d^T = B^T A^T + c^T instead, the same arithmetic per element
    transposed = N < 16 and M > N
    codes = {F16: kernel.F16, BF16: kernel.BF16, E4M3: kernel.E4M3, E5M2: kernel.E5M2}  # the kernel's formats
    fa, fb = codes[np.dtype(a.dtype)], codes[np.dtype(b.dtype)]

    def run(lo, hi):
        kernel.chain(
            ua,
            ta,
            ia,
            ub,
            tb,
            ib,
            cb,
            ic,
            out3,
            lo,
            hi,
            F,
            block,
            e_zero,
            fa,
            fb,
            transposed,
            np.empty((2, M if transposed else N), sum_dtype),
        )

    parts = min(_threads(), nb, max(1, nb * M * N * K // _THREAD_MIN))
    if parts == 1:
        run(0, nb)
    else:
        cuts = [nb * p // parts for p in range(parts + 1)]
        for f in [_pool(parts).submit(run, cuts[p], cuts[p + 1]) for p in range(parts)]:
            f.result()
    return out


def _bits(x3: np.ndarray):
    """The bits of an (n, R, C) f16 / bf16 / FP8 operand for the kernel: (C-contiguous uint16 or uint8 (n, R, C),
    False), or (its transpose (n, C, R), True) when x3 is a transposed view of a C-contiguous array (K^T: no copy)."""
    u = x3.view(np.uint16 if x3.itemsize == 2 else np.uint8)
    if not u.flags.c_contiguous:
        t = u.swapaxes(1, 2)
        if t.flags.c_contiguous and t.flags.writeable:
            return t, True
    return _plain(u), False


def _plain(x: np.ndarray) -> np.ndarray:
    """x as a C-contiguous writeable array (a copy only if it is not one): the one array type the kernel is
    compiled for (numba compiles read-only and non-contiguous arrays as other types)."""
    return x if x.flags.c_contiguous and x.flags.writeable else np.array(x, order="C")


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
