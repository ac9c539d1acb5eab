"""Warp-level instructions: shfl.sync, vote.sync, activemask. Each runs once every non-exited lane of its member
mask has reached it (flashsim.ptx.machine.Group.converge); a lane reads another lane's register as it is at that
moment. (match.sync, redux.sync, elect.sync: flashsim/ptx/semantics/warp_collectives.py.)"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Not, Pair
from ..program import Decoded


def source_threads(g, j):
    """The thread index of lane ``j`` (per thread) of each thread's warp, and whether that lane exists."""
    m = g.m
    base = np.arange(m.T) - m.lane_of
    src = base + j
    ok = (j >= 0) & (j < 32) & (src < m.T)
    ok &= np.where(ok, m.warp_of[np.clip(src, 0, m.T - 1)] == m.warp_of, False)
    return np.where(ok, src, np.arange(m.T)), ok


@isa.implements("shfl")
def shfl(d: Decoded):
    mods = d.mods
    sync = mods.flag(".sync")
    mode = mods.take(".up", ".down", ".bfly", ".idx")
    t = mods.type()
    mods.done()
    if not sync:
        raise isa.Unsupported("shfl without .sync (removed from sm_70 on)")
    if mode is None or t != ".b32":
        raise isa.Unsupported("shfl.sync needs a mode and .b32")
    out = d.operands[0]
    if isinstance(out, Pair):
        dst = None if not hasattr(out.first, "name") else d.reg(out.first)
        pdst = d.reg(out.second)
    else:
        dst, pdst = d.dst(0), None
    a, b, c, member = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.src(4, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        m = g.m
        lane = m.lane_of.astype(np.int64)
        bv = np.broadcast_to(np.asarray(g.R[b]).astype(np.int64), (m.T,))
        cv = np.broadcast_to(np.asarray(g.R[c]).astype(np.int64), (m.T,))
        clamp, seg = cv & 0x1F, (cv >> 8) & 0x1F
        max_lane = (lane & seg) | (clamp & ~seg)
        min_lane = lane & seg
        if mode == ".up":
            j = lane - bv
            ok = j >= max_lane
        elif mode == ".down":
            j = lane + bv
            ok = j <= max_lane
        elif mode == ".bfly":
            j = lane ^ bv
            ok = j <= max_lane
        else:
            j = min_lane | (bv & 0x1F & ~seg)
            ok = j <= max_lane
        j = np.where(ok, j, lane)
        src, _exists = source_threads(g, j)
        value = np.broadcast_to(np.asarray(g.R[a]), (m.T,))[src]
        g.write(dst, value)
        if pdst is not None:
            g.write(pdst, ok)

    return d.op(run)


@isa.implements("vote")
def vote(d: Decoded):
    mods = d.mods
    sync = mods.flag(".sync")
    mode = mods.take(".all", ".any", ".uni", ".ballot")
    t = mods.type()
    mods.done()
    if not sync or mode is None:
        raise isa.Unsupported("vote needs .sync and a mode")
    if (mode == ".ballot") != (t == ".b32") or (mode != ".ballot" and t != ".pred"):
        raise isa.Unsupported(f"vote{mode}{t}")
    dst = d.dst(0)
    pop = d.operands[1]
    negated = isinstance(pop, Not)
    p = d.reg(pop.reg) if negated else d.value(pop, bool)
    member = d.src(2, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        m = g.m
        act = g.active()
        pv = np.broadcast_to(np.asarray(g.R[p]).astype(bool), (m.T,))
        if negated:
            pv = ~pv
        mask = np.broadcast_to(np.asarray(g.R[member]).astype(np.uint32), (m.T,))
        member_lane = ((mask >> m.lane_of.astype(np.uint32)) & np.uint32(1)).astype(bool)
        voters = act & member_lane
        bits = np.zeros(m.n_warps, np.uint64)
        np.bitwise_or.at(bits, m.warp_of[voters & pv], np.uint64(1) << m.lane_of[voters & pv].astype(np.uint64))
        count = np.zeros(m.n_warps, np.int64)
        np.add.at(count, m.warp_of[voters], 1)
        trues = np.zeros(m.n_warps, np.int64)
        np.add.at(trues, m.warp_of[voters & pv], 1)
        w = m.warp_of
        if mode == ".ballot":
            g.write(dst, (bits[w] & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        elif mode == ".all":
            g.write(dst, trues[w] == count[w])
        elif mode == ".any":
            g.write(dst, trues[w] > 0)
        else:
            g.write(dst, (trues[w] == 0) | (trues[w] == count[w]))

    return d.op(run)


@isa.implements("activemask")
def activemask(d: Decoded):
    if d.mods.type() != ".b32":
        raise isa.Unsupported("activemask needs .b32")
    d.mods.done()
    dst = d.dst(0)

    def run(g):
        m = g.m
        act = g.active()
        bits = np.zeros(m.n_warps, np.uint64)
        np.bitwise_or.at(bits, m.warp_of[act], np.uint64(1) << m.lane_of[act].astype(np.uint64))
        g.write(dst, bits[m.warp_of].astype(np.uint32))

    return d.op(run)
