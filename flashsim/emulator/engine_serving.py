"""The serving engine: kernel_program's steps over the kernel's grid for a KV cache or a variable-length batch.

The grid is flashsim.serving.blocks' (which rows and which KV tiles each block has: the kernel's). Moving data is
exact, so each sequence's keys are first gathered into place (pages through the block table, varlen rows from their
offsets), with zeros past the sequence's keys as the kernel's cp.async zero-fill leaves them, and each block's Q
rows likewise (packed GQA rows, zeros for padding). Then every block runs as engine_numpy runs one: from the
initial state, KV tile by KV tile through steps 1-7 (kernel_program.scores, probabilities, accumulate), in chunks
of blocks whose scores stay under ``max_tile_elems`` elements, and the epilogue: the single pass's
(kernel_program.epilogue) or, with split-KV (across blocks, or inside them: KernelConfig.warp_split), each part's
(split_epilogue) and then the combine (kernel_program.combine) over the parts of every row.

Backends. "numpy" runs the steps eagerly on the blocks still busy at each tile; "jax" runs the same functions
jit-compiled (one program per chunk shape, every block of the chunk at each step, the state of a finished block
kept by a select), and the epilogue and the combine on jax.numpy: the same code on another namespace, and the same
bits (tests/test_serving_emulator.py compares them).
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..numerics import sfu
from ..numerics.target import Target
from ..numerics.xp import enable_x64, errstate
from ..serving.blocks import Blocks, grid_blocks
from ..serving.problem import SequenceIndex, ServingProblem
from ..settings import EngineOptions
from . import kernel_program as K
from .progress import Progress

DEFAULT_MAX_TILE_ELEMS = 1 << 22  # score elements per step, as engine_numpy
BACKENDS = ("numpy", "jax")


def sequence_keys(x, prob: ServingProblem, index: SequenceIndex, span: int) -> np.ndarray:
    """(B, span, Hkv, d): key j of sequence b from the cache (contiguous or pages) or the packed varlen rows, zero
    at or past the sequence's nk_b keys (what the kernel's zero-fill gives; a page entry past them is never read)."""
    _, _, k_start, nk = index.lengths(prob)
    j = np.arange(span)
    keep = j[None, :] < nk[:, None]
    if prob.kind == "varlen":
        rows = np.clip(k_start[:, None] + j[None, :], 0, max(prob.k_total - 1, 0))
        got = x[rows] if prob.k_total else np.zeros((prob.batch, span) + x.shape[1:], x.dtype)
    elif prob.page_size:
        table = np.asarray(index.block_table, np.int64)
        slot = np.clip(j // prob.page_size, 0, prob.max_pages - 1)
        page = np.clip(table[:, slot], 0, prob.num_pages - 1)
        got = x[page, (j % prob.page_size)[None, :]]
    else:
        got = x[:, np.clip(j, 0, prob.nk_cap - 1)]
    return np.where(keep[:, :, None, None], got, np.zeros((), x.dtype))


def sequence_queries(q, prob: ServingProblem, index: SequenceIndex) -> np.ndarray:
    """(B, nq_cap, Hq, d): query row i of sequence b, zero at or past its nq_b rows."""
    if prob.kind == "kvcache":
        return np.asarray(q)
    q_start, nq, _, _ = index.lengths(prob)
    i = np.arange(max(prob.nq_cap, 1))
    rows = np.clip(q_start[:, None] + i[None, :], 0, max(prob.q_total - 1, 0))
    got = q[rows] if prob.q_total else np.zeros((prob.batch, i.size) + q.shape[1:], q.dtype)
    return np.where((i[None, :] < nq[:, None])[:, :, None, None], got, np.zeros((), q.dtype))


def output_rows(prob: ServingProblem, index: SequenceIndex, blocks: Blocks, units) -> tuple[np.ndarray, np.ndarray]:
    """(row of o viewed as (rows, d), index of lse flattened) of every (unit, r) of ``units``: KV cache o (B, Nq, Hq,
    d) and lse (B, Hq, Nq); varlen o (total_q, Hq, d) and lse (Hq, total_q). Meaningful where the row is valid."""
    b, i, h = blocks.batch[units][:, None], blocks.q_row[units], blocks.q_head[units]
    if prob.kind == "kvcache":
        return (b * prob.nq_cap + i) * prob.heads + h, (b * prob.heads + h) * prob.nq_cap + i
    q_start = index.lengths(prob)[0][b]
    return (q_start + i) * prob.heads + h, h * prob.q_total + q_start + i


def part_rows(prob: ServingProblem, blocks: Blocks, units) -> np.ndarray:
    """The split-KV partial outputs' row of every (unit, r): q's (b, i, h) order (kernel/flash_fwd.cu, p_row)."""
    b, i, h = blocks.batch[units][:, None], blocks.q_row[units], blocks.q_head[units]
    return (b * prob.nq_cap + i) * prob.heads + h


class _Steps:
    """Steps 1-7 of one KV tile for a chunk of blocks: ``__call__(state, q, k, v, rows, cols, nq, nk, active)``
    returns the new (m, l, o) of the active blocks (numpy: computed on those alone; JAX: jit-compiled on all, the
    inactive ones keeping their state)."""

    def __init__(self, backend: str, prob: ServingProblem, target: Target):
        cfg = prob.config
        self.backend, self.prob = backend, prob
        self.static = dict(
            causal=cfg.causal,
            window=prob.window,
            cap=prob.cap_scale if cfg.softcap else None,
            two_level=cfg.pv_accum == "f16x2",
            group_keys=cfg.fp8_group_keys,
        )
        self.target = target
        if backend == "jax":
            import jax

            self._tables = tuple(jax.numpy.asarray(a) for a in sfu.table_arrays(prob.arch))
            self._jit = jax.jit(partial(self._jax_step, prob.arch, prob.scale_log2, tuple(self.static.items())))

    @staticmethod
    def _tile(state, q, k, v, rows, cols, nq, nk, *, arch, scale_log2, static, target):
        m, l, o = state
        s, m_new, alpha, neg_m = K.scores(
            q,
            k,
            m,
            rows,
            cols,
            nq[:, None, None],
            nk[:, None, None],
            scale_log2,
            causal=static["causal"],
            arch=arch,
            window=static["window"],
            cap_scale=static["cap"],
            target=target,
        )
        p = K.probabilities(s, neg_m, scale_log2, arch=arch, target=target)
        l, o = K.accumulate(
            l, o, p, alpha, v, arch=arch, two_level=static["two_level"], group_keys=static["group_keys"], target=target
        )
        return m_new, l, o

    @staticmethod
    def _jax_step(arch, scale_log2, static_items, tables, state, q, k, v, rows, cols, nq, nk, active):
        import jax.numpy as jnp

        static = dict(static_items)
        target = Target().with_tables(arch, "ex2", tables)
        new = _Steps._tile(
            state, q, k, v, rows, cols, nq, nk, arch=arch, scale_log2=scale_log2, static=static, target=target
        )
        keep = [active.reshape(active.shape + (1,) * (x.ndim - 1)) for x in state]
        return tuple(jnp.where(a, n, x) for a, n, x in zip(keep, new, state))

    def __call__(self, state, q, k, v, rows, cols, nq, nk, active):
        p = self.prob
        if self.backend == "numpy":
            act = np.nonzero(active)[0]
            sub = tuple(x[act] for x in state)
            m, l, o = self._tile(
                sub,
                q[act],
                k,
                v,
                rows[act],
                cols,
                nq[act],
                nk[act],
                arch=p.arch,
                scale_log2=p.scale_log2,
                static=self.static,
                target=self.target,
            )
            for dst, src in zip(state, (m, l, o)):  # the chunk's own state arrays, updated in place
                dst[act] = src
            return state
        return tuple(np.asarray(x) for x in self._jit(self._tables, state, q, k, v, rows, cols, nq, nk, active))


def run(
    q,
    k,
    v,
    prob: ServingProblem,
    index: SequenceIndex,
    *,
    backend: str = "numpy",
    progress: bool | None = None,
    options: EngineOptions | None = None,
    max_tile_elems: int | None = None,
):
    """Emulate the serving kernel (and, with splits, the combine): returns (o in prob.o_shape of q's dtype, lse f32
    in prob.lse_shape, flag bool in prob.lse_shape: the kernel's overflow flag per row). q, k, v numpy arrays in the
    call's shapes (prepare_kvcache / prepare_varlen); ``index``'s values checked (check_indices)."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "jax":
        try:
            import jax  # noqa: F401 - loaded before enable_x64, which is a no-op without JAX
        except ImportError as e:
            raise ImportError(f"backend='jax' needs jax: pip install 'flashsim[jax]' ({e})") from None
        with enable_x64():
            return _run(q, k, v, prob, index, backend, progress, options, max_tile_elems)
    return _run(q, k, v, prob, index, backend, progress, options, max_tile_elems)


def _run(q, k, v, prob, index, backend, progress, options, max_tile_elems):
    options = options if options is not None else EngineOptions.from_environment()
    target = Target(mma_threads=options.mma_threads)
    cfg = prob.config
    bm, bc, d = cfg.block_m, cfg.kv_tile, prob.head_dim
    out_dtype = q.dtype
    blocks = grid_blocks(prob, index)
    _, nq_b, _, nk_b = index.lengths(prob)
    span = max(1, int((blocks.t0 + blocks.tiles).max(initial=0))) * bc
    kg, vg = (sequence_keys(x, prob, index, span) for x in (k, v))
    qg = sequence_queries(q, prob, index)
    rows_out = prob.q_total * prob.heads
    o = np.zeros((rows_out, d), out_dtype)
    lse = np.zeros(int(np.prod(prob.lse_shape)), np.float32)
    flag = np.zeros(lse.shape, bool)
    split = prob.parts > 1  # split-KV across blocks or inside them (warp_split): parts, then the combine
    if split:
        o_part = np.zeros((prob.parts, prob.part_rows, d), np.float32)
        lse_part = np.full((prob.parts, prob.part_rows), -np.inf, np.float32)
    steps = _Steps(backend, prob, target)
    xp = np
    split_epilogue = partial(K.split_epilogue, lse_scale=prob.lse_scale)
    epilogue = partial(K.epilogue, lse_scale=prob.lse_scale, out_dtype=out_dtype)
    combine = partial(K.combine, arch=prob.arch, out_dtype=out_dtype)
    if backend == "jax":  # each as one program: op by op, JAX would compile every operation on its own
        import jax
        import jax.numpy as xp

        split_epilogue, epilogue, combine = (jax.jit(f) for f in (split_epilogue, epilogue, combine))
    chunk = max(1, int(max_tile_elems or DEFAULT_MAX_TILE_ELEMS) // (bm * bc))
    bar = Progress(int(blocks.tiles.sum()), progress)
    done = 0
    with errstate():
        for c0 in range(0, blocks.count, chunk):
            units = np.arange(c0, min(blocks.count, c0 + chunk))
            b, kvh, valid = blocks.batch[units], blocks.kv_head[units], blocks.valid[units]
            rows = blocks.q_row[units].astype(np.int32)
            qt = qg[b[:, None], np.clip(blocks.q_row[units], 0, qg.shape[1] - 1), blocks.q_head[units]]
            qt = np.where(valid[:, :, None], qt, np.zeros((), qt.dtype))
            nq, nk = nq_b[b].astype(np.int32), nk_b[b].astype(np.int32)
            state = K.initial_state(np, (units.size,), bm, d, cfg.o_f16)
            tiles, t0 = blocks.tiles[units], blocks.t0[units]
            for t in range(int(tiles.max(initial=0))):
                active = tiles > t
                tile = np.minimum(t0 + t, span // bc - 1)
                cols = (tile[:, None] * bc + np.arange(bc)[None, :]).astype(np.int32)
                act = np.nonzero(active)[0] if backend == "numpy" else slice(None)
                kt, vt = kg[b[act, None], cols[act], kvh[act, None]], vg[b[act, None], cols[act], kvh[act, None]]
                state = steps(state, qt, kt, vt, rows, cols[act], nq, nk, active)
                done += int(active.sum())
                bar.update(done)
            m, l, acc = (xp.asarray(x) for x in state)
            if split:
                op, lp, _, fl = split_epilogue(l, acc, m)
                pr = part_rows(prob, blocks, units)
                s = blocks.split[units][:, None]
                o_part[np.broadcast_to(s, pr.shape)[valid], pr[valid]] = np.asarray(op)[valid]
                lse_part[np.broadcast_to(s, pr.shape)[valid], pr[valid]] = np.asarray(lp)[valid]
                _, li = output_rows(prob, index, blocks, units)
                # splits share rows: an unbuffered or (a fancy-index |= keeps only the last split's value per row)
                np.logical_or.at(flag, li[valid], np.asarray(fl)[valid])
            else:
                oo, ll, _, fl = epilogue(l, acc, m)
                oi, li = output_rows(prob, index, blocks, units)
                o[oi[valid]] = np.asarray(oo)[valid]
                lse[li[valid]] = np.asarray(ll)[valid]
                flag[li[valid]] = np.asarray(fl)[valid]
    bar.close()
    if split:
        oc, lc = combine(xp.asarray(lse_part), xp.asarray(o_part))
        o = np.asarray(oc)  # rows in q's (b, i, h) order: o's own
        b, i, h = np.unravel_index(np.arange(prob.part_rows), (prob.batch, prob.nq_cap, prob.heads))
        lse[(b * prob.heads + h) * prob.nq_cap + i] = np.asarray(lc)
    return o.reshape(prob.o_shape), lse.reshape(prob.lse_shape), flag.reshape(prob.lse_shape)
