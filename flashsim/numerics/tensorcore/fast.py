"""The numpy engine's fast path of the tensor-core model: the compiled kernel of _numba_chain.py for whole
batches of chains, its dispatch, and the threads it runs on.

One compiled kernel (numba, ``cache=True``, ``nogil``) in integer arithmetic only (no float operation touches a
value, so no rounding mode, FTZ / DAZ or FMA contraction can act on it), term for term the generic routine's model
(docs/tensorcore.md has the design and the measurements). Batches with enough work are split over threads. Block
sizes other than 4, 8 and 16 and a process without numba run the generic routine on numpy instead (numba missing:
with one RuntimeWarning). tests/test_tensorcore_engines.py holds every case bit for bit equal to the generic routine.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from ...arch import Arch
from ...settings import default_mma_threads
from .. import xp as X
from ..target import PLAIN, Target
from . import generic
from .types import BF16, E4M3, E5M2, F16, F32, FP8_FIELDS

_KERNEL = None  # the numba kernel module once imported; False when numba cannot be imported


def _numba_kernel():
    """flashsim.numerics._tensorcore_numba, or None (with one RuntimeWarning per process) if numba cannot be
    imported: ``mma_chain`` / ``mma`` on numpy arrays then run the generic routine (same bits, ~25x slower)."""
    global _KERNEL
    if _KERNEL is None:
        try:
            from . import _numba_chain as kernel
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


def threads(requested: int | None = None) -> int:
    """Threads for the kernel: ``requested``, else flashsim.settings' default (FLASHSIM_MMA_THREADS, else the CPUs
    this process may use, at most 8)."""
    if requested is None:
        return default_mma_threads()
    if not isinstance(requested, int) or requested < 1:
        raise ValueError(f"mma_threads must be a positive integer, got {requested!r}")
    return requested


_POOL: dict = {}


def _pool(n: int):
    """A pool of n threads for this process (keyed by pid: a forked child must not reuse its parent's)."""
    key = (os.getpid(), n)
    pool = _POOL.get(key)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor

        pool = _POOL[key] = ThreadPoolExecutor(n, thread_name_prefix="flashsim-mma")
    return pool


def chain(a, b, c, spec: Arch, target: Target = PLAIN):
    """The chain of m16n8k16 steps (shapes and dtypes already checked): on numpy arrays the compiled kernel, on
    any other namespace (or where numba is missing) the generic routine."""
    xp = X.namespace(a, b, c)
    if X.is_numpy(xp):
        return chain_fast(np.asarray(a), np.asarray(b), np.asarray(c), spec, target.mma_threads)
    return generic.chain(xp, a, b, c, spec, target)


def chain_fast(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch, n_threads: int | None = None) -> np.ndarray:
    """``mma_chain`` for numpy arrays (shapes and dtypes already checked): the compiled kernel on ``n_threads``
    (``threads``), or the generic routine where numba is missing."""
    kernel = _numba_kernel()
    if kernel is None or spec.mma_block_k not in (4, 8, 16):  # the kernel fuses products four at a time
        return generic.chain(np, a, b, c, spec)
    e_zero = spec.mma_zero_exponent_f16 if c.dtype == F16 else spec.mma_zero_exponent_f32
    sum_dtype = generic.acc_int_dtype(np, spec, a.dtype == BF16)
    return _run_kernel(kernel, a, b, c, spec.mma_fraction_bits, spec.mma_block_k, e_zero, sum_dtype, n_threads)


def chain_k32_fast(a: np.ndarray, b: np.ndarray, c: np.ndarray, spec: Arch, n_threads: int | None = None):
    """``mma_chain_k32`` (K a multiple of 32; one step is ``mma_k32``) with FP8 inputs on numpy arrays, for an arch
    with a native FP8 block (``mma8_block_k``): the compiled kernel with the arch's FP8 parameters, as
    ``k32._k32_fp8_generic``. None where the kernel does not apply (numba missing, a block size that is not a multiple
    of 4, or Ada's shortened f32 results): the caller runs the generic routine."""
    kernel = _numba_kernel()
    acc16 = c.dtype == F16
    if kernel is None or spec.mma8_block_k % 4 or (not acc16 and spec.mma8_f32_result_frac_bits < 23):
        return None
    ma, mb = FP8_FIELDS[np.dtype(a.dtype)][1], FP8_FIELDS[np.dtype(b.dtype)][1]
    F, block = spec.mma8_fraction_bits, spec.mma8_block_k
    e_zero = spec.mma_zero_exponent_f16 if acc16 else spec.mma_zero_exponent_f32
    return _run_kernel(kernel, a, b, c, F, block, e_zero, generic.sum_int_dtype(np, block, F, ma, mb), n_threads)


def chain_block(a, b, c, F: int, block: int, e_zero: int, sum_dtype, n_threads: int | None = None):
    """One chain of fused blocks with explicit parameters (fraction bits F, products per block, c's zero exponent,
    the sum type ``generic.sum_int_dtype`` gives) on numpy operands of any of the kernel's formats (f16, bf16, FP8,
    float32 as wgmma's tf32): wgmma's route (flashsim.numerics.tensorcore.warpgroup). None where the kernel does not
    apply (numba missing, a block that is not a multiple of 4): the caller runs the generic routine."""
    kernel = _numba_kernel()
    if kernel is None or block % 4:
        return None
    return _run_kernel(kernel, a, b, c, F, block, e_zero, sum_dtype, n_threads)


def _run_kernel(
    kernel,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray,
    F: int,
    block: int,
    e_zero: int,
    sum_dtype,
    n_threads: int | None = None,
) -> np.ndarray:
    """The compiled chain on numpy operands (f16 / bf16 or FP8; shapes already checked) with fraction bits F, the
    block size, c's zero exponent and the products' sum type (np.int32 / np.int64, ``generic.sum_int_dtype``).

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
    # the kernel's formats (float32 operands are wgmma's tf32: flashsim.numerics.tensorcore.warpgroup)
    codes = {F16: kernel.F16, BF16: kernel.BF16, E4M3: kernel.E4M3, E5M2: kernel.E5M2, F32: kernel.TF32}
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

    parts = min(threads(n_threads), nb, max(1, nb * M * N * K // _THREAD_MIN))
    if parts == 1:
        run(0, nb)
    else:
        cuts = [nb * p // parts for p in range(parts + 1)]
        for f in [_pool(parts).submit(run, cuts[p], cuts[p + 1]) for p in range(parts)]:
            f.result()
    return out


def _bits(x3: np.ndarray):
    """The bits of an (n, R, C) f16 / bf16 / FP8 / tf32 operand for the kernel: (C-contiguous uint16, uint8 or uint32
    (n, R, C), False), or (its transpose (n, C, R), True) when x3 is a transposed view of a C-contiguous array (K^T:
    no copy)."""
    u = x3.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x3.itemsize])
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
