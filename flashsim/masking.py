"""Which keys a query sees: the attention mask, written once for the kernel's emulation, the float64 reference and
the tiling (which KV tiles a query block visits).

Positions are aligned bottom-right, as in FlashAttention-2: query row i sits at position i + Nk - Nq. Key j is
visible to query i iff j < Nk and

* causal: j <= i + Nk - Nq;
* sliding window ``(left, right)``: i + Nk - Nq - left <= j <= i + Nk - Nq + right, a negative bound meaning
  unbounded on that side (FlashAttention-2's ``window_size``; causal is the window's right bound 0).

The kernel (kernel/flash_fwd.cu) receives the window as two non-negative ints (``Window.from_user``): an
unbounded side becomes Nq + Nk, which no distance between a query row (< Nq) and a key reaches, so the kernel's
predicate has no special case and cannot overflow int32 (flashsim.problem limits Nq + Nk). The padding rows of the
last query block (>= Nq, computed and dropped) may see fewer keys that way; the emulator runs the same predicate.
tests/test_kernel_gpu.py and the H200 captures check
that the kernel applies the same predicate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .numerics.xp import namespace

__all__ = ["Window", "key_visible", "key_range"]


@dataclass(frozen=True)
class Window:
    """A sliding window in kernel form: ``left``, ``right`` >= 0 keys on each side of the query's position (an
    unbounded side is Nq + Nk: ``from_user``)."""

    left: int
    right: int

    @classmethod
    def from_user(cls, window_size, nq: int, nk: int) -> Window:
        """FlashAttention-2's ``window_size=(left, right)`` (-1: unbounded) for Nq, Nk queries and keys."""
        big = nq + nk
        left, right = window_size
        return cls(big if left < 0 else min(int(left), big), big if right < 0 else min(int(right), big))


def key_visible(rows, cols, nq, nk, causal: bool, window: Window | None = None):
    """Boolean mask, broadcast of ``rows`` (query indices) against ``cols`` (key indices): may query i see key j.

    Works on numpy and JAX arrays (``nq``, ``nk`` and the window's bounds may be traced scalars)."""
    xp = namespace(rows, cols)
    visible = cols < nk
    pos = rows + (nk - nq)
    if causal:
        visible = visible & (cols <= pos)
    if window is not None:
        visible = visible & (cols >= pos - window.left) & (cols <= pos + window.right)
    return xp.asarray(visible)


def key_range(row0, block_m: int, nq: int, nk: int, causal: bool, window: Window | None = None):
    """(first, end): the keys a query block (first row ``row0``, ``block_m`` rows) must visit, [first, end); every
    key visible to any of its rows lies in it (the kernel's loop bounds: tiles outside are skipped). end <= first
    means no key at all."""
    row0 = np.asarray(row0, dtype=np.int64)
    first = np.zeros(row0.shape, np.int64)
    end = np.full(row0.shape, nk, np.int64)
    last_pos = row0 + block_m - 1 + nk - nq  # position of the block's last row
    if causal:
        end = np.minimum(end, np.maximum(0, last_pos + 1))
    if window is not None:
        end = np.minimum(end, np.maximum(0, last_pos + window.right + 1))
        first = np.clip(row0 + nk - nq - window.left, 0, nk)
    return first, end
