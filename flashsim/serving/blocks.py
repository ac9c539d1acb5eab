"""The kernel's grid for a serving problem: which rows and which KV tiles each thread block has.

Block (x, y, z) of flash_fwd's grid (ServingProblem.grid) is q block x of grid head y in sequence b = z // S, split
s = z % S (S = num_splits). Its rows p = x * BM + r (r < BM) are, with GQA packing, query row p // group of query
head y * group + p % group (K / V head y), else query row p of head y (K / V head y // group). Rows at or past the
sequence's rows (nq_b, times the group when packed) are padding: zero Q, computed, never stored. A block whose
first row is past them does not run at all (the kernel returns at once). With KernelConfig.warp_split W, each block
is W units, one a warp: warp w of split s takes part s * W + w of the row's S * W parts (ServingProblem.parts).

Its KV tiles (``block_tiles``): the keys any of its rows may see, from its first and last query rows, padding
included (causal: up to the last row's position; a window: from the first row's left bound to the last row's right
one; a row at position pos = i + nk_b - nq_b), intersected with its split's tiles (flashsim.serving.splits). The
kernel computes the same range (kernel/flash_fwd.cu, SEQLENS), so the emulator visits exactly the kernel's tiles:
every row's arithmetic then follows, tile for tile, whichever block it sits in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .problem import SequenceIndex, ServingProblem
from .splits import split_tiles


@dataclass(frozen=True)
class Blocks:
    """The blocks (with warp_split, the blocks' warps) that run, (U,) arrays each, and their rows, (U, BM) each:
    sequence, part (the split, or with warp_split the warp's part), grid head, q block,
    K / V head, first KV tile and tile count; per row its query row in the sequence (the masking's row; padding rows
    continue the formula), its query head and whether it is a real row."""

    batch: np.ndarray
    split: np.ndarray
    head: np.ndarray
    qblk: np.ndarray
    kv_head: np.ndarray
    t0: np.ndarray
    tiles: np.ndarray
    q_row: np.ndarray
    q_head: np.ndarray
    valid: np.ndarray

    @property
    def count(self) -> int:
        return int(self.batch.size)


def block_tiles(prob: ServingProblem, q_lo, q_hi, nq, nk, split):
    """(first tile, tile count) of blocks whose first and last query rows are ``q_lo``, ``q_hi`` in sequences of
    ``nq`` rows and ``nk`` keys, split ``split`` (numpy arrays, broadcast): the kernel's loop bounds."""
    cfg, win, bc = prob.config, prob.window, prob.config.kv_tile
    off = nk - nq
    key_end, key_begin = nk, np.zeros_like(nk)
    if cfg.causal:
        key_end = np.minimum(key_end, np.maximum(0, q_hi + 1 + off))
    if win is not None:
        key_end = np.minimum(key_end, np.maximum(0, q_hi + 1 + off + win.right))
        key_begin = np.minimum(nk, np.maximum(0, q_lo + off - win.left))
    t_begin, t_end = key_begin // bc, -(-key_end // bc)
    if prob.parts > 1:
        lo, hi = split_tiles(-(-nk // bc), prob.parts, split)
        t_begin, t_end = np.maximum(t_begin, lo), np.minimum(t_end, hi)
    return t_begin, np.maximum(0, t_end - t_begin)


def grid_blocks(prob: ServingProblem, index: SequenceIndex) -> Blocks:
    """Every block of ``prob``'s grid that runs, in the grid's order (x fastest, then y, then z; a block's warps in
    order with warp_split)."""
    cfg = prob.config
    bm, group, pack = cfg.block_m, prob.group, cfg.pack_gqa
    _, nq_b, _, nk_b = index.lengths(prob)
    gx, gy, gz = prob.grid
    z, y, x = (a.ravel() for a in np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij"))
    b, s = z // prob.num_splits, z % prob.num_splits
    rows_b = nq_b * group if pack else nq_b
    run = x * bm < rows_b[b]
    b, s, y, x = b[run], s[run], y[run], x[run]
    w = cfg.warp_split
    if w > 1:  # warp j of a block: part s * W + j
        b, y, x = (np.repeat(a, w) for a in (b, y, x))
        s = np.repeat(s * w, w) + np.tile(np.arange(w), s.size)
    p = x[:, None] * bm + np.arange(bm)[None, :]  # (U, BM) packed rows
    if pack:
        q_row, q_head, kv_head = p // group, y[:, None] * group + p % group, y
        q_lo, q_hi = (x * bm) // group, (x * bm + bm - 1) // group
    else:
        q_row, q_head, kv_head = p, np.broadcast_to(y[:, None], p.shape), y // group
        q_lo, q_hi = x * bm, x * bm + bm - 1
    valid = p < rows_b[b][:, None]
    t0, tiles = block_tiles(prob, q_lo, q_hi, nq_b[b], nk_b[b], s)
    return Blocks(b, s, y, x, kv_head, t0, tiles, q_row, np.ascontiguousarray(q_head), valid)
