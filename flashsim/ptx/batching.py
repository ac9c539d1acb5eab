"""Deferred mma.sync: the mma's of a basic block run as a few batched tensor-core calls instead of one call each.

A kernel's inner loop issues long runs of mma.sync: FlashAttention's Q K^T is a chain of in-place mma's per
output tile (``d = a b + d`` along K), one chain per tile of N, all tiles sharing the A fragments; P V the same.
One call of the tensor-core model per mma is dominated by its fixed cost, so the machine defers them:

- ``plan(prog)``, once per program: in each basic block, an unguarded mma may be deferred; an instruction that
  names a register a deferred mma will write (its D registers) must see the result, so the pending mma's are
  flushed before it, as they are before an mma that reads a pending D as its A or B, or that accumulates into a
  pending D without overwriting it in place, and at the end of the block.
- at run time a deferred mma records references to its A, B (and, starting a chain, C) register arrays, which are
  immutable (every write replaces the array), so later writes of those registers cannot change what it reads.
- ``flush`` links each mma whose C registers are the D of the chain's last mma and whose D are its own C (in
  place: the intermediate result is never visible) into that chain; chains of equal length whose steps read the
  same A arrays become one product with their B and C side by side along N (each output column of an mma is its
  own dot product: the arithmetic per element is unchanged); what is left of the same shape is stacked along the
  batch axis. Each group is one call of the model, the same chain the emulator's kernel program computes; the bits
  are those of one mma at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MmaInfo", "Plan", "plan", "Pending", "flush"]


@dataclass(frozen=True, eq=False)
class MmaInfo:
    """What an mma op tells the batcher: ``key`` (shape and types: only equal keys batch), register slots ``a``,
    ``b``, ``c``, ``d`` (one per fragment register), the member-mask slot, ``tiles(wa, wb, wc)`` (fragment words
    (W, 32, regs) -> (W, 16, K), (W, K, 8), (W, 16, 8) tiles), ``words(out)`` ((W, 16, 8) -> (W, 32, regs) words),
    ``model(a, b, c)`` (a chain of K / step steps when ``chainable``) and ``step`` (the K of one mma)."""

    key: tuple
    a: tuple
    b: tuple
    c: tuple
    d: tuple
    member: int
    tiles: object
    words: object
    model: object
    chainable: bool
    step: int


@dataclass(frozen=True)
class Plan:
    """Per PC: whether its mma may be deferred, and whether pending mma's must be flushed before it runs."""

    deferrable: np.ndarray
    flush_before: np.ndarray


def plan(prog) -> Plan:
    """The deferral plan of ``prog`` (flashsim.ptx.program.Program): see the module docstring."""
    n = len(prog.ops)
    deferrable = np.zeros(n, bool)
    flush_before = np.zeros(n, bool)
    for start in np.flatnonzero(prog.block_end >= 0):
        pending: set[int] = set()
        chains: set[tuple] = set()
        for pc in range(int(start), int(prog.block_end[start]) + 1):
            op = prog.ops[pc]
            info = op.info if isinstance(op.info, MmaInfo) else None
            if info is None:
                if pending and not pending.isdisjoint(op.regs):
                    flush_before[pc] = True
                    pending, chains = set(), set()
                continue
            reads_pending = not pending.isdisjoint(info.a + info.b)
            in_place = info.chainable and info.c == info.d and info.c in chains
            if reads_pending or (not in_place and not pending.isdisjoint(info.c + info.d)):
                flush_before[pc] = True
                pending, chains = set(), set()
            deferrable[pc] = True
            pending.update(info.d)
            chains.add(info.d)
    return Plan(deferrable, flush_before)


class Pending:
    """The mma's deferred in one run of a block: entries (info, warp threads or None, A refs, B refs, C refs)."""

    __slots__ = ("entries", "threads")

    def __init__(self):
        self.entries: list = []
        self.threads = None  # the (W, 32) threads of the pending mma's (None: every thread of the wave)

    def add(self, g, info: MmaInfo, threads) -> None:
        R = g.R
        self.entries.append((info, [R[s] for s in info.a], [R[s] for s in info.b], [R[s] for s in info.c]))
        self.threads = threads


def _words(refs, threads, T: int) -> np.ndarray:
    """(W, 32, len(refs)) uint32: the registers ``refs`` (arrays over the wave, or scalars) of the warps."""
    out = np.empty((T, len(refs)), np.uint32)
    for k, r in enumerate(refs):
        out[:, k] = r
    return out.reshape(T // 32, 32, len(refs)) if threads is None else out[threads]


def flush(g, pending: Pending, scatter) -> None:
    """Compute every pending mma of ``pending`` for group ``g`` and write their D registers (``scatter(g, slots,
    threads, words)``, flashsim.ptx.semantics.matrix's)."""
    entries, threads = pending.entries, pending.threads
    pending.entries, pending.threads = [], None
    if not entries:
        return
    T = g.m.T
    chains: list[dict] = []
    open_chain: dict[tuple, dict] = {}
    for info, a, b, c in entries:
        chain = open_chain.get(info.c) if info.chainable and info.c == info.d else None
        if chain is not None and chain["info"].key == info.key:
            chain["steps"].append((a, b))
            continue
        chain = {"info": info, "steps": [(a, b)], "c": c}
        chains.append(chain)
        for s in info.d:  # a later chain writing these registers closes the older one
            for k in [k for k in open_chain if s in k]:
                del open_chain[k]
        open_chain[info.d] = chain
    # N: chains of one key and length whose steps read the same A arrays
    groups: dict[tuple, list] = {}
    for ch in chains:
        # side by side along N only for the chained model (the single-step m16n8k32 model takes N = 8)
        ident = tuple(tuple(id(x) for x in a) for a, _ in ch["steps"]) if ch["info"].chainable else id(ch)
        groups.setdefault((ch["info"].key, len(ch["steps"]), ident), []).append(ch)
    # batch: groups of one key, length and width stacked along the warps
    stacks: dict[tuple, list] = {}
    for (key, length, _), group in groups.items():
        stacks.setdefault((key, length, len(group)), []).append(group)
    for stack in stacks.values():
        _compute(g, stack, threads, T, scatter)


def _tiles_of(info: MmaInfo, which: int, words: np.ndarray, count: int) -> np.ndarray:
    """(count, W, rows, cols) tiles of operand ``which`` (0 A, 1 B, 2 C) from (W, 32, count * regs) words."""
    W = words.shape[0]
    regs = words.shape[2] // count
    stacked = words.reshape(W, 32, count, regs).transpose(2, 0, 1, 3).reshape(count * W, 32, regs)
    args = [None, None, None]
    args[which] = stacked
    tile = info.tiles(*args)[which]
    return tile.reshape((count, W) + tile.shape[1:])


def _compute(g, stack: list, threads, T: int, scatter) -> None:
    """One model call for ``stack``: groups of equal shape, each chains side by side along N."""
    info = stack[0][0]["info"]
    length, width = len(stack[0][0]["steps"]), len(stack[0])
    a_parts, b_parts, c_parts = [], [], []
    for group in stack:
        a_refs = [r for a, _ in group[0]["steps"] for r in a]
        b_refs = [r for k in range(length) for ch in group for r in ch["steps"][k][1]]
        c_refs = [r for ch in group for r in ch["c"]]
        ta = _tiles_of(info, 0, _words(a_refs, threads, T), length)  # (L, W, 16, k)
        tb = _tiles_of(info, 1, _words(b_refs, threads, T), length * width)  # (L * n, W, k, 8)
        tc = _tiles_of(info, 2, _words(c_refs, threads, T), width)  # (n, W, 16, 8)
        W, M, K = ta.shape[1:]
        N = tb.shape[-1]
        a_parts.append(ta.transpose(1, 2, 0, 3).reshape(W, M, length * K))
        b_parts.append(tb.reshape(length, width, W, K, N).transpose(2, 0, 3, 1, 4).reshape(W, length * K, width * N))
        c_parts.append(tc.transpose(1, 2, 0, 3).reshape(W, M, width * N))
    a = np.concatenate(a_parts, axis=0) if len(a_parts) > 1 else a_parts[0]
    b = np.concatenate(b_parts, axis=0) if len(b_parts) > 1 else b_parts[0]
    c = np.concatenate(c_parts, axis=0) if len(c_parts) > 1 else c_parts[0]
    out = info.model(a, b, c)  # (stack * W, 16, width * 8)
    W, M = a_parts[0].shape[:2]
    N = out.shape[-1] // width
    tiles = out.reshape(len(stack), W, M, width, N).transpose(0, 3, 1, 2, 4).reshape(len(stack) * width * W, M, N)
    words = info.words(np.ascontiguousarray(tiles))  # (stack * n * W, 32, regs)
    regs = words.shape[-1]
    words = words.reshape(len(stack), width, W, 32, regs)
    for s, group in enumerate(stack):
        slots = [x for ch in group for x in ch["info"].d]
        scatter(g, slots, threads, words[s].transpose(1, 2, 0, 3).reshape(W, 32, width * regs))
