"""Control flow and synchronisation: bra, brx.idx, call, ret, exit, trap, bar / barrier, bar.warp.sync, and the
memory-ordering instructions (membar, fence), which order nothing here: the simulated memory is sequentially
consistent and every access is complete when its instruction ends.

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


@isa.implements("membar", "fence")
def fence(d: Decoded):
    """Orders memory accesses; a no-op on sequentially consistent memory (every scope and proxy accepted). Why a
    sequentially consistent execution is a valid one of the PTX memory model: flashsim.ptx.semantics.atomic."""
    d.mods.left = [
        m
        for m in d.mods.left
        if not (m in ORDERING or m in SCOPES or m.startswith((".proxy", ".tensormap")) or m in (".async", ".alias"))
    ]
    d.mods.done()

    def run(g):
        return None

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
