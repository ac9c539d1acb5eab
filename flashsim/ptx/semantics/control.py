"""Control flow and synchronisation: bra, brx.idx, call, ret, exit, trap, bar / barrier (barrier.cluster: in
flashsim.ptx.semantics.cluster), bar.warp.sync, and the memory-ordering instructions (membar, fence), which order
nothing here: the simulated memory is sequentially consistent and every access is complete when its instruction
ends. Each fence form the PTX ISA defines is accepted by name, and none other:

- ``fence{.sc|.acq_rel|.acquire|.release}.{cta,cluster,gpu,sys}`` (.acq_rel when omitted),
  ``fence.acquire.sync_restrict::shared::cluster.cluster`` / ``fence.release.sync_restrict::shared::cta.cluster``,
  ``membar.{cta,gl,sys}``: no effect;
- ``fence.mbarrier_init.release.cluster`` (what cuda::barrier and cooperative groups emit after mbarrier.init):
  makes the inits visible to the cluster, which they already are here;
- ``fence.proxy.alias``, ``fence.proxy.tensormap::generic.{release,acquire}.{cta,cluster,gpu,sys}`` (the acquire
  with its ``[addr], 128`` operands): no effect on values;
- ``fence.proxy.async{,.global,.shared::cta,.shared::cluster}`` (also spelled ``membar.proxy``): orders the
  thread's generic-proxy accesses before later async-proxy ones; under racecheck it marks the shared bytes whose
  last generic write it covers (flashsim.ptx.sanitize.RaceCheck.proxy_async_fence), which an async-proxy read
  (wgmma, a bulk copy's source) requires; ``fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster``
  is that fence for the CTA's shared memory, its ``.acquire.sync_restrict::shared::cluster.cluster`` twin (async
  writes before generic accesses, which the mbarrier orders here) has no effect.

Which forms exist was checked against ptxas 13.0 (each accepted one assembles for sm_90a; each refused one is
refused by ptxas too).

A call copies the arguments' .param bytes into the callee's parameters (the per-thread parameter frame of
flashsim.ptx.memory), pushes the return PC and jumps; ret pops it and copies the callee's return values into the call
sequence's .param variables. The device-runtime functions a kernel may call without a body (vprintf, __assertfail,
malloc / free) are simulated here: vprintf's output goes to the launch report.
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Reg, Sym
from ..printf import vprintf
from ..program import BARRIER, BRANCH, CALL, EXIT, RETURN, Decoded
from .cluster import barrier_cluster

ORDERING = (".sc", ".acq_rel", ".acquire", ".release", ".relaxed", ".weak")
SCOPES = (".cta", ".cluster", ".gpu", ".sys", ".gl")


@isa.implements("bra")
def bra(d: Decoded):
    d.mods.take(".uni")
    d.mods.done()
    (target,) = d.operands
    if not isinstance(target, Sym):
        raise isa.Unsupported(f"bra to {target!r}")
    pc = d.label(target.name)

    def run(g):
        g.ctl.taken = g.active().copy() if g.mask is not None else g.m.all_true.copy()
        g.ctl.target = pc

    return d.op(run, BRANCH)


@isa.implements("brx")
def brx(d: Decoded):
    mods = d.mods
    if not mods.flag(".idx"):
        raise isa.Unsupported("brx without .idx")
    mods.take(".uni")
    mods.done()
    index, table = d.operands
    targets = (d.fn.branch_targets or {}).get(table.name) if isinstance(table, Sym) else None
    if targets is None:
        raise isa.Unsupported(f"brx.idx over {table!r}: no .branchtargets list of that name")
    pcs = np.array([d.label(t) for t in targets], np.int64)
    idx = d.src(0, np.uint32)

    def run(g):
        i = np.asarray(g.R[idx]).astype(np.int64)
        active = g.active()
        bad = active & ((i < 0) | (i >= pcs.size))
        if bad.any():
            raise g.m.error(f"brx.idx index outside its {pcs.size} targets", int(np.flatnonzero(bad)[0]))
        target = np.zeros(g.m.T, np.int64)
        target[active] = pcs[np.broadcast_to(i, (g.m.T,))[active]]
        g.ctl.taken = active.copy()
        g.ctl.target = target

    return d.op(run, BRANCH)


@isa.implements("exit")
def exit_(d: Decoded):
    d.mods.done()

    def run(g):
        act = g.active().copy()
        g.ctl.exited = act if g.ctl.exited is None else (g.ctl.exited | act)

    return d.op(run, EXIT)


@isa.implements("ret")
def ret(d: Decoded):
    d.mods.take(".uni")
    d.mods.done()
    if d.fn.entry:
        return exit_(d)
    prog = d.prog

    def run(g):
        m = g.m
        lanes = g.lanes()
        depth = m.depth[lanes] - 1
        back = m.stack[lanes, depth]
        m.depth[lanes] = depth
        for site in np.unique(back).tolist():  # the call site's return values, into its .param variables
            copies = prog.call_returns.get(site - 1, ())
            sel = lanes[back == site]
            for src, dst, size in copies:
                m.mem.frame[sel, dst : dst + size] = m.mem.frame[sel, src : src + size]
        target = np.zeros(m.T, np.int64)
        target[lanes] = back
        g.ctl.taken = g.active().copy()
        g.ctl.target = target

    return d.op(run, RETURN)


def _frame_offset(d: Decoded, operand, what: str) -> int:
    if not isinstance(operand, Sym):
        raise isa.Unsupported(f"a call {what} passed as {operand!r} (only .param variables are simulated)")
    space, offset = d.prog.layout.symbol(d.prog, d.fn, operand.name)
    if space != ".frame":
        raise isa.Unsupported(f"a call {what} {operand.name} in {space}")
    return offset + operand.offset


@isa.implements("call")
def call(d: Decoded):
    mods = d.mods
    mods.take(".uni")
    mods.done()
    ins = d.ins
    if not isinstance(ins.callee, Sym):
        raise isa.Unsupported("indirect calls")
    callee = d.prog.module.functions.get(ins.callee.name)
    if callee is None:
        raise isa.Unsupported(f"call of an unknown function {ins.callee.name}")
    if callee.declaration_only:
        return _runtime_call(d, callee)
    layout = d.prog.layout
    args = [_frame_offset(d, a, "argument") for a in ins.args]
    params = [(layout.frame[(callee.name, p.name)], p.size) for p in callee.params]
    if len(args) != len(params):
        raise isa.Unsupported(f"call of {callee.name} with {len(args)} arguments for {len(params)} parameters")
    rets = [_frame_offset(d, r, "return value") for r in ins.returns]
    callee_rets = [(layout.frame[(callee.name, p.name)], p.size) for p in callee.returns]
    d.prog.call_returns[d.pc] = [(src, dst, size) for (src, size), dst in zip(callee_rets, rets)]
    start = d.prog.functions[callee.name].start

    def run(g):
        m = g.m
        lanes = g.lanes()
        for a, (p, size) in zip(args, params):
            m.mem.frame[lanes, p : p + size] = m.mem.frame[lanes, a : a + size]
        g.ctl.call = (lanes, start)

    return d.op(run, CALL)


def _runtime_call(d: Decoded, callee):
    name = callee.name
    ins = d.ins
    if name == "__assertfail":

        def run(g):
            raise g.m.error("assertion failed in the kernel (__assertfail)", int(g.lanes()[0]))

        return d.op(run)
    if name == "vprintf":
        fmt_off = _frame_offset(d, ins.args[0], "argument")
        arg_off = _frame_offset(d, ins.args[1], "argument")
        ret = _frame_offset(d, ins.returns[0], "return value") if ins.returns else None

        def run(g):
            vprintf(g, fmt_off, arg_off, ret)

        return d.op(run)
    raise isa.Unsupported(f"call of the device-runtime function {name} (only vprintf and __assertfail are simulated)")


def _barrier_operands(d: Decoded, first: int):
    """(id slot, count slot or None) of a bar / barrier instruction's a{, b} operands."""
    ops = d.operands[first:]
    ids = d.value(ops[0], np.uint32)
    count = d.value(ops[1], np.uint32) if len(ops) > 1 else None
    return ids, count


@isa.implements("bar", "barrier")
def bar(d: Decoded):
    mods = d.mods
    if d.ins.opcode == "bar" and mods.flag(".warp"):
        return _warp_sync(d)
    if d.ins.opcode == "barrier" and mods.flag(".cluster"):
        return barrier_cluster(d)
    mods.take(".cta")
    mods.take(".aligned")
    kind = mods.take(".sync", ".arrive", ".red")
    if kind is None:
        kind = ".sync"  # bar a == bar.sync a
    red_op = None
    if kind == ".red":
        red_op = mods.take(".popc", ".and", ".or")
        t = mods.type()
        if red_op is None or (red_op == ".popc") != (t == ".u32") or (red_op != ".popc" and t != ".pred"):
            raise isa.Unsupported("bar.red needs .popc.u32 or .and / .or .pred")
    mods.done()
    if kind == ".red":
        dst = d.dst(0)
        ids, count = _barrier_operands(d, 1)
        pred_operand = d.operands[-1]
        negate = False
        if hasattr(pred_operand, "reg") and not isinstance(pred_operand, Reg):
            negate, pred_operand = True, pred_operand.reg
        pred = d.reg(pred_operand)
        op_name = red_op[1:]
        ops = d.operands
        if len(ops) == 3:
            count = None
        else:
            count = d.value(ops[2], np.uint32)
    else:
        ids, count = _barrier_operands(d, 0)
    wait = kind != ".arrive"
    if kind == ".arrive" and count is None:
        raise isa.Unsupported("bar.arrive needs a thread count")

    def run(g):
        lanes = g.lanes()
        i = np.broadcast_to(np.asarray(g.R[ids]).astype(np.int64), (g.m.T,))[lanes]
        c = None if count is None else np.broadcast_to(np.asarray(g.R[count]).astype(np.int64), (g.m.T,))[lanes]
        red = None
        if kind == ".red":
            p = np.broadcast_to(np.asarray(g.R[pred]), (g.m.T,))[lanes]
            red = (op_name, dst, ~p if negate else p)
        g.m.barriers.sync(lanes, i, c, g, wait, red)

    return d.op(run, BARRIER)


def _warp_sync(d: Decoded):
    """bar.warp.sync membermask: the lanes of the mask (those not exited) meet here."""
    if not d.mods.flag(".sync"):
        raise isa.Unsupported("bar.warp needs .sync")
    d.mods.done()
    member = d.src(0, np.uint32)

    def run(g):
        g.converge(member)

    return d.op(run)


def _no_effect(g):
    return None


# The Hopper forms of the barriers and fences: barrier.cluster, fence.proxy.async, fence.mbarrier_init and the
# .cluster scope (ptxas 13.0: "Feature 'barrier.cluster.arrive' requires .target sm_90 or higher", "Modifier
# '.async' requires .target sm_90 or higher").
_SM90_RULE = "PTX ISA: requires sm_90 or higher (ptxas 13.0)"
isa.requires("barrier", ".cluster", archs=isa.since(90), source=_SM90_RULE)
isa.requires("fence", ".proxy", ".async", archs=isa.since(90), source=_SM90_RULE)
isa.requires("fence", ".mbarrier_init", archs=isa.since(90), source=_SM90_RULE)
isa.requires("fence", ".cluster", archs=isa.since(90), source=_SM90_RULE)


@isa.implements("membar", "fence")
def fence(d: Decoded):
    """Orders memory accesses; no effect on values on sequentially consistent memory (the forms: the module
    docstring; why a sequentially consistent execution is a valid one of the PTX memory model:
    flashsim.ptx.semantics.atomic). fence.proxy.async is racecheck's async-proxy fence."""
    mods = d.mods
    opcode = d.ins.opcode
    if mods.flag(".proxy"):
        if opcode == "membar" and mods.left != [".alias"]:
            raise isa.Unsupported("membar.proxy is .alias only (fence.proxy has the other proxies)")
        return _proxy_fence(d)
    if opcode == "membar":
        level = mods.take(".cta", ".gl", ".sys")
        mods.done()
        if level is None or d.operands:
            raise isa.Unsupported("membar needs .cta, .gl or .sys")
        return d.op(_no_effect)
    if mods.flag(".mbarrier_init"):
        sem, scope = mods.take(".release"), mods.take(*SCOPES)
        mods.done()
        if sem is None or scope != ".cluster" or d.operands:
            raise isa.Unsupported("fence.mbarrier_init is .release.cluster only")
        return d.op(_no_effect)
    sem = mods.take(".sc", ".acq_rel", ".acquire", ".release")
    restrict = mods.prefixed(".sync_restrict::")
    scope = mods.take(".cta", ".cluster", ".gpu", ".sys")
    mods.done()
    if scope is None or d.operands:
        raise isa.Unsupported("fence needs a scope (.cta, .cluster, .gpu, .sys)")
    if restrict is not None:
        want = {".acquire": ".sync_restrict::shared::cluster", ".release": ".sync_restrict::shared::cta"}.get(sem)
        if restrict != want or scope != ".cluster":
            raise isa.Unsupported(
                "fence.sync_restrict is .acquire.sync_restrict::shared::cluster.cluster or "
                ".release.sync_restrict::shared::cta.cluster"
            )
    return d.op(_no_effect)


def _proxy_fence(d: Decoded):
    """fence.proxy.{alias, async{.global,.shared::cta,.shared::cluster}, tensormap::generic.{release,acquire}}."""
    mods = d.mods
    if mods.flag(".alias"):
        mods.done()
        return d.op(_no_effect)
    if mods.flag(".tensormap::generic"):
        sem, scope = mods.take(".release", ".acquire"), mods.take(*SCOPES)
        mods.done()
        if sem is None or scope not in (".cta", ".cluster", ".gpu", ".sys"):
            raise isa.Unsupported("fence.proxy.tensormap::generic needs .release / .acquire and a scope")
        if (sem == ".acquire") != bool(d.operands):
            raise isa.Unsupported("fence.proxy.tensormap::generic.acquire takes [addr], size (and .release none)")
        return d.op(_no_effect)
    if mods.flag(".async::generic"):  # the one-way fences between the generic and the async proxy (PTX 8.6)
        sem, restrict, scope = mods.take(".release", ".acquire"), mods.prefixed(".sync_restrict::"), mods.take(*SCOPES)
        mods.done()
        want = {".release": ".sync_restrict::shared::cta", ".acquire": ".sync_restrict::shared::cluster"}.get(sem)
        if sem is None or restrict != want or scope != ".cluster" or d.operands:
            raise isa.Unsupported(
                "fence.proxy.async::generic is .release.sync_restrict::shared::cta.cluster or "
                ".acquire.sync_restrict::shared::cluster.cluster"
            )
        if sem == ".acquire":  # orders the async proxy's writes before later generic accesses: the mbarrier's job
            return d.op(_no_effect)

        def release(g):  # the generic proxy's writes to the CTA's shared memory before later async-proxy accesses
            if g.m.sanitizer is not None:
                g.m.sanitizer.proxy_async_fence(g.lanes(), ".shared::cta")

        return d.op(release)
    if not mods.flag(".async"):
        raise isa.Unsupported(f"fence.proxy{''.join(mods.left)} (proxies: .alias, .async, .tensormap::generic)")
    space = mods.take(".global", ".shared::cta", ".shared::cluster")
    mods.done()
    if d.operands:
        raise isa.Unsupported("fence.proxy.async takes no operands")

    def run(g):
        sanitizer = g.m.sanitizer
        if sanitizer is not None:
            sanitizer.proxy_async_fence(g.lanes(), space)

    return d.op(run)


@isa.implements("trap")
def trap(d: Decoded):
    d.mods.done()

    def run(g):
        raise g.m.error("trap", int(g.lanes()[0]))

    return d.op(run)


@isa.implements("nanosleep", "pmevent")
def nothing(d: Decoded):
    """No effect on any value (a sleep, a performance-monitor event)."""
    d.mods.left.clear()

    def run(g):
        return None

    return d.op(run)


isa.requires("griddepcontrol", archs=isa.since(90), source="PTX ISA: requires sm_90 or higher (ptxas 13.0)")


@isa.implements("griddepcontrol")
def grid_dependency(d: Decoded):
    """griddepcontrol.wait / .launch_dependents (programmatic dependent launch, sm_90+): wait blocks until the grids
    this one depends on have completed and flushed their memory; launch_dependents lets a dependent grid start
    early. A launch here runs one grid to its end before the next one starts, so every prerequisite is complete
    and visible when a grid begins: both are no-ops on that order."""
    action = d.mods.take(".wait", ".launch_dependents")
    if action is None:
        raise isa.Unsupported("griddepcontrol needs .wait or .launch_dependents")
    d.mods.done()

    def run(g):
        return None

    return d.op(run)
