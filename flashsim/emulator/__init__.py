"""The kernel emulated on the CPU (``attention``) and the float64 reference (``reference_attention``).

kernel_program.py is the kernel's program, written once against an array namespace; engine_numpy.py runs it
eagerly (the default), engine_jax.py jit-compiles it for JAX's CPU or GPU devices and shards it over a Mesh.
"""
from __future__ import annotations

import numpy as np

from ..overflow import OverflowCheck, check_mode, first_flagged, overflow_error
from ..problem import check_emulator_memory, prepare
from .reference import reference_attention

__all__ = ["attention", "reference_attention"]


def attention(q, k, v, *, causal=None, softmax_scale=None, pv_accum=None, arch="sm_90", config=None,
              backend="numpy", progress=None, check_overflow=True):
    """What kernel/flash_fwd.cu returns on ``arch``, bit for bit: (o float16 (B,H,Nq,d), lse float32 (B,H,Nq)).

    q (B,H,Nq,d), k and v (B,H,Nk,d): float16 numpy arrays. ``config`` (flashsim.KernelConfig) fixes the
    tiling; by default the arch's default configuration with the given causal / pv_accum. ``causal`` and
    ``pv_accum`` left out (None) take the config's values, or False and "f32"; given, they must agree with it.
    ``backend``: "numpy" (default) or "jax". A problem whose emulation would not fit in memory is refused first
    (flashsim.problem.check_emulator_memory). With an f16 P@V mma (pv_accum "f16" or "f16x2") a row whose f16
    accumulator overflowed raises FloatingPointError naming the row and the bound, as the GPU runner does
    (flashsim.overflow); ``check_overflow=False`` returns the kernel's inf / NaN instead; "deferred" returns
    (o, lse, check) with ``check()`` raising the same error when called.
    """
    prob = prepare(q, k, v, causal=causal, softmax_scale=softmax_scale, pv_accum=pv_accum, arch=arch,
                   config=config)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray):
            raise ValueError(f"{name} must be a numpy array (the emulator runs on the CPU), got {type(x).__name__}")
    if backend == "numpy":
        from .engine_numpy import run
    elif backend == "jax":
        from .engine_jax import run
    else:
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
    mode = check_mode(check_overflow)
    check_emulator_memory(prob, backend)
    o, lse, rows = run(q, k, v, prob, progress=progress)

    def check():
        flat = first_flagged(rows.flag) if prob.config.pv_mma_f16 else None
        if flat is not None:
            bh, row = divmod(flat, prob.nq)
            b, h = divmod(bh, prob.heads)
            raise overflow_error(prob, flat, float(np.abs(v[b, h].astype(np.float32)).max()),
                                 float(rows.l[b, h, row]))
    if mode == "deferred":
        return o, lse, OverflowCheck(check)
    if mode:
        check()
    return o, lse
