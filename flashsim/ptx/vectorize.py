"""Independent lane-wise instructions of a basic block run together, stacked along a new leading axis.

A kernel's unrolled loops issue the same instruction on many registers: FlashAttention's softmax is 64 ``ex2`` of
64 scores per thread, each with its ``fma`` and ``add`` around it. One numpy call per instruction over the wave's
threads is dominated by its fixed cost; one call over (K, threads) for K such instructions is not. So:

- a builder whose ``run(g)`` is lane-wise marks its op ``info=ELEMENTWISE``: it reads registers only as
  ``g.R[slot]`` of its own slots, computes element by element (numpy broadcasting over any leading axes) and writes
  only through ``g.write(slot, value)``. Everything else (memory, warp-synchronous and control instructions, mma)
  is a barrier that keeps its place. Its destinations must come from ``Decoded.dst`` (``Op.writes``).
- ``schedule(prog)``, once per program: between two barriers, the lane-wise ops form a dependence graph (one
  depends on an earlier one that writes a register it reads or writes, or that reads a register it writes); list
  scheduling takes, at each step, every ready op of the most common *congruent* kind: ops whose ``run`` closures
  have the same code and the same values in every cell except their register slots (so the same opcode,
  modifiers and constants).
- at run time a group runs the first op's ``run`` once on a ``StackedGroup``: its slot ``s`` reads the K ops'
  corresponding registers stacked into one (K, threads) array, and its writes go, row by row, to each op's own
  destination. The arithmetic per element is the op's own: the bits do not change (tests/test_ptx_batching.py and
  tests/test_ptx_fused_stacking.py run kernels both ways).
- a run of consecutive groups that is a dependent chain (each op reads the result of its column's op in the group
  before, and otherwise only registers the chain does not write), of a form whose ``run`` names the numerics of a
  whole chain (``run.chain``: a row sum's add.rn.f32, a row max's max.f32), runs as one ``Chain``: one call of those
  numerics (numerics.ieee32.add_chain / fmax_chain, each the bits of its steps), every link's result written
  (tests/test_ptx_chains.py).
- with few of the wave's threads running (a warp-specialised kernel's consumers while its producer waits), a group
  computes on their columns alone, taken as whole warps; its K results become the rows of one array, which a later
  group reading those registers (still those rows) takes as it is instead of stacking them again, as it does a
  wgmma's accumulators (``remember``: the wave's ``Machine.stacked``).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

__all__ = ["ELEMENTWISE", "schedule", "run_group", "Schedule", "Chain"]


class _Elementwise:
    """The ``info`` of a lane-wise op (the module docstring)."""

    def __repr__(self) -> str:
        return "ELEMENTWISE"


ELEMENTWISE = _Elementwise()


def _key(op):
    """(the congruence key, the closure's slot cells) of an ELEMENTWISE op, or None when its closure cannot be read.
    A cell is a slot when it holds an int (not a bool) among the op's registers. The key records which slot cells
    hold the same register (``add %r1, %r2, %r2`` is not congruent with ``add %r1, %r2, %r3``: stacked, their
    cells would map one slot to two columns)."""
    fn = op.run
    cells = fn.__closure__ or ()
    parts, slots = [fn.__code__], []
    first_cell: dict[int, int] = {}
    for i, cell in enumerate(cells):
        try:
            v = cell.cell_contents
        except ValueError:
            return None
        if type(v) is int and v in op.regs:
            parts.append((i, "slot", first_cell.setdefault(v, i)))
            slots.append(i)
            continue
        try:
            hash(v)
            parts.append((i, type(v), v))
        except TypeError:
            parts.append((i, "id", id(v)))
    return tuple(parts), tuple(slots)


class Schedule:
    """Per block start PC: the order to run its ops in, a list of items, each a PC (run alone), a tuple of PCs (a
    congruent group run once, stacked) or a Chain; ``flush_first`` the items before which pending mma's are
    flushed; ``plans`` what running each group or chain needs, made on its first run."""

    def __init__(self):
        self.items: dict[int, list] = {}
        self.flush_first: dict[int, set] = {}
        self.plans: dict = {}  # per group or chain, what running it needs of its ops (kept with the program)


def schedule(prog, flush_before) -> Schedule:
    """The grouped order of every block of ``prog`` that has a group of two or more (the module docstring);
    ``flush_before``: flashsim.ptx.batching's per-PC flush flags, moved to the start of each reordered segment."""
    out = Schedule()
    keys = {}
    for pc, op in enumerate(prog.ops):
        if op.info is ELEMENTWISE:
            k = _key(op)
            if k is not None:
                keys[pc] = k
    for start in np.flatnonzero(prog.block_end >= 0):
        start, end = int(start), int(prog.block_end[start])
        items, flush, grouped = [], set(), False
        segment: list[int] = []

        def close():
            nonlocal grouped
            if not segment:
                return
            first = len(items)
            for item in _link_chains(prog, _list_schedule(prog, segment, keys), keys):
                items.append(item)
                grouped |= isinstance(item, tuple)
            if any(flush_before[p] for p in segment):
                flush.add(first)
            segment.clear()

        for pc in range(start, end + 1):
            if pc in keys:
                segment.append(pc)
                continue
            close()
            if flush_before[pc]:
                flush.add(len(items))
            items.append(pc)
        close()
        if grouped:
            out.items[start] = items
            out.flush_first[start] = flush
    return out


def _list_schedule(prog, segment: list[int], keys: dict) -> list:
    """Segment ``segment`` (PCs of lane-wise ops, in program order) as a list of PCs and tuples of PCs."""
    n = len(segment)
    regs = [prog.ops[p].regs for p in segment]
    writes = [prog.ops[p].writes for p in segment]
    preds = [set() for _ in range(n)]
    for j in range(n):
        for i in range(j):  # j after i: it reads or writes what i writes, or writes what i reads
            if not writes[i].isdisjoint(regs[j]) or not writes[j].isdisjoint(regs[i]):
                preds[j].add(i)
    done: set[int] = set()
    out = []
    ready = [j for j in range(n) if not preds[j]]
    while ready:
        by_key = Counter(keys[segment[j]][0] for j in ready)
        best = max(by_key, key=lambda k: (by_key[k], -min(j for j in ready if keys[segment[j]][0] == k)))
        chosen = [j for j in ready if keys[segment[j]][0] == best]
        out.append(segment[chosen[0]] if len(chosen) == 1 else tuple(segment[j] for j in chosen))
        done.update(chosen)
        pending = set(range(n)) - done
        ready = sorted(j for j in pending if preds[j] <= done)
    return out


class Chain(tuple):
    """A dependent chain of lane-wise ops run at once: the PCs of its ``groups`` (tuples of K congruent PCs, one per
    chain), each op of group j + 1 reading the result of the op in its column of group j as one operand. Built by
    ``_link_chains`` for ops whose ``run`` has a ``chain`` attribute (dst slot, the two source slots, the numerics of
    the chain: x (n + 1, ...) float32 -> the n results, e.g. numerics.ieee32.add_chain); run by ``run_chain``."""

    def __new__(cls, groups):
        self = super().__new__(cls, [pc for group in groups for pc in group])
        self.groups = tuple(groups)
        return self


def _link_chains(prog, items: list, keys: dict) -> list:
    """``items`` (one segment's schedule) with every run of two or more consecutive items that form a dependent
    chain (``_extends``) replaced by one Chain."""
    out, i = [], 0
    while i < len(items):
        run = [items[i] if type(items[i]) is tuple else (items[i],)]
        j = i + 1
        while j < len(items):
            nxt = _extends(prog, run, items[j], keys)
            if nxt is None:
                break
            run.append(nxt)
            j += 1
        out.append(Chain(run) if len(run) > 1 else items[i])
        i = j
    return out


def _extends(prog, run: list, item, keys: dict):
    """``item`` as the next group of the chain ``run`` (its PCs in the order of ``run``'s columns), or None: it must
    be congruent with the chain's ops, each of its ops must read the result of exactly one op of the last group as one
    operand, and read as the other a register no op of the chain writes (read when the chain starts)."""
    group = item if type(item) is tuple else (item,)
    last = run[-1]
    ops = prog.ops
    if len(group) != len(last) or getattr(ops[last[0]].run, "chain", None) is None:
        return None
    if group[0] not in keys or keys[group[0]][0] != keys[last[0]][0]:
        return None
    column = {ops[p].run.chain[0]: k for k, p in enumerate(last)}
    written = {ops[p].run.chain[0] for g in run for p in g}
    ordered = [None] * len(last)
    for q in group:
        a, b = ops[q].run.chain[1]
        if (a in column) == (b in column):
            return None
        k = column[a] if a in column else column[b]
        if (b if a in column else a) in written or ordered[k] is not None:
            return None
        ordered[k] = q
    return tuple(ordered)


def run_chain(g, prog, chain: Chain, memo: dict) -> None:
    """Run a Chain: its registers read at once (the first group's two operands, then each later op's other one),
    its numerics once over the whole chain, and every op's result written to its destination."""
    plans = prog.schedule.plans
    plan = plans.get(chain)
    if plan is None:
        plan = plans[chain] = _chain_plan(prog, chain)
    reads, targets, scan = plan
    n, K, T = len(chain.groups), len(chain.groups[0]), g.m.T
    lanes, warps = _compact_lanes(g, T, memo)
    regs = _StackedRegs(g.R, {0: reads}, len(reads), T, lanes, warps, memo)
    width = T if lanes is None else lanes.size
    x = np.asarray(regs[0]).astype(np.uint32, copy=False)
    x = np.ascontiguousarray(np.broadcast_to(x, (len(reads), width))).reshape(n + 1, K, width)
    value = np.asarray(scan(x.view(np.float32))).view(np.uint32).reshape(n * K, -1)
    if g.mask is not None and _write_rows(g, targets, value, lanes, warps, memo):
        return
    for k, target in enumerate(targets):  # in order: a register written twice keeps the later result
        if lanes is None:
            g.write(target, value[k])
            continue
        new = np.broadcast_to(np.asarray(g.R[target]), (T,)).astype(g.m.dtypes[target], copy=True)
        new[lanes] = value[k]
        g.R[target] = new


def _chain_plan(prog, chain: Chain):
    """(registers to read, in the order of the numerics' x: the first group's operands, then each later op's other
    operand, K per step; destinations, n * K in order; the numerics)."""
    ops = prog.ops
    first = chain.groups[0]
    reads = [ops[p].run.chain[1][0] for p in first] + [ops[p].run.chain[1][1] for p in first]
    for prev, group in zip(chain.groups, chain.groups[1:]):
        for p, q in zip(prev, group):
            a, b = ops[q].run.chain[1]
            reads.append(b if a == ops[p].run.chain[0] else a)
    targets = [ops[p].run.chain[0] for group in chain.groups for p in group]
    return reads, targets, ops[first[0]].run.chain[2]


class _StackedRegs:
    """``R`` as the first op of a group sees it: its slot cells read the K ops' registers stacked; with ``lanes``
    (the running threads' indices) every register comes restricted to those threads, (K, L) or (L,); ``warps``: the
    same threads as whole warps (indices of rows of 32), or None where they are not."""

    __slots__ = ("R", "maps", "K", "T", "cache", "lanes", "warps", "memo")

    def __init__(self, R, maps, K, T, lanes=None, warps=None, memo=None):
        self.R, self.maps, self.K, self.T, self.lanes, self.warps = R, maps, K, T, lanes, warps
        self.cache = {}
        self.memo = memo  # the machine's record of the last stacked writes (``_write_rows``), or None

    def _columns(self, x):
        """The running threads' columns of ``x`` (..., T)."""
        if self.warps is not None:  # whole warps: rows of 32 taken as runs (much cheaper than a column gather)
            lead = x.shape[:-1]
            return np.take(x.reshape(lead + (-1, 32)), self.warps, axis=-2).reshape(lead + (-1,))
        return np.take(x, self.lanes, axis=-1)

    def __getitem__(self, slot):
        got = self.cache.get(slot)
        if got is not None:
            return got
        m = self.maps.get(slot)
        if m is None:
            got = self.R[slot]
        else:
            values = [self.R[s] for s in m]
            if all(v is values[0] for v in values):
                got = values[0]
            elif all(np.ndim(v) == 0 for v in values):
                got = np.array(values)[:, None]
            else:
                T = self.T
                known = _written(self.memo, m, values, self.lanes)
                if known is not None:  # registers written together: their array as it was
                    got, was = known
                    if was is None and self.lanes is not None:
                        got = self._columns(got)
                    self.cache[slot] = got
                    return got
                if all(type(v) is np.ndarray and v.shape == (T,) for v in values):
                    got = np.stack(values)
                else:
                    got = np.stack([np.broadcast_to(v, (T,)) for v in values])
                if self.lanes is not None:  # one gather of the running columns for the K registers
                    got = self._columns(got)
                    self.cache[slot] = got
                    return got
        if self.lanes is not None and np.ndim(got) and np.shape(got)[-1] == self.T:
            got = self._columns(got)
        self.cache[slot] = got
        return got


class StackedGroup:
    """The group a stacked run sees: the real group's lanes and mask, stacked registers, recorded writes."""

    __slots__ = ("g", "R", "m", "mask", "pc", "ctl", "writes")

    def __init__(self, g, maps, K, lanes=None, warps=None, memo=None):
        self.g, self.m, self.mask, self.pc, self.ctl = g, g.m, g.mask, g.pc, g.ctl
        self.R = _StackedRegs(g.R, maps, K, g.m.T, lanes, warps, memo)
        self.writes = []

    def write(self, slot, value) -> None:
        self.writes.append((slot, value))

    def lanes(self):
        return self.g.lanes()

    def active(self):
        return self.g.active()


# A group whose running threads are at most this share of the wave computes on those threads alone (the registers'
# running columns stacked, the results scattered back): a warp-specialised kernel's consumer warpgroups run while
# its producer waits, so a third of the wave or less, and lane-wise arithmetic costs per element.
COMPACT_SHARE = 0.5


def run_group(g, prog, pcs: tuple, memo: dict) -> None:
    """Run the congruent ops at ``pcs`` as one stacked call of the first one's ``run`` (the module docstring), or a
    Chain as one call of its numerics."""
    if type(pcs) is Chain:
        run_chain(g, prog, pcs, memo)
        return
    ops = [prog.ops[p] for p in pcs]
    plans = prog.schedule.plans
    slots = plans.get(pcs)
    if slots is None:
        slots = plans[pcs] = _slot_maps(ops)
    K, T = len(ops), g.m.T
    lanes, warps = _compact_lanes(g, T, memo)
    sg = StackedGroup(g, slots, K, lanes, warps, memo)
    ops[0].run(sg)
    width = T if lanes is None else lanes.size
    for slot, value in sg.writes:
        targets = slots.get(slot)
        value = np.asarray(value)
        if targets is None:
            raise RuntimeError(f"a stacked {ops[0].name} wrote register slot {slot}, not one of its own")
        per_op = value.ndim == 2 and value.shape[0] == K
        if g.mask is not None and value.ndim <= 2 and (value.ndim < 2 or per_op):
            # every op's row at once (a value the ops share, such as a register they all read, broadcast)
            try:
                rows = np.broadcast_to(value, (K, width))
            except ValueError:
                rows = None
            if rows is not None and _write_rows(g, targets, rows, lanes, warps, memo):
                continue
        for k, target in enumerate(targets):
            v = value[k] if per_op else value
            if v.ndim == 1 and v.shape[0] != width:
                v = np.broadcast_to(v, (width,))
            if lanes is None:
                g.write(target, v)
                continue
            dtype = g.m.dtypes[target]  # the running columns replaced, in a new array (registers are not mutated)
            new = np.broadcast_to(np.asarray(g.R[target]), (T,)).astype(dtype, copy=True)
            new[lanes] = v.astype(dtype, copy=False)
            g.R[target] = new


def _compact_lanes(g, T: int, memo) -> tuple:
    """(running lanes, their whole warps) where a masked group runs on at most COMPACT_SHARE of the wave's threads
    (it then computes on those alone), else (None, None): every thread."""
    if g.mask is None:
        return None, None
    lanes = g.lanes()
    if lanes.size > COMPACT_SHARE * T:
        return None, None
    return lanes, _whole_warps(lanes, T, memo)


def _whole_warps(lanes, T: int, memo: dict):
    """The indices of the warps (rows of 32 threads) that ``lanes`` is, where it is whole warps of a wave of whole
    warps; else None. Remembered for the last ``lanes`` array (a block's ops share their group's)."""
    last = memo.get(_WARPS)
    if last is not None and last[0] is lanes:
        return last[1]
    warps = None
    if T % 32 == 0 and lanes.size % 32 == 0:
        first = lanes[::32]
        if not (first % 32).any() and (lanes.reshape(-1, 32) - first[:, None] == np.arange(32)).all():
            warps = first // 32
    memo[_WARPS] = (lanes, warps)
    return warps


_WARPS = ("whole warps",)  # the memo's key (never a tuple of PCs)


def _write_rows(g, targets, value, lanes, warps=None, memo=None) -> bool:
    """Registers ``targets[k]`` := row k of ``value`` (K, width) on the running lanes of a masked group (``lanes``:
    the columns of the compacted threads, ``warps`` the same as whole warps or None; or None when ``value`` spans
    the wave), all at once: the K old registers stacked, the new values merged in one call, each register then a row
    of that one array (registers are never written in place). False (nothing written) where the targets' dtypes
    differ."""
    dtypes = g.m.dtypes
    dt = dtypes[targets[0]]
    if any(dtypes[t] != dt for t in targets):
        return False
    R = g.R
    base = np.empty((len(targets), g.m.T), dt)
    for k, t in enumerate(targets):  # a register may hold a scalar: broadcast by the assignment
        base[k] = R[t]
    if lanes is None:
        np.copyto(base, value, casting="unsafe", where=g.mask[None, :])
    elif warps is not None:  # whole warps: rows of 32 written as runs
        base.reshape(len(targets), -1, 32)[:, warps, :] = value.reshape(len(targets), -1, 32)
    else:
        base[:, lanes] = value
    rows = [base[k] for k in range(len(targets))]
    for t, row in zip(targets, rows):
        R[t] = row
    if memo is not None and (lanes is None or value.dtype == dt):  # what a stacked read of the rows would give
        remember(memo, targets, rows, lanes, base if lanes is None else value)
    return True


# Registers written together as the rows of one array (a stacked group's results, ``_write_rows``; a wgmma's
# accumulators): a group that reads some of them, still those rows, takes them from that array (its running columns,
# where they were kept) instead of stacking the K registers and gathering their columns again: an unrolled loop's
# steps (the scores out of the wgmma, their scale, the max subtracted, the ex2) pass their registers along this way.
_WRITTEN = ("rows written together",)  # the memo's key (never a tuple of PCs): {slot: (entry, row)}


def remember(memo: dict, targets, rows, lanes, stacked) -> None:
    """Record that registers ``targets`` are now ``rows`` (views of one array), whose values on the threads ``lanes``
    (None: every thread of the wave) are ``stacked`` (len(targets), width), in ``memo`` (the machine's
    ``stacked``)."""
    index = memo.setdefault(_WRITTEN, {})
    entry = (rows, lanes, stacked)
    for k, t in enumerate(targets):
        index[t] = (entry, k)


def _written(memo, slots, values, lanes):
    """(the stacked array (K, width) of registers ``slots``, whose values are ``values`` now, and the threads it holds:
    ``lanes``, or None for the whole wave), where they are rows recorded by ``remember`` on those threads or on the
    whole wave; else None."""
    index = memo.get(_WRITTEN) if memo is not None else None
    if not index:
        return None
    got = index.get(slots[0])
    if got is None:
        return None
    entry = got[0]
    rows, was, stacked = entry
    if was is not None and was is not lanes and (lanes is None or not np.array_equal(was, lanes)):
        return None
    idx = []
    for s, v in zip(slots, values):
        got = index.get(s)
        if got is None or got[0] is not entry or v is not rows[got[1]]:
            return None
        idx.append(got[1])
    if len(idx) != len(rows) or idx != list(range(len(rows))):
        stacked = np.take(stacked, idx, axis=0)
    return stacked, was


def _slot_maps(ops) -> dict:
    """{slot of the first op: the K ops' corresponding slots}, from their closures' slot cells."""
    cells = [[c.cell_contents for c in op.run.__closure__] for op in ops]
    first = ops[0]
    maps: dict[int, list] = {}
    for i, v in enumerate(cells[0]):
        if type(v) is int and v in first.regs:
            column = [c[i] for c in cells]
            known = maps.get(v)
            if known is not None and known != column:
                raise RuntimeError(f"inconsistent register cells in a stacked {first.name}")
            maps[v] = column
    return maps
