"""Hopper's warpgroup MMA: wgmma.mma_async (every dense shape and type pair of sm_90a, A from a shared-memory matrix
descriptor or from registers, imm-trans-a / b, scale-d, imm-scale-a / b, .satfinite), wgmma.fence, commit_group
and wait_group.

The 128 threads of a warpgroup (four consecutive warps of a block, the first one's index a multiple of 4) run each
of these together (.sync.aligned): threads that arrive first wait at the instruction until the rest of their
warpgroup arrives; one that exited first is an error naming the rule. Every complete warpgroup at the instruction
runs at once, vectorised. Descriptors are decoded by flashsim.layout.wgmma (one address table per descriptor,
cached), fragments go through its warpgroup maps, and the arithmetic is flashsim.numerics.tensorcore's
``wgmma_unchecked`` for the program's arch.

Asynchrony, as the PTX ISA gives it: the accumulator registers (and the A registers) belong to the async unit from
the mma_async until a wgmma.wait_group that covers its group. The unit reads its operands at issue (what the GPU
reads when the program has fenced its shared-memory writes with fence.proxy.async and its register writes with
wgmma.fence, as the ISA requires) and keeps the result; the result reaches the registers only at the wait (issue
order within a warpgroup, so chained wgmmas on one accumulator, in one group or several, each take the previous
one's result as c). An instruction other than a wgmma that reads or writes an in-flight accumulator register, or
writes an in-flight A register, before the wait:
  * under check="racecheck": a RaceError naming the hazard, the register, the thread and both PTX lines;
  * otherwise: the access waits for the warpgroup's in-flight wgmmas first, which is what the GPU does: ptxas
    injects that wait itself ("warpgroup.wait is injected ... to allow use of registers defined by GMMA", C7517),
    so the value read is the wgmma's result, never a stale one.
Under racecheck a missing wgmma.fence is an error too: before a warpgroup's first mma_async, and between another
instruction's access to a D or A register and an mma_async that uses it (without racecheck the wgmma reads the
registers as they are). Racecheck also sees the shared-memory reads, at issue and again at the wait (the unit may
read until then): as reads of the warpgroup's first thread (a store by another thread not ordered before them by a
barrier is a hazard) and, where the sanitizer tracks the async proxy, as async-proxy reads (a generic-proxy store
not followed by fence.proxy.async is a hazard).

Refused, clearly: ``.sp`` (sparse wgmma), the single-bit form (.b1 .and.popc), imm-trans for anything but f16 /
bf16 from a descriptor (the ISA allows it nowhere else).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ...layout import wgmma as WL
from .. import isa, vectorize
from ..errors import RaceError
from ..ir import Imm, Reg, Vec
from ..machine import WAIT_NONE, WAIT_SYNC
from ..program import Decoded

__all__ = ["WgmmaUnit", "unit", "SHAPES", "Operands"]

# the instruction catalogue (PTX ISA, wgmma.mma_async): input type -> (K, element dtype, accumulator types)
_INPUT = {
    ".f16": (16, np.dtype(np.float16), (".f16", ".f32")),
    ".bf16": (16, np.dtype(ml_dtypes.bfloat16), (".f32",)),
    ".tf32": (8, np.dtype(np.float32), (".f32",)),
    ".e4m3": (32, np.dtype(ml_dtypes.float8_e4m3fn), (".f16", ".f32")),
    ".e5m2": (32, np.dtype(ml_dtypes.float8_e5m2), (".f16", ".f32")),
    ".s8": (32, np.dtype(np.int8), (".s32",)),
    ".u8": (32, np.dtype(np.uint8), (".s32",)),
}
_ACC = {".f32": np.dtype(np.float32), ".f16": np.dtype(np.float16), ".s32": np.dtype(np.int32)}
_FLOAT_N = tuple(range(8, 257, 8))
_INT_N = (8, 16, 24, 32) + tuple(range(48, 257, 16))
SHAPES = {f".m64n{n}k{k}": (n, k) for k in (8, 16, 32) for n in _FLOAT_N}


_MODEL = []


def _model():
    """flashsim.numerics.tensorcore's wgmma_unchecked, looked up when a wgmma first runs."""
    if not _MODEL:
        from ...numerics.tensorcore import wgmma_unchecked

        _MODEL.append(wgmma_unchecked)
    return _MODEL[0]


# -- the async unit's state ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Operands:
    """The ``info`` of a wgmma.mma_async op: its D and A register slots."""

    d: tuple
    a: tuple


class _Record:
    """One wgmma.mma_async in flight for the warpgroups ``wgs`` (G,): their threads (G, 128), the register slots of
    D and A, the result tiles (G, 64, N) of the accumulator's dtype and their D fragment map (the registers' words
    (G, 128, len(d)) that reach D at the wait, ``words``, are gathered from them once, when first asked: a chain's
    next link takes the tiles as they are), the group each belongs to (the count of committed groups of its
    warpgroup at issue), the issuing PC and, under racecheck, the shared-memory reads [(addresses (G, ...), element
    bytes)] (checked again at the wait: the unit may read until then)."""

    __slots__ = ("wgs", "threads", "d", "a", "tiles", "fmap", "_words", "group", "pc", "reads")

    def __init__(self, wgs, threads, d, a, tiles, fmap, group, pc, reads=()):
        self.wgs, self.threads, self.d, self.a, self.group, self.pc = wgs, threads, d, a, group, pc
        self.tiles, self.fmap, self._words = tiles, fmap, None
        self.reads = reads

    @property
    def words(self) -> np.ndarray:
        if self._words is None:
            self._words = WL.warpgroup_gather(self.tiles, self.fmap)
        return self._words

    def rows(self, keep) -> _Record:
        """This record for the warpgroups at indices ``keep``."""
        reads = tuple((addr[keep], eb) for addr, eb in self.reads)
        out = _Record(
            self.wgs[keep], self.threads[keep], self.d, self.a, self.tiles[keep], self.fmap, self.group[keep], self.pc
        )
        out.reads = reads
        if self._words is not None:
            out._words = self._words[keep]
        return out


class WgmmaUnit:
    """The wgmma async unit of a machine (``machine.state["wgmma"]``): the warpgroup of each thread, each
    warpgroup's committed-group count, and the wgmmas in flight (issue order). While any is in flight it watches
    every other instruction's registers (``machine.watch``)."""

    def __init__(self, machine):
        m = self.m = machine
        per_block = -(-m.warps_per_block // 4)
        local_warp = (np.arange(m.T) % m.block_threads) // 32
        self.wg_of = m.block_of * per_block + local_warp // 4
        self.n_wg = m.n_blocks * per_block
        self.committed = np.zeros(self.n_wg, np.int64)
        self.first = np.searchsorted(self.wg_of, np.arange(self.n_wg))  # each warpgroup's first thread
        self._lanes128 = np.arange(WL.WARPGROUP_THREADS)[None, :]
        self.records: list[_Record] = []
        self.busy: set[int] = set()  # register slots of D and A of every record in flight
        self.exempt = {pc for pc, op in enumerate(m.prog.ops) if op.name.startswith("wgmma.")}
        self._names: dict | None = None
        # racecheck's wgmma.fence rule: per warpgroup, the PC of the last access to each register a wgmma.mma_async
        # of the program uses (D, A) since the warpgroup's last wgmma.fence (-1: none), and whether it ever fenced
        self.checking = m.sanitizer is not None
        tracked = sorted({s for op in m.prog.ops if isinstance(op.info, Operands) for s in (*op.info.d, *op.info.a)})
        self.column = {s: k for k, s in enumerate(tracked)}
        self.tracked = set(tracked)
        self.accessed = np.full((self.n_wg, len(tracked)), -1, np.int64)
        self.fenced = np.zeros(self.n_wg, bool)
        if self.checking:
            m.watch = self.watch

    # -- warpgroup convergence ------------------------------------------------------------------------------------

    def converge(self, g):
        """The complete warpgroups at the running instruction: (threads (G, 128), wgs (G,)), or None when every
        running lane waits for the rest of its warpgroup. Lanes of incomplete warpgroups wait here (WAIT_SYNC);
        lanes that waited here earlier and whose warpgroup is now complete run with these and go on after it."""
        m, pc = self.m, g.pc
        lanes = g.lanes()
        wg = self.wg_of
        count = np.bincount(wg[lanes], minlength=self.n_wg)
        mine = np.flatnonzero(count)
        if (count[mine] == WL.WARPGROUP_THREADS).all():  # whole warpgroups here (so none exited or waits here)
            return self.first[mine][:, None] + self._lanes128, mine
        in_mine = np.isin(wg, mine)
        gone = in_mine & m.exited
        if gone.any():
            t = int(lanes[np.flatnonzero(np.isin(wg[lanes], wg[gone]))[0]])
            raise m.error(
                f"{m.prog.ops[pc].name}: a thread of this warpgroup exited before it (the 128 threads of a "
                "warpgroup must all execute a .sync.aligned wgmma instruction)",
                t,
            )
        here = np.zeros(m.T, bool)
        here[lanes] = True
        earlier = in_mine & ~here & (m.wait == WAIT_SYNC) & (m.pc == pc)
        count = np.bincount(wg[here | earlier], minlength=self.n_wg)
        full = count[mine] == WL.WARPGROUP_THREADS
        if m.block_threads % WL.WARPGROUP_THREADS and not full.all():
            partial = (m.block_threads % WL.WARPGROUP_THREADS) // 32
            last = (np.arange(m.T) % m.block_threads) >= m.block_threads - (m.block_threads % WL.WARPGROUP_THREADS)
            if (last & here).any():
                raise m.error(
                    f"{m.prog.ops[pc].name} in a warpgroup of {partial} warps (a block of {m.block_threads} threads "
                    "ends with an incomplete warpgroup: wgmma needs four whole warps)",
                    int(np.flatnonzero(last & here)[0]),
                )
        if not full.all():
            g.stop(here & np.isin(wg, mine[~full]), WAIT_SYNC, pc)
        wgs = mine[full]
        if wgs.size == 0:
            return None
        done = earlier & np.isin(wg, wgs)
        if done.any():  # they ran it now, with the rest of their warpgroup: they go on after it
            m.wait[done] = WAIT_NONE
            m.pc[done] = pc + 1
        first = np.searchsorted(wg, wgs)  # threads are in warpgroup order
        return first[:, None] + np.arange(WL.WARPGROUP_THREADS)[None, :], wgs

    # -- issue, commit, wait --------------------------------------------------------------------------------------

    def issue(self, record: _Record) -> None:
        self.records.append(record)
        self.busy.update(record.d)
        self.busy.update(record.a)
        self.m.watch = self.watch

    def pending_words(self, wgs, slots, words) -> None:
        """Overlay, on ``words`` (G, 128, len(slots)) read from the registers, the results of earlier wgmmas in
        flight on the same warpgroups and registers (chained accumulators): the last one issued wins. The records
        are taken newest first and each (warpgroup, register) once, so a chain of n wgmmas on one accumulator costs
        one copy per wgmma, not n: the newest record already holds the chain's result."""
        col = {s: k for k, s in enumerate(slots)}
        done = np.zeros((len(wgs), len(slots)), bool)  # (warpgroup row, slot column) already overlaid
        for rec in reversed(self.records):
            shared = [(col[s], j) for j, s in enumerate(rec.d) if s in col]
            if not shared:
                continue
            rows_new, rows_rec = _match(wgs, rec.wgs)
            if not rows_new.size:
                continue
            dst, src = (np.array(x) for x in zip(*shared))
            need = ~done[np.ix_(rows_new, dst)]  # (rows, columns) no newer record set
            if not need.any():
                continue
            part = words[rows_new]
            new = rec.words[rows_rec][:, :, src]
            part[:, :, dst] = new if need.all() else np.where(need[:, None, :], new, part[:, :, dst])
            words[rows_new] = part
            done[np.ix_(rows_new, dst)] = True
            if done.all():
                break

    def chained_tiles(self, wgs, slots):
        """The accumulator tiles (G, 64, N) of the newest wgmma in flight on ``wgs`` that writes ``slots``, when that
        one wgmma writes exactly ``slots`` on every one of ``wgs`` (a chain's next link: what the registers will hold
        at the wait); None otherwise (the registers and pending_words say it)."""
        slots, wanted = tuple(slots), set(slots)
        for rec in reversed(self.records):
            if wanted.isdisjoint(rec.d):
                continue
            rows_new, rows_rec = _match(wgs, rec.wgs)
            if not rows_new.size:
                continue
            if rec.d != slots or rows_new.size != len(wgs):
                return None
            if rows_rec.size == rec.wgs.size and (rows_new == rows_rec).all():  # the same warpgroups, in order
                return rec.tiles
            out = np.empty((len(wgs),) + rec.tiles.shape[1:], rec.tiles.dtype)
            out[rows_new] = rec.tiles[rows_rec]
            return out
        return None

    def commit(self, wgs) -> None:
        self.committed[wgs] += 1

    def complete(self, wgs, keep: int | None) -> None:
        """Write the results of the wgmmas in flight on ``wgs`` to their registers: of every group but the ``keep``
        most recent committed ones (wait_group ``keep``), or all of them, committed or not (``keep`` None)."""
        limit = None if keep is None else self.committed - keep
        left, finished = [], []
        for rec in self.records:
            rows, _ = _match(rec.wgs, wgs)
            if keep is not None and rows.size:
                rows = rows[rec.group[rows] < limit[rec.wgs[rows]]]
            if rows.size:
                finished.append((rec, rows))
            if not rows.size:
                left.append(rec)  # untouched: kept as it is
            elif rows.size < rec.wgs.size:
                left.append(rec.rows(np.setdiff1d(np.arange(rec.wgs.size), rows)))
        # in issue order, as the unit retires them, but leaving out a warpgroup's words that a newer record finishing
        # now overwrites in full (a chain of wgmmas on one accumulator writes its registers once, not once per link)
        written: dict = {}  # warpgroup -> register slots newer finishing records write
        live = []
        for rec, rows in reversed(finished):
            d = set(rec.d)
            live.append(rows[[not d <= written.get(int(w), set()) for w in rec.wgs[rows]]])
            for w in rec.wgs[rows]:
                written.setdefault(int(w), set()).update(d)
        for (rec, _rows), rows in zip(finished, reversed(live)):
            if rows.size:
                _write(self.m, rec.d, rec.threads[rows], rec.words[rows])
        if self.m.sanitizer is not None:  # the reads may happen until now: a store since the issue races
            for rec, rows in finished:
                for addr, eb in rec.reads:
                    _sanitize_reads(self.m, rec.threads[rows], addr[rows], eb, self.m.current_pc, proxy=False)
        self.records = left
        self.busy = {s for rec in left for s in (*rec.d, *rec.a)}
        if not left and not self.checking:
            self.m.watch = None
        self.m.progress += 1

    # -- register hazards -----------------------------------------------------------------------------------------

    def watch(self, g, item) -> None:
        """Before an instruction runs (``machine.watch``): does it touch a register of a wgmma in flight?"""
        ops = self.m.prog.ops
        for pc in (item,) if type(item) is int else item:
            if pc in self.exempt:
                continue
            op = ops[pc]
            if self.busy and op.regs & self.busy:
                self.touch(g, pc, op.regs, op.writes)
            if self.checking:
                hit = op.regs & self.tracked
                if hit:
                    wgs = np.unique(self.wg_of[g.lanes()])
                    self.accessed[np.ix_(wgs, [self.column[s] for s in hit])] = pc

    def touch(self, g, pc: int, reads: set, writes: set) -> None:
        """Lanes of ``g`` at ``pc`` access registers ``reads`` (any access) and write ``writes``: a hazard with every
        wgmma in flight on their warpgroups whose D is among ``reads`` or whose A is among ``writes``."""
        m = self.m
        lanes = g.lanes()
        wgs = np.unique(self.wg_of[lanes])
        for rec in self.records:
            slots = (reads & set(rec.d)) | (writes & set(rec.a))
            if not slots:
                continue
            rows, _ = _match(rec.wgs, wgs)
            if not rows.size:
                continue
            if m.sanitizer is None:  # the wait ptxas injects before such an access (C7517)
                self.complete(wgs, None)
                return
            slot = min(slots)
            t = int(lanes[np.flatnonzero(np.isin(self.wg_of[lanes], rec.wgs[rows]))[0]])
            role = "accumulator" if slot in rec.d else "A"
            kind = "write" if slot in writes else "read"
            err = m.error(
                f"wgmma register hazard: {kind} of {self._name(slot)}, the {role} register of the wgmma.mma_async at "
                f"{_line(m, rec.pc)} still in flight (no wgmma.wait_group covering its group ran before), at "
                f"{_line(m, pc)}",
                t,
                RaceError,
            )
            err.kind, err.register = f"wgmma {kind}-before-wait", self._name(slot)
            err.other_line = m.prog.ops[rec.pc].line
            raise err

    def fence(self, wgs) -> None:
        self.accessed[wgs] = -1
        self.fenced[wgs] = True

    def check_fenced(self, threads, wgs, slots, pc: int) -> None:
        """Racecheck: the ISA requires a wgmma.fence before a warpgroup's first wgmma.mma_async and between any
        other access to a register and a wgmma.mma_async that uses it (its D or A registers)."""
        m = self.m
        if not self.fenced[wgs].all():
            row = int(np.flatnonzero(~self.fenced[wgs])[0])
            err = m.error(
                "wgmma.fence missing: no wgmma.fence before the warpgroup's first wgmma.mma_async (the ISA requires "
                "one; without it the registers the wgmma reads are undefined)",
                int(threads[row, 0]),
                RaceError,
            )
            err.kind = "wgmma.fence missing"
            raise err
        cols = [self.column[s] for s in slots]
        last = self.accessed[np.ix_(wgs, cols)]
        if (last >= 0).any():
            row, k = (int(x[0]) for x in np.nonzero(last >= 0))
            other = int(last[row, k])
            err = m.error(
                f"wgmma.fence missing: {self._name(slots[k])}, a register of this wgmma.mma_async, was accessed at "
                f"{_line(m, other)} after the warpgroup's last wgmma.fence (the ISA requires a wgmma.fence between a "
                "register access and a wgmma.mma_async that uses the register)",
                int(threads[row, 0]),
                RaceError,
            )
            err.kind, err.register, err.other_line = "wgmma.fence missing", self._name(slots[k]), m.prog.ops[other].line
            raise err

    def _name(self, slot: int) -> str:
        if self._names is None:
            self._names = {s: key.split(":", 1)[1] for key, s in self.m.prog.regs.items()}
        return self._names.get(slot, f"register slot {slot}")


def unit(m) -> WgmmaUnit:
    state = m.state.get("wgmma")
    if state is None:
        state = m.state["wgmma"] = WgmmaUnit(m)
    return state


def _match(a, b):
    """Indices (into a, into b) of the values a and b share (each value once in each)."""
    _, ia, ib = np.intersect1d(a, b, assume_unique=True, return_indices=True)
    return ia, ib


def _line(m, pc: int) -> str:
    src = m.prog.source_of(pc)
    return f"PTX line {m.prog.ops[pc].line}" + (f" ({src})" if src else "")


def _aligned(m, threads):
    """The indices of the rows of 128 threads that ``threads`` (G, 128, whole warpgroups: ``converge``) are, where the
    wave is whole aligned warpgroups (a register's values reshaped (-1, 128) then hold a warpgroup per row); else
    None."""
    first = threads[:, 0]
    if m.T % WL.WARPGROUP_THREADS or (first % WL.WARPGROUP_THREADS).any():
        return None
    return first // WL.WARPGROUP_THREADS


def _gather(m, slots, threads) -> np.ndarray:
    """(G, 128, len(slots)) uint32: the registers ``slots`` of ``threads`` (G, 128)."""
    values = [np.asarray(m.R[s]) for s in slots]
    if all(v.shape == (m.T,) for v in values):  # the usual case: one stack, one gather
        rows = _aligned(m, threads)
        if rows is not None:  # rows of 128 threads taken as runs
            stacked = np.stack(values).astype(np.uint32, copy=False).reshape(len(slots), -1, WL.WARPGROUP_THREADS)
            return np.take(stacked, rows, axis=1).transpose(1, 2, 0)
        return np.stack(values, axis=-1).astype(np.uint32, copy=False)[threads]
    out = np.empty(threads.shape + (len(slots),), np.uint32)
    for k, v in enumerate(values):
        out[..., k] = np.broadcast_to(v, (m.T,))[threads]
    return out


def _write(m, slots, threads, words) -> None:
    """Registers ``slots`` of ``threads`` (G, 128) := ``words`` (G, 128, len(slots)) (new arrays: registers are
    never written in place)."""
    idx = threads.reshape(-1)
    every = idx.size == m.T and bool((idx == np.arange(m.T)).all())
    dtypes = {m.dtypes[s] for s in slots}
    if len(dtypes) == 1:  # one (slots, threads) array written at once; each register a row of it (never mutated)
        dt = dtypes.pop()
        if every:
            base = np.ascontiguousarray(words.reshape(-1, len(slots)).T, dtype=dt)
        else:
            base = np.empty((len(slots), m.T), dt)
            for k, s in enumerate(slots):  # a register may be a scalar (a constant): broadcast by the assignment
                base[k] = m.R[s]
            first = threads[:, 0]
            if m.T % WL.WARPGROUP_THREADS == 0 and not (first % WL.WARPGROUP_THREADS).any():
                # whole aligned warpgroups: rows of 128 threads copied as runs (a strided copy, no scatter)
                view = base.reshape(len(slots), -1, WL.WARPGROUP_THREADS)
                view[:, first // WL.WARPGROUP_THREADS, :] = words.transpose(2, 0, 1)
            else:
                base[:, idx] = words.reshape(-1, len(slots)).T
        rows = [base[k] for k in range(len(slots))]
        for s, row in zip(slots, rows):
            m.R[s] = row
        vectorize.remember(m.stacked, slots, rows, None, base)  # the lane-wise ops after read them at once
        return
    for k, s in enumerate(slots):
        if every:
            m.R[s] = np.ascontiguousarray(words[..., k].reshape(-1)).astype(m.dtypes[s], copy=False)
            continue
        new = np.broadcast_to(np.asarray(m.R[s]), (m.T,)).astype(m.dtypes[s], copy=True)
        new[idx] = words[..., k].reshape(-1)
        m.R[s] = new


# -- shared-memory operands ---------------------------------------------------------------------------------------


def _uniform(m, slot, threads, what: str, pc: int) -> np.ndarray:
    """The one value of register ``slot`` in each warpgroup (G,) (an error where its threads disagree)."""
    value = m.R[slot]
    rows = _aligned(m, threads) if np.ndim(value) else None
    if rows is not None:
        v = np.take(value.reshape(-1, WL.WARPGROUP_THREADS), rows, axis=0)
    else:
        v = np.broadcast_to(np.asarray(value), (m.T,))[threads]
    bad = np.flatnonzero((v != v[:, :1]).any(axis=1))
    if bad.size:
        row = int(bad[0])
        t = int(threads[row][np.flatnonzero(v[row] != v[row, 0])[0]])
        raise m.error(
            f"{m.prog.ops[pc].name}: the {what} differs between the threads of a warpgroup "
            f"({int(v[row, 0]):#x} in its first thread; the ISA requires the same value in every warp)",
            t,
        )
    return v[:, 0]


@functools.lru_cache(maxsize=1024)  # one per distinct descriptor and operand shape of the kernels run: bounded
def _operand_table(bits: int, mn: int, k: int, eb: int, mn_major: bool):
    """(decoded descriptor, its problem or None, the byte offsets (mn, k) it reads from the block's shared memory,
    the end of the last element, the offsets in elements of ``eb`` bytes or None where one is not a multiple of
    ``eb``), read-only: what ``_read_operand`` needs of a descriptor, decoded once."""
    desc = WL.decode_descriptor(bits)
    problem = WL.descriptor_problem(desc)
    if problem is not None:
        return desc, problem, None, 0, None
    table = np.asarray(WL.operand_addresses(desc, mn, k, eb * 8, mn_major), np.int64)
    elements = None if (table % eb).any() else table // eb
    for x in (table, elements):
        if x is not None:
            x.flags.writeable = False
    return desc, None, table, int(table.max()) + eb, elements


@functools.lru_cache(maxsize=1024)
def _operand_chunks(bits: int, mn: int, k: int, eb: int, mn_major: bool):
    """The operand ``_operand_table`` describes as whole 16-byte chunks of shared memory, where it is one: (chunk
    indices (mn, k / c) with its elements in runs of c = 16 / eb along k, or (k, mn / c) along mn, and whether the runs
    go along mn); else None. The canonical layouts are such runs (8 f16 / bf16 along the leading dimension of a
    swizzle atom: PTX ISA, the wgmma matrix layouts), so a descriptor's operand is gathered as chunks, not
    elements."""
    table = _operand_table(bits, mn, k, eb, mn_major)[2]
    if table is None:
        return None
    per = 16 // eb
    for along_mn, t in ((False, table), (True, table.T)):
        if t.shape[1] % per:
            continue
        runs = t.reshape(t.shape[0], -1, per)
        if not (runs[..., 0] % 16).any() and (runs - runs[..., :1] == eb * np.arange(per)).all():
            chunks = runs[..., 0] // 16
            chunks.flags.writeable = False
            return chunks, along_mn
    return None


def _read_operand(m, descs, threads, pc, mn, k, dtype, mn_major, what):
    """The operand (G, mn, k) of ``dtype`` each warpgroup's descriptor (G,) describes in its block's shared memory,
    and (under a sanitizer, else None) the byte addresses read (G, mn, k)."""
    eb = dtype.itemsize
    G = descs.size
    blocks = m.block_of[threads[:, 0]].astype(np.int64)
    uniq, inverse = (
        (descs[:1], np.zeros(G, np.intp)) if (descs == descs[0]).all() else np.unique(descs, return_inverse=True)
    )
    tables, elements = [], []
    for u, bits in enumerate(uniq.tolist()):
        desc, problem, table, end, elems = _operand_table(bits, mn, k, eb, mn_major)
        t = int(threads[np.flatnonzero(inverse == u)[0], 0])
        if problem is not None:
            name = m.prog.ops[pc].name
            raise m.error(f"{name}: {what} descriptor {bits:#018x} misaligned for its swizzle: {problem}", t)
        if end > m.mem.shared_bytes:
            raise m.error(
                f"{m.prog.ops[pc].name}: {what} descriptor {bits:#018x} (start {desc.start:#x}, LBO {desc.lbo:#x}, "
                f"SBO {desc.sbo:#x}, {desc.swizzle}) reads shared memory up to offset {end:#x}, past the block's "
                f"{m.mem.shared_bytes} bytes",
                t,
                m.mem.fault,
            )
        tables.append(table)
        elements.append(elems)
    row = m.mem.shared.shape[1]
    addr = None
    if m.sanitizer is not None:
        addr = tables[0][None] if len(tables) == 1 else np.stack(tables)[inverse]
        addr = np.broadcast_to(addr, (G, mn, k))
    chunked = [_operand_chunks(int(bits), mn, k, eb, mn_major) for bits in uniq.tolist()]
    if row % 16 == 0 and all(c is not None and c[1] == chunked[0][1] for c in chunked):  # 16-byte chunks
        key = (descs.tobytes(), blocks.tobytes(), mn, k, eb, mn_major, "chunks")
        cache = m.state.setdefault("wgmma.operand_index", {})
        index = cache.get(key)
        if index is None:
            rel = chunked[0][0][None] if len(chunked) == 1 else np.stack([c[0] for c in chunked])[inverse]
            index = blocks[:, None, None] * (row // 16) + rel
            if len(cache) >= 256:
                cache.clear()
            cache[key] = index
        data = np.take(m.mem.shared.reshape(-1).view("V16"), index).view(dtype)  # (G, mn, k) or (G, k, mn)
        return (data.transpose(0, 2, 1) if chunked[0][1] else data), addr
    if row % eb == 0 and all(e is not None for e in elements):  # gathered as elements, not bytes
        # the element indices over the wave's shared memory, kept per (descriptors, blocks): a pipeline's wgmmas
        # cycle through a few stage buffers on the same blocks
        key = (descs.tobytes(), blocks.tobytes(), mn, k, eb, mn_major)
        cache = m.state.setdefault("wgmma.operand_index", {})
        index = cache.get(key)
        if index is None:
            rel = elements[0][None] if len(elements) == 1 else np.stack(elements)[inverse]
            index = blocks[:, None, None] * (row // eb) + rel
            if len(cache) >= 256:
                cache.clear()
            cache[key] = index
        flat = m.mem.shared.reshape(-1).view(np.dtype(f"u{eb}"))
        return np.take(flat, index).view(dtype), addr
    rel = tables[0][None] if len(tables) == 1 else np.stack(tables)[inverse]
    flat = (blocks[:, None, None] * row + rel)[..., None] + np.arange(eb)
    data = m.mem.shared.reshape(-1)[flat].reshape(G, mn, k * eb).view(dtype)
    return data, addr


def _sanitize_reads(m, threads, addr, eb: int, pc: int, proxy: bool = True) -> None:
    """Racecheck's view of a wgmma's shared-memory reads: the warpgroup's first thread reads them (generic ordering)
    and, where the sanitizer tracks the async proxy (``proxy``), they are async-proxy reads."""
    san = m.sanitizer
    G = threads.shape[0]
    per = addr.reshape(G, -1)
    first = np.repeat(threads[:, 0], per.shape[1])
    offsets = per.reshape(-1).astype(np.uint64)
    if proxy and hasattr(san, "async_proxy_access"):  # it checks the generic ordering too
        san.async_proxy_access(m.block_of[first].astype(np.int64), offsets, eb, False, first, pc)
    else:
        san.access(".shared", offsets, eb, first, False, False, pc)


# -- the instructions ---------------------------------------------------------------------------------------------


def _imm(d: Decoded, i: int, allowed: tuple, what: str) -> int:
    op = d.operands[i]
    if not isinstance(op, Imm) or op.kind not in ("int", "uint") or int(op.value) not in allowed:
        raise isa.Unsupported(f"{what} must be an immediate in {allowed}, got {op!r}")
    return int(op.value)


def _vec_slots(d: Decoded, i: int, n: int, what: str, write: bool = False) -> list[int]:
    op = d.operands[i]
    if not isinstance(op, Vec):
        raise isa.Unsupported(f"{what}: a vector of {n} registers expected")
    if len(op.items) != n:
        raise isa.Unsupported(f"{what}: {n} registers expected for this shape, got {len(op.items)}")
    slots = []
    for x in op.items:
        if not isinstance(x, Reg):
            raise isa.Unsupported(f"{what}: registers expected, got {x!r}")
        s = d.reg(x)
        if d.prog.dtypes[s] != np.dtype(np.uint32):
            raise isa.Unsupported(f"{what}: 32-bit registers expected ({x.name} is not)")
        if write:
            d.written.add(s)
        slots.append(s)
    return slots


# wgmma exists on sm_90a alone (PTX ISA, wgmma's Target ISA Notes; ptxas 13.0 refuses it for sm_100a and sm_120a:
# "Instruction 'wgmma.fence' not supported on .target 'sm_120a'"). tcgen05, the sm_100a tensor-core family, has no
# builder here; its entry makes the refusal on the other archs say so rather than "not implemented".
isa.requires("wgmma", archs=("sm_90",), source="PTX ISA: requires sm_90a; ptxas 13.0 refuses it on sm_100a / sm_120a")
isa.requires("tcgen05", archs=("sm_100",), source="PTX ISA: sm_100a family; ptxas 13.0 refuses it on sm_90a / sm_120a")


@isa.implements("wgmma")
def wgmma(d: Decoded):
    mods = d.mods
    if mods.flag(".sp"):
        raise isa.Unsupported("sparse wgmma (.sp) is not simulated")
    if not (mods.flag(".sync") and mods.flag(".aligned")):
        raise isa.Unsupported("wgmma needs .sync.aligned")
    if mods.flag(".fence"):
        mods.done()
        return _collective(d, None)
    if mods.flag(".commit_group"):
        mods.done()
        return _collective(d, "commit")
    if mods.flag(".wait_group"):
        mods.done()
        n = d.operands[0] if d.operands else None
        if not isinstance(n, Imm) or int(n.value) < 0:
            raise isa.Unsupported("wgmma.wait_group needs a non-negative immediate")
        return _collective(d, int(n.value))
    if not mods.flag(".mma_async"):
        raise isa.Unsupported("wgmma: .mma_async, .fence, .commit_group or .wait_group expected")
    return _mma_async(d)


def _collective(d: Decoded, action):
    """wgmma.fence (None: the registers are read at issue, so it only clears racecheck's record of accesses that
    need it), commit_group ("commit") and wait_group N (an int)."""

    def run(g):
        u = unit(g.m)
        got = u.converge(g)
        if got is None:
            return
        _threads, wgs = got
        if action is None:
            u.fence(wgs)
        elif action == "commit":
            u.commit(wgs)
        elif action is not None and u.records:
            u.complete(wgs, action)

    return d.op(run)


def _mma_async(d: Decoded):
    mods = d.mods
    shape = mods.prefixed(".m64n")
    satfinite = mods.flag(".satfinite")
    op = mods.take(".and")
    popc = mods.flag(".popc")
    types = mods.types()
    mods.done()
    if op is not None or popc or ".b1" in types:
        raise isa.Unsupported("single-bit wgmma (.b1 .and.popc) is not simulated")
    if shape not in SHAPES or len(types) != 3:
        raise isa.Unsupported(f"wgmma.mma_async{shape or ''}{''.join(types)}: not a wgmma shape and type of sm_90a")
    n, k = SHAPES[shape]
    dt, at, bt = types
    if at not in _INPUT or bt not in _INPUT or dt not in _ACC:
        raise isa.Unsupported(f"wgmma.mma_async with {dt}.{at}.{bt}")
    ka, a_dtype, accs = _INPUT[at]
    kb, b_dtype, _ = _INPUT[bt]
    integer = at in (".s8", ".u8")
    fp8 = at in (".e4m3", ".e5m2")
    pair_ok = (
        (integer and bt in (".s8", ".u8"))
        or (fp8 and bt in (".e4m3", ".e5m2"))
        or (not integer and not fp8 and at == bt)
    )
    if not pair_ok or dt not in accs or ka != k or kb != k:
        raise isa.Unsupported(f"wgmma.mma_async{shape}{dt}{at}{bt}: not a type combination of the ISA")
    if integer and n not in _INT_N:
        raise isa.Unsupported(f"wgmma.mma_async{shape} with integer types (N must be 8, 16, 24, 32 or 48..256 by 16)")
    if satfinite and not integer:
        raise isa.Unsupported(".satfinite is for the integer wgmma forms only")
    c_dtype = _ACC[dt]
    n_d = n // 4 if dt == ".f16" else n // 2
    a_from_regs = isinstance(d.operands[1], Vec)
    transposable = at in (".f16", ".bf16")
    n_ops = 4 if integer else 6 + (transposable and not a_from_regs) + transposable
    if len(d.operands) != n_ops:
        raise isa.Unsupported(
            f"wgmma.mma_async{shape}{dt}{at}{bt} with A from {'registers' if a_from_regs else 'a descriptor'} takes "
            f"{n_ops} operands, got {len(d.operands)}"
        )
    d_slots = _vec_slots(d, 0, n_d, "the accumulator D", write=True)
    a_slots = _vec_slots(d, 1, 4, "the A registers") if a_from_regs else []
    a_desc = None if a_from_regs else d.value(d.operands[1], np.uint64)
    b_desc = d.value(d.operands[2], np.uint64)
    sd_op = d.operands[3]
    if isinstance(sd_op, Imm):
        scale_d_slot = d.prog.const(int(sd_op.value) != 0, bool)
    elif isinstance(sd_op, Reg) and d.fn.regs.get(sd_op.name) == ".pred":
        scale_d_slot = d.reg(sd_op)
    else:
        raise isa.Unsupported(f"scale-d must be a predicate or an immediate, got {sd_op!r}")
    scale_a = scale_b = 1
    trans_a = trans_b = False
    if not integer:
        scale_a = _imm(d, 4, (1, -1), "imm-scale-a")
        scale_b = _imm(d, 5, (1, -1), "imm-scale-b")
        if transposable:
            if not a_from_regs:
                trans_a = bool(_imm(d, 6, (0, 1), "imm-trans-a"))
            trans_b = bool(_imm(d, n_ops - 1, (0, 1), "imm-trans-b"))
    a_map, d_map = WL.a_map(k), WL.d_map(dt[1:])
    d_key, a_key = tuple(d_slots), tuple(a_slots)
    pc = d.pc

    def run(g):
        m = g.m
        u = unit(m)
        if u.busy and a_slots:  # A registers that an earlier wgmma in flight still writes: that wgmma first
            u.touch(g, pc, set(a_slots), set())
        got = u.converge(g)
        if got is None:
            return
        threads, wgs = got
        G = wgs.size
        if u.checking:
            u.check_fenced(threads, wgs, d_slots + a_slots, pc)
        b, b_addr = _read_operand(
            m, _uniform(m, b_desc, threads, "B descriptor", pc), threads, pc, n, k, b_dtype, trans_b, "B"
        )
        b = b.transpose(0, 2, 1)  # (G, N, K) -> (G, K, N)
        if a_from_regs:
            a = WL.warpgroup_scatter(_gather(m, a_slots, threads), a_map, a_dtype)
        else:
            a, a_addr = _read_operand(
                m, _uniform(m, a_desc, threads, "A descriptor", pc), threads, pc, 64, k, a_dtype, trans_a, "A"
            )
        reads = ()
        if m.sanitizer is not None:
            reads = ((b_addr, b_dtype.itemsize),) + (() if a_from_regs else ((a_addr, a_dtype.itemsize),))
            for addr, eb in reads:
                _sanitize_reads(m, threads, addr, eb, pc)
        scale_d = _uniform(m, scale_d_slot, threads, "scale-d predicate", pc).astype(bool)
        if not scale_d.any():  # D = A B: the accumulator is not read (zeros stand for it)
            c = np.zeros((G, 64, n), c_dtype)
        else:
            c = u.chained_tiles(wgs, d_slots)
            if c is None:
                c_words = _gather(m, d_slots, threads)
                u.pending_words(wgs, d_slots, c_words)
                c = WL.warpgroup_scatter(c_words, d_map, c_dtype)
        out = _model()(  # a transposed operand (K-major B) goes as it is: the compiled kernel reads its base
            a,
            b,
            c,
            m.prog.arch,
            scale_d=scale_d,
            scale_a=scale_a,
            scale_b=scale_b,
            satfinite=satfinite,
        )
        tiles = np.asarray(out, c_dtype).reshape(G, 64, n)
        u.issue(_Record(wgs, threads, d_key, a_key, tiles, d_map, u.committed[wgs].copy(), pc, reads))

    return d.op(run, info=Operands(tuple(d_slots), tuple(a_slots)))
