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
    ``b``, ``c``, ``d`` (one per fragment register), the member-mask slot, the operands' fragment maps
    (flashsim.layout.fragments) and element dtypes, and ``model(a, b, c)`` on (W, 16, K) x (W, K, N) tiles (a chain
    of k16 steps when ``chainable``)."""

    key: tuple
    a: tuple
    b: tuple
    c: tuple
    d: tuple
    member: int
    maps: tuple  # (A, B, C) FragmentMaps
    dtypes: tuple  # (A, B, C) element dtypes
    model: object
    chainable: bool


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


def _stacked(refs, T: int, per: int) -> np.ndarray:
    """The registers ``refs`` (arrays over the wave, or scalars) as one flat array of fragment elements: element
    ``half`` of register ``i`` of thread ``t`` at ``(i * T + t) * per + half``."""
    out = np.empty((len(refs), T), np.uint32)
    for i, r in enumerate(refs):
        out[i] = r
    return out.view(np.dtype(f"u{4 // per}")).reshape(-1)


_TABLES: dict = {}


def _operand_table(fmap, steps: int, chains: int, T: int, along_k: bool):
    """(static flat offsets, lane of each) of an operand tile (rows, cols) built from ``steps`` x ``chains``
    instruction fragments: the A operand along K (steps side by side in its columns), B along K (rows) and N (chains
    in its columns), C along N. Registers of fragment (step l, chain j) come at ref (l * chains + j) * regs."""
    key = (fmap.name, steps, chains, T, along_k)
    got = _TABLES.get(key)
    if got is None:
        per, regs = fmap.per_reg, fmap.regs
        lane, elem = fmap.lane_of, fmap.elem_of  # (rows, cols)
        base = (elem // per) * T * per + elem % per
        out_rows, out_cols = [], []
        for l in range(steps):
            row_parts = [(base + ((l * chains + j) * regs) * T * per) for j in range(chains)]
            out_cols.append(np.concatenate(row_parts, axis=1))
            out_rows.append(np.concatenate([lane] * chains, axis=1))
        if along_k:  # A: steps side by side in the columns
            static, lanes = np.concatenate(out_cols, axis=1), np.concatenate(out_rows, axis=1)
        else:  # B (steps stacked in the rows) and C (one step)
            static, lanes = np.concatenate(out_cols, axis=0), np.concatenate(out_rows, axis=0)
        got = _TABLES[key] = (static, lanes)
    return got


def _operand(refs, fmap, dtype, steps: int, chains: int, threads, T: int, along_k: bool) -> np.ndarray:
    """The (W, rows, cols) tile of one operand from its registers (``_operand_table``), in ``dtype``."""
    flat = _stacked(refs, T, fmap.per_reg)
    if threads is None:  # every warp of the wave: the whole index, once per shape
        key = ("all", fmap.name, steps, chains, T, along_k)
        index = _TABLES.get(key)
        if index is None:
            static, lanes = _operand_table(fmap, steps, chains, T, along_k)
            index = _TABLES[key] = static[None] + np.arange(T).reshape(-1, 32)[:, lanes] * fmap.per_reg
    else:
        static, lanes = _operand_table(fmap, steps, chains, T, along_k)
        index = static[None] + threads[:, lanes] * fmap.per_reg  # (W, rows, cols)
    return np.take(flat, index).view(dtype)


def _result_table(fmap, chains: int):
    """For D of ``chains`` side by side (rows, chains * cols): (nslots, 32, per) offsets into one warp's flat tile."""
    key = ("D", fmap.name, chains)
    got = _TABLES.get(key)
    if got is None:
        per, regs, cols = fmap.per_reg, fmap.regs, fmap.cols
        width = chains * cols
        e = np.arange(regs * per).reshape(regs, per)  # element of (reg, half)
        r, c = fmap.row[:, e], fmap.col[:, e]  # (32, regs, per)
        parts = [(r * width + c + j * cols).transpose(1, 0, 2) for j in range(chains)]  # (regs, 32, per) each
        got = _TABLES[key] = np.concatenate(parts, axis=0)
    return got


def _compute(g, stack: list, threads, T: int, scatter) -> None:
    """One model call for ``stack``: groups of equal shape, each chains side by side along N."""
    info = stack[0][0]["info"]
    amap, bmap, cmap = info.maps
    adt, bdt, cdt = info.dtypes
    length, width = len(stack[0][0]["steps"]), len(stack[0])
    a_parts, b_parts, c_parts = [], [], []
    for group in stack:
        a_refs = [r for a, _ in group[0]["steps"] for r in a]
        b_refs = [r for k in range(length) for ch in group for r in ch["steps"][k][1]]
        c_refs = [r for ch in group for r in ch["c"]]
        a_parts.append(_operand(a_refs, amap, adt, length, 1, threads, T, True))
        b_parts.append(_operand(b_refs, bmap, bdt, length, width, threads, T, False))
        c_parts.append(_operand(c_refs, cmap, cdt, 1, width, threads, T, False))
    a, b, c = (np.concatenate(p, axis=0) if len(p) > 1 else p[0] for p in (a_parts, b_parts, c_parts))
    out = np.ascontiguousarray(info.model(a, b, c))  # (stack * W, 16, width * 8)
    W = a_parts[0].shape[0]
    per = cmap.per_reg
    table = _result_table(cmap, width)  # (width * regs, 32, per)
    tile = out.shape[1] * out.shape[2]
    flat = out.view(np.dtype(f"u{4 // per}")).reshape(-1)
    key = ("D index", cmap.name, width, W, tile)
    index = _TABLES.get(key)
    if index is None:
        index = _TABLES[key] = table[:, None] + np.arange(W)[None, :, None, None] * tile
    for s, group in enumerate(stack):
        words = np.take(flat, index + s * W * tile if s else index).view(np.uint32)  # (slots, W, 32, 1)
        slots = [x for ch in group for x in ch["info"].d]
        scatter(g, slots, threads, words.reshape(len(slots), W * 32))
