"""``trace=``: record chosen registers at chosen instructions for chosen threads of a launch.

    trace = flashsim.ptx.trace.Trace(["%r5", "%f12"], lines=[148], threads=[0, 33])
    report = flashsim.ptx.launch(kernel, grid, block, args, trace=trace)
    report.trace.records        # numpy structured array, one row per thread per visit
    print(report.trace.table())  # the same as text, each register shown as its declared type

When: ``when="before"`` (the default) records the registers just before the instruction runs; ``"after"`` just
after it ran, for the lanes that ran it (a warp-synchronous instruction: once its warp ran it; lanes that wait there
are recorded when they run it); ``"both"`` records a row before and a row after, the ``after`` column telling them
apart: an instruction's inputs and its result from one launch (an mma's fragments, scales and d).

Where: ``lines`` PTX lines (the instruction that starts on the line), ``pcs`` program counters (indices into
``kernel.program.ops``), ``source_lines`` CUDA source lines from the PTX's ``.loc`` (an int for a line of any file,
or "file.cu:120", the file matched by the end of its path); a source line is recorded before the first instruction
of each run of instructions ptxas' input attributes to it, so a statement is seen once as it starts. The values are
those the registers hold just before the instruction runs (every visit: a loop gives one row per iteration).
Registers are named as in the PTX (``%r5``, ``%fd3``, ``%p1``, special registers such as ``%tid.x``): NVRTC's PTX
carries no C++ variable names, so a C++ variable is reached through the register its line computes. Threads:
``None`` (every thread), or each an int (the launch-wide linear index, block-major: ``block * threads_per_block +
thread``) or a pair (block, thread), each an int (linear) or an (x, y, z) tuple.

A record is a row of ``records``: ``seq`` (the order of recording), ``pc``, ``line`` (PTX), ``source`` ("file:line" or
""), ``block`` and ``thread`` ((x, y, z) each), ``after`` (False: before the instruction), then one column per
register holding its bits (unsigned of its width; bool for a predicate). Recording stops after ``limit`` rows, and
``truncated`` says so.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Trace"]

_FLOAT_VIEWS = {".f16": np.float16, ".f32": np.float32, ".f64": np.float64}
_FIXED = ("seq", "pc", "line", "source", "block", "thread", "after")
_WHEN = ("before", "after", "both")


def _dims3(value, what: str) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)):
        return int(value), -1, -1  # linear: resolved by bind
    dims = tuple(int(v) for v in value)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"a trace {what} must be an int or 1 to 3 ints, got {value!r}")
    return dims + (0,) * (3 - len(dims))


class Trace:
    """What to record in a launch (the module docstring) and, once it ran, ``records`` and ``table()``."""

    def __init__(
        self, registers, *, lines=(), pcs=(), source_lines=(), threads=None, limit: int = 1_000_000, when="before"
    ):
        if isinstance(registers, str):
            registers = [registers]
        self.registers = [str(r) for r in registers]
        if not self.registers:
            raise ValueError("a Trace needs at least one register to record")
        for name in self.registers:
            if not name.startswith("%") or name in _FIXED:
                raise ValueError(f"a trace register is a PTX register name such as '%r5', got {name!r}")
        if len(set(self.registers)) != len(self.registers):
            raise ValueError(f"a register is named twice in {self.registers}")
        self.lines = [int(x) for x in lines]
        self.wanted_pcs = [int(x) for x in pcs]
        self.source_lines = list(source_lines)
        if not (self.lines or self.wanted_pcs or self.source_lines):
            raise ValueError("a Trace needs lines=, pcs= or source_lines= to say where to record")
        if when not in _WHEN:
            raise ValueError(f"a Trace's when is one of {', '.join(_WHEN)}, got {when!r}")
        self.when = when
        self.before = when in ("before", "both")
        self.after = when in ("after", "both")
        self.threads = None if threads is None else list(threads)
        self.limit = int(limit)
        self.pcs: frozenset = frozenset()
        self.truncated = False
        self._prog = None
        self._chunks: list = []
        self._rows = 0

    # -- set-up: launch calls bind once, then wave before each wave of blocks ---------------------------------

    def bind(self, prog, grid=(1, 1, 1), block=(1, 1, 1)) -> None:
        """Resolve the lines and registers in ``prog`` (ValueError naming what is not there) and the threads in
        the launch's ``grid`` and ``block``; clears earlier records (a Trace records one launch)."""
        self._prog = prog
        self._grid, self._block = tuple(grid), tuple(block)
        self._bt = int(np.prod(self._block))
        n_threads = int(np.prod(self._grid)) * self._bt
        pcs = set(self.wanted_pcs)
        for pc in self.wanted_pcs:
            if not 0 <= pc < len(prog.ops):
                raise ValueError(f"trace pc {pc} is outside the program's {len(prog.ops)} instructions")
        for line in self.lines:
            hits = [pc for pc, op in enumerate(prog.ops) if op.line == line]
            if not hits:
                near = sorted({op.line for op in prog.ops}, key=lambda x: abs(x - line))[:3]
                raise ValueError(f"no instruction starts on PTX line {line} (nearest: {near})")
            pcs.add(hits[0])
        for want in self.source_lines:
            hits = self._source_pcs(prog, want)
            if not hits:
                why = "" if any(op.loc for op in prog.ops) else ": the PTX has no .loc (compile with -lineinfo)"
                raise ValueError(f"no instruction of the PTX comes from source line {want!r}{why}")
            pcs.update(hits)
        self.pcs = frozenset(pcs)
        self._slots = {pc: tuple(self._slot(prog, pc, name) for name in self.registers) for pc in self.pcs}
        self._types = [self._declared(prog, name) for name in self.registers]
        dtypes = [prog.dtypes[s] for s in next(iter(self._slots.values()))]
        for slots in self._slots.values():
            for name, s, dt in zip(self.registers, slots, dtypes):
                if prog.dtypes[s] != dt:
                    raise ValueError(f"{name} has different widths at the traced instructions")
        width = max([len(prog.source_of(pc) or "") for pc in self.pcs] + [1])
        self.dtype = np.dtype(
            [
                ("seq", np.int64),
                ("pc", np.int32),
                ("line", np.int32),
                ("source", f"U{width}"),
                ("block", np.int64, (3,)),
                ("thread", np.int64, (3,)),
                ("after", np.bool_),
            ]
            + [(name, dt) for name, dt in zip(self.registers, dtypes)]
        )
        self._global = None if self.threads is None else self._thread_indices(n_threads)
        self._chunks, self._rows, self.truncated = [], 0, False

    def _source_pcs(self, prog, want) -> list[int]:
        """The first PC of each run of ops whose .loc is source line ``want`` (an int, or "file:line")."""
        if isinstance(want, str):
            path, _, number = want.rpartition(":")
            number = int(number)
        else:
            path, number = "", int(want)
        files = {i: f.path for i, f in prog.module.files.items()}

        def matches(loc):
            if loc is None or loc[1] != number:
                return False
            return not path or files.get(loc[0], "").endswith(path)

        hits = [pc for pc, op in enumerate(prog.ops) if matches(op.loc)]
        return [pc for pc in hits if pc - 1 not in hits]

    def _slot(self, prog, pc: int, name: str) -> int:
        if name in prog.specials:
            return prog.specials[name]
        op = prog.ops[pc]
        fi = list(prog.functions).index(op.function)
        slot = prog.regs.get(f"{fi}:{name}")
        if slot is not None:
            return slot
        fn = prog.functions[op.function].fn
        if name in fn.regs:
            raise ValueError(f"{name} is declared in {op.function} but no instruction uses it: it holds nothing")
        raise ValueError(
            f"{name} is not a register of {op.function} (PTX line {op.line}) nor a special register it reads"
        )

    def _declared(self, prog, name: str) -> str:
        fn = prog.functions[prog.ops[next(iter(self.pcs))].function].fn
        return fn.regs.get(name, "")

    def _thread_indices(self, n_threads: int) -> np.ndarray:
        """The launch-wide linear index of each chosen thread (ValueError for one outside the launch)."""
        out = []
        for spec in self.threads:
            if isinstance(spec, (int, np.integer)):
                t = int(spec)
            else:
                try:
                    b, th = spec
                except (TypeError, ValueError):
                    raise ValueError(f"a trace thread is an int or a (block, thread) pair, got {spec!r}") from None
                t = self._linear(b, self._grid, "block") * self._bt + self._linear(th, self._block, "thread")
            if not 0 <= t < n_threads:
                raise ValueError(f"trace thread {spec!r} is outside the launch's {n_threads} threads")
            out.append(t)
        return np.unique(np.array(out, np.int64))

    @staticmethod
    def _linear(value, dims, what: str) -> int:
        x, y, z = _dims3(value, what)
        if y < 0:
            index = x
        else:
            if not (0 <= x < dims[0] and 0 <= y < dims[1] and 0 <= z < dims[2]):
                raise ValueError(f"trace {what} {value!r} is outside {what} {dims}")
            index = x + dims[0] * (y + dims[1] * z)
        if not 0 <= index < int(np.prod(dims)):
            raise ValueError(f"trace {what} {value!r} is outside {what} {dims}")
        return index

    def wave(self, first_block: int, n_blocks: int, linear_blocks=None) -> None:
        """A wave of ``n_blocks`` blocks from linear block ``first_block`` starts: which of its threads to record.
        ``linear_blocks``: the linear index of each of the wave's blocks where they are not consecutive (a launch
        whose clusters span y or z runs its blocks cluster by cluster)."""
        lo, n = first_block * self._bt, n_blocks * self._bt
        if linear_blocks is None:
            self._offset = lo
            if self._global is None:
                self._wave = None
            else:
                chosen = self._global[(self._global >= lo) & (self._global < lo + n)]
                self._wave = chosen - lo
            return
        t = np.arange(n)
        launch_wide = np.asarray(linear_blocks, np.int64)[t // self._bt] * self._bt + t % self._bt
        self._offset = launch_wide  # wave thread -> launch-wide thread
        self._wave = None if self._global is None else np.flatnonzero(np.isin(launch_wide, self._global))

    # -- recording: the machine calls record before (and after) it runs a PC of ``pcs`` --------------------------

    def record(self, machine, g, pc: int, before: bool = True) -> None:
        """Record the registers of the running lanes of group ``g`` that are chosen threads, before PC ``pc`` runs,
        or with ``before`` False after it ran (the lanes still running and not waiting there: those that ran it)."""
        if self.truncated:
            return
        active = g.active() if before else g.active() & (machine.wait == 0)
        idx = np.flatnonzero(active) if self._wave is None else self._wave[active[self._wave]]
        if idx.size == 0:
            return
        room = self.limit - self._rows
        if idx.size > room:
            idx, self.truncated = idx[:room], True
        T = machine.T
        cols = [np.broadcast_to(np.asarray(machine.R[s]), (T,))[idx].copy() for s in self._slots[pc]]
        where = idx + self._offset if type(self._offset) is int else self._offset[idx]
        self._chunks.append((pc, where, cols, not before))
        self._rows += idx.size

    def absorb(self, chunks, rows: int, truncated: bool) -> None:
        """Append the records another process took of the same launch (a share of a distributed launch, merged in
        block order: flashsim.ptx.distributed), up to ``limit`` rows in all."""
        del rows  # the chunks carry their rows
        for pc, where, cols, after in chunks:  # as ``record`` appends them: after, the record of a PC that ran
            room = self.limit - self._rows
            if room <= 0:
                self.truncated = True
                return
            if where.size > room:
                where, cols, self.truncated = where[:room], [c[:room] for c in cols], True
            self._chunks.append((pc, where, cols, after))
            self._rows += where.size
        self.truncated = self.truncated or truncated

    # -- results ---------------------------------------------------------------------------------------------

    @property
    def records(self) -> np.ndarray:
        """Every record so far (the module docstring), in the order they were taken."""
        if self._prog is None:
            raise ValueError("this Trace has not been given to a launch yet")
        out = np.zeros(self._rows, self.dtype)
        at = 0
        gx, gy = self._grid[0], self._grid[1]
        bx, by = self._block[0], self._block[1]
        for pc, threads, cols, after in self._chunks:
            rows = out[at : at + threads.size]
            rows["pc"] = pc
            rows["line"] = self._prog.ops[pc].line
            rows["source"] = self._prog.source_of(pc) or ""
            b, t = threads // self._bt, threads % self._bt
            rows["block"] = np.stack([b % gx, (b // gx) % gy, b // (gx * gy)], axis=1)
            rows["thread"] = np.stack([t % bx, (t // bx) % by, t // (bx * by)], axis=1)
            rows["after"] = after
            for name, values in zip(self.registers, cols):
                rows[name] = values
            at += threads.size
        out["seq"] = np.arange(self._rows)
        return out

    def __len__(self) -> int:
        return self._rows

    def values(self, register: str) -> np.ndarray:
        """The recorded values of ``register`` as its declared type (a float register's bits viewed as the float)."""
        column = self.records[register]
        view = _FLOAT_VIEWS.get(self._types[self.registers.index(register)])
        return column.view(view) if view is not None else column

    def table(self, max_rows: int = 50) -> str:
        """The records as text: one row each, every register in hex, a float register with its value too."""
        rec = self.records
        both = self.when == "both"
        head = ["seq", "line", "source", "block", "thread", *(["when"] if both else []), *self.registers]
        rows = []
        for r in rec[:max_rows]:
            cells = [str(r["seq"]), str(r["line"]), r["source"] or "-", _xyz(r["block"]), _xyz(r["thread"])]
            if both:
                cells.append("after" if r["after"] else "before")
            for name, declared in zip(self.registers, self._types):
                cells.append(_cell(r[name], declared))
            rows.append(cells)
        widths = [max(len(h), *(len(c[i]) for c in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip()]
        lines += ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip() for cells in rows]
        if rec.size > max_rows:
            lines.append(f"... {rec.size - max_rows} more rows (Trace.records has them all)")
        if self.truncated:
            lines.append(f"recording stopped at limit={self.limit} rows")
        return "\n".join(lines)

    def __repr__(self) -> str:
        where = self.lines or self.source_lines or self.wanted_pcs
        return f"Trace({self.registers}, at {where}, {self._rows} records)"


def _xyz(v) -> str:
    return f"({v[0]},{v[1]},{v[2]})"


def _cell(value, declared: str) -> str:
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if np.asarray(value).dtype.kind == "V":  # a .b128 register: its 16 bytes as one little-endian number
        return f"0x{int.from_bytes(bytes(value), 'little'):032x}"
    bits = int(value)
    width = value.dtype.itemsize * 2
    view = _FLOAT_VIEWS.get(declared)
    text = f"0x{bits:0{width}x}"
    if view is not None:
        text += f" ({np.asarray(value).view(view).item()!r})"
    return text
