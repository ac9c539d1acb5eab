"""The three sanitizers of a launch (``launch(..., check=...)``), as compute-sanitizer's tools, on the CPU.

memcheck: the memory (flashsim.ptx.memory) refuses every access outside the arrays, shared and local memory it
holds whatever ``check`` is; with check="memcheck" the error is a MemcheckError. Every report names kernel, block,
thread, PTX line, CUDA line (``.loc``), address and buffer: the launch argument and how far past its end the access
lies, or "no buffer"; misaligned accesses, stores to read-only arrays, shared accesses past the block's static plus
dynamic bytes, local ones past the frame, and an mbarrier used before mbarrier.init the same.

racecheck: shared-memory hazards between two threads of a block that no synchronisation orders (RaceError at the
first). Design: vector clocks. Every thread t holds a clock vector ``vc[t]`` over the threads of its block, its own
entry its current epoch; an access is stamped with the epoch of its thread. A release (arriving at a barrier, an
mbarrier, a warp synchronisation) publishes the thread's vector and then starts a new epoch; an acquire (leaving a
barrier, an mbarrier wait that saw its phase complete, the end of a warp synchronisation) takes the elementwise
maximum with what was published. An earlier access by thread t at epoch e is ordered before thread u's access iff
t == u or ``vc[u][t] >= e``. Shadow state per shared byte of each block: the last writer (thread, epoch, PTX
instruction, atomic or not), per thread of the block the epoch and instruction of its last read since that write
(8 bytes per byte and thread, and a flag per byte saying whether any read is kept: launch runs as many blocks per
wave as keep this under RACECHECK_BYTES), and the cp.async in flight to it. A read checks the last write
(read-after-write), a write checks the last write (write-after-write), every read since it (write-after-read) and
the other lanes of its own instruction; all of it whole-array numpy over the accessing lanes. What synchronises:
  * bar.sync / barrier.sync / bar.red: the arriving threads release, the threads released at completion acquire
    (bar.arrive releases only); a named barrier with a thread count orders only the threads that take part in it;
  * mbarrier: an arrive (mbarrier.arrive, arrive_drop, cp.async.mbarrier.arrive) releases into the barrier; the
    completion of a phase fixes what a waiter of it acquires (a test_wait / try_wait that returns true);
  * cp.async: its write may land at any moment between issue and completion (cp.async.wait_group / wait_all of the
    issuing thread, or the cp.async.mbarrier.arrive it was tied to). At issue it is checked as a write of the
    issuing thread against what came before, and its bytes are marked in flight: any access to them before the
    completion is a hazard. At completion it is recorded as a write of the issuing thread at its epoch there, under
    the cp.async's own PTX line, so it is ordered before what that thread (and whoever acquires from it) does next;
  * warp-synchronous instructions (bar.warp.sync = __syncwarp, shfl / vote / match / redux / elect .sync,
    mma.sync, ldmatrix / stmatrix .sync, wmma): the lanes of a warp that run one together release and acquire
    among themselves (all of them: two member masks that split a warp and meet at one PC are joined as one).
    Threads of one warp are otherwise not ordered (sm_70+ independent thread scheduling), so intra-warp hazards are
    reported, as compute-sanitizer does.
Atomics never conflict with atomics; an atomic conflicts with a plain access as a write does (only the last write of
a byte is kept: a plain write followed by two atomics of other threads is checked against the first atomic only).
Global memory is not checked, as compute-sanitizer's racecheck checks shared memory only.

initcheck: a load of shared-memory bytes that no thread of the block wrote, or of local-memory bytes the thread
itself did not write (InitcheckError); atomics read too. Global memory is initialised by definition: its arrays
come from numpy, every byte of them holds a value the caller gave; cp.async writes its bytes when it completes.
"""

from __future__ import annotations

import numpy as np

from .errors import InitcheckError, RaceError

__all__ = ["make_sanitizer", "wave_blocks", "RaceCheck", "InitCheck", "RACECHECK_BYTES"]

RACECHECK_BYTES = 1 << 29  # shadow memory a wave of racecheck may hold (512 MiB)
NO_FENCE, ASYNC_WRITE = -1, -2  # RaceCheck.f_thread: no fence.proxy.async covers the last generic write / async
_CTA, _ALL = 1, 2  # what a thread's latest fence.proxy.async covers: its CTA's shared memory, or its cluster's
_PC_BITS = 24  # a read's shadow entry: epoch << 24 | PTX instruction index
WARP_SYNC_OPCODES = ("shfl", "vote", "match", "redux", "elect", "mma", "ldmatrix", "stmatrix", "wmma", "movmatrix")


def make_sanitizer(check: str | None, machine, block: tuple):
    """The access observer of ``check`` for a wave's ``machine`` (None for no check and for memcheck, which is the
    memory's own bounds checks with MemcheckError)."""
    if check == "racecheck":
        return RaceCheck(machine, block)
    if check == "initcheck":
        return InitCheck(machine, block)
    return None


def wave_blocks(check: str | None, block_threads: int, shared_bytes: int, per_wave: int, cluster_size: int = 1) -> int:
    """How many blocks a wave runs: ``per_wave``, fewer under racecheck where its shadow (8 bytes per shared byte
    and thread of a cluster, and a clock vector over the cluster's threads per thread) would pass RACECHECK_BYTES,
    at least one (the launch rounds to whole clusters)."""
    if check != "racecheck":
        return per_wave
    ct = block_threads * cluster_size
    per_block = max(shared_bytes, 1) * (8 * ct + 24) + 16 * block_threads * ct  # + clocks and fence clocks
    return max(1, min(per_wave, RACECHECK_BYTES // per_block))


class _Observer:
    """What both shadow sanitizers share: the machine, the block shape and reports that name both ends."""

    def __init__(self, machine, block: tuple):
        self.m = machine
        self.block = tuple(block)
        self.bt = machine.block_threads

    def _where(self, t: int, pc: int) -> dict:
        """The error fields of thread ``t`` (wave index) at instruction ``pc``."""
        loc = dict(self.m.locate(t))
        prog = self.m.prog
        loc["line"] = prog.ops[pc].line
        loc["source"] = prog.source_of(pc)
        return loc

    def _thread(self, local: int) -> tuple:
        local = local % self.bt  # a cluster-wide index (rank * block threads + thread) names the thread
        bx, by = self.block[0], self.block[1]
        return (local % bx, (local // bx) % by, local // (bx * by))

    def _line(self, pc: int) -> str:
        src = self.m.prog.source_of(pc)
        return f"PTX line {self.m.prog.ops[pc].line}" + (f" ({src})" if src else "")

    def _pc(self, pc) -> int:
        return int(self.m.current_pc if pc is None else pc)


class InitCheck(_Observer):
    """check="initcheck": which bytes of each block's shared memory and each thread's local memory were written."""

    def __init__(self, machine, block: tuple):
        super().__init__(machine, block)
        mem = machine.mem
        self.shared = np.zeros(mem.shared.shape, bool)
        self.local = np.zeros(mem.local.shape, bool)

    def access(self, space, addr, width, threads, write, atomic, pc, blocks=None) -> None:
        if space == ".shared":
            shadow, rows = self.shared, self.m.block_of[threads] if blocks is None else blocks
        elif space == ".local":
            shadow, rows = self.local, threads
        else:
            return
        cols = addr.astype(np.int64)[:, None] + np.arange(width)
        if write:
            shadow[rows[:, None], cols] = True
            return
        done = shadow[rows[:, None], cols]
        if done.all():
            return
        k, j = (int(x[0]) for x in np.nonzero(~done))
        t = int(threads[k])
        where = "no thread of the block wrote it" if space == ".shared" else "this thread never wrote it"
        missing = int((~done[k]).sum())
        err = InitcheckError(
            f"{width}-byte {space[1:]} load at {space[1:]} offset {int(addr[k]) + j:#x}: {missing} of its bytes "
            f"uninitialised ({where})",
            **self._where(t, self._pc(pc)),
        )
        err.address, err.space = int(addr[k]) + j, space
        raise err


class RaceCheck(_Observer):
    """check="racecheck": the vector clocks of a wave's threads and the shadow of its blocks' shared memory (the
    module docstring). The machine calls ``executed`` after each instruction, the barriers ``barrier_arrive`` /
    ``barrier_complete``, the mbarriers ``mbarrier_arrive`` / ``mbarrier_complete`` / ``mbarrier_acquire``."""

    def __init__(self, machine, block: tuple):
        super().__init__(machine, block)
        m = machine
        bt = self.bt
        self.cs = cs = getattr(m, "cluster_size", 1)
        ct = bt * cs  # clocks run over the threads of a cluster: its blocks reach each other's shared memory
        t = np.arange(m.T)
        self.local = (((t // bt) % cs) * bt + t % bt).astype(np.int64)  # rank * block threads + thread
        self.vc = np.zeros((m.T, ct), np.int64)
        self.vc[np.arange(m.T), self.local] = 1
        S = m.mem.shared.shape[1]
        nb = m.n_blocks
        self.S = S
        self.w_thread = np.full((nb, S), -1, np.int32)
        self.w_epoch = np.zeros((nb, S), np.int64)
        self.w_pc = np.zeros((nb, S), np.int32)
        self.w_atomic = np.zeros((nb, S), bool)
        # the async proxy: the writer of the byte's last generic write where the writer's own fence.proxy.async
        # covers it (f_epoch: the writer's epoch at that fence), NO_FENCE, or ASYNC_WRITE where the async proxy
        # wrote it (no fence needed)
        self.f_thread = np.full((nb, S), NO_FENCE, np.int32)
        self.f_epoch = np.zeros((nb, S), np.int64)
        # each thread's latest fence.proxy.async: its clock vector, its own epoch (0: none) and what it covers
        self.fence_vc = np.zeros((m.T, ct), np.int64)
        self.fence_epoch = np.zeros(m.T, np.int64)
        self.fence_scope = np.zeros(m.T, np.int8)
        self.reads = np.zeros((nb, S, ct), np.int64)  # epoch << _PC_BITS | pc, 0: no read since the last write
        self.read_since = np.zeros((nb, S), bool)  # whether any thread read the byte since its last write
        self.p_thread = np.full((nb, S), -1, np.int32)  # the thread of a cp.async in flight to the byte, or -1
        self.p_pc = np.zeros((nb, S), np.int32)
        self.pending_any = False
        self.released: dict = {}  # (block, barrier id) -> clock vector published into a pending barrier
        self.mb_released: dict = {}  # mbarrier object -> clock vector published into it
        self.mb_phase: dict = {}  # mbarrier object -> what its last completed phase releases
        names = m.prog.op_names
        self.warp_sync = np.array(
            [n.startswith("bar.warp.sync") or (n.split(".")[0] in WARP_SYNC_OPCODES and ".sync" in n) for n in names],
            bool,
        )

    # -- accesses ---------------------------------------------------------------------------------------------

    def access(self, space, addr, width, threads, write, atomic, pc, blocks=None, record: bool = True) -> None:
        """A shared-memory access of ``threads`` (``blocks``: the wave block each one reaches, None: its own)."""
        if space != ".shared" or threads.size == 0 or (atomic and not write):
            return  # an atomic's read is checked as its write
        m = self.m
        pc = self._pc(pc)
        n = threads.size
        rows = (m.block_of[threads] if blocks is None else np.asarray(blocks)).astype(np.int64)
        lt = self.local[threads]
        cols = addr.astype(np.int64)[:, None] + np.arange(width)  # (n, width)
        r2 = np.broadcast_to(rows[:, None], cols.shape)
        if self.pending_any:
            self._in_flight(threads, rows, r2, cols, write, pc)
        mine = self.vc[threads]  # (n, bt)
        own = mine[np.arange(n), lt]
        wt = self.w_thread[r2, cols].astype(np.int64)
        other = (wt >= 0) & (wt != lt[:, None])
        if atomic:
            other &= ~self.w_atomic[r2, cols]
        if other.any():
            known = mine[np.arange(n)[:, None], np.maximum(wt, 0)] >= self.w_epoch[r2, cols]
            bad = other & ~known
            if bad.any():
                k, j = (int(x[0]) for x in np.nonzero(bad))
                kind = "write-after-write" if write else "read-after-write"
                b = int(rows[k])
                self._report(kind, threads[k], pc, b, int(cols[k, j]), int(wt[k, j]), int(self.w_pc[b, cols[k, j]]))
        if not write:
            self.reads[r2, cols, lt[:, None]] = (own[:, None] << _PC_BITS) | pc
            self.read_since[r2, cols] = True
            return
        if not atomic and n > 1:
            self._same_instruction(threads, rows, cols, pc)
        read = self.read_since[r2, cols]
        if read.any():  # only the bytes read since their last write
            k_idx, j_idx = np.nonzero(read)
            seen = self.reads[rows[k_idx], cols[k_idx, j_idx]]  # (m, bt)
            late = (seen >> _PC_BITS) > mine[k_idx]
            late[np.arange(k_idx.size), lt[k_idx]] = False
            if late.any():
                e, reader = (int(x[0]) for x in np.nonzero(late))
                k, j = int(k_idx[e]), int(j_idx[e])
                b = int(rows[k])
                pc_r = int(seen[e, reader] & ((1 << _PC_BITS) - 1))
                self._report("write-after-read", threads[k], pc, b, int(cols[k, j]), reader, pc_r)
        if not record:
            return
        self.w_thread[r2, cols] = lt[:, None]
        self.w_epoch[r2, cols] = own[:, None]
        self.w_pc[r2, cols] = pc
        self.w_atomic[r2, cols] = atomic
        self.f_thread[r2, cols] = NO_FENCE
        if read.any():
            self.reads[rows[k_idx], cols[k_idx, j_idx]] = 0
            self.read_since[r2, cols] = False

    # -- cp.async in flight -------------------------------------------------------------------------------

    def async_issued(self, threads, dst, width: int, blocks=None) -> None:
        """cp.async issued: its write may land at any moment until it completes, so it is checked now against what
        came before (as a write of the issuing threads) and marks its bytes in flight (``blocks``: the wave block
        each write lands in, None: the issuing thread's)."""
        addr = np.asarray(dst, np.uint64)
        self.access(".shared", addr, width, threads, True, False, None, blocks, record=False)
        rows = (self.m.block_of[threads] if blocks is None else np.asarray(blocks)).astype(np.int64)
        cols = addr.astype(np.int64)[:, None] + np.arange(width)
        r2 = np.broadcast_to(rows[:, None], cols.shape)
        self.p_thread[r2, cols] = self.local[threads][:, None]
        self.p_pc[r2, cols] = int(self.m.current_pc)
        self.pending_any = True

    def async_completed(self, threads, dst, width: int, blocks=None) -> None:
        """cp.async completes (its write follows through the memory): its bytes are no longer in flight."""
        rows = (self.m.block_of[threads] if blocks is None else np.asarray(blocks)).astype(np.int64)
        cols = np.asarray(dst, np.uint64).astype(np.int64)[:, None] + np.arange(width)
        self.p_thread[np.broadcast_to(rows[:, None], cols.shape), cols] = -1
        self.pending_any = bool((self.p_thread >= 0).any())

    def _in_flight(self, threads, rows, r2, cols, write, pc) -> None:
        """Any access to bytes an incomplete cp.async will write races with it."""
        busy = self.p_thread[r2, cols] >= 0
        if busy.any():
            k, j = (int(x[0]) for x in np.nonzero(busy))
            b, c = int(rows[k]), int(cols[k, j])
            kind = "write-after-write" if write else "read-after-write"
            self._report(kind, threads[k], pc, b, c, int(self.p_thread[b, c]), int(self.p_pc[b, c]), " (in flight)")

    def _same_instruction(self, threads, rows, cols, pc) -> None:
        """Two lanes of one store that write the same byte (a write-after-write inside the instruction)."""
        key = (rows[:, None] * self.S + cols).reshape(-1)
        who = np.repeat(threads, cols.shape[1])
        order = np.argsort(key, kind="stable")
        k, w = key[order], who[order]
        dup = np.flatnonzero((k[1:] == k[:-1]) & (w[1:] != w[:-1]))
        if dup.size:
            i = int(dup[0])
            first, second = int(w[i]), int(w[i + 1])
            b = int(k[i] // self.S)
            self._report("write-after-write", second, pc, b, int(k[i] - b * self.S), int(self.local[first]), pc)

    def _who(self, local: int) -> str:
        """``thread (x, y, z)``, with its CTA rank in a cluster launch."""
        rank = f" of CTA rank {local // self.bt}" if self.cs > 1 else ""
        return f"thread {self._thread(local)}{rank}"

    def _report(self, kind: str, t, pc: int, block: int, offset: int, other_local: int, other_pc: int, note=""):
        t = int(t)
        other = self._thread(other_local)
        first, then = (
            ("reads", "writes") if kind == "write-after-read" else ("writes", "reads" if kind[0] == "r" else "writes")
        )
        where = f" of CTA rank {block % self.cs}" if self.cs > 1 else ""
        err = RaceError(
            f"{kind} hazard at shared offset {offset:#x}{where}: {self._who(other_local)} {first} it{note} at "
            f"{self._line(other_pc)}, then {self._who(int(self.local[t]))} {then} it at {self._line(pc)}, with no "
            "synchronisation ordering them",
            **self._where(t, pc),
        )
        err.kind, err.address, err.space = kind, offset, ".shared"
        err.other_thread, err.other_line = other, self.m.prog.ops[other_pc].line
        err.other_source = self.m.prog.source_of(other_pc)
        raise err

    # -- the async proxy ----------------------------------------------------------------------------------------

    def async_proxy_access(self, blocks, offsets, width: int, write: bool, threads, pc) -> None:
        """An access of shared memory through the async proxy (a wgmma operand read, a bulk / TMA copy's read of its
        source or write of its destination): ``blocks`` the wave block of each access (int64), ``offsets`` its
        shared byte offset (uint64), ``width`` bytes per access, ``threads`` the issuing thread of each (wave
        indices), ``pc`` the issuing instruction. It is checked as an access of the issuing thread (ordered after
        what that thread has synchronised with), and a read must find every byte's last generic-proxy write
        covered by a fence.proxy.async (``proxy_async_fence``) ordered between them: one of the writer after the
        write that the reader is ordered after, one of the reader itself after it was ordered after the write, or
        (the latest fence of each thread is kept) one of a third thread ordered after the write and before the
        read. A write marks its bytes as the async proxy's (an async read of them needs no fence; a generic read
        needs the usual ordering, which the mbarrier that completes the copy gives when the copy's completion
        releases the issuing thread's clock into it)."""
        threads = np.asarray(threads)
        if threads.size == 0:
            return
        rows = np.asarray(blocks).astype(np.int64)
        addr = np.asarray(offsets, np.uint64)
        self.access(".shared", addr, width, threads, bool(write), False, pc, rows)
        cols = addr.astype(np.int64)[:, None] + np.arange(width)
        r2 = np.broadcast_to(rows[:, None], cols.shape)
        if write:
            self.f_thread[r2, cols] = ASYNC_WRITE
            return
        writer = self.w_thread[r2, cols].astype(np.int64)
        mark = self.f_thread[r2, cols]
        need = (writer >= 0) & (mark != ASYNC_WRITE)
        if not need.any():
            return
        k_idx, j_idx = np.nonzero(need)
        th = threads[k_idx]
        w = writer[k_idx, j_idx]
        row = rows[k_idx]
        col = cols[k_idx, j_idx]
        e = self.w_epoch[row, col]
        vc_r = self.vc[th]  # (m, ct)
        m_idx = np.arange(th.size)
        # the writer fenced after the write, and the reader is ordered after that fence
        ok = (mark[k_idx, j_idx] >= 0) & (vc_r[m_idx, w] >= self.f_epoch[row, col])
        # the reader's own latest fence came after it was ordered after the write
        scope = self.fence_scope[th]
        covers = (scope == _ALL) | ((scope == _CTA) & (self.m.block_of[th] == row))
        ok |= covers & (self.fence_vc[th, w] >= e) & (self.fence_epoch[th] > 0)
        left = np.flatnonzero(~ok)
        if left.size:  # a third thread's latest fence: ordered after the write and before the read
            cluster_first = (row[left] // self.cs) * self.cs * self.bt  # the cluster's first wave thread
            ct = self.vc.shape[1]
            f = cluster_first[:, None] + np.arange(ct)[None, :]  # (n, ct) wave threads of each cluster
            f = np.minimum(f, self.m.T - 1)
            scope = self.fence_scope[f]
            reach = (scope == _ALL) | ((scope == _CTA) & (self.m.block_of[f] == row[left][:, None]))
            known = self.fence_vc[f, w[left][:, None]] >= e[left][:, None]
            before = vc_r[left][np.arange(left.size)[:, None], self.local[f]] >= self.fence_epoch[f]
            ok[left] = (reach & known & before & (self.fence_epoch[f] > 0)).any(axis=1)
        bad = np.flatnonzero(~ok)
        if bad.size:
            q = int(bad[0])
            k, j = int(k_idx[q]), int(j_idx[q])
            b, c = int(rows[k]), int(cols[k, j])
            where = f" of CTA rank {b % self.cs}" if self.cs > 1 else ""
            t = int(threads[k])
            pc = self._pc(pc)
            wpc = int(self.w_pc[b, c])
            err = RaceError(
                f"async-proxy hazard at shared offset {c:#x}{where}: {self._who(int(writer[k, j]))} writes it through "
                f"the generic proxy at {self._line(wpc)}, then {self._who(int(self.local[t]))} reads it through the "
                f"async proxy at {self._line(pc)}, with no fence.proxy.async ordered between them",
                **self._where(t, pc),
            )
            err.kind, err.address, err.space = "async-proxy", c, ".shared"
            err.other_thread, err.other_line = self._thread(int(writer[k, j])), self.m.prog.ops[wpc].line
            err.other_source = self.m.prog.source_of(wpc)
            raise err

    def proxy_async_fence(self, threads, scope: str | None) -> None:
        """``threads`` execute fence.proxy.async (``scope`` None for every state space, ".shared::cta" their own
        CTA's shared memory, ".shared::cluster" their cluster's, ".global" no shared memory): each thread's fence
        (its clock vector and epoch now) is kept, and the shared bytes it wrote itself and no fence covered yet are
        marked with its epoch (the writer's first fence after the write)."""
        threads = np.asarray(threads)
        if scope == ".global" or threads.size == 0:
            return
        m = self.m
        lt = self.local[threads]
        self.fence_vc[threads] = self.vc[threads]
        self.fence_epoch[threads] = self.vc[threads, lt]
        self.fence_scope[threads] = _CTA if scope == ".shared::cta" else _ALL
        self.vc[threads, lt] += 1  # what the thread does next is after the fence (a new epoch)
        blocks = m.block_of[threads]
        cs = self.cs
        rows = (
            np.unique(blocks)
            if scope == ".shared::cta"
            else np.unique((blocks // cs)[:, None] * cs + np.arange(cs)[None, :])
        )
        for r in rows[rows < m.n_blocks].tolist():
            fencer = np.zeros(self.vc.shape[1] + 1, bool)
            mine = threads if scope != ".shared::cta" else threads[blocks == r]
            if scope != ".shared::cta":
                mine = mine[(m.block_of[mine] // cs) == r // cs]
            fencer[self.local[mine]] = True
            epoch = np.zeros(self.vc.shape[1] + 1, np.int64)
            epoch[self.local[mine]] = self.fence_epoch[mine]  # the epoch at the fence, before the new one
            w = self.w_thread[r].astype(np.int64)
            sel = np.flatnonzero((w >= 0) & (self.f_thread[r] == NO_FENCE) & fencer[w])
            if sel.size:
                self.f_thread[r, sel] = w[sel]
                self.f_epoch[r, sel] = epoch[w[sel]]

    # -- synchronisation --------------------------------------------------------------------------------------

    def _release(self, threads) -> np.ndarray:
        """The join of ``threads``' clock vectors (one block's), after which each starts a new epoch."""
        joined = self.vc[threads].max(axis=0)
        self.vc[threads, self.local[threads]] += 1
        return joined

    def _acquire(self, threads, vector) -> None:
        self.vc[threads] = np.maximum(self.vc[threads], vector)

    def barrier_arrive(self, block: int, barrier: int, threads) -> None:
        joined = self._release(threads)
        key = (block, barrier)
        prev = self.released.get(key)
        self.released[key] = joined if prev is None else np.maximum(prev, joined)

    def barrier_complete(self, block: int, barrier: int, threads) -> None:
        vector = self.released.pop((block, barrier), None)
        if vector is not None and threads.size:
            self._acquire(threads, vector)

    def mbarrier_arrive(self, ids, threads) -> None:
        """Threads arrive on the mbarrier objects ``ids`` (one per thread): each releases into its object."""
        for i in np.unique(ids).tolist():  # the distinct objects of one instruction: a handful
            joined = self._release(threads[ids == i])
            prev = self.mb_released.get(i)
            self.mb_released[i] = joined if prev is None else np.maximum(prev, joined)

    def mbarrier_complete(self, ids) -> None:
        """The current phase of the objects ``ids`` completed: its waiters acquire what was released so far."""
        for i in np.asarray(ids).tolist():
            vector = self.mb_released.get(i)
            if vector is not None:
                self.mb_phase[i] = vector.copy()

    def mbarrier_acquire(self, ids, threads) -> None:
        """Threads whose wait on the objects ``ids`` saw the phase complete."""
        for i in np.unique(ids).tolist():
            vector = self.mb_phase.get(i)
            if vector is not None:
                self._acquire(threads[ids == i], vector)

    def cluster_arrive(self, cluster: int, threads) -> None:
        """barrier.cluster.arrive (.release) of ``threads`` of wave cluster ``cluster``."""
        joined = self._release(threads)
        key = ("cluster", cluster)
        prev = self.mb_released.get(key)
        self.mb_released[key] = joined if prev is None else np.maximum(prev, joined)

    def cluster_complete(self, cluster: int) -> None:
        """The cluster barrier's phase completed: what its waiters acquire."""
        key = ("cluster", cluster)
        vector = self.mb_released.pop(key, None)
        if vector is not None:
            self.mb_phase[key] = vector

    def cluster_acquire(self, cluster: int, threads) -> None:
        """barrier.cluster.wait of ``threads`` returned (the phase they arrived in completed)."""
        vector = self.mb_phase.get(("cluster", cluster))
        if vector is not None and np.size(threads):
            self._acquire(threads, vector)

    def executed(self, g, pc: int) -> None:
        """After instruction ``pc`` ran for group ``g``: a warp-synchronous one orders the lanes of each warp that
        ran it together."""
        if not self.warp_sync[pc]:
            return
        lanes = g.lanes()
        if lanes.size == 0:
            return
        warps = self.m.warp_of[lanes]  # non-decreasing: lanes are in thread order, warps contiguous
        starts = np.flatnonzero(np.diff(warps, prepend=-1))
        joined = np.maximum.reduceat(self.vc[lanes], starts, axis=0)
        self.vc[lanes] = np.repeat(joined, np.diff(np.append(starts, lanes.size)), axis=0)
        self.vc[lanes, self.local[lanes]] += 1
