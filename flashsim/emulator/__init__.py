"""The kernel emulated on the CPU (``attention``) and the float64 reference (``reference_attention``)."""
from __future__ import annotations

import numpy as np

from ..problem import prepare
from .reference import reference_attention

__all__ = ["attention", "reference_attention"]


def attention(q, k, v, *, causal=False, softmax_scale=None, pv_accum="f32", arch="sm_90", config=None,
              backend="numpy", progress=None):
    """What kernel/flash_fwd.cu returns on ``arch``, bit for bit: (o float16 (B,H,Nq,d), lse float32 (B,H,Nq)).

    q (B,H,Nq,d), k and v (B,H,Nk,d): float16 numpy arrays. ``config`` (flashsim.KernelConfig) fixes the
    tiling; by default the arch's default configuration with the given causal / pv_accum. ``backend``:
    "numpy" (default) or "jax".
    """
    prob = prepare(q, k, v, causal=causal, softmax_scale=softmax_scale, pv_accum=pv_accum, arch=arch,
                   config=config)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, np.ndarray):
            raise ValueError(f"{name} must be a numpy array (the emulator runs on the CPU), got {type(x).__name__}")
    if backend == "numpy":
        from .kernel_program import run
    elif backend == "jax":
        from .jax_backend import run
    else:
        raise ValueError(f"backend must be 'numpy' or 'jax', got {backend!r}")
    return run(q, k, v, prob, progress=progress)
