"""Asynchronous copies and mbarriers: cp.async (.ca / .cg, 4 / 8 / 16 bytes, src-size zero fill, ignore-src),
cp.async.commit_group / wait_group / wait_all, cp.async.mbarrier.arrive{.noinc}, and mbarrier init / arrive /
arrive_drop / expect_tx / complete_tx / test_wait / try_wait (phase token or parity) / pending_count / inval.

mbarrier forms (PTX ISA, "Parallel Synchronization and Communication Instructions: mbarrier"): the .sem qualifiers
(.release / .relaxed on arrive, arrive_drop, expect_tx, complete_tx; .acquire / .relaxed on test_wait, try_wait)
and the .scope ones (.cta, .cluster) are taken by name: memory is sequentially consistent, so they change no value.
The object is named by a shared::cta address (.shared, .shared::cta), a shared::cluster address (.shared::cluster:
the arrive forms and expect_tx / complete_tx, on the CTA's own mbarrier or, through mapa's address, another CTA's
of the cluster; a remote arrive returns no state, its destination is ``_``) or a generic address of the shared
window; the objects are kept by (wave block, offset) that address resolves to (flashsim.ptx.memory.cluster_rows).
try_wait's optional suspend-time hint (a .u32 of nanoseconds) bounds how long a GPU suspends the thread before the
instruction returns false; the simulator returns at once, which is one of the outcomes the ISA allows.

A cp.async is recorded at issue (its source and destination addresses, sizes and the issuing thread's open group)
and performed at the latest moment the PTX memory model allows the program to rely on: when a wait_group /
wait_all of the issuing thread waits for its group, or when the mbarrier arrive it was tied to by
cp.async.mbarrier.arrive fires. A program that reads the destination before then reads the old bytes, as it may on
a GPU. An mbarrier's state (phase, pending arrivals, expected arrivals, transaction count) is kept per block and
shared-memory offset; a phase completes when its pending arrivals and its transaction count both reach zero.
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..errors import MemcheckError, SimulationError
from ..ir import Imm, Reg, Sink
from ..program import SPACE_BASE, Decoded
from .data import SPACES


class AsyncCopies:
    """The in-flight cp.async operations of a machine: records (threads, dst, src, cp size, src size, group, the
    issuing PC: the sanitizers name the cp.async's line) and each thread's count of committed groups."""

    def __init__(self, machine):
        self.m = machine
        self.records: list = []
        self.committed = np.zeros(machine.T, np.int64)

    def issue(self, threads, dst, src, cp: int, src_size) -> None:
        pc = np.full(threads.size, self.m.current_pc, np.int64)
        self.records.append([threads, dst, src, cp, src_size, self.committed[threads].copy(), pc])
        if self.m.sanitizer is not None:
            self.m.sanitizer.async_issued(threads, dst, cp)

    def commit(self, threads) -> None:
        self.committed[threads] += 1

    def complete(self, threads, keep_groups=None) -> None:
        """Perform the copies of ``threads`` (all of them, or all but their ``keep_groups`` most recent committed
        groups and the open one) in issue order: consecutive records of one copy size as one load and one store."""
        m = self.m
        mine = np.zeros(m.T, bool)
        mine[threads] = True
        limit = None if keep_groups is None else self.committed - keep_groups  # groups below this are waited for
        left, run = [], []
        for rec in self.records:
            th, dst, src, cp, size, group, pc = rec
            sel = mine[th]
            if limit is not None:
                sel &= group < limit[th]
            if sel.any():
                if run and run[0][3] != cp:
                    self._copy(*_joined(run))
                    run = []
                run.append((th[sel], dst[sel], src[sel], cp, size[sel], pc[sel]))
                rest = ~sel
                if rest.any():
                    left.append([th[rest], dst[rest], src[rest], cp, size[rest], group[rest], pc[rest]])
            else:
                left.append(rec)
        if run:
            self._copy(*_joined(run))
        self.records = left

    def _copy(self, th, dst, src, cp, size, pc) -> None:
        m = self.m
        data = np.zeros((th.size, cp), np.uint8)
        full = size == cp
        if full.any():
            data[full] = m.mem.load(".global", src[full], cp, th[full])
        part = np.flatnonzero((size > 0) & ~full)
        if part.size:  # a partial source (src-size < cp): its bytes one by one, the rest zero
            k, j = np.nonzero(np.arange(cp)[None, :] < size[part][:, None])
            lanes = part[k]
            data[lanes, j] = m.mem.load(".global", src[lanes] + j.astype(np.uint64), 1, th[lanes])[:, 0]
        if m.sanitizer is not None:
            m.sanitizer.async_completed(th, dst, cp)
        if m.mem.hook is None:
            m.mem.store(".shared", dst, data, th)
        else:  # the sanitizers see each cp.async instruction's part under its own PTX line
            for p in np.unique(pc).tolist():
                sel = pc == p
                m.mem.store(".shared", dst[sel], data[sel], th[sel], pc=p)
        m.progress += 1


def _joined(run: list) -> tuple:
    """Records (threads, dst, src, cp, size, pc) of one copy size as one."""
    if len(run) == 1:
        return run[0]
    th, dst, src, cp, size, pc = zip(*run)
    return (
        np.concatenate(th),
        np.concatenate(dst),
        np.concatenate(src),
        cp[0],
        np.concatenate(size),
        np.concatenate(pc),
    )


def copies(m) -> AsyncCopies:
    state = m.state.get("cp.async")
    if state is None:
        state = m.state["cp.async"] = AsyncCopies(m)
    return state


def _mbarrier_addr(d: Decoded, i: int, generic: bool):
    """A function of a group giving each running lane's shared::cluster address of mbarrier operand ``i`` (a
    generic one: its place in the shared window; an address outside it is an error)."""
    get = _shared_addr(d, i)
    if not generic:
        return get
    base, end = np.uint64(SPACE_BASE[".shared"]), np.uint64(SPACE_BASE[".shared"] + (1 << 32))

    def addr(g):
        a = get(g)
        outside = (a < base) | (a >= end)
        if outside.any():
            t = int(g.lanes()[np.flatnonzero(outside)[0]])
            raise g.m.error("mbarrier at a generic address outside shared memory", t)
        return a - base

    return addr


def _shared_addr(d: Decoded, i: int):
    """A function of a group giving each running lane's shared-memory address of memory operand ``i``."""
    sym_space, base, offset = d.addr(i)
    if sym_space not in (None, ".shared"):
        raise isa.Unsupported(f"a {sym_space} operand where shared memory is expected")
    off = np.uint64(offset & (2**64 - 1))
    if base is None:
        return lambda g: np.full(g.lanes().size, off, np.uint64)
    return lambda g: g.lane_values(base).astype(np.uint64) + off


@isa.implements("cp")
def cp(d: Decoded):
    mods = d.mods
    if not mods.flag(".async"):
        raise isa.Unsupported("cp without .async")
    if mods.flag(".commit_group"):
        mods.done()

        def run(g):
            copies(g.m).commit(g.lanes())

        return d.op(run)
    if mods.flag(".wait_group"):
        mods.done()
        n = d.operands[0]
        if not isinstance(n, Imm):
            raise isa.Unsupported("wait_group needs an immediate")
        keep = int(n.value)

        def run(g):
            copies(g.m).complete(g.lanes(), keep)

        return d.op(run)
    if mods.flag(".wait_all"):
        mods.done()

        def run(g):
            copies(g.m).complete(g.lanes())

        return d.op(run)
    if mods.flag(".mbarrier"):
        if not mods.flag(".arrive"):
            raise isa.Unsupported("cp.async.mbarrier needs .arrive")
        noinc = mods.flag(".noinc")
        space = mods.take(*SPACES)
        if mods.type() != ".b64" or (space is not None and SPACES[space] != ".shared"):
            raise isa.Unsupported("cp.async.mbarrier.arrive.shared.b64 only")
        mods.done()
        addr = _shared_addr(d, 0)

        def run(g):
            copies(g.m).complete(g.lanes())
            barriers(g.m).arrive(g, addr(g), np.ones(g.lanes().size, np.int64), inc=not noinc)

        return d.op(run)
    level = mods.take(".ca", ".cg")
    dst_space = mods.take(".shared", ".shared::cta")
    src_space = mods.take(".global")
    hint = False
    for m in [x for x in mods.left if x.startswith((".L2::", ".L1::"))]:
        mods.left.remove(m)
        hint = hint or m == ".L2::cache_hint"
    mods.done()
    if level is None or dst_space is None or src_space is None:
        raise isa.Unsupported("cp.async needs .ca / .cg, .shared and .global")
    cp_size = d.operands[2]
    if not isinstance(cp_size, Imm) or int(cp_size.value) not in (4, 8, 16):
        raise isa.Unsupported("cp.async's cp-size is 4, 8 or 16")
    n = int(cp_size.value)
    if level == ".cg" and n != 16:
        raise isa.Unsupported("cp.async.cg copies 16 bytes")
    dst_addr = _shared_addr(d, 0)
    _sp, src_base, src_off = d.addr(1)
    if src_base is None:
        raise isa.Unsupported("cp.async from a constant address")
    src_off = np.uint64(src_off & (2**64 - 1))
    extra = list(d.operands[3:])
    if hint:
        extra = extra[:-1]  # the cache policy
    size_slot, ignore = None, None
    if extra:
        op = extra[0]
        if isinstance(op, Reg) and d.fn.regs.get(op.name) == ".pred":
            ignore = d.reg(op)
        else:
            size_slot = d.value(op, np.uint32)

    def run(g):
        lanes = g.lanes()
        src = g.lane_values(src_base).astype(np.uint64) + src_off
        if size_slot is not None:
            size = g.lane_values(size_slot).astype(np.int64)
            if ((size < 0) | (size > n)).any():
                t = int(lanes[np.flatnonzero((size < 0) | (size > n))[0]])
                raise g.m.error(f"cp.async src-size outside 0..{n}", t)
        elif ignore is not None:
            size = np.where(g.lane_values(ignore).astype(bool), 0, n).astype(np.int64)
        else:
            size = np.full(lanes.size, n, np.int64)
        copies(g.m).issue(lanes, dst_addr(g), src, n, size)

    return d.op(run)


TX_LIMIT = (1 << 20) - 1  # a tx-count lies in -(2^20 - 1) .. 2^20 - 1 (PTX ISA, "Contents of the mbarrier object")


class MBarriers:
    """The mbarrier objects of a wave, by (block, shared offset): index ``ids`` into arrays of the phase count, the
    pending and expected arrivals and the transaction count. An instruction's lanes act at once: their arrivals on
    one object add up (np.add.at), the phase completes when pending arrivals and transactions reach zero, and each
    lane's state token is the phase it arrived in.

    Transactions: expect-tx raises the tx-count, complete-tx lowers it; the ISA lets it go negative within its
    range (a copy may complete before its expect-tx), so the errors are what no execution can make right: a
    tx-count outside -(2^20 - 1) .. 2^20 - 1 (overflow / underflow of the range), a phase whose arrivals are all in
    with a negative tx-count (more bytes completed than the phase expected), and a phase that completes while bulk
    copies it tracks are still in flight (their bytes were never expected). Bulk copies tracked by an object
    (``track``) are performed at the latest moment the program may rely on them: when a thread polls the object
    (test_wait / try_wait) and its arrivals are all in; their bytes are completed then."""

    def __init__(self, machine):
        self.m = machine
        self.index: dict[int, int] = {}  # block * 2^32 + offset -> object
        self.where: list[tuple[int, int]] = []  # object -> (block, offset)
        self.phase = np.zeros(0, np.int64)
        self.pending = np.zeros(0, np.int64)
        self.expected = np.zeros(0, np.int64)
        self.tx = np.zeros(0, np.int64)
        self.live = np.zeros(0, bool)
        self.inflight: dict[int, list] = {}  # object -> [(perform, bytes, thread, pc)] of bulk copies it tracks
        n = machine.T
        self.poll_offset = np.full(n, -1, np.int64)  # per thread: the mbarrier it last polled in vain (deadlocks)
        self.poll_want = np.zeros(n, np.int64)

    def _keys(self, g, addr) -> np.ndarray:
        """block * 2^32 + offset of each lane's object, resolved from its shared::cluster address (a shared::cta
        offset names the lane's own block)."""
        rows, off = self.m.mem.cluster_rows(addr, 8, g.lanes())
        return rows * (1 << 32) + off

    def _uninitialised(self, key: int, t: int):
        cls = MemcheckError if self.m.mem.fault is MemcheckError else SimulationError
        return self.m.error(f"mbarrier at shared offset {key & 0xFFFFFFFF:#x} used before mbarrier.init", t, cls)

    def ids(self, g, addr, create: bool = False) -> np.ndarray:
        """The object of each running lane's address (created by ``init``; an error for one never initialised)."""
        keys = self._keys(g, addr)
        uniq, inverse = np.unique(keys, return_inverse=True)
        found = np.empty(uniq.size, np.int64)
        for u, key in enumerate(uniq.tolist()):  # the distinct objects of one instruction: a handful
            i = self.index.get(key)
            if i is None and create:
                i = self.index[key] = self.phase.size
                self.where.append((key >> 32, key & 0xFFFFFFFF))
                self.phase, self.pending, self.expected, self.tx = (
                    np.append(a, 0) for a in (self.phase, self.pending, self.expected, self.tx)
                )
                self.live = np.append(self.live, False)
            if i is None or not (create or self.live[i]):
                raise self._uninitialised(key, int(g.lanes()[np.flatnonzero(keys == key)[0]]))
            found[u] = i
        return found[inverse]

    def id_of(self, block: int, offset: int, t: int) -> int:
        """The object at shared ``offset`` of wave block ``block``, for thread ``t``'s instruction."""
        key = int(block) * (1 << 32) + int(offset)
        i = self.index.get(key)
        if i is None or not self.live[i]:
            raise self._uninitialised(key, t)
        return i

    def _name(self, i: int) -> str:
        return f"mbarrier at shared offset {self.where[i][1]:#x}"

    def init(self, g, addr, counts) -> None:
        bad = np.flatnonzero((counts < 1) | (counts >= 1 << 20))
        if bad.size:
            raise self.m.error(f"mbarrier.init count {int(counts[bad[0]])} outside 1..2^20-1", int(g.lanes()[bad[0]]))
        ids = self.ids(g, addr, create=True)
        self.phase[ids], self.pending[ids], self.expected[ids], self.tx[ids] = 0, counts, counts, 0
        self.live[ids] = True
        for i in np.unique(ids).tolist():
            self.inflight.pop(i, None)
        self.m.progress += 1

    def invalidate(self, g, addr) -> None:
        self.live[self.ids(g, addr)] = False

    def _check_tx(self, ids, threads, what: str) -> None:
        """Errors of the tx-counts of objects ``ids`` (one per thread of ``threads``) after ``what`` changed them."""
        tx = self.tx[ids]
        bad = np.flatnonzero((tx > TX_LIMIT) | (tx < -TX_LIMIT) | ((tx < 0) & (self.pending[ids] == 0)))
        if not bad.size:
            return
        k = int(bad[0])
        i, v = int(ids[k]), int(tx[k])
        if v > TX_LIMIT:
            why = f"tx-count overflow: {what} brings it to {v}, past 2^20 - 1"
        elif v < -TX_LIMIT:
            why = f"tx-count underflow: {what} brings it to {v}, below -(2^20 - 1)"
        else:
            why = (
                f"tx-count underflow: {what} leaves it at {v} with every arrival of the phase in: "
                f"{-v} more bytes completed than the phase expected"
            )
        raise self.m.error(f"{self._name(i)}: {why}", int(threads[k]))

    def arrive(self, g, addr, counts, inc: bool = False, drop: bool = False, tx=0):
        """Arrivals of the running lanes (``counts`` each); returns each lane's state token (its phase count)."""
        ids = self.ids(g, addr)
        tokens = self.phase[ids].astype(np.uint64)
        np.add.at(self.tx, ids, np.broadcast_to(np.asarray(tx, np.int64), ids.shape))
        if self.m.sanitizer is not None:
            self.m.sanitizer.mbarrier_arrive(ids, g.lanes())
        if not inc:  # cp.async.mbarrier.arrive without .noinc: pending + 1, then the arrive: no net arrival
            np.subtract.at(self.pending, ids, counts)
            if drop:
                np.subtract.at(self.expected, ids, counts)
            over = np.flatnonzero(self.pending[ids] < 0)
            if over.size:
                key = int(self._keys(g, addr)[over[0]])
                raise self.m.error(
                    f"mbarrier at shared offset {key & 0xFFFFFFFF:#x}: more arrivals than expected",
                    int(g.lanes()[over[0]]),
                )
        self._check_tx(ids, g.lanes(), "an arrive" + (".expect_tx" if np.any(tx) else ""))
        self._complete(np.unique(ids))
        self.m.progress += 1
        return tokens

    def _complete(self, ids) -> None:
        """Objects ``ids`` whose pending arrivals and transactions are zero move to the next phase."""
        full = ids[(self.pending[ids] == 0) & (self.tx[ids] == 0)]
        for i in full.tolist():
            if self.inflight.get(i):
                _perform, nbytes, t, pc = self.inflight[i][0]
                self.m.current_pc = pc
                raise self.m.error(
                    f"{self._name(i)}: its phase completed with this bulk copy of {nbytes} bytes still in flight "
                    "(tx-count underflow: the copy completes bytes the phase never expected)",
                    t,
                )
        self.phase[full] += 1
        self.pending[full] = self.expected[full]
        if self.m.sanitizer is not None and full.size:
            self.m.sanitizer.mbarrier_complete(full)

    def expect_tx(self, g, addr, tx) -> None:
        ids = self.ids(g, addr)
        np.add.at(self.tx, ids, np.broadcast_to(np.asarray(tx, np.int64), ids.shape))
        self._check_tx(ids, g.lanes(), "mbarrier.expect_tx")
        self.m.progress += 1

    def complete_tx(self, g, addr, tx) -> None:
        ids = self.ids(g, addr)
        np.subtract.at(self.tx, ids, np.broadcast_to(np.asarray(tx, np.int64), ids.shape))
        self._check_tx(ids, g.lanes(), "mbarrier.complete_tx")
        self._complete(np.unique(ids))
        self.m.progress += 1

    def track(self, i: int, perform, nbytes: int, t: int) -> None:
        """A bulk copy of thread ``t`` whose completion object ``i`` tracks: ``perform()`` writes its destination
        and returns the bytes it completes (when a poll lets the program rely on it, ``done``)."""
        self.inflight.setdefault(i, []).append((perform, nbytes, t, self.m.current_pc))
        self.m.progress += 1

    def _perform_tracked(self, ids) -> None:
        """Perform the bulk copies tracked by the objects ``ids`` whose arrivals are all in, then complete their
        bytes on each object at once (one underflow check over all of them)."""
        for i in np.unique(ids).tolist():
            if self.pending[i] != 0 or not self.inflight.get(i):
                continue
            copies = self.inflight.pop(i)
            pc = self.m.current_pc
            total = 0
            for perform, _nbytes, _t, issued in copies:
                self.m.current_pc = issued  # errors name the copy's line
                total += perform()
            _perform, nbytes, t, issued = copies[-1]
            if self.m.sanitizer is not None:  # complete-tx releases (PTX ISA): each copy's issuing thread's clock
                self.m.sanitizer.mbarrier_arrive(np.full(len(copies), i), np.array([c[2] for c in copies]))
            self.tx[i] -= total
            self._check_tx(np.array([i]), np.array([t]), f"the completion of {len(copies)} bulk copies ({total} bytes)")
            self._complete(np.array([i]))
            self.m.current_pc = pc
            self.m.progress += 1

    def done(self, g, addr, phase_or_parity, parity: bool) -> np.ndarray:
        """Whether the phase each lane names (its state token, or with ``parity`` the phase parity) completed."""
        ids = self.ids(g, addr)
        if self.inflight:
            self._perform_tracked(ids)
        want = np.asarray(phase_or_parity, np.int64)
        phase = self.phase[ids]
        out = ((phase & 1) != (want & 1)) if parity else (phase != want)
        lanes = g.lanes()
        if self.m.sanitizer is not None and out.any():
            self.m.sanitizer.mbarrier_acquire(ids[out], lanes[out])
        self.poll_offset[lanes] = np.where(out, -1, addr.astype(np.int64))
        self.poll_want[lanes] = want & 1 if parity else want
        return out

    def waits_for(self, t: int):
        """("mbarrier", offset, phase, what the phase still waits for) for a thread whose last poll found its phase
        incomplete, else None."""
        if self.poll_offset[t] < 0:
            return None
        offset = int(self.poll_offset[t])
        i = self.index.get(int(self.m.block_of[t]) * (1 << 32) + offset)
        left = ""
        if i is not None:
            left = f" (the phase waits for {int(self.pending[i])} arrival(s) and a tx-count of {int(self.tx[i])})"
        return ("mbarrier", offset, int(self.poll_want[t]), left)


def barriers(m) -> MBarriers:
    state = m.state.get("mbarrier")
    if state is None:
        state = m.state["mbarrier"] = MBarriers(m)
    return state


# The mbarrier forms Hopper added (ptxas 13.0: "Feature 'mbarrier.arrive.expect_tx' requires .target sm_90 or
# higher", likewise try_wait and the .sem / .scope qualifiers); sm_120a accepts every one of them.
_SM90_RULE = "PTX ISA: requires sm_90 or higher (ptxas 13.0)"
for _mod in (".expect_tx", ".complete_tx", ".try_wait", ".relaxed", ".acquire", ".release", ".cluster"):
    isa.requires("mbarrier", _mod, archs=isa.since(90), source=_SM90_RULE)


@isa.implements("mbarrier")
def mbarrier(d: Decoded):
    mods = d.mods
    expect = ".arrive" in mods.left and mods.flag(".expect_tx")  # mbarrier.arrive.expect_tx: an arrive
    op = mods.take(
        ".init",
        ".arrive",
        ".arrive_drop",
        ".expect_tx",
        ".complete_tx",
        ".test_wait",
        ".try_wait",
        ".pending_count",
        ".inval",
    )
    sem = mods.take(".release", ".acquire", ".relaxed")
    scope = mods.take(".cta", ".cluster")
    parity = mods.flag(".parity")
    noComplete = mods.flag(".noComplete")
    space = mods.take(*SPACES)
    t = mods.type()
    mods.done()
    if op is None or t != ".b64" or (space is not None and SPACES[space] not in (".shared", ".shared::cluster")):
        raise isa.Unsupported(f"mbarrier{op or ''}{t} (shared, .b64)")
    if noComplete:
        raise isa.Unsupported("mbarrier.arrive.noComplete (sm_80's form for cp.async groups) is not simulated")
    arrives = op in (".arrive", ".arrive_drop", ".expect_tx", ".complete_tx")
    waits = op in (".test_wait", ".try_wait")
    if (sem is not None or scope is not None) and not (arrives or waits):
        raise isa.Unsupported(f"mbarrier{op} takes no .sem / .scope")
    if sem is not None and sem not in ((".release", ".relaxed") if arrives else (".acquire", ".relaxed")):
        raise isa.Unsupported(f"mbarrier{op}{sem} ({'.release / .relaxed' if arrives else '.acquire / .relaxed'})")
    remote = space is not None and SPACES[space] == ".shared::cluster"
    if remote and not arrives:
        raise isa.Unsupported(f"mbarrier{op} on a .shared::cluster address (only the arrive forms reach other CTAs)")
    generic = space is None
    ops = d.operands
    if remote and op in (".arrive", ".arrive_drop") and not isinstance(ops[0], Sink):
        raise isa.Unsupported("a .shared::cluster mbarrier arrive returns no state: its destination is _")

    if op == ".init":
        addr, count = _mbarrier_addr(d, 0, generic), d.src(1, np.uint32)

        def run(g):
            barriers(g.m).init(g, addr(g), g.lane_values(count).astype(np.int64))

        return d.op(run)
    if op == ".inval":
        addr = _mbarrier_addr(d, 0, generic)

        def run(g):
            barriers(g.m).invalidate(g, addr(g))

        return d.op(run)
    if op in (".arrive", ".arrive_drop"):
        dst = d.dst(0)
        addr = _mbarrier_addr(d, 1, generic)
        rest = ops[2:]
        count = d.value(rest[0], np.uint32) if rest else None
        if expect:  # mbarrier.arrive.expect_tx state, [addr], tx_count
            tx_slot, count = count, None
        else:
            tx_slot = None

        def run(g):
            n = g.lanes().size
            c = g.lane_values(count).astype(np.int64) if count is not None else np.ones(n, np.int64)
            tx = g.lane_values(tx_slot).astype(np.int64) if tx_slot is not None else 0
            tokens = barriers(g.m).arrive(g, addr(g), c, drop=op == ".arrive_drop", tx=tx)
            if dst is not None:
                g.write_lanes(dst, tokens)

        return d.op(run)
    if op in (".expect_tx", ".complete_tx"):
        addr, tx_slot = _mbarrier_addr(d, 0, generic), d.src(1, np.uint32)

        def run(g):
            tx = g.lane_values(tx_slot).astype(np.int64)
            mb = barriers(g.m)
            (mb.expect_tx if op == ".expect_tx" else mb.complete_tx)(g, addr(g), tx)

        return d.op(run)
    if op in (".test_wait", ".try_wait"):
        dst = d.dst(0)
        addr = _mbarrier_addr(d, 1, generic)
        token = d.src(2, np.uint32 if parity else np.uint64)
        if len(ops) > 4 or (len(ops) == 4 and op != ".try_wait"):
            raise isa.Unsupported(f"mbarrier{op} with {len(ops)} operands")
        if len(ops) == 4:
            d.src(3, np.uint32)  # try_wait's suspend-time hint: the simulator returns at once (module docstring)

        def run(g):
            want = g.lane_values(token).astype(np.int64)
            g.write_lanes(dst, barriers(g.m).done(g, addr(g), want, parity))

        return d.op(run)
    # pending_count: the count of pending arrivals in a state token (here: the phase count has no pending part)
    raise isa.Unsupported(f"mbarrier{op}")
