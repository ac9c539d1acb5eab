"""Warp-level instructions (PTX ISA "Data Movement": shfl.sync; "Parallel Synchronization and Communication":
vote.sync, match.sync, redux.sync, elect.sync, activemask).

Each ``.sync`` instruction runs once every non-exited lane of its member mask has reached it
(flashsim.ptx.machine.Group.converge); a lane then reads the others' registers as they are at that moment. The
members of a lane are the lanes of its member mask that run the instruction with it (an exited lane takes no part:
"all non-exited threads in membermask"). Every result is computed for all threads at once from per-warp tables
(warps x 32 lanes); a lane of a partial warp that does not exist is never a member.
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Not, Pair, Sink
from ..program import Decoded

_U32 = np.uint32


def source_threads(g, j):
    """The thread index of lane ``j`` (per thread) of each thread's warp, and whether that lane exists."""
    m = g.m
    base = np.arange(m.T) - m.lane_of
    src = base + j
    ok = (j >= 0) & (j < 32) & (src < m.T)
    ok &= np.where(ok, m.warp_of[np.clip(src, 0, m.T - 1)] == m.warp_of, False)
    return np.where(ok, src, np.arange(m.T)), ok


def ballot(g, flags) -> np.ndarray:
    """Per warp, the uint32 mask of the running lanes where ``flags`` (a bool array over the threads) holds."""
    m = g.m
    on = g.active() & np.broadcast_to(flags, (m.T,))
    bits = np.zeros(m.n_warps, np.uint64)
    np.bitwise_or.at(bits, m.warp_of[on], np.uint64(1) << m.lane_of[on].astype(np.uint64))
    return bits.astype(_U32)


def members(g, member_slot: int) -> np.ndarray:
    """Per thread, its member mask restricted to the lanes that run the instruction now (uint32)."""
    m = g.m
    mask = np.broadcast_to(np.asarray(g.R[member_slot]).astype(_U32), (m.T,))
    return mask & ballot(g, True)[m.warp_of]


def lane_table(g, values, fill=0) -> np.ndarray:
    """(warps, 32) table of ``values`` (one per thread) by warp and lane; ``fill`` where a lane does not exist."""
    m = g.m
    v = np.broadcast_to(np.asarray(values), (m.T,))
    table = np.full((m.n_warps, 32), fill, v.dtype)
    table[m.warp_of, m.lane_of] = v
    return table


def _member_bits(mem) -> np.ndarray:
    """(threads, 32) bool: lane j is in the thread's member set."""
    return ((mem[:, None] >> np.arange(32, dtype=_U32)[None, :]) & _U32(1)).astype(bool)


def _pack(bits) -> np.ndarray:
    """(threads, 32) bool -> uint32 masks."""
    return (bits.astype(np.uint64) << np.arange(32, dtype=np.uint64)[None, :]).sum(axis=1).astype(_U32)


def _sync(d: Decoded) -> None:
    if not d.mods.flag(".sync"):
        raise isa.Unsupported(f"{d.ins.opcode} without .sync (removed from sm_70 on)")


def _pair_dests(d: Decoded, i: int = 0):
    """(d slot or None, p slot or None) of a ``d[|p]`` destination (``_`` for d: None)."""
    out = d.operands[i]
    if isinstance(out, Pair):
        return (None if isinstance(out.first, Sink) else d.reg(out.first)), d.reg(out.second)
    return d.dst(i), None


@isa.implements("shfl")
def shfl(d: Decoded):
    """shfl.sync.{up,down,bfly,idx}.b32 d[|p], a, b, c, membermask (PTX ISA shfl.sync): bval = b[4:0], clamp =
    c[4:0], segmask = c[12:8], maxLane = (lane & segmask) | (clamp & ~segmask); a source lane out of range gives
    the lane's own a and p false. Reading a lane that does not run the instruction is unpredictable in the ISA;
    the model reads that lane's register as it is."""
    mods = d.mods
    _sync(d)
    mode = mods.take(".up", ".down", ".bfly", ".idx")
    t = mods.type()
    mods.done()
    if mode is None or t != ".b32":
        raise isa.Unsupported("shfl.sync needs a mode and .b32")
    dst, pdst = _pair_dests(d)
    a, b, c, member = d.src(1, _U32), d.src(2, _U32), d.src(3, _U32), d.src(4, _U32)

    def run(g):
        if not g.converge(member):  # also when every thread runs: a lane outside its mask is an error
            return
        m = g.m
        lane = m.lane_of.astype(np.int64)
        bval = np.broadcast_to(np.asarray(g.R[b]).astype(np.int64) & 0x1F, (m.T,))
        cv = np.broadcast_to(np.asarray(g.R[c]).astype(np.int64), (m.T,))
        clamp, seg = cv & 0x1F, (cv >> 8) & 0x1F
        max_lane = (lane & seg) | (clamp & ~seg)
        if mode == ".up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == ".down":
            j = lane + bval
            ok = j <= max_lane
        elif mode == ".bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = (lane & seg) | (bval & ~seg)
            ok = j <= max_lane
        src, _exists = source_threads(g, np.where(ok, j, lane))  # a lane past a partial warp's end: its own
        g.write(dst, np.broadcast_to(np.asarray(g.R[a]), (m.T,))[src])
        if pdst is not None:
            g.write(pdst, ok)

    return d.op(run)


@isa.implements("vote")
def vote(d: Decoded):
    """vote.sync.{all,any,uni}.pred d, {!}a, membermask and vote.sync.ballot.b32: over the thread's members."""
    mods = d.mods
    _sync(d)
    mode = mods.take(".all", ".any", ".uni", ".ballot")
    t = mods.type()
    mods.done()
    if mode is None or (mode == ".ballot") != (t == ".b32") or (mode != ".ballot" and t != ".pred"):
        raise isa.Unsupported(f"vote{mode or ''}{t}")
    dst = d.dst(0)
    pop = d.operands[1]
    negated = isinstance(pop, Not)
    p = d.reg(pop.reg) if negated else d.value(pop, bool)
    member = d.src(2, _U32)

    def run(g):
        if not g.converge(member):  # also when every thread runs: a lane outside its mask is an error
            return
        m = g.m
        pv = np.broadcast_to(np.asarray(g.R[p]).astype(bool), (m.T,))
        mem = members(g, member)
        yes = ballot(g, ~pv if negated else pv)[m.warp_of] & mem
        if mode == ".ballot":
            g.write(dst, yes)
        elif mode == ".all":
            g.write(dst, yes == mem)
        elif mode == ".any":
            g.write(dst, yes != 0)
        else:
            g.write(dst, (yes == 0) | (yes == mem))

    return d.op(run)


@isa.implements("match")
def match(d: Decoded):
    """match.any.sync.{b32,b64} d, a, membermask: the members whose a equals the lane's; match.all.sync d[|p]:
    all the members if their a are all equal (p true), else 0 (p false)."""
    mods = d.mods
    mode = mods.take(".any", ".all")
    _sync(d)
    t = mods.type()
    mods.done()
    if mode is None or t not in (".b32", ".b64"):
        raise isa.Unsupported("match.sync needs .any / .all and .b32 / .b64")
    ud = np.uint32 if t == ".b32" else np.uint64
    dst, pdst = _pair_dests(d)
    if pdst is not None and mode == ".any":
        raise isa.Unsupported("match.any with a predicate destination")
    a, member = d.src(1, ud), d.src(2, _U32)

    def run(g):
        if not g.converge(member):  # also when every thread runs: a lane outside its mask is an error
            return
        m = g.m
        mem = members(g, member)
        vals = np.broadcast_to(np.asarray(g.R[a]).astype(ud), (m.T,))
        same = (lane_table(g, vals)[m.warp_of] == vals[:, None]) & _member_bits(mem)
        equal = _pack(same)
        if mode == ".any":
            g.write(dst, equal)
            return
        all_equal = equal == mem
        g.write(dst, np.where(all_equal, mem, _U32(0)))
        if pdst is not None:
            g.write(pdst, all_equal)

    return d.op(run)


_REDUX = {
    ".add": (np.add, 0),
    ".min": (np.minimum, None),
    ".max": (np.maximum, None),
    ".and": (np.bitwise_and, -1),
    ".or": (np.bitwise_or, 0),
    ".xor": (np.bitwise_xor, 0),
}


@isa.implements("redux")
def redux(d: Decoded):
    """redux.sync.{add,min,max}.{u32,s32} and .{and,or,xor}.b32 dst, src, membermask: the reduction over the
    members (.add wraps to 32 bits). The .f32 min / max forms are sm_100a's: unsupported."""
    mods = d.mods
    _sync(d)
    op = mods.take(*_REDUX)
    t = mods.type()
    mods.done()
    integer = op in (".add", ".min", ".max")
    if op is None or (integer and t not in (".u32", ".s32")) or (not integer and t != ".b32"):
        raise isa.Unsupported(f"redux.sync{op or ''}{t}")
    fn, identity = _REDUX[op]
    signed = t == ".s32"
    dst, src, member = d.dst(0), d.src(1, _U32), d.src(2, _U32)

    def run(g):
        if not g.converge(member):  # also when every thread runs: a lane outside its mask is an error
            return
        m = g.m
        vals = np.broadcast_to(np.asarray(g.R[src]).astype(_U32), (m.T,))
        wide = vals.view(np.int32).astype(np.int64) if signed else vals.astype(np.int64)
        if identity is None:  # min / max: the identity is the other end of the range
            neutral = (2**31 - 1 if signed else 2**32 - 1) if op == ".min" else (-(2**31) if signed else 0)
        else:
            neutral = identity
        table = np.where(_member_bits(members(g, member)), lane_table(g, wide)[m.warp_of], np.int64(neutral))
        g.write(dst, (fn.reduce(table, axis=1) & 0xFFFFFFFF).astype(_U32))

    return d.op(run)


isa.requires("elect", archs=isa.since(90), source="PTX ISA: requires sm_90 or higher (ptxas 13.0)")


@isa.implements("elect")
def elect(d: Decoded):
    """elect.sync d|p, membermask: the leader is the lowest-numbered member (the ISA: deterministic, the same for
    the same membermask); d its lane id, p true on the leader."""
    mods = d.mods
    _sync(d)
    mods.done()
    dst, pdst = _pair_dests(d)
    if pdst is None:
        raise isa.Unsupported("elect.sync needs a d|p destination")
    member = d.src(1, _U32)

    def run(g):
        if not g.converge(member):  # also when every thread runs: a lane outside its mask is an error
            return
        mem = members(g, member)
        lowest = mem & (~mem + _U32(1))  # the lowest set bit
        leader = np.bitwise_count(lowest - _U32(1)).astype(_U32)
        g.write(dst, leader)
        g.write(pdst, (mem != 0) & (leader == g.m.lane_of.astype(_U32)))

    return d.op(run)


@isa.implements("activemask")
def activemask(d: Decoded):
    """activemask.b32 d: the lanes of the warp that run this instruction together."""
    if d.mods.type() != ".b32":
        raise isa.Unsupported("activemask needs .b32")
    d.mods.done()
    dst = d.dst(0)

    def run(g):
        g.write(dst, ballot(g, True)[g.m.warp_of])

    return d.op(run)
