"""Atomics: ``atom`` and ``red`` (PTX ISA, "Parallel Synchronization and Communication Instructions: atom / red")
on .global, .shared (.shared::cta; .shared::cluster: the CTA's own or another CTA's of its cluster, through a
shared::cluster address) and generic addresses.

Forms: .and / .or / .xor (.b32 .b64), .exch (.b32 .b64), .cas (.b16 .b32 .b64; atom only), .add (.u32 .s32 .u64
.f32 .f64, and .noftz .f16 .f16x2 .bf16 .bf16x2), .inc / .dec (.u32), .min / .max (.u32 .s32 .u64 .s64); the sm_90
vector forms on .global: .add .v2 / .v4 .f32, .add .v2 / .v4 / .v8 .f16 / .bf16 and .v2 / .v4 .f16x2 / .bf16x2
(``{...}`` operands; each element is one atomic operation). .inc: ``old >= b ? 0 : old + 1``; .dec: ``old == 0 ||
old > b ? b : old - 1`` (unsigned). Float adds round to nearest even; atom.add.f32 flushes subnormal inputs and
results to sign-preserving zero on global memory and keeps them on shared memory, as the ISA says (a silicon probe
pins both); .noftz halves and f64 keep subnormals; NaN results of f32 and the halves are canonical
(flashsim.numerics.ieee32), those of f64 the double-precision adder's (numerics.ieee.nan_result: the NaN operand
quieted, 0xFFF8000000000000 for inf - inf; memory/own_atom_add_f64_*, own_red_add_f64_*).

Serialisation: an instruction's lanes that hit the same location (the same global address, or the same shared
offset of one block) are applied one after another in thread-index order (elements of one lane's vector in
element order), each lane's ``d`` the value before its own update. Any order is one the GPU may pick, and the
probes check only what no order changes (final values; the multiset of returned values against the final).
Vectorised: the lanes are sorted by location (a stable sort keeps thread order), associative integer operations
run as segmented scans (log2(n) whole-array steps), exch as a shift, and the rest (float adds, .inc / .dec, .cas)
as a loop over the rank within a location: as many whole-array steps as the most lanes on one location.

Memory order: .relaxed / .acquire / .release / .acq_rel and the scopes .cta / .cluster / .gpu / .sys are accepted
and change nothing. All threads of a launch share one memory, and every instruction reads and writes it at once
when it runs, in the scheduler's order: the execution is sequentially consistent. That is a valid execution of the
PTX memory model for every program: it respects program order and coherence, each atomic is indivisible, and
fences and scopes only forbid outcomes, never require one, so the strongest order satisfies every one of them. What
it cannot show is an outcome a weaker order allows (a missing fence, a too narrow scope): racecheck
(flashsim.ptx.sanitize) reports the shared-memory accesses that no synchronisation orders.
"""

from __future__ import annotations

import numpy as np

from ...numerics import ieee, ieee32
from ...numerics.formats import F64
from .. import isa
from ..ir import Sink, Vec
from ..program import Decoded
from .common import BF16, F16, udtype
from .data import address_fn

SPACES = {
    ".global": ".global",
    ".shared": ".shared",
    ".shared::cta": ".shared",
    ".shared::cluster": ".shared::cluster",
}
SEMANTICS = (".relaxed", ".acquire", ".release", ".acq_rel")
SCOPES = (".cta", ".cluster", ".gpu", ".sys")
OPS = (".and", ".or", ".xor", ".cas", ".exch", ".add", ".inc", ".dec", ".min", ".max")
TYPES = {
    ".and": (".b32", ".b64"),
    ".or": (".b32", ".b64"),
    ".xor": (".b32", ".b64"),
    ".exch": (".b32", ".b64"),
    ".cas": (".b16", ".b32", ".b64"),
    ".add": (".u32", ".s32", ".u64", ".f32", ".f64", ".f16", ".f16x2", ".bf16", ".bf16x2"),
    ".inc": (".u32",),
    ".dec": (".u32",),
    ".min": (".u32", ".s32", ".u64", ".s64"),
    ".max": (".u32", ".s32", ".u64", ".s64"),
}
HALVES = (".f16", ".f16x2", ".bf16", ".bf16x2")  # need .noftz
VECTOR_TYPES = {".f32": (2, 4), ".f16": (2, 4, 8), ".bf16": (2, 4, 8), ".f16x2": (2, 4), ".bf16x2": (2, 4)}
BITS = {".b16": 16, ".f16": 16, ".bf16": 16, ".f16x2": 32, ".bf16x2": 32, ".f32": 32, ".f64": 64}
BITWISE = {".and": np.bitwise_and, ".or": np.bitwise_or, ".xor": np.bitwise_xor}

_SPACE_CODE = {".global": 0, ".shared": 1}


def _bits_of(t: str) -> int:
    return BITS.get(t) or int(t[2:])


# -- one update, on whole arrays of element bits ----------------------------------------------------------------


def _half_add(t: str):
    """The add of a half type's bits (uint16) and, for the x2 types, of each half of a uint32."""
    if t in (".f16", ".f16x2"):

        def one(x, y):
            return ieee32.add_f16(x.view(F16), y.view(F16)).view(np.uint16)
    else:

        def one(x, y):
            return ieee32.add_bf16(x.view(BF16), y.view(BF16)).view(np.uint16)

    if t in (".f16", ".bf16"):
        return one

    def pair(x, y):
        lo = one((x & np.uint32(0xFFFF)).astype(np.uint16), (y & np.uint32(0xFFFF)).astype(np.uint16))
        hi = one((x >> np.uint32(16)).astype(np.uint16), (y >> np.uint32(16)).astype(np.uint16))
        return lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))

    return pair


def step_fn(op: str, t: str):
    """``step(old, b, c, ftz)``: the new value of a location from its old value and a lane's operands (uint bit
    arrays of the element's width; ``ftz`` a bool array, where atom.add.f32 flushes subnormals)."""
    ud = udtype(_bits_of(t))
    if op == ".add":
        if t == ".f32":

            def step(old, b, c, ftz):
                x, y = old.view(np.float32), b.view(np.float32)
                r = ieee32.add(x, y)
                if ftz.any():
                    r = np.where(ftz, ieee32.add(x, y, ftz=True), r)
                return r.view(np.uint32)

            return step
        if t == ".f64":
            return lambda old, b, c, ftz: ieee.add(old, b, F64, "rne")
        if t in HALVES:
            half = _half_add(t)
            return lambda old, b, c, ftz: half(old, b)
        return lambda old, b, c, ftz: old + b  # wraps modulo 2^n
    if op in (".min", ".max"):
        f = np.minimum if op == ".min" else np.maximum
        if t[1] == "s":
            sd = np.dtype(f"i{ud.itemsize}")
            return lambda old, b, c, ftz: f(old.view(sd), b.view(sd)).view(ud)
        return lambda old, b, c, ftz: f(old, b)
    if op == ".inc":
        return lambda old, b, c, ftz: np.where(old >= b, ud.type(0), old + ud.type(1))
    if op == ".dec":
        return lambda old, b, c, ftz: np.where((old == 0) | (old > b), b, old - ud.type(1))
    if op == ".exch":
        return lambda old, b, c, ftz: b
    if op == ".cas":
        return lambda old, b, c, ftz: np.where(old == b, c, old)
    ufunc = BITWISE[op]
    return lambda old, b, c, ftz: ufunc(old, b)


# -- serialisation of the lanes of one instruction -----------------------------------------------------------


def serialise(op: str, t: str, init, b, c, segment, ftz):
    """Apply the updates of elements sorted by location (``segment`` the location's number, non-decreasing;
    ``init`` each element's location's value before the instruction) in order: (each element's old value, each
    element's location's value after it, as of that element)."""
    n = segment.size
    step = step_fn(op, t)
    if op in (".and", ".or", ".xor", ".min", ".max") or (op == ".add" and t[1] in "us"):
        # inclusive segmented scan of the operands (Hillis-Steele: log2(n) whole-array steps), then one step each
        acc = b.copy()
        shift = 1
        while shift < n:
            same = segment[shift:] == segment[:-shift]
            nxt = acc.copy()
            nxt[shift:] = np.where(same, step(acc[:-shift], acc[shift:], None, None), acc[shift:])
            acc = nxt
            shift *= 2
        after = step(init, acc, None, None)
        first = np.ones(n, bool)
        first[1:] = segment[1:] != segment[:-1]
        old = init.copy()
        old[1:] = np.where(first[1:], init[1:], after[:-1])
        return old, after
    if op == ".exch":
        first = np.ones(n, bool)
        first[1:] = segment[1:] != segment[:-1]
        old = init.copy()
        old[1:] = np.where(first[1:], init[1:], b[:-1])
        return old, b.copy()
    # rank within the location; one whole-array step per rank
    first = np.ones(n, bool)
    first[1:] = segment[1:] != segment[:-1]
    starts = np.flatnonzero(first)
    rank = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    value = init[starts].copy()  # the current value of each location
    old = np.empty_like(init)
    after = np.empty_like(init)
    for r in range(int(rank.max()) + 1 if n else 0):
        sel = np.flatnonzero(rank == r)
        loc = segment[sel]
        cur = value[loc]
        old[sel] = cur
        new = step(cur, b[sel], None if c is None else c[sel], ftz[sel])
        value[loc] = new
        after[sel] = new
    return old, after


# -- the builders ------------------------------------------------------------------------------------------------


def _operand_slots(d: Decoded, i: int, ud, n: int) -> list:
    operand = d.operands[i]
    items = operand.items if isinstance(operand, Vec) else (operand,)
    if len(items) != n:
        raise isa.Unsupported(f"{n} values expected in operand {i + 1}, got {len(items)}")
    return [d.value(x, ud) for x in items]


def _decode(d: Decoded, returns: bool):
    mods = d.mods
    mods.take(*SEMANTICS)
    mods.take(*SCOPES)
    space = mods.take(*SPACES)
    space = None if space is None else SPACES[space]
    op = mods.take(*OPS)
    noftz = mods.flag(".noftz")
    hint = mods.flag(".L2::cache_hint")
    vec = mods.take(".v2", ".v4", ".v8")
    t = mods.type()
    mods.done()
    if op is None:
        raise isa.Unsupported("no atomic operation (.add, .min, .cas, ...)")
    if not returns and op in (".cas", ".exch"):
        raise isa.Unsupported(f"red{op} (only atom has {op})")
    n = 1
    if vec is not None:
        n = int(vec[2:])
        if op != ".add":
            raise isa.Unsupported(f"vector {op} (min / max of f16 / bf16 vectors are not simulated; add only)")
        if n not in VECTOR_TYPES.get(t, ()):
            raise isa.Unsupported(f"{vec}{t} (vector forms: .v2 / .v4 .f32, .v2-.v8 .f16 / .bf16, .v2 / .v4 x2)")
        if space != ".global":
            raise isa.Unsupported("vector atomics need .global")
    elif t not in TYPES[op]:
        raise isa.Unsupported(f"{op}{t}")
    if (t in HALVES) != noftz:
        raise isa.Unsupported(f"{op}{t} {'needs' if t in HALVES else 'takes no'} .noftz")
    return space, op, t, n, hint


def _build(d: Decoded, returns: bool):
    space, op, t, n, hint = _decode(d, returns)
    bits = _bits_of(t)
    ud = udtype(bits)
    ew = bits // 8
    first = 1 if returns else 0
    extra = len(d.operands) - first - (3 if op == ".cas" else 2)
    if extra != (1 if hint else 0):
        raise isa.Unsupported(f"{len(d.operands)} operands for {'atom' if returns else 'red'}{op}")
    dsts = []
    if returns:
        out = d.operands[0]
        items = out.items if isinstance(out, Vec) else (out,)
        if len(items) != n:
            raise isa.Unsupported(f"{n} destinations expected, got {len(items)}")
        dsts = [None if isinstance(x, Sink) else d.reg(x) for x in items]
    space, addr = address_fn(d, first, space)
    b_slots = _operand_slots(d, first + 1, ud, n)
    c_slots = _operand_slots(d, first + 2, ud, n) if op == ".cas" else None

    def run(g):
        m = g.m
        lanes = g.lanes()
        a = addr(g)
        raw = m.mem.load(space, a, ew * n, lanes, atomic=True)  # bounds and alignment of the whole access
        init = raw.view(ud).reshape(-1, n)
        code, row, off = locations(m, space, a, lanes)
        # one element per (lane, vector index), in thread order
        e_code = np.repeat(code, n)
        e_row = np.repeat(row, n)
        e_off = (off[:, None] + np.arange(n, dtype=np.uint64) * np.uint64(ew)).reshape(-1)
        order = np.lexsort((e_off, e_row, e_code))  # stable: ties keep (lane, element) order
        so, sr, sc = e_off[order], e_row[order], e_code[order]
        new_loc = np.ones(order.size, bool)
        new_loc[1:] = (so[1:] != so[:-1]) | (sr[1:] != sr[:-1]) | (sc[1:] != sc[:-1])
        segment = np.cumsum(new_loc) - 1
        b = np.stack([g.lane_values(s).astype(ud) for s in b_slots], axis=1).reshape(-1)[order]
        c = None
        if c_slots is not None:
            c = np.stack([g.lane_values(s).astype(ud) for s in c_slots], axis=1).reshape(-1)[order]
        ftz = (sc == _SPACE_CODE[".global"]) if t == ".f32" else np.zeros(order.size, bool)
        # a location's value before the instruction: what its first element loaded
        starts = np.flatnonzero(new_loc)
        loc_init = init.reshape(-1)[order][starts]
        old_sorted, after = serialise(op, t, loc_init[segment], b, c, segment, ftz)
        last = np.append(starts[1:], order.size) - 1  # each location's last element writes its final value
        elem = order[last]
        ea = (a[:, None] + np.arange(n, dtype=np.uint64) * np.uint64(ew)).reshape(-1)[elem]
        m.mem.store(space, ea, after[last].view(np.uint8).reshape(-1, ew), lanes[elem // n], atomic=True)
        m.progress += 1
        if dsts:
            old = np.empty_like(old_sorted)
            old[order] = old_sorted
            old = old.reshape(-1, n)
            for k, s in enumerate(dsts):
                if s is not None:
                    g.write_lanes(s, old[:, k])

    return d.op(run)


def locations(m, space, a, lanes):
    """(space code, row, offset) of each lane's location: global addresses in row 0, shared offsets in their
    block's row; a generic address is resolved first (an atomic on local, const or param memory is an error)."""
    if space is not None:
        parts = [(space, None, a)]
    else:
        parts = m.mem.classify(a)
    code = np.zeros(a.size, np.int64)
    row = np.zeros(a.size, np.int64)
    off = np.array(a, np.uint64)
    for sp, sel, where in parts:
        if sp not in _SPACE_CODE and sp != ".shared::cluster":
            t = int(lanes[0] if sel is None else lanes[sel[0]])
            raise m.error(f"an atomic on a generic address in {sp} memory (only global and shared)", t)
        idx = slice(None) if sel is None else sel
        code[idx] = _SPACE_CODE[".shared" if sp == ".shared::cluster" else sp]
        off[idx] = where
        if sp == ".shared":
            row[idx] = m.block_of[lanes[idx]]
        elif sp == ".shared::cluster":  # the block and offset the address names (checked by the load before)
            row[idx], o = m.mem.cluster_rows(where, 1, lanes[idx])
            off[idx] = o.astype(np.uint64)
    return code, row, off


@isa.implements("atom")
def atom(d: Decoded):
    return _build(d, returns=True)


@isa.implements("red")
def red(d: Decoded):
    return _build(d, returns=False)
