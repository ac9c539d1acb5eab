"""Cluster launch control (sm_100a / sm_120a; PTX ISA "clusterlaunchcontrol"): the hardware's dynamic scheduling
of persistent kernels, which CUTLASS's sm100 / sm120 tile schedulers (PersistentTileSchedulerSm100) issue.

``clusterlaunchcontrol.try_cancel.async{.shared::cta}.mbarrier::complete_tx::bytes{.multicast::cluster::all}.b128
[addr], [mbar]`` asks to cancel the launch of a cluster that has not started running, and writes a 16-byte opaque
response at ``addr`` (to the same offset of every CTA of the cluster with ``.multicast::cluster::all``), completing
16 bytes on the mbarrier ``mbar`` of each CTA written. ``clusterlaunchcontrol.query_cancel.is_canceled.pred.b128
p, r`` reads whether a response ``r`` (a .b128 register) cancelled a cluster, and ``query_cancel.get_first_ctaid
{::x,::y,::z}.b32.b128 d, r`` / ``get_first_ctaid.v4.b32.b128 {x, y, z, _}, r`` the %ctaid of its first CTA.

The simulator cancels no cluster: every request fails. That is the hardware's answer whenever no cluster of the
grid is left unstarted, and one every kernel must handle (a kernel acts on a success only after checking it; a
CTA that saw a failure must not ask again: the ISA's undefined behaviour, which the simulator refuses with an error
naming the thread). So each CTA of a launch runs the work its own %ctaid gives it, and the clusters the hardware
might have cancelled run as themselves: the same results for a kernel whose scheduling is correct. The response
is flashsim's own encoding (the ISA leaves it opaque): byte 0 bit 0 the outcome, bytes 4..15 the first CTA's x, y,
z (zero on failure, where the ISA leaves them undefined).
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Vec
from ..program import CLUSTER_OFFSET_MASK, CLUSTER_RANK_SHIFT, Decoded
from .asynchronous import barriers
from .data import B128, address_fn

__all__ = ["RESPONSE_BYTES", "failed_response"]

RESPONSE_BYTES = 16
_RULE = "PTX ISA: clusterlaunchcontrol requires sm_100 or higher"


def failed_response(n: int) -> np.ndarray:
    """``n`` responses of a request that cancelled nothing, as (n, 16) bytes."""
    return np.zeros((n, RESPONSE_BYTES), np.uint8)


class _Requests:
    """The CTAs (wave block indices) that have issued a request answered with a failure."""

    def __init__(self):
        self.failed: set = set()


def _requests(m) -> _Requests:
    state = m.state.get("clusterlaunchcontrol")
    if state is None:
        state = m.state["clusterlaunchcontrol"] = _Requests()
    return state


def _try_cancel(d: Decoded):
    mods = d.mods
    mods.flag(".try_cancel")
    if not mods.flag(".async") or not mods.flag(".mbarrier::complete_tx::bytes"):
        raise isa.Unsupported("clusterlaunchcontrol.try_cancel needs .async.mbarrier::complete_tx::bytes")
    if not mods.flag(".shared::cta"):
        raise isa.Unsupported("clusterlaunchcontrol.try_cancel on generic addresses (only .shared::cta here)")
    multicast = mods.flag(".multicast::cluster::all")
    if mods.type() != ".b128":
        raise isa.Unsupported("clusterlaunchcontrol.try_cancel is .b128")
    mods.done()
    _s, addr = address_fn(d, 0, ".shared")
    _m, mbar = address_fn(d, 1, ".shared")

    def run(g):
        m = g.m
        lanes = g.lanes()
        block = lanes // m.block_threads
        state = _requests(m)
        again = np.flatnonzero(np.isin(block, list(state.failed)))
        if again.size:
            raise m.error(
                "clusterlaunchcontrol.try_cancel after this CTA saw a request fail (PTX ISA: undefined behaviour)",
                int(lanes[again[0]]),
            )
        a, b = addr(g) & np.uint64(CLUSTER_OFFSET_MASK), mbar(g) & np.uint64(CLUSTER_OFFSET_MASK)
        ranks = range(m.cluster_size) if multicast else (None,)
        bars = barriers(m)
        for r in ranks:
            tag = np.uint64(0) if r is None else np.uint64((r + 1) << CLUSTER_RANK_SHIFT)
            m.mem.store(".shared::cluster", a | tag, failed_response(lanes.size), lanes)
            if m.sanitizer is not None:
                m.sanitizer.mbarrier_arrive(bars.ids(g, b | tag), lanes)
            bars.complete_tx(g, b | tag, np.full(lanes.size, RESPONSE_BYTES, np.int64))
        state.failed.update(int(x) for x in np.unique(block))
        m.progress += 1

    return d.op(run)


def _words(g, source) -> np.ndarray:
    """Each running lane's response register as (lanes, 4) uint32 words."""
    v = np.ascontiguousarray(np.broadcast_to(g.R[source], (g.m.T,)))
    return v.view(np.uint32).reshape(g.m.T, 4)[g.lanes()]


def _query(d: Decoded):
    mods = d.mods
    mods.flag(".query_cancel")
    if mods.flag(".is_canceled"):
        if mods.types() != [".pred", ".b128"]:
            raise isa.Unsupported("clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, r")
        mods.done()
        target, source = d.dst(0), d.reg(d.operands[1])

        def run(g):
            g.write_lanes(target, (_words(g, source)[:, 0] & 1).astype(bool))

        return d.op(run)
    dim = mods.take(".get_first_ctaid::x", ".get_first_ctaid::y", ".get_first_ctaid::z", ".get_first_ctaid")
    if dim is None:
        raise isa.Unsupported("clusterlaunchcontrol.query_cancel needs .is_canceled or .get_first_ctaid")
    vector = mods.flag(".v4")
    if mods.types() != [".b32", ".b128"]:
        raise isa.Unsupported("clusterlaunchcontrol.query_cancel.get_first_ctaid is .b32.b128")
    mods.done()
    source = d.reg(d.operands[1])
    if d.prog.dtypes[source] != B128:
        raise isa.Unsupported("clusterlaunchcontrol.query_cancel reads a .b128 register")
    if vector != (dim == ".get_first_ctaid") or (vector and not isinstance(d.operands[0], Vec)):
        raise isa.Unsupported("get_first_ctaid.v4.b32.b128 {x, y, z, _}, r or get_first_ctaid::{x,y,z}.b32.b128 d, r")
    if vector:
        targets = [None if getattr(x, "name", None) is None else d.reg(x) for x in d.operands[0].items]
        columns = [1, 2, 3, None]
    else:
        targets, columns = [d.dst(0)], [{"x": 1, "y": 2, "z": 3}[dim[-1]]]

    def run(g):
        words = _words(g, source)
        for t, c in zip(targets, columns):
            if t is not None:
                g.write_lanes(t, words[:, c] if c is not None else np.zeros(words.shape[0], np.uint32))

    return d.op(run)


@isa.implements("clusterlaunchcontrol")
def clusterlaunchcontrol(d: Decoded):
    if ".try_cancel" in d.mods.left:
        return _try_cancel(d)
    if ".query_cancel" in d.mods.left:
        return _query(d)
    raise isa.Unsupported("clusterlaunchcontrol needs .try_cancel or .query_cancel")


isa.requires("clusterlaunchcontrol", archs=isa.since(100), source=_RULE)
