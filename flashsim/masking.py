"""Which keys a query sees: the attention mask, written once for the kernel's emulation, the float64 reference and
the tiling (which KV tiles a query block visits).

Causal masking is aligned bottom-right, as in FlashAttention-2: query row i sits at position i + Nk - Nq, and key
j is visible to it iff j <= i + Nk - Nq. Keys past Nk (the zero-filled padding of the last KV tile) are never
visible. The kernel (kernel/flash_fwd.cu) applies the same predicate; tests/test_kernel_gpu.py and the H200
captures check that it does.
"""
from __future__ import annotations

import numpy as np

from .numerics.xp import namespace

__all__ = ["key_visible", "keys_visited"]


def key_visible(rows, cols, nq, nk, causal: bool):
    """Boolean mask, broadcast of ``rows`` (query indices) against ``cols`` (key indices): may query i see key j.

    Works on numpy and JAX arrays (``nq``, ``nk`` may be traced scalars)."""
    xp = namespace(rows, cols)
    visible = cols < nk
    if causal:
        visible = visible & (cols <= rows + (nk - nq))
    return xp.asarray(visible)


def keys_visited(row0, block_m: int, nq: int, nk: int, causal: bool):
    """Number of leading keys a query block (first row ``row0``, ``block_m`` rows) must visit: every key visible to
    any of its rows lies below it (the kernel's loop bound; tiles past it are skipped)."""
    row0 = np.asarray(row0)
    keys = np.full(row0.shape, nk)
    if causal:
        keys = np.minimum(nk, np.maximum(0, row0 + block_m + nk - nq))
    return keys
