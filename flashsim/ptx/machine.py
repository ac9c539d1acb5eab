"""The SIMT machine: threads of a wave of blocks, their registers and PCs, the scheduler, barriers and the report.

Every thread has its own PC. A warp runs the lanes that sit at its smallest PC (among those not exited or waiting),
so that diverged lanes reconverge where their paths meet (a label: the start of a basic block); lanes at the same
PC in different warps and blocks run together, as one vectorised group. The scheduler sweeps PCs upward: it runs
the group at the smallest warp PC at or above its cursor for one basic block, moves the cursor past it, and starts a
new sweep from 0 when no warp is left above. Every warp that can run runs at least one block per sweep, so warps
that wait on each other (a producer and a consumer on an mbarrier, a spin on a flag in global memory written by
another block, named barriers) all make progress, and warps that move forward in lockstep stay one group.

A barrier (``bar.sync`` / ``barrier.sync`` / ``bar.arrive`` / ``bar.red``) counts arriving threads per block and
barrier id; the waiting threads run on once the count is reached. A warp-synchronous instruction (``shfl.sync``,
``vote.sync``, ``mma.sync.aligned``...) runs when every non-exited lane of its member mask has reached it; lanes
that reach it first wait there. When no thread can run and some have not exited, the launch ends in Deadlock naming
every waiting warp's PC and what it waits for; a warp that spins (runs without any thread changing memory, an
mbarrier or a barrier) for more than ``spin_limit`` sweeps in a row is reported the same way.
"""

from __future__ import annotations

import numpy as np

from . import batching, vectorize
from .barriers import Barriers
from .errors import Deadlock, SimulationError

__all__ = ["Machine", "Group", "WAIT_NONE", "WAIT_BARRIER", "WAIT_SYNC"]

WAIT_NONE, WAIT_BARRIER, WAIT_SYNC = 0, 1, 2
_BIG = np.iinfo(np.int64).max
CALL_DEPTH = 32
DEFAULT_SPIN_LIMIT = 100_000  # polls of a barrier a wave waits before it is called a deadlock (launch's spin_limit)


class _Control:
    """What a block's terminator did to its lanes (shared by a group and its guarded sub-groups)."""

    __slots__ = ("taken", "target", "exited", "call")

    def __init__(self):
        self.taken = None
        self.target = None
        self.exited = None
        self.call = None


class Group:
    """The lanes that run a basic block together. ``R`` the machine's register list (registers are immutable numpy
    arrays over all threads of the wave, replaced on every write); ``mask`` None (every thread of the wave runs) or a
    bool array over the threads; ``pc`` the PC being run. Ops read ``R[i]`` whole (a value of a lane outside the mask
    is never used: ``write`` merges under the mask) and go through ``lanes()`` for memory and other effects."""

    __slots__ = ("m", "R", "mask", "_lanes", "ctl", "pc")

    def __init__(self, machine, mask, ctl=None):
        self.m = machine
        self.R = machine.R
        self.mask = mask
        self._lanes = None
        self.ctl = ctl if ctl is not None else _Control()
        self.pc = 0

    def lanes(self) -> np.ndarray:
        """Indices of the running threads (in the wave)."""
        if self._lanes is None:
            self._lanes = np.arange(self.m.T) if self.mask is None else np.flatnonzero(self.mask)
        return self._lanes

    def active(self) -> np.ndarray:
        """The running threads as a bool array over the wave."""
        return self.m.all_true if self.mask is None else self.mask

    def write(self, i: int | None, value) -> None:
        """Register ``i`` := ``value`` (a scalar or an array over all threads) on the running lanes."""
        if i is None:
            return
        dt = self.m.dtypes[i]
        if type(value) is not np.ndarray or value.dtype != dt:
            value = np.asarray(value)
            if value.dtype != dt:
                value = value.astype(dt)
        if self.mask is None:
            self.R[i] = value if value.ndim else np.full(self.m.T, value, dt)
            return
        old = self.R[i]
        if type(old) is np.ndarray and old.shape == self.mask.shape:  # a copy merged under the mask (cheaper)
            new = old.copy()
            np.copyto(new, value, where=self.mask)
            self.R[i] = new
        else:
            self.R[i] = np.where(self.mask, value, old)

    def write_lanes(self, i: int | None, values) -> None:
        """Register ``i`` := ``values`` (one per running lane, in ``lanes()`` order)."""
        if i is None:
            return
        if self.mask is None:
            self.write(i, values)
            return
        new = self.R[i].copy()
        new[self.lanes()] = np.asarray(values).astype(self.m.dtypes[i], copy=False)
        self.R[i] = new

    def lane_values(self, i: int) -> np.ndarray:
        """Register ``i``'s value on each running lane (``lanes()`` order)."""
        v = self.R[i]
        if type(v) is not np.ndarray:
            return np.full(self.lanes().size, v, dtype=np.asarray(v).dtype)
        return v if self.mask is None else v[self.lanes()]

    def restrict(self, p: int, negated: bool):
        """The sub-group whose guard ``@[!]p`` holds (sharing this group's control record), or None if no lane's."""
        guard = self.R[p]
        if negated:
            guard = ~guard
        if np.ndim(guard) == 0:
            return self if bool(guard) else None
        m = guard if self.mask is None else (guard & self.mask)
        if self.mask is None and m.all():
            return self
        if not m.any():
            return None
        sub = Group(self.m, m, self.ctl)
        sub.pc = self.pc
        return sub

    def converge(self, member_slot: int) -> bool:
        """A warp-synchronous instruction with member mask register ``member_slot`` (one 32-bit mask per lane): the
        running lanes of a warp whose non-exited members are not all here wait at this PC (WAIT_SYNC, run again
        with the others); True if lanes are left to run it. Every running lane must be a member of its mask."""
        m = self.m
        act = self.active()
        mask = np.broadcast_to(np.asarray(self.R[member_slot]).astype(np.uint32), (m.T,))
        member = ((mask >> m.lane_of.astype(np.uint32)) & np.uint32(1)).astype(bool)
        if (act & ~member).any():
            t = int(np.flatnonzero(act & ~member)[0])
            raise m.error("a lane runs a warp-synchronous instruction outside its member mask", t)
        # each warp's member lanes (by the mask of its running lanes) must all be running or exited
        need = np.zeros(m.n_warps, np.uint32)
        np.bitwise_or.at(need, m.warp_of[act], mask[act])
        wanted = ((need[m.warp_of] >> m.lane_of.astype(np.uint32)) & np.uint32(1)).astype(bool)
        missing = wanted & ~act & ~m.exited
        if not missing.any():
            return True
        bad_warps = np.zeros(m.n_warps, bool)
        bad_warps[m.warp_of[missing]] = True
        waiting = act & bad_warps[m.warp_of]
        self.stop(waiting, 2, self.pc)
        return bool(self.active().any())

    def stop(self, lanes_mask: np.ndarray, wait: int, resume: int) -> None:
        """Take the lanes of ``lanes_mask`` out of this group: they wait (``wait``: WAIT_SYNC, WAIT_BARRIER) and go on
        at PC ``resume`` when released."""
        m = self.m
        m.pc[lanes_mask] = resume
        m.wait[lanes_mask] = wait
        self.mask = self.active() & ~lanes_mask
        self._lanes = None


class Machine:
    """The threads of ``n_blocks`` blocks of ``block_threads`` threads each (a wave of a launch), running ``prog``
    over ``memory``. ``specials`` gives each special register's values over the threads (flashsim.ptx.launch)."""

    def __init__(
        self,
        prog,
        memory,
        n_blocks: int,
        block_threads: int,
        specials: dict,
        *,
        kernel: str,
        locate,
        spin_limit: int = DEFAULT_SPIN_LIMIT,
        sanitizer=None,
        trace=None,
        max_steps: int | None = None,
        cluster_size: int = 1,
    ):
        self.prog, self.mem = prog, memory
        self.cluster_size = cluster_size  # wave block b is rank b % cluster_size of its cluster (flashsim.ptx.cluster)
        self.kernel = kernel
        self.n_blocks, self.block_threads = n_blocks, block_threads
        self.warps_per_block = -(-block_threads // 32)
        self.T = n_blocks * block_threads
        self.W = -(-self.T // 32) if block_threads % 32 == 0 else n_blocks * self.warps_per_block
        self.dtypes = prog.dtypes
        self.all_true = np.ones(self.T, bool)
        self.R = []
        for dt, init in zip(prog.dtypes, prog.init):
            if init is not None:
                self.R.append(init)
            else:
                self.R.append(np.zeros(self.T, dt))
        for name, slot in prog.specials.items():
            if name in specials:
                self.R[slot] = np.asarray(specials[name]).astype(prog.dtypes[slot])
        self.clock_slots = [prog.specials[n] for n in ("%clock", "%clock64", "%clock_hi") if n in prog.specials]
        self.pc = np.full(self.T, prog.kernel.start, np.int64)
        self.exited = np.zeros(self.T, bool)
        self.wait = np.zeros(self.T, np.int8)
        # the warp of each thread: warps never straddle blocks (a block's last warp may be partial)
        local = np.arange(self.T) % block_threads
        self.warp_of = (np.arange(self.T) // block_threads) * self.warps_per_block + local // 32
        self.block_of = np.arange(self.T) // block_threads
        self.n_warps = n_blocks * self.warps_per_block
        self.lane_of = local % 32
        self.stack = np.zeros((self.T, CALL_DEPTH), np.int64)
        self.depth = np.zeros(self.T, np.int64)
        self.barriers = Barriers(self)
        self.counts = np.zeros(len(prog.ops), np.int64)
        self.steps = 0
        self.clock = 0
        self.progress = 0  # bumped by every store, arrive, barrier or exit: a spin ends only if it changes
        self.spin_limit = spin_limit
        self.max_steps = max_steps
        self.locate = locate
        self.sanitizer = sanitizer  # racecheck's synchronisation observer (flashsim.ptx.sanitize.RaceCheck) or None
        self.trace = trace
        self.current_pc = None  # the PC being run (errors name its line)
        # mma's batched per block (flashsim.ptx.batching); not under a trace, which reads registers at each PC
        self.batch_plan = prog.batch_plan if trace is None else None
        self.schedule = prog.schedule if trace is None else None  # lane-wise ops stacked (flashsim.ptx.vectorize)
        self.stacked: dict = {}  # flashsim.ptx.vectorize's record of this wave's registers (rows written together)
        self.state: dict = {}  # per-feature state of semantics modules (mbarriers, cp.async groups, ...)
        # waits other than the 16 named barriers (barrier.cluster.wait, setmaxnreg.inc): threads wait with
        # WAIT_BARRIER and a barrier id of 16 or more, and the state that releases them is waiters[id]: an object
        # with ``waits_for(t)`` (a deadlock report's ("other", text)) and ``exited(threads)`` (exits may release)
        self.waiters: dict = {}
        # while set, called as watch(group, item) before each item (a PC, or a tuple of stacked PCs) of a block runs:
        # an asynchronous unit's check of the registers it owns (flashsim.ptx.semantics.wgmma)
        self.watch = None

    # -- scheduling -------------------------------------------------------------------------------------

    def _warp_min(self, live) -> np.ndarray:
        """Each warp's smallest PC among its live threads (_BIG where none)."""
        pcs = np.where(live, self.pc, _BIG)
        out = np.full(self.n_warps, _BIG, np.int64)
        np.minimum.at(out, self.warp_of, pcs)
        return out

    def run(self) -> None:
        try:
            self._schedule()
            for unit in list(self.state.values()):  # asynchronous units with work never waited for finish it now
                finish = getattr(unit, "at_exit", None)
                if finish is not None:
                    finish()
        finally:
            self.current_pc = None

    def _schedule(self) -> None:
        cursor = 0
        idle_sweeps = 0
        last_progress = self.progress
        while True:
            live = ~self.exited & (self.wait == WAIT_NONE)
            if not live.any():
                if self.exited.all():
                    return
                self.current_pc = None
                self._deadlock("every thread that has not exited waits")
            wmin = self._warp_min(live)
            above = wmin[(wmin >= cursor) & (wmin != _BIG)]
            if above.size == 0:
                cursor = 0
                if self.progress == last_progress:
                    idle_sweeps += 1
                    if idle_sweeps > self.spin_limit:
                        self._deadlock(
                            f"no thread changed memory, an mbarrier or a barrier in {self.spin_limit} "
                            "sweeps (a spin loop no one ends)"
                        )
                else:
                    idle_sweeps, last_progress = 0, self.progress
                continue
            p = int(above.min())
            warps = wmin == p
            at_p = self.pc == p
            group = live & at_p & warps[self.warp_of]
            waiting = (self.wait == WAIT_SYNC) & at_p & warps[self.warp_of]
            if waiting.any():  # lanes waiting at a warp-synchronous op of these warps run again with the rest
                self.wait[waiting] = WAIT_NONE
                group |= waiting
            self._run_block(p, None if group.all() else group)
            cursor = p + 1
            self.steps += 1
            if self.max_steps is not None and self.steps > self.max_steps:
                raise SimulationError(
                    f"stopped after {self.max_steps} scheduling steps (max_steps)", kernel=self.kernel
                )

    def _run_block(self, start: int, mask) -> None:
        prog = self.prog
        end = int(prog.block_end[start])
        if end < 0:  # lanes resume inside a block (a warp-synchronous op they waited at): run to its block's end
            end = int(prog.block_end[np.flatnonzero(prog.block_end[: start + 1] >= 0)[-1]])
        g = Group(self, mask)
        ops = prog.ops
        n_warps = self.n_warps if mask is None else int(np.unique(self.warp_of[mask]).size)
        self.counts[start : end + 1] += n_warps
        for s in self.clock_slots:
            self.R[s] = self.dtypes[s].type(self.clock)
        self.clock += end - start + 1
        trace = self.trace
        sanitizer = self.sanitizer
        plan = self.batch_plan
        pending = None
        items = self.schedule.items.get(start) if self.schedule is not None else None
        flush_at = self.schedule.flush_first[start] if items is not None else None
        for index, item in enumerate(range(start, end + 1) if items is None else items):
            pc = item if type(item) is int else item[0]
            g.pc = pc
            self.current_pc = pc
            if self.watch is not None:
                self.watch(g, item)
            if plan is not None:
                if (
                    pending is not None
                    and pending.entries
                    and (plan.flush_before[pc] if flush_at is None else index in flush_at)
                ):
                    batching.flush(g, pending, _scatter_words)
                if plan.deferrable[pc]:
                    pending = self._defer(g, pc, pending)
                    if sanitizer is not None:  # a deferred mma.sync still orders its warp's lanes here
                        sanitizer.executed(g, pc)
                    if g.mask is not None and not g.mask.any():  # its lanes wait for the rest of their warps
                        if pending is not None and pending.entries:
                            batching.flush(g, pending, _scatter_words)
                        self._finish(g, None)
                        return
                    continue
            if type(item) is not int:  # congruent lane-wise ops, run once stacked (flashsim.ptx.vectorize)
                vectorize.run_group(g, prog, item, self.stacked)
                continue
            traced = trace is not None and pc in trace.pcs
            if traced and trace.before:
                trace.record(self, g, pc, before=True)
            ops[pc].run(g)
            if traced and trace.after:
                trace.record(self, g, pc, before=False)
            if sanitizer is not None:
                sanitizer.executed(g, pc)
            if g.mask is not None and not g.mask.any():  # every lane stopped (a barrier, an exit, a wait)
                if pending is not None and pending.entries:  # the deferred mma's ran before it: their results
                    batching.flush(g, pending, _scatter_words)
                self._finish(g, None)
                return
        if pending is not None and pending.entries:
            self.current_pc = end
            batching.flush(g, pending, _scatter_words)
        self._finish(g, end + 1)

    def _defer(self, g: Group, pc: int, pending):
        """Defer the mma at ``pc`` for the group's warps (flashsim.ptx.batching); flush first when the warps
        changed (lanes stopped at a warp-synchronous instruction)."""
        info = self.prog.ops[pc].info
        if g.mask is not None and not g.converge(info.member):
            return pending
        threads = _warp_threads(g)
        if pending is None:
            pending = batching.Pending()
        elif pending.entries and not _same_threads(pending.threads, threads):
            batching.flush(g, pending, _scatter_words)
        pending.add(g, info, threads)
        return pending

    def _finish(self, g: Group, next_pc) -> None:
        """Apply a block's ending to its lanes: fall through to ``next_pc``, or what its terminator recorded."""
        ctl = g.ctl
        active = g.active()
        if next_pc is not None:
            self.pc[active] = next_pc
        if ctl.taken is not None:
            self.pc[ctl.taken] = ctl.target if np.ndim(ctl.target) == 0 else ctl.target[ctl.taken]
        if ctl.call is not None:
            lanes, target = ctl.call
            d = self.depth[lanes]
            if (d >= CALL_DEPTH).any():
                t = int(lanes[np.flatnonzero(d >= CALL_DEPTH)[0]])
                raise SimulationError(f"call depth past {CALL_DEPTH} (recursion is not simulated)", **self.locate(t))
            self.stack[lanes, d] = g.pc + 1
            self.depth[lanes] = d + 1
            self.pc[lanes] = target
        if ctl.exited is not None:
            self.exited[ctl.exited] = True
            # lanes of these warps waiting at a warp-synchronous op retry it: an exited member no longer counts
            retry = (self.wait == WAIT_SYNC) & np.isin(self.warp_of, self.warp_of[ctl.exited])
            self.wait[retry] = WAIT_NONE
            self.progress += 1
            self.barriers.exited(np.unique(self.block_of[ctl.exited]))
            for waiter in list(self.waiters.values()):
                waiter.exited(np.flatnonzero(ctl.exited))

    def error(self, message: str, t: int, cls=SimulationError) -> SimulationError:
        """A ``cls`` error located at thread ``t`` (its block, thread, PC)."""
        return cls(message, **self.locate(t))

    def waits_for(self, t: int) -> tuple:
        """What thread ``t`` waits for, for a deadlock report."""
        if self.wait[t] == WAIT_BARRIER:
            bar = int(self.barriers.bar_id[t])
            if bar in self.waiters:
                return self.waiters[bar].waits_for(t)
            return ("barrier", int(self.block_of[t]), bar)
        if self.wait[t] == WAIT_SYNC:
            return ("warpgroup",) if self.prog.op_names[self.pc[t]].startswith("wgmma.") else ("sync",)
        mbarriers = self.state.get("mbarrier")
        poll = mbarriers.waits_for(t) if mbarriers is not None else None
        return poll if poll is not None else ("spin",)

    # -- reports ----------------------------------------------------------------------------------------

    def _deadlock(self, why: str):
        lines = []
        live = ~self.exited
        for w in np.unique(self.warp_of[live]):
            threads = np.flatnonzero(live & (self.warp_of == w))
            pcs = np.unique(self.pc[threads])
            waits = {self.waits_for(int(t)) for t in threads}
            b = int(w) // self.warps_per_block
            what = "; ".join(sorted(_wait_text(x) for x in waits))
            lines.append(
                f"  block {b} warp {int(w) % self.warps_per_block}: PC {', '.join(map(str, pcs))} "
                f"(PTX line {', '.join(str(self.prog.ops[p].line) for p in pcs)}): {what}"
            )
            if len(lines) >= 32:
                lines.append("  ...")
                break
        t = int(np.flatnonzero(live)[0])
        raise Deadlock(f"deadlock: {why}\n" + "\n".join(lines), **self.locate(t))


def _warp_threads(g: Group):
    """The (W, 32) threads of the group's whole warps, or None when it is every thread of a wave of whole warps."""
    m = g.m
    if g.mask is None and m.block_threads % 32 == 0:
        return None
    lanes = g.lanes()
    warps = np.unique(m.warp_of[lanes])
    first = lanes[np.searchsorted(m.warp_of[lanes], warps)]
    if lanes.size != 32 * warps.size or (m.lane_of[first] != 0).any():
        raise m.error(
            "a .aligned warp instruction with part of a warp (its other lanes exited or diverged)", int(lanes[0])
        )
    return first[:, None] + np.arange(32)[None, :]


def _same_threads(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return a.shape == b.shape and bool((a == b).all())


def _scatter_words(g: Group, slots, threads, words) -> None:
    """Register ``slots[k]`` := row k of ``words`` (len(slots), threads) uint32 on the warps ``threads`` (None: every
    thread of the wave; the rows then become the registers, views of one buffer: registers are never written in
    place)."""
    R = g.R
    if threads is None:
        for k, s in enumerate(slots):
            R[s] = words[k]
        return
    idx = threads.reshape(-1)
    for k, s in enumerate(slots):
        new = np.broadcast_to(np.asarray(R[s]), (g.m.T,)).astype(g.m.dtypes[s], copy=True)
        new[idx] = words[k]
        R[s] = new


def _wait_text(info) -> str:
    kind = info[0]
    if kind == "barrier":
        return f"waits at barrier {info[2]}"
    if kind == "sync":
        return "waits for the other lanes of its warp at a warp-synchronous instruction"
    if kind == "warpgroup":
        return (
            "waits for the other threads of its warpgroup at a .sync.aligned wgmma instruction (the 128 threads of a "
            "warpgroup must all execute the same one: they diverged)"
        )
    if kind == "mbarrier":
        return f"polls an mbarrier at shared offset {info[1]:#x} for phase parity {info[2]}" + "".join(info[3:])
    if kind == "other":
        return info[1]
    return "runs without ending (a spin loop)"
