"""Float64 reference attention: the mathematics the kernel approximates, computed plainly."""
from __future__ import annotations

import numpy as np

from ..problem import prepare


def reference_attention(q, k, v, *, causal=False, softmax_scale=None):
    """softmax(q k^T * scale) v in float64; returns (o float64 (B,H,Nq,d), lse float64 (B,H,Nq), natural log).

    Causal masks are aligned bottom-right (key j visible to query i iff j <= i + Nk - Nq). Rows with no
    visible key get o = 0 and lse = +inf, as the kernel does.
    """
    p = prepare(q, k, v, causal=causal, softmax_scale=softmax_scale)
    q64, k64, v64 = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    s = np.einsum("bhid,bhjd->bhij", q64, k64) * float(p.softmax_scale)
    if causal:
        i = np.arange(p.nq)[:, None]
        j = np.arange(p.nk)[None, :]
        s = np.where(j <= i + p.nk - p.nq, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    empty = ~np.isfinite(m) & (m < 0)
    m_safe = np.where(empty, 0.0, m)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s - m_safe)
        l = e.sum(axis=-1, keepdims=True)
        o = np.einsum("bhij,bhjd->bhid", e, v64) / np.where(l == 0, 1.0, l)
        lse = np.where(l == 0, np.inf, m_safe + np.log(np.where(l == 0, 1.0, l)))[..., 0]
    return o, lse
