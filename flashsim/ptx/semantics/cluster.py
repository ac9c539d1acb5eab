"""Thread-block clusters (sm_90+): mapa, getctarank, the cluster barrier (barrier.cluster.arrive / wait) and the
asynchronous stores and reductions into a cluster's shared memory (st.async, red.async).

Addresses (flashsim.ptx.program.CLUSTER_RANK_SHIFT, docs/ptx.md "The address map"): a shared::cluster address below
2^24 is an offset in the executing CTA's own shared memory; ``(rank + 1) << 24 | offset`` is ``offset`` in CTA
``rank`` of the cluster. ``mapa{.shared::cluster}.{u32,u64} d, a, rank`` keeps a's offset and names CTA ``rank``
(the generic form maps a generic address of the shared window to the generic address of the same offset in that
CTA); ``getctarank{.shared::cluster}.{u32,u64} d, a`` is the rank of the CTA an address belongs to. A rank past
the cluster is an error (the ISA leaves it undefined).

``barrier.cluster.arrive{.release|.relaxed}{.aligned}`` / ``barrier.cluster.wait{.acquire}{.aligned}``: every
non-exited thread of every CTA of the cluster arrives, then the phase completes and the waiters go on; a thread
arrives once per phase and waits once per arrival (arriving twice, or waiting without arriving, is an error).
.release / .acquire (the defaults) order the threads' shared-memory accesses for racecheck; an arrive.relaxed
releases nothing. Memory is sequentially consistent here, so no value depends on these orders.

``st.async{.weak}{.cluster}.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4}.type [a], b, [mbar]`` (.b32 .b64
.u32 .s32 .u64 .s64 .f32 .f64; .v4 of 32-bit types) and ``red.async.relaxed.cluster.shared::cluster.mbarrier::
complete_tx::bytes.op.type [a], b, [mbar]`` (.add .u32 .s32 .u64, .min / .max .u32 .s32, .inc / .dec .u32, .and /
.or / .xor .b32 .b64, as atom's arithmetic: flashsim.ptx.semantics.atomic): the write lands in the shared memory
of the CTA ``a`` names and completes its bytes on the mbarrier ``mbar`` of that same CTA (an error otherwise); here
both happen when the instruction runs, which is one of the orders the ISA allows, and the completion releases the
issuing thread's clock into the mbarrier so that racecheck orders the write before the waiters' reads.
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Instruction, Vec
from ..program import BARRIER, CLUSTER_OFFSET_MASK, CLUSTER_RANK_SHIFT, SPACE_BASE, Decoded
from . import atomic
from .asynchronous import barriers
from .common import bits_of, udtype
from .data import address_fn

__all__ = [
    "ClusterBarrier",
    "CLUSTER_BARRIER_ID",
    "barrier_cluster",
    "cluster_barrier",
    "mapa",
    "getctarank",
    "st_async",
    "red_async",
]
COMPLETE_TX = ".mbarrier::complete_tx::bytes"
ST_ASYNC_TYPES = (".b32", ".b64", ".u32", ".s32", ".u64", ".s64", ".f32", ".f64")

CLUSTER_BARRIER_ID = 16  # Barriers.bar_id of a thread waiting at barrier.cluster.wait (machine.waiters)
WAIT_NONE, WAIT_BARRIER = 0, 1
_SHARED = np.uint64(SPACE_BASE[".shared"])
_WINDOW = np.uint64(1 << 32)


def _space(d: Decoded) -> bool:
    """True for the .shared::cluster form, False for the generic one."""
    space = d.mods.take(".shared::cluster", ".shared::cta", ".shared")
    if space not in (None, ".shared::cluster"):
        raise isa.Unsupported(f"{d.ins.opcode}{space} (the state space is .shared::cluster or generic)")
    return space is not None


def _split(g, addr, generic: bool):
    """(rank field: 0 own CTA, r + 1 rank r; offset; whether each lane's address lies in the shared window)."""
    a = np.asarray(addr).astype(np.uint64)
    inside = np.ones(a.shape, bool)
    if generic:
        inside = (a >= _SHARED) & (a < _SHARED + _WINDOW)
        a = np.where(inside, a - _SHARED, np.uint64(0))
    a = a & np.uint64(0xFFFFFFFF)
    return (a >> np.uint64(CLUSTER_RANK_SHIFT)).astype(np.int64), a & np.uint64(CLUSTER_OFFSET_MASK), inside


def _check_rank(g, ranks, what: str) -> None:
    cs = g.m.cluster_size
    bad = np.flatnonzero((ranks < 0) | (ranks >= cs))
    if bad.size:
        t = int(g.lanes()[bad[0]])
        raise g.m.error(f"{what} names CTA rank {int(ranks[bad[0]])}, past the cluster's {cs} CTA{'s' * (cs > 1)}", t)


_SM90_RULE = "PTX ISA: requires sm_90 or higher (ptxas 13.0)"
for _op in ("mapa", "getctarank"):
    isa.requires(_op, archs=isa.since(90), source=_SM90_RULE)
for _op in ("st", "red"):
    isa.requires(_op, ".async", archs=isa.since(90), source=_SM90_RULE)


@isa.implements("mapa")
def mapa(d: Decoded):
    cluster = _space(d)
    t = d.mods.type()
    d.mods.done()
    if t not in (".u32", ".u64"):
        raise isa.Unsupported(f"mapa{t} (.u32 / .u64)")
    if not cluster and t != ".u64":
        raise isa.Unsupported("generic mapa is .u64")
    dt = np.uint32 if t == ".u32" else np.uint64
    dst, a, b = d.dst(0), d.src(1, dt), d.src(2, np.uint32)

    def run(g):
        lanes = g.lanes()
        hi, off, inside = _split(g, g.lane_values(a), not cluster)
        if not inside.all():
            t0 = int(lanes[np.flatnonzero(~inside)[0]])
            raise g.m.error("mapa of a generic address outside shared memory", t0)
        rank = g.lane_values(b).astype(np.int64)
        _check_rank(g, rank, "mapa")
        out = ((rank + 1).astype(np.uint64) << np.uint64(CLUSTER_RANK_SHIFT)) | off
        if not cluster:
            out = out + _SHARED
        g.write_lanes(dst, out.astype(dt))

    return d.op(run)


@isa.implements("getctarank")
def getctarank(d: Decoded):
    cluster = _space(d)
    t = d.mods.type()
    d.mods.done()
    if t not in (".u32", ".u64"):
        raise isa.Unsupported(f"getctarank{t} (.u32 / .u64)")
    dst, a = d.dst(0), d.src(1, np.uint32 if t == ".u32" else np.uint64)

    def run(g):
        lanes = g.lanes()
        hi, _off, inside = _split(g, g.lane_values(a), not cluster)
        if not inside.all():
            t0 = int(lanes[np.flatnonzero(~inside)[0]])
            raise g.m.error("getctarank of a generic address outside shared memory", t0)
        own = g.m.block_of[lanes] % g.m.cluster_size
        rank = np.where(hi == 0, own, hi - 1)
        _check_rank(g, rank, "getctarank's address")
        g.write_lanes(dst, rank.astype(np.uint32))

    return d.op(run)


class ClusterBarrier:
    """The cluster barrier of a wave's clusters: per thread the phase it arrived in (-1: none pending), per cluster
    its phase count; a phase completes when every thread of the cluster has arrived in it or exited."""

    def __init__(self, machine):
        m = self.m = machine
        self.arrived = np.full(m.T, -1, np.int64)
        self.phase = np.zeros(-(-m.n_blocks // m.cluster_size), np.int64)
        self.span = m.cluster_size * m.block_threads  # threads of a cluster (consecutive in the wave)
        m.waiters[CLUSTER_BARRIER_ID] = self

    def arrive(self, g, lanes, release: bool) -> None:
        m = self.m
        c = lanes // self.span
        again = self.arrived[lanes] >= 0
        if again.any():
            t = int(lanes[np.flatnonzero(again)[0]])
            raise m.error("barrier.cluster.arrive again before barrier.cluster.wait", t)
        self.arrived[lanes] = self.phase[c]
        if m.sanitizer is not None and release:
            for k in np.unique(c).tolist():
                m.sanitizer.cluster_arrive(k, lanes[c == k])
        m.progress += 1
        for k in np.unique(c).tolist():
            self._check(k)

    def wait(self, g, lanes) -> None:
        m = self.m
        c = lanes // self.span
        pending = self.arrived[lanes]
        if (pending < 0).any():
            t = int(lanes[np.flatnonzero(pending < 0)[0]])
            raise m.error("barrier.cluster.wait without a barrier.cluster.arrive before it", t)
        done = self.phase[c] > pending
        go = lanes[done]
        if go.size:
            self.arrived[go] = -1
            if m.sanitizer is not None:
                for k in np.unique(c[done]).tolist():
                    m.sanitizer.cluster_acquire(k, go[c[done] == k])
        stay = lanes[~done]
        if stay.size:
            mask = np.zeros(m.T, bool)
            mask[stay] = True
            m.barriers.bar_id[stay] = CLUSTER_BARRIER_ID
            g.stop(mask, WAIT_BARRIER, g.pc + 1)

    def _check(self, k: int) -> None:
        m = self.m
        sl = slice(k * self.span, min((k + 1) * self.span, m.T))
        if not ((self.arrived[sl] == self.phase[k]) | m.exited[sl]).all():
            return
        self.phase[k] += 1
        if m.sanitizer is not None:
            m.sanitizer.cluster_complete(k)
        waiting = np.flatnonzero((m.wait[sl] == WAIT_BARRIER) & (m.barriers.bar_id[sl] == CLUSTER_BARRIER_ID))
        threads = waiting + k * self.span
        if threads.size:
            m.wait[threads] = WAIT_NONE
            m.barriers.bar_id[threads] = -1
            self.arrived[threads] = -1
            if m.sanitizer is not None:
                m.sanitizer.cluster_acquire(k, threads)
        m.progress += 1

    def exited(self, threads) -> None:
        for k in np.unique(np.asarray(threads) // self.span).tolist():
            self._check(k)

    def waits_for(self, t: int):
        k = t // self.span
        sl = slice(k * self.span, min((k + 1) * self.span, self.m.T))
        missing = int((~((self.arrived[sl] == self.phase[k]) | self.m.exited[sl])).sum())
        return ("other", f"waits at barrier.cluster.wait for {missing} thread(s) of its cluster to arrive")


def cluster_barrier(m) -> ClusterBarrier:
    state = m.state.get("barrier.cluster")
    if state is None:
        state = m.state["barrier.cluster"] = ClusterBarrier(m)
    return state


def barrier_cluster(d: Decoded):
    """barrier.cluster.arrive{.release|.relaxed}{.aligned} / barrier.cluster.wait{.acquire}{.aligned} (the builder of
    ``barrier`` hands the .cluster forms here)."""
    mods = d.mods
    kind = mods.take(".arrive", ".wait")
    sem = mods.take(".release", ".relaxed", ".acquire")
    mods.take(".aligned")
    mods.done()
    if kind is None:
        raise isa.Unsupported("barrier.cluster needs .arrive or .wait")
    if (kind == ".arrive" and sem == ".acquire") or (kind == ".wait" and sem in (".release", ".relaxed")):
        raise isa.Unsupported(f"barrier.cluster{kind}{sem} (arrive takes .release / .relaxed, wait .acquire)")
    if d.operands:
        raise isa.Unsupported("barrier.cluster takes no operands")
    release = sem != ".relaxed"

    if kind == ".arrive":

        def run(g):
            cluster_barrier(g.m).arrive(g, g.lanes(), release)

    else:

        def run(g):
            cluster_barrier(g.m).wait(g, g.lanes())

    return d.op(run, BARRIER)


def _mbarrier_operand(d: Decoded, i: int):
    """A function of a group giving each running lane's shared::cluster address of the mbarrier operand ``i``."""
    sym_space, base, offset = d.addr(i)
    if sym_space not in (None, ".shared"):
        raise isa.Unsupported(f"a {sym_space} mbarrier operand")
    off = np.uint64(offset & (2**64 - 1))
    if base is None:
        return lambda g: np.full(g.lanes().size, off, np.uint64)
    return lambda g: g.lane_values(base).astype(np.uint64) + off


def _complete(g, addr, mbar, width: int) -> None:
    """The async write of ``width`` bytes per lane at ``addr`` completes on the mbarrier ``mbar`` of the same CTA."""
    m = g.m
    lanes = g.lanes()
    rows, _ = m.mem.cluster_rows(addr, width, lanes)
    mrows, _ = m.mem.cluster_rows(mbar, 8, lanes)
    bad = np.flatnonzero(rows != mrows)
    if bad.size:
        raise m.error(
            f"{g.m.prog.ops[g.pc].name}: the mbarrier is in CTA rank {int(mrows[bad[0]]) % m.cluster_size}, the "
            f"write in CTA rank {int(rows[bad[0]]) % m.cluster_size} (they must be in the same CTA)",
            int(lanes[bad[0]]),
        )
    bars = barriers(m)
    if m.sanitizer is not None:  # the completion publishes the write to the mbarrier's waiters
        m.sanitizer.mbarrier_arrive(bars.ids(g, mbar), lanes)
    bars.complete_tx(g, mbar, np.full(lanes.size, width, np.int64))


@isa.implements_form("st", ".async")
def st_async(d: Decoded):
    mods = d.mods
    mods.flag(".async")
    mods.take(".weak")
    mods.take(".cluster")
    space = mods.take(".shared::cluster")
    complete = mods.flag(COMPLETE_TX)
    n = {".v2": 2, ".v4": 4}.get(mods.take(".v2", ".v4"), 1)
    t = mods.type()
    mods.done()
    bits = bits_of(t)
    if space is None or not complete or t not in ST_ASYNC_TYPES or (n == 4 and bits == 64):
        raise isa.Unsupported(
            "st.async{.weak}{.cluster}.shared::cluster.mbarrier::complete_tx::bytes{.v2,.v4} of a 32- or 64-bit type "
            "(.v4: 32-bit)"
        )
    ud = udtype(bits)
    width = bits // 8 * n
    _space, addr = address_fn(d, 0, ".shared::cluster")
    operand = d.operands[1]
    srcs = [d.value(x, ud) for x in (operand.items if isinstance(operand, Vec) else (operand,))]
    if len(srcs) != n:
        raise isa.Unsupported(f"{n} sources expected, got {len(srcs)}")
    mbar = _mbarrier_operand(d, 2)

    def run(g):
        a = addr(g)
        data = np.stack([g.lane_values(s).astype(ud) for s in srcs], axis=1).view(np.uint8).reshape(-1, width)
        g.m.mem.store(".shared::cluster", a, data, g.lanes())
        _complete(g, a, mbar(g), width)
        g.m.progress += 1

    return d.op(run)


@isa.implements_form("red", ".async")
def red_async(d: Decoded):
    ins = d.ins
    mods = [m for m in ins.mods if m not in (".async", COMPLETE_TX)]
    if COMPLETE_TX not in ins.mods or ".shared::cluster" not in ins.mods or len(ins.operands) != 3:
        raise isa.Unsupported(
            "red.async{.relaxed}{.cluster}.shared::cluster.mbarrier::complete_tx::bytes.op.type [a], b, [mbar]"
        )
    op = next((m for m in mods if m in atomic.OPS), None)
    t = next((m for m in mods if m in isa.TYPES), None)
    allowed = {".add": (".u32", ".s32", ".u64"), ".min": (".u32", ".s32"), ".max": (".u32", ".s32")}
    allowed.update({".inc": (".u32",), ".dec": (".u32",), ".and": (".b32", ".b64"), ".or": (".b32", ".b64")})
    allowed[".xor"] = (".b32", ".b64")
    if t not in allowed.get(op, ()):
        raise isa.Unsupported(
            f"red.async{op or ''}{t or ''} (the ISA's forms: .add .u32 .s32 .u64, .min / .max .u32 "
            ".s32, .inc / .dec .u32, .and / .or / .xor .b32 .b64)"
        )
    # the reduction itself is red's (one arithmetic for atom, red and red.async), on the first two operands
    inner_ins = Instruction("red", tuple(mods), ins.operands[:2], None, ins.line, ins.loc)
    inner_d = Decoded(d.prog, d.fi, d.fn, inner_ins, d.pc)
    inner = atomic.red(inner_d)
    d.mods.left.clear()
    d.touched |= inner_d.touched
    _space, addr = address_fn(d, 0, ".shared::cluster")
    mbar = _mbarrier_operand(d, 2)
    width = bits_of(t) // 8

    def run(g):
        inner.run(g)
        _complete(g, addr(g), mbar(g), width)

    return d.op(run)
