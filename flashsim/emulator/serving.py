"""The serving calls emulated on the CPU, bit for bit what the kernel returns, and their float64 references.

``attention_with_kvcache`` (FlashAttention-2's flash_attn_with_kvcache) and ``attention_varlen``
(flash_attn_varlen_func) check their arguments with flashsim.serving.problem (the GPU runner's very checks) and
run flashsim.emulator.engine_serving; ``reference_attention_with_kvcache`` / ``reference_attention_varlen`` compute
the same attention in float64, sequence by sequence, through flashsim.reference_attention.
"""

from __future__ import annotations

import numpy as np

from ..overflow import OverflowCheck, check_mode, first_flagged, overflow_error_at
from ..serving.problem import (
    SequenceIndex,
    ServingProblem,
    check_indices,
    index_of,
    prepare_kvcache,
    prepare_varlen,
    serving_options,
)
from ..settings import EngineOptions
from . import engine_serving
from .reference import reference_attention

__all__ = [
    "attention_with_kvcache",
    "attention_varlen",
    "reference_attention_with_kvcache",
    "reference_attention_varlen",
]


def _numpy_inputs(**arrays) -> None:
    for name, x in arrays.items():
        if x is not None and not isinstance(x, np.ndarray):
            raise ValueError(f"{name} must be a numpy array (the emulator runs on the CPU), got {type(x).__name__}")


def attention_with_kvcache(
    q,
    k_cache,
    v_cache,
    *,
    cache_seqlens=None,
    block_table=None,
    num_splits=None,
    max_seqlen_k=None,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    arch="sm_90",
    config=None,
    backend="numpy",
    progress=None,
    check_overflow=True,
    engine: EngineOptions | None = None,
):
    """What the kernel returns for attention over a KV cache, bit for bit: (o like q, lse float32 (B, Hq, Nq)).

    q (B, Nq, Hq, d); k_cache, v_cache (B, N_cache, Hkv, d), or with ``block_table`` (B, max_pages) int32 the pages
    (num_pages, page_size, Hkv, d), page_size a power of two from 16 to 256; ``cache_seqlens`` (B,) int32: the keys
    row b holds (default: all of them); causal aligned to each row's cache length (query i at position
    i + cache_seqlens[b] - Nq). ``num_splits``: split-KV parts (1: the single pass; None: FlashAttention-2's
    heuristic for ``arch``'s reference GPU, flashsim.serving.splits, over the key tiles of ``max_seqlen_k``, the
    longest row the caller states, or of the capacity: the GPU call chooses alike from the same arguments; a row
    longer than a stated max_seqlen_k is an index error, as on the GPU). The other options are flashsim.attention's
    (window_size, softcap, softmax_scale, pv_accum, check_overflow, backend "numpy" or "jax", engine); quant is
    refused, layout is (B, N, H, d). ``config`` fixes the tiling (its serving switches follow the call)."""
    _numpy_inputs(q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=cache_seqlens, block_table=block_table)
    opts = serving_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
    prob = prepare_kvcache(
        q, k_cache, v_cache, cache_seqlens, block_table, num_splits, opts=opts, arch=arch, max_seqlen_k=max_seqlen_k
    )
    index = index_of(cache_seqlens=cache_seqlens, block_table=block_table)
    return _run(q, k_cache, v_cache, prob, index, backend, progress, check_overflow, engine)


def attention_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    *,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    arch="sm_90",
    config=None,
    backend="numpy",
    progress=None,
    check_overflow=True,
    engine: EngineOptions | None = None,
):
    """What the kernel returns for a variable-length batch, bit for bit: (o like q, lse float32 (Hq, total_q)).

    q (total_q, Hq, d), k and v (total_k, Hkv, d): the sequences one after another, sequence b's rows
    [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of q and its keys [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of k and v
    (int32 (B + 1,), from 0 to the totals; empty sequences allowed); max_seqlen_q / max_seqlen_k at least the
    longest. Options as attention_with_kvcache (no num_splits)."""
    _numpy_inputs(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    opts = serving_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
    prob = prepare_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opts=opts, arch=arch)
    index = index_of(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    return _run(q, k, v, prob, index, backend, progress, check_overflow, engine)


def _run(q, k, v, prob: ServingProblem, index: SequenceIndex, backend, progress, check_overflow, engine):
    if engine is not None and not isinstance(engine, EngineOptions):
        raise ValueError(f"engine must be a flashsim.EngineOptions, got {type(engine).__name__}")
    mode = check_mode(check_overflow)
    check_indices(prob, index)
    o, lse, flag = engine_serving.run(q, k, v, prob, index, backend=backend, progress=progress, options=engine)

    def check():
        flat = first_flagged(flag) if prob.config.pv_mma_f16 else None
        if flat is not None:
            raise overflow_of(prob, index, v, flat)

    if mode == "deferred":
        return o, lse, OverflowCheck(check)
    if mode:
        check()
    return o, lse


def overflow_of(prob: ServingProblem, index: SequenceIndex, v, flat: int) -> FloatingPointError:
    """The FloatingPointError for the flagged row ``flat`` (lse's flat index) of a serving call, with the largest
    |v| among the keys that row's sequence holds in its K / V head (``v`` on the host)."""
    q_start, _, _, nk = index.lengths(prob)
    if prob.kind == "kvcache":
        bh, i = divmod(flat, prob.nq_cap)
        b, h = divmod(bh, prob.heads)
        where = f"(b={b}, h={h}, row={i})"
    else:
        h, row = divmod(flat, prob.q_total)
        b = int(np.searchsorted(q_start, row, side="right")) - 1
        where = f"(h={h}, row={row} of q: sequence {b}, its row {row - q_start[b]})"
    keys = engine_serving.sequence_keys(np.asarray(v), prob, index, max(int(nk.max(initial=0)), 1))
    vh = keys[b, : int(nk[b]), h // prob.group].astype(np.float32)
    vmax = float(np.abs(vh).max()) if vh.size else 0.0
    return overflow_error_at(prob.config, where, vmax, None, int(nk[b]))


# -- float64 references --------------------------------------------------------------------------------------


def _reference_rows(q_rows, k_rows, v_rows, causal, softmax_scale, window_size, softcap, d):
    """(o, lse) in float64 of one sequence: q_rows (nq, Hq, d), k_rows / v_rows (nk, Hkv, d); nk = 0 gives o = 0
    and lse = +inf (no key), nq = 0 nothing."""
    nq, h = q_rows.shape[0], q_rows.shape[1]
    if nq == 0:
        return np.zeros((0, h, d)), np.zeros((h, 0))
    if k_rows.shape[0] == 0:
        return np.zeros((nq, h, d)), np.full((h, nq), np.inf)
    o, lse = reference_attention(
        q_rows[None],
        k_rows[None],
        v_rows[None],
        causal=causal,
        softmax_scale=softmax_scale,
        window_size=window_size,
        softcap=softcap,
        layout="bnhd",
    )
    return o[0], lse[0]


def reference_attention_with_kvcache(
    q,
    k_cache,
    v_cache,
    *,
    cache_seqlens=None,
    block_table=None,
    causal=False,
    softmax_scale=None,
    window_size=None,
    softcap=None,
    **checked,
):
    """attention_with_kvcache in float64 (o float64 like q, lse float64 (B, Hq, Nq)): each row's keys gathered from
    the cache, then flashsim.reference_attention. ``checked``: the emulator's other options (num_splits, pv_accum,
    arch, ...), checked, ignored by the mathematics."""
    opts = serving_options(
        causal,
        checked.pop("pv_accum", None),
        checked.pop("config", None),
        softmax_scale,
        window_size,
        softcap,
        checked.pop("layout", None),
        checked.pop("quant", None),
    )
    prob = prepare_kvcache(
        q,
        k_cache,
        v_cache,
        cache_seqlens,
        block_table,
        checked.pop("num_splits", None),
        opts=opts,
        arch=checked.pop("arch", "sm_90"),
        max_seqlen_k=checked.pop("max_seqlen_k", None),
    )
    index = index_of(cache_seqlens=cache_seqlens, block_table=block_table)
    check_indices(prob, index)
    _, _, _, nk = index.lengths(prob)
    keys = [engine_serving.sequence_keys(x, prob, index, max(prob.nk_cap, 1)) for x in (k_cache, v_cache)]
    o = np.zeros(q.shape)
    lse = np.zeros((prob.batch, prob.heads, prob.nq_cap))
    for b in range(prob.batch):
        n = int(nk[b])
        o[b], lse[b] = _reference_rows(
            q[b], keys[0][b, :n], keys[1][b, :n], opts.causal, softmax_scale, opts.window_size, softcap, prob.head_dim
        )
    return o, lse


def reference_attention_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    *,
    causal=False,
    softmax_scale=None,
    window_size=None,
    softcap=None,
    **checked,
):
    """attention_varlen in float64 (o float64 like q, lse float64 (Hq, total_q)), sequence by sequence."""
    opts = serving_options(
        causal,
        checked.pop("pv_accum", None),
        checked.pop("config", None),
        softmax_scale,
        window_size,
        softcap,
        checked.pop("layout", None),
        checked.pop("quant", None),
    )
    prob = prepare_varlen(
        q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opts=opts, arch=checked.pop("arch", "sm_90")
    )
    index = index_of(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    check_indices(prob, index)
    q_start, nq, k_start, nk = index.lengths(prob)
    o = np.zeros(q.shape)
    lse = np.zeros((prob.heads, prob.q_total))
    for b in range(prob.batch):
        qs, ks = slice(q_start[b], q_start[b] + nq[b]), slice(k_start[b], k_start[b] + nk[b])
        o[qs], lse[:, qs] = _reference_rows(
            q[qs], k[ks], v[ks], opts.causal, softmax_scale, opts.window_size, softcap, prob.head_dim
        )
    return o, lse
