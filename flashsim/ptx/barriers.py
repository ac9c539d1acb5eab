"""A block's 16 named barriers (``bar`` / ``barrier``: ``.sync``, ``.arrive``, ``.red``), as the PTX ISA defines them.

A barrier counts warps: a warp arrives once all its non-exited threads have executed the instruction (its lanes
that get there first wait for the others). ``bar.sync a`` / ``bar.red`` wait until the barrier completes;
``bar.arrive a, b`` arrives without waiting. With a thread count b the barrier completes when b / 32 warps have
arrived (b is a multiple of 32); without one, when every warp of the block has arrived or has no thread left
(exiting threads release a barrier that waits only for them). Completion releases the waiting threads and resets
the barrier for its next use. ``bar.red.popc / .and / .or`` reduce a predicate over the threads of the completed
barrier and give the result to each of them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Barriers"]

WAIT_NONE, WAIT_BARRIER = 0, 1


class Barriers:
    """The barriers of a machine's blocks: the id each waiting thread waits on (``bar_id``, -1 none), the warps
    that arrived without waiting (``arrived``) and the warps each pending barrier needs (``need``: 0 means every
    warp of the block)."""

    def __init__(self, machine):
        self.m = machine
        n = machine.n_blocks
        self.bar_id = np.full(machine.T, -1, np.int8)
        self.arrived = np.zeros((n, 16), np.int64)
        self.need = np.full((n, 16), -1, np.int64)  # -1: not in use
        self.red: dict = {}  # (block, id) -> (op, {thread: (dst slot, predicate value)})

    def _block(self, b: int):
        bt = self.m.block_threads
        return slice(b * bt, (b + 1) * bt)

    def sync(self, lanes: np.ndarray, ids: np.ndarray, counts, g, wait: bool, red=None) -> None:
        """The threads ``lanes`` (indices) execute a barrier: ids and thread counts (None: all) per lane. ``red``:
        (op, dst slot, predicate values per lane) of bar.red."""
        m = self.m
        if ((ids < 0) | (ids > 15)).any():
            t = int(lanes[np.flatnonzero((ids < 0) | (ids > 15))[0]])
            raise m.error("barrier id outside 0..15", t)
        blocks = m.block_of[lanes]
        for b, i in set(zip(blocks.tolist(), ids.tolist())):
            sel = (blocks == b) & (ids == i)
            c = None if counts is None else np.unique(np.asarray(counts)[sel])
            need = 0 if c is None else int(-(-int(c[0]) // 32))
            if c is not None and (c.size != 1 or c[0] <= 0 or c[0] % 32):
                raise m.error(
                    f"barrier {i}: thread count {c.tolist()} is not one positive multiple of 32",
                    int(lanes[np.flatnonzero(sel)[0]]),
                )
            if self.need[b, i] not in (-1, need):
                raise m.error(
                    f"barrier {i} used with {need * 32 or 'all'} threads while waiting for "
                    f"{int(self.need[b, i]) * 32 or 'all'}",
                    int(lanes[np.flatnonzero(sel)[0]]),
                )
            self.need[b, i] = need
            mine = lanes[sel]
            if m.sanitizer is not None:
                m.sanitizer.barrier_arrive(b, i, mine)
            if red is not None:
                op, dst, values = red
                entry = self.red.setdefault((b, i), (op, {}))
                entry[1].update(zip(mine.tolist(), ((dst, bool(v)) for v in np.asarray(values)[sel])))
            if wait:
                m.pc[mine] = g.pc + 1
                m.wait[mine] = WAIT_BARRIER
                self.bar_id[mine] = i
            else:
                self._arrive_warps(b, i, mine)
        if wait:
            stopped = np.zeros(m.T, bool)
            stopped[lanes] = True
            g.mask = g.active() & ~stopped
            g._lanes = None
        for b, i in set(zip(blocks.tolist(), ids.tolist())):
            self._check(b, i)

    def _arrive_warps(self, b: int, i: int, lanes: np.ndarray) -> None:
        """bar.arrive: the warps whose every non-exited thread is among ``lanes`` arrive."""
        m = self.m
        hit = np.zeros(m.T, bool)
        hit[lanes] = True
        warps = np.zeros(m.n_warps, bool)
        warps[m.warp_of[lanes]] = True
        if (warps[m.warp_of] & ~m.exited & ~hit).any():  # a live thread of one of these warps is not here
            raise m.error("bar.arrive by part of a warp (its other lanes diverged): not simulated", int(lanes[0]))
        self.arrived[b, i] += int(warps.sum())

    def _check(self, b: int, i: int) -> None:
        """Complete barrier (b, i) if enough warps have arrived: release its threads (and give bar.red's result)."""
        m = self.m
        need = int(self.need[b, i])
        if need < 0:
            return
        sl = self._block(b)
        waiting = (m.wait[sl] == WAIT_BARRIER) & (self.bar_id[sl] == i)
        exited = m.exited[sl]
        wpb, bt = m.warps_per_block, m.block_threads
        pad = wpb * 32 - bt
        if pad:  # a partial last warp: its missing lanes count as exited
            w_wait = np.pad(waiting | exited, (0, pad), constant_values=True).reshape(wpb, 32)
            w_any = np.pad(waiting, (0, pad)).reshape(wpb, 32).any(axis=1)
            w_gone = np.pad(exited, (0, pad), constant_values=True).reshape(wpb, 32).all(axis=1)
        else:
            w_wait = (waiting | exited).reshape(wpb, 32)
            w_any = waiting.reshape(wpb, 32).any(axis=1)
            w_gone = exited.reshape(wpb, 32).all(axis=1)
        arrived = int((w_wait.all(axis=1) & w_any).sum()) + int(self.arrived[b, i])
        if need == 0:
            done = arrived + int(w_gone.sum()) >= wpb
        else:
            done = arrived >= need
        if not done:
            return
        threads = np.flatnonzero(waiting) + b * bt
        m.wait[threads] = WAIT_NONE
        self.bar_id[threads] = -1
        if m.sanitizer is not None:
            m.sanitizer.barrier_complete(b, i, threads)
        self.arrived[b, i] = 0
        self.need[b, i] = -1
        m.progress += 1
        entry = self.red.pop((b, i), None)
        if entry is not None:
            op, values = entry
            preds = np.array([v for _, v in values.values()], bool)
            result = {"popc": int(preds.sum()), "and": bool(preds.all()), "or": bool(preds.any())}[op]
            for t, (dst, _) in values.items():
                new = m.R[dst].copy()
                new[t] = result
                m.R[dst] = new

    def exited(self, blocks) -> None:
        """Threads of ``blocks`` exited: barriers that wait for every warp may now complete."""
        for b in np.asarray(blocks).tolist():
            for i in np.flatnonzero(self.need[b] == 0).tolist():
                self._check(b, i)
