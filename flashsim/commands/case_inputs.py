"""The inputs of the verify cases (flashsim verify, its serving cases, the captures they made): regenerated from
(kind, shape, seed), so a capture stores outputs and the hash of its inputs only."""

from __future__ import annotations

import numpy as np

from ..numerics.formats import get_format

__all__ = ["INPUT_KINDS", "make_case_inputs"]

INPUT_KINDS = ("normal", "wide", "adversarial", "specials", "offset", "flat")


def make_case_inputs(kind, b, h, nq, nk, d, seed, *, heads_kv=None, dtype="f16", layout="bhnd"):
    """Inputs of one kind: normal N(0,1); wide (per-row scales over 2^-8..2^6: exp2 underflow/overflow paths);
    offset (keys with a per-channel mean 4x their spread); flat (q = 0 and equal rows of v: P@V's largest sums);
    adversarial (large equal scores, NaN and inf in a few places, all-equal rows, zeros); specials (+-inf in q, k
    and v, +-65504, f16 subnormals and rows of them, -0). q (B, H, Nq, d), k and v with ``heads_kv`` heads (default
    H), rounded to ``dtype`` ("f16" or "bf16"), in ``layout``."""
    rng = np.random.default_rng(seed)
    hk = h if heads_kv is None else heads_kv
    q = rng.standard_normal((b, h, nq, d))
    k = rng.standard_normal((b, hk, nk, d))
    v = rng.standard_normal((b, hk, nk, d))
    if kind == "wide":
        q *= 2.0 ** rng.integers(-8, 7, size=(b, h, nq, 1))
        k *= 2.0 ** rng.integers(-4, 5, size=(b, hk, nk, 1))
        v *= 2.0 ** rng.integers(-10, 10, size=(b, hk, nk, 1))
    elif kind == "adversarial":
        q *= 8.0  # scores in the thousands: exp overflows without the max shift
        if nk > 2:
            k[..., nk // 2, :] = k[..., 0, :]  # exact ties of the row max
        v[..., :: max(nk // 3, 1), :] = 0.0
        flat_q, flat_v = q.reshape(-1), v.reshape(-1)
        flat_q[rng.integers(0, flat_q.size, 2)] = np.nan
        flat_v[rng.integers(0, flat_v.size, 2)] = np.inf
        if nq > 3:
            q[..., 3, :] = 0.0  # a row of equal scores
    elif kind == "specials":
        # +-inf scores (inf in q and in k), the f16 range's edges, f16 subnormals, -0
        flat = [x.reshape(-1) for x in (q, k, v)]
        for x in flat:
            idx = rng.integers(0, x.size, 6)
            x[idx] = (np.inf, -np.inf, 65504.0, -65504.0, 2.0**-24, -0.0)
        q[..., :: max(nq // 4, 1), :] *= 2.0**-20  # whole rows of f16 subnormals
    elif kind == "offset":
        k += 4.0 * rng.standard_normal((b, hk, 1, d))  # a per-channel mean 4x the spread: what smoothing removes
    elif kind == "flat":
        # q = 0: every visible key gets p = 1; every row of v is the same, so each channel's |v| is its max: P@V's
        # sums reach their bound (with FP8 P@V and f16 accumulation, FP8_F16_KEYS * 448 * v_range = 64512 per group)
        q[:] = 0.0
        v[:] = v[..., :1, :]
    elif kind != "normal":
        raise ValueError(f"unknown input kind {kind!r}; known: {INPUT_KINDS}")
    elem = get_format(dtype).dtype
    # bf16 through float32: what ml_dtypes < 0.7 did with a float64 source and what the stored captures saw
    # (ml_dtypes 0.7 rounds float64 to bf16 once, which differs at double-rounding ties); f16 is numpy's own
    # single rounding
    via = np.float32 if dtype == "bf16" else np.float64
    with np.errstate(over="ignore", invalid="ignore"):
        keep_specials = kind in ("adversarial", "specials")
        out = tuple((x if keep_specials else np.clip(x, -65504, 65504)).astype(via).astype(elem) for x in (q, k, v))
    if layout == "bnhd":
        out = tuple(np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in out)
    return out
