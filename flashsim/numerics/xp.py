"""The array namespace the emulator is written against, and the few things the array API standard lacks.

Every routine of the emulated kernel and of its numerics is written once, against ``xp``: the namespace of its
inputs (``namespace(*arrays)``), numpy by default or ``jax.numpy`` when any input is a JAX array or tracer.  Both
follow the Python array API standard for what the programs use (``xp.where``, ``xp.astype``,
``xp.bitwise_left_shift``, ``xp.maximum``, reductions, ``xp.take``...), so the same function runs eagerly on numpy
and under ``jax.jit`` (CPU, GPU, sharded).  The standard has no bit casts, no count-leading-zeros and no functional
scatter; this module supplies them, one small function each, with one branch per library.  Nothing else in the
emulator may test which library it runs on, except a fast path that is measured to pay and tested bit for bit
against the generic routine (see ``is_numpy``).

We use numpy's and jax.numpy's own namespaces (numpy >= 2 implements the standard's names) instead of
``array_api_compat`` wrappers: the wrappers add a Python call per operation on the hot path and buy nothing here.

Floating point: numpy runs IEEE binary32 with gradual underflow and no contraction; XLA flushes subnormals on the
CPU and contracts ``a * b + c``.  Generic routines therefore never rely on float32 hardware arithmetic for results
that could be subnormal or contracted: see flashsim.numerics.ieee32.
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from .target import PLAIN, Target

__all__ = [
    "namespace",
    "is_numpy",
    "bitcast",
    "shl",
    "shr",
    "bit_length",
    "set_at",
    "enable_x64",
    "errstate",
    "asarray_like",
    "require_x64",
    "staged",
    "ptx",
    "trunc_to_int",
    "pieces",
    "lookup",
    "on_jax",
]


def _is_jax_array(x) -> bool:
    mod = type(x).__module__
    return mod.startswith("jax") or mod.startswith("jaxlib")


def namespace(*arrays):
    """numpy, or jax.numpy if any argument is a JAX array (or tracer). Scalars and None are ignored."""
    for x in arrays:
        if _is_jax_array(x):
            import jax.numpy as jnp

            return jnp
    return np


def is_numpy(xp) -> bool:
    """True for the numpy namespace: the one test a measured fast path may make."""
    return xp is np


def bitcast(x, dtype):
    """The bits of ``x`` reinterpreted as ``dtype`` of the same width (numpy ``view``, JAX ``bitcast_convert_type``)."""
    dtype = np.dtype(dtype)
    if isinstance(x, (np.ndarray, np.generic)):
        return np.asarray(x).view(dtype)
    from jax import lax

    return lax.bitcast_convert_type(x, dtype)


def shl(x, s):
    """x << s for unsigned or signed integers, s broadcast to x's dtype (numpy and JAX promote differently)."""
    xp = namespace(x)
    return xp.bitwise_left_shift(x, xp.asarray(s, dtype=x.dtype))


def shr(x, s):
    """x >> s: logical for unsigned dtypes, arithmetic for signed ones (both libraries' rule)."""
    xp = namespace(x)
    return xp.bitwise_right_shift(x, xp.asarray(s, dtype=x.dtype))


def bit_length(x, target: Target = PLAIN):
    """Bit length of non-negative integers (0 for 0), as int32. JAX: count-leading-zeros; numpy and fused kernels
    (Triton has no count-leading-zeros): the exponent of the float64 image (exact for x < 2^53) or of x >> 21 for
    wider values."""
    numpy_in = isinstance(x, (np.ndarray, np.generic))
    if not numpy_in and not target.fused:
        import jax.numpy as jnp
        from jax import lax

        return (x.dtype.itemsize * 8 - lax.clz(x)).astype(jnp.int32)
    xp = np if numpy_in else namespace(x)
    x = xp.asarray(x)
    wide = x.dtype.itemsize == 8

    def exponent(v):  # floor(log2 v) + 1 for 0 < v < 2^53, from the float64 image's exponent field
        return ((bitcast(xp.astype(v, xp.float64), np.int64) >> 52) - 1022).astype(xp.int32)

    hi = (x >> xp.asarray(21, dtype=x.dtype)) if wide else x
    e = xp.where(hi == 0, 0, exponent(hi))
    if wide:
        e = xp.where(hi == 0, xp.where(x == 0, 0, exponent(x)), e + 21)
    return e.astype(xp.int32)


def set_at(x, index, values):
    """A copy of ``x`` with ``x[index] = values`` (JAX ``x.at[index].set``); numpy writes into a copy."""
    if isinstance(x, np.ndarray):
        out = x.copy()
        out[index] = values
        return out
    return x.at[index].set(values)


def asarray_like(value, like, dtype=None):
    """``value`` as an array of ``like``'s namespace (and dtype, unless given)."""
    xp = namespace(like)
    return xp.asarray(value, dtype=dtype if dtype is not None else like.dtype)


@contextlib.contextmanager
def enable_x64():
    """64-bit types for JAX (int64 sums, float64 intermediates) for the body only; a no-op without JAX loaded."""
    if "jax" not in sys.modules:
        yield
        return
    import jax

    if hasattr(jax, "enable_x64"):
        with jax.enable_x64(True):
            yield
        return
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


def require_x64(xp) -> None:
    """RuntimeError unless ``xp`` has 64-bit types: JAX without x64 silently makes int64 / float64 32 bits wide,
    which would change bits. A trace-time check (no array values), so it is safe under jit."""
    if is_numpy(xp):
        return
    import jax

    if jax.dtypes.canonicalize_dtype(np.int64) != np.int64:
        raise RuntimeError("this routine needs 64-bit types in JAX: run it under flashsim.numerics.xp.enable_x64()")


def errstate():
    """numpy's floating-point warnings off for the body (overflow to inf, 0 * inf are intended); JAX has none."""
    return np.errstate(all="ignore")


# ------------------------------------------------------------------------------------------------------------------
# fused GPU kernels (flashsim.emulator.engine_pallas): the same routines traced into one Pallas kernel for Triton,
# which cannot slice a value, gather from one, or index one by a loop counter. Three small forms cover what the
# emulator needs (``pieces``, ``lookup``, ``staged``); for a target that is not fused the first two are the plain
# operation and the third is not called. A kernel compiled for the GPU may also run what PTX defines exactly as one
# inline instruction (``ptx``, ``trunc_to_int``). Which form applies is the caller's ``Target``
# (flashsim.numerics.target), passed explicitly.


def staged(a_arrays, b_arrays, target: Target):
    """In a fused kernel, the operands of an mma chain written to the kernel's own memory, so that the chain can
    read column k of each (..., M, K) array of ``a_arrays`` and row k of each (..., K, N) array of ``b_arrays``
    for a traced k (Triton can index memory, not a value). Returns (read_a, read_b): functions of k giving the
    tuple of every array's (..., M, 1) column, and of every (..., 1, N) row. The engine supplies the memory
    (``Target.stage``)."""
    if target.stage is None:
        raise RuntimeError("an mma chain in a fused kernel needs the engine's staging memory (Target.stage)")
    return target.stage(tuple(a_arrays), tuple(b_arrays))


_PTX_REG = {np.dtype(np.float32): "f", np.dtype(np.float64): "d", np.dtype(np.int32): "r", np.dtype(np.int64): "l"}


def ptx(asm: str, dtype, *args, target: Target):
    """One inline PTX instruction per element (``asm`` with $0 the result, $1... the operands) on arrays of float32,
    float64, int32 or int64, broadcast together; the result has ``dtype``. Only for a target with ``inline_ptx``."""
    if not target.inline_ptx:
        raise RuntimeError(f"inline PTX ({asm}) for a target that is not a fused kernel compiled for the GPU")
    import jax
    from jax.experimental.pallas import triton as pltriton

    xp = namespace(*args)
    args = xp.broadcast_arrays(*args)
    regs = ",".join(_PTX_REG[np.dtype(a.dtype)] for a in args)
    [out] = pltriton.elementwise_inline_asm(
        asm,
        args=list(args),
        constraints=f"={_PTX_REG[np.dtype(dtype)]},{regs}",
        pack=1,
        result_shape_dtypes=[jax.ShapeDtypeStruct(args[0].shape, dtype)],
    )
    return out


def trunc_to_int(x, dtype, target: Target = PLAIN):
    """Float ``x`` truncated toward zero to the integer ``dtype`` (int32 / int64), for finite values whose truncation
    fits; any other value gives an unspecified result that the caller must overwrite (numpy and XLA wrap or saturate
    differently). With ``target.inline_ptx`` one ``cvt.rzi`` instruction: Pallas's cast clamps every value to the
    integer range first, two more instructions per emulated product (benchmarks/experiments/jax_staged/README.md)."""
    dtype = np.dtype(dtype)
    if not target.inline_ptx:
        return namespace(x).astype(x, dtype)
    return ptx(f"cvt.rzi.s{dtype.itemsize * 8}.f{np.dtype(x.dtype).itemsize * 8} $0, $1;", dtype, x, target=target)


def pieces(x, size: int, axis: int, target: Target = PLAIN) -> list:
    """``x`` cut into its consecutive slices of ``size`` along ``axis`` (the axis keeps its length ``size``): plain
    slices, or in a fused kernel ``split`` (Triton lowers a split into a power-of-two number of equal parts)."""
    n, r = divmod(x.shape[axis], size)
    if r:
        raise ValueError(f"axis {axis} of length {x.shape[axis]} is not a multiple of {size}")
    if n == 1:
        return [x]
    if target.fused:
        if n & (n - 1):
            raise ValueError(f"a fused kernel splits an axis only into a power-of-two number of parts, not {n}")
        import jax.numpy as jnp

        return list(jnp.split(x, n, axis=axis))
    ax = axis % x.ndim
    lead = (slice(None),) * ax
    return [x[lead + (slice(i * size, (i + 1) * size),)] for i in range(n)]


def lookup(table, index, target: Target = PLAIN):
    """``table[index]`` for a 1-D table and an integer array ``index`` of any shape: ``take``, or in a fused kernel
    a load from the table's Pallas reference (the tables stay in device memory)."""
    if target.fused:
        return table[index]
    return namespace(table, index).take(table, index)


def on_jax(fn, *arrays):
    """``fn`` on JAX copies of numpy ``arrays`` (None passes as None) under ``enable_x64``, the result back as numpy:
    the ``backend="jax"`` of the tensor-core entry points. ValueError naming the extra where jax is missing."""
    try:
        import jax.numpy as jnp
    except ImportError as e:
        raise ValueError(f"backend='jax' needs jax: pip install 'flashsim[jax]' ({e})") from None
    with enable_x64():
        return np.asarray(fn(*(None if x is None else jnp.asarray(x) for x in arrays)))
