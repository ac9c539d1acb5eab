"""What a share of a launch stored into global memory, and the merge of the shares into the arrays.

A launch of some ``blocks`` (one worker's share of a distributed launch, flashsim.ptx.distributed) records, per byte
of every array it stores into, the linear index of the block whose store wrote it last (``WriteLog``), and for a
byte an atomic updated, which reduction did it. ``Written`` is what comes back: the writer of each byte as runs (a
block writes whole rows: a few runs per block), the bytes written, in address order, and the atomics' runs; ``mask``
and ``bytes`` give them per byte. ``Merger`` folds shares into the driver's arrays: a plain byte is copied, an
atomic's byte merged by its reduction (flashsim.ptx.communication.merge); a byte that blocks of two shares both
stored is an inter-block race (BlockRace naming both blocks, the array and the offset): on a GPU its value would
depend on which block ran last.

Within one share the log checks the same when asked (``races=True``): a byte stored by two blocks is a race too, so
the verdict does not depend on how the blocks were split (a kernel whose blocks communicate runs on one worker, in
block order, without this check: its blocks are ordered by the flags and atomics they communicate through).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .communication import element_width, merge, mergeable, reduction_of
from .errors import BlockRace

__all__ = ["WriteLog", "Written", "Merger", "block_xyz"]


def block_xyz(linear: int, grid: tuple) -> tuple[int, int, int]:
    """The (x, y, z) of linear block index ``linear`` of ``grid``."""
    gx, gy = grid[0], grid[1]
    return linear % gx, (linear // gx) % gy, linear // (gx * gy)


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start offsets, values) of the runs of equal values of a flat array."""
    if values.size == 0:
        return np.zeros(0, np.int64), values[:0]
    starts = np.concatenate([[0], np.flatnonzero(values[1:] != values[:-1]) + 1]).astype(np.int64)
    return starts, values[starts]


def _expand(starts: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    return np.repeat(values, np.diff(np.append(starts, n)))


class WriteLog:
    """Records, per byte of each array a launch stores into, the block that wrote it (-1: none) and the reduction
    an atomic updated it with (a code into ``kinds``; 0: none). ``wave(machine, linear)`` before each wave;
    ``record`` from flashsim.ptx.memory.Memory.store after each global store."""

    def __init__(self, races: bool = False, grid: tuple = (1, 1, 1)):
        # buffer base -> int32 per byte: 1 + the block that wrote it, 0 none (np.zeros: the memory of pages no store
        # touches is never filled, which matters for the large outputs a share writes a small part of)
        self.writers: dict[int, np.ndarray] = {}
        self.codes: dict[int, np.ndarray] = {}  # buffer base -> uint8 reduction code per byte
        self.spans: dict[int, list] = {}  # buffer base -> [first byte written, one past the last]
        self.kinds: list[tuple[str, str]] = []
        self.races = races
        self.grid = grid
        self.machine = None
        self.linear = None

    @property
    def bases(self) -> set:
        return set(self.writers)

    def wave(self, machine, linear) -> None:
        self.machine = machine
        self.linear = np.asarray(linear, np.int64)

    def _code(self, pc) -> int:
        m = self.machine
        kind = reduction_of(m.prog.op_names[m.current_pc if pc is None else pc])
        if kind not in self.kinds:
            self.kinds.append(kind)
        return self.kinds.index(kind) + 1

    def record(self, memory, addr, width: int, threads, atomic: bool, pc) -> None:
        """The global store of ``width`` bytes at ``addr`` (in bounds: Memory checked) by ``threads`` is done."""
        m = self.machine
        idx = np.searchsorted(memory.bases, addr, side="right").astype(np.int64) - 1
        blocks = self.linear[np.asarray(threads, np.int64) // m.block_threads]
        for i in np.unique(idx):
            sel = None if idx[0] == idx[-1] and (idx == i).all() else np.flatnonzero(idx == i)
            buf = memory.buffers[int(i)]
            off = (addr if sel is None else addr[sel]).astype(np.int64) - buf.base
            blk = (blocks if sel is None else blocks[sel]).astype(np.int32)
            cols = off[:, None] + np.arange(width)
            writer = self.writers.get(buf.base)
            if writer is None:
                writer = self.writers[buf.base] = np.zeros(buf.nbytes, np.int32)
                self.spans[buf.base] = [buf.nbytes, 0]
            span = self.spans[buf.base]
            span[0], span[1] = min(span[0], int(off.min())), max(span[1], int(off.max()) + width)
            if atomic:
                codes = self.codes.get(buf.base)
                if codes is None:
                    codes = self.codes[buf.base] = np.zeros(buf.nbytes, np.uint8)
                codes[cols] = self._code(pc)
            elif self.races:
                self._check(writer, cols, blk, buf.name, threads, sel)
            writer[cols] = blk[:, None] + 1

    def _check(self, writer, cols, blk, name: str, threads, sel) -> None:
        """BlockRace where a lane stores a byte another block wrote before, or another block's lane of the same
        store writes too (lanes of one instruction in several blocks of a wave)."""
        old = writer[cols]
        clash = (old > 0) & (old != blk[:, None] + 1)
        first = second = None
        if clash.any():
            lane, col = np.argwhere(clash)[0]
            first, second, offset = int(old[lane, col]) - 1, int(blk[lane]), int(cols[lane, col])
        elif blk.size > 1 and (blk != blk[0]).any():
            flat = cols.reshape(-1)
            who = np.repeat(blk, cols.shape[1])
            order = np.argsort(flat, kind="stable")
            c, b = flat[order], who[order]
            dup = np.flatnonzero((c[1:] == c[:-1]) & (b[1:] != b[:-1]))
            if dup.size:
                k = int(dup[0])
                first, second, offset = int(b[k]), int(b[k + 1]), int(c[k])
                lane = int(order[k + 1]) // cols.shape[1]
        if first is None:
            return
        t = int(threads[lane if sel is None else sel[lane]])
        raise BlockRace(_race_text(name, offset, first, second, self.grid), **self.machine.locate(t))

    def results(self, buffers) -> list:
        """A Written per buffer of ``buffers`` (flashsim.ptx.memory.Buffer: bytes after the launch) it stored into."""
        out = []
        for buf in buffers:
            writer = self.writers.get(buf.base)
            if writer is None:
                continue
            lo, hi = self.spans[buf.base]
            writer = writer[lo:hi] - 1
            codes = self.codes.get(buf.base)
            starts, who = _runs(writer)
            rs, rc = _runs(codes[lo:hi]) if codes is not None else (np.zeros(1, np.int64), np.zeros(1, np.uint8))
            data = buf.bytes[lo:hi][writer >= 0].copy()
            out.append(Written(buf.name, buf.base, buf.nbytes, lo, hi, starts, who, data, rs, rc, list(self.kinds)))
        return out


def _race_text(name: str, offset: int, first: int, second: int, grid: tuple) -> str:
    return (
        f"blocks {block_xyz(first, grid)} and {block_xyz(second, grid)} both store byte {offset} of {name}: blocks "
        "of one launch run in no set order on a GPU, so its value depends on which ran last (an inter-block race); "
        "communicating=True runs every block on one worker, in block order, as one process does"
    )


@dataclass
class Written:
    """What a launch's blocks stored into one array: ``name`` (as errors name it: "argument 3"), ``base`` (its device
    address), ``nbytes``; ``lo`` .. ``hi`` the bytes from the first written to past the last, and within them the
    writer runs (``starts``, ``writers``: from byte ``lo + starts[i]`` on, the linear block whose store wrote it,
    -1 none); ``data`` the written bytes in address order; the atomics' runs in the same span (``reduced_starts``,
    ``reduced_codes``: 0 none, else 1 + an index into ``kinds``, (operation, type) pairs)."""

    name: str
    base: int
    nbytes: int
    lo: int
    hi: int
    starts: np.ndarray
    writers: np.ndarray
    data: np.ndarray
    reduced_starts: np.ndarray
    reduced_codes: np.ndarray
    kinds: list

    def span_writer(self) -> np.ndarray:
        """The writer of each byte of ``lo`` .. ``hi`` (int32, -1 none)."""
        return _expand(self.starts, self.writers, self.hi - self.lo)

    def span_reduced(self) -> np.ndarray | None:
        """The reduction code of each byte of ``lo`` .. ``hi``, or None where no atomic wrote."""
        return _expand(self.reduced_starts, self.reduced_codes, self.hi - self.lo) if self.reduced_codes.any() else None

    @property
    def writer(self) -> np.ndarray:
        """The linear block that wrote each byte of the array (-1: none), int32."""
        out = np.full(self.nbytes, -1, np.int32)
        out[self.lo : self.hi] = self.span_writer()
        return out

    @property
    def mask(self) -> np.ndarray:
        """Which bytes the blocks stored (bool per byte of the array)."""
        return self.writer >= 0

    @property
    def bytes(self) -> np.ndarray:
        """The array's bytes as the blocks left them where ``mask``, 0 elsewhere (uint8 per byte)."""
        out = np.zeros(self.nbytes, np.uint8)
        out[self.mask] = self.data
        return out


class Merger:
    """Folds Written shares into staging copies of the driver's arrays, then (``commit``) into the arrays themselves:
    ``targets`` {base: (flat uint8 bytes of the array, its name)}; ``grid`` names blocks in errors; ``kernel`` names
    the kernel. Until ``commit`` the arrays are untouched: a launch that fails leaves them as they were."""

    def __init__(self, targets: dict, grid: tuple, kernel: str):
        self.targets = targets
        self.grid = grid
        self.kernel = kernel
        self.staged: dict[int, np.ndarray] = {}  # base -> the merged bytes so far
        # base -> int32: 1 + the block whose plain store wrote each byte, 0 none; base -> bool: updated by an atomic
        # (np.zeros: only the pages of the bytes shares wrote are ever filled)
        self.owner: dict[int, np.ndarray] = {}
        self.reduced: dict[int, np.ndarray] = {}

    def _stage(self, base: int) -> tuple[np.ndarray, str]:
        original, name = self.targets[base]
        got = self.staged.get(base)
        if got is None:
            got = self.staged[base] = original.copy()
        return got, name

    def commit(self) -> None:
        """Copy the merged bytes into the arrays."""
        for base, staged in self.staged.items():
            self.targets[base][0][...] = staged

    def add(self, share: list) -> None:
        """Merge one share's Written list (BlockRace for a byte two shares stored); the work is over the bytes from
        the first the share wrote to the last (a share's blocks write a run of rows: a small part of the array)."""
        for w in share:
            target, name = self._stage(w.base)
            lo, hi = w.lo, w.hi
            writer = w.span_writer()
            mask = writer >= 0
            red = w.span_reduced()
            plain = mask if red is None else mask & (red == 0)
            owner = self.owner.get(w.base)
            if owner is None:
                owner = self.owner[w.base] = np.zeros(w.nbytes, np.int32)
            owned = owner[lo:hi]
            seen = self.reduced.get(w.base)
            clash = plain & (owned > 0)
            if seen is not None:
                clash |= plain & seen[lo:hi]
            if red is not None:
                clash |= (red > 0) & (owned > 0)
            if clash.any():
                o = int(np.flatnonzero(clash)[0])
                other = int(owned[o]) - 1
                if other >= 0:
                    text = _race_text(name, lo + o, other, int(writer[o]), self.grid)
                else:
                    text = (
                        f"block {block_xyz(int(writer[o]), self.grid)} and an atomic of another block both write "
                        f"byte {lo + o} of {name} (an inter-block race)"
                    )
                raise BlockRace(text, kernel=self.kernel, block=block_xyz(int(writer[o]), self.grid))
            values = np.zeros(hi - lo, np.uint8)
            values[mask] = w.data
            part = target[lo:hi]
            part[plain] = values[plain]
            owned[plain] = writer[plain] + 1
            if red is not None:
                self._reduce(w, target, name, red, values)

    def _reduce(self, w: Written, target, name: str, red, values) -> None:
        """Fold the bytes an atomic updated (``red``, ``values``: over the share's span) into ``target``."""
        initial = self.targets[w.base][0]  # the array itself: untouched until commit
        seen = self.reduced.setdefault(w.base, np.zeros(w.nbytes, bool))
        for code in np.unique(red[red > 0]):
            op, kind = w.kinds[int(code) - 1]
            width = element_width(kind)
            index = np.unique((w.lo + np.flatnonzero(red == code)) // width)
            cols = index[:, None] * width + np.arange(width)  # absolute byte offsets of the elements
            if not mergeable(op, kind) and seen[cols].any():
                o = int(cols[seen[cols].any(axis=1)][0, 0])
                raise BlockRace(
                    f"atomics {op}{kind} of several workers update byte {o} of {name}: their order decides the "
                    "value, which no merge recovers; communicating=True runs every block on one worker",
                    kernel=self.kernel,
                )
            view = np.dtype(f"u{width}")
            cur, ini = (np.ascontiguousarray(a[cols]).view(view).reshape(-1) for a in (target, initial))
            val = np.ascontiguousarray(values[cols - w.lo]).view(view).reshape(-1)
            out = merge(op, kind, cur, val, ini) if mergeable(op, kind) else val  # the first share's: its value
            target[cols] = out.astype(view).view(np.uint8).reshape(-1, width)
            seen[cols] = True
