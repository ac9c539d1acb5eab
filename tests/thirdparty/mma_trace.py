"""Instruction-by-instruction check of a kernel's sm_120a mma.sync kinds against mmasim.

Every ``mma ... .kind::`` instruction of the kernel is traced in one launch (flashsim.ptx.trace, ``when="both"``:
its fragment, accumulator, scale and selector registers just before it runs, its d just after); each warp's visit is
turned into the tiles its registers hold by the PTX ISA's fragment and scale-selector layouts (flashsim.layout,
held to CuTe's SM120 atoms elsewhere), and MMA-Sim's RTX Blackwell model (tests/mmasim_block_scale.py) computes d
from those tiles: the simulator's d must be those bits. The forms are read from each instruction's own modifiers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flashsim.layout import blockscale
from flashsim.layout import fragments as F
from flashsim.ptx.ir import Imm, Reg, Vec
from flashsim.ptx.trace import Trace

__all__ = ["KindMma", "kind_mmas", "trace", "check"]

_ELEMS = ("e2m1", "e2m3", "e3m2", "e4m3", "e5m2")
_DEFAULT_VEC = {"mxf8f6f4": 1, "mxf4": 2}


@dataclass(frozen=True)
class KindMma:
    """One ``mma.sync ... .kind::`` instruction: its PTX line, its form (kind, scale_vec, scale format, a format, b
    format, accumulator: tests/mmasim_block_scale.py's form tuple) and its operands' register names (selectors: an int
    or a register name each)."""

    line: int
    form: tuple
    d: tuple
    a: tuple
    b: tuple
    c: tuple
    scale_a: str | None = None
    scale_b: str | None = None
    selectors: tuple = ()

    @property
    def registers(self) -> tuple:
        named = [s for s in self.selectors if isinstance(s, str)]
        extra = [r for r in (self.scale_a, self.scale_b) if r is not None]
        return tuple(dict.fromkeys((*self.d, *self.a, *self.b, *self.c, *extra, *named)))


def _names(operand) -> tuple:
    items = operand.items if isinstance(operand, Vec) else (operand,)
    if not all(isinstance(x, Reg) for x in items):
        raise ValueError(f"registers expected, got {operand!r}")
    return tuple(x.name for x in items)


def _form(mods) -> tuple:
    kind = next(m for m in mods if m.startswith(".kind::")).removeprefix(".kind::")
    types = [m[1:] for m in mods if m[1:] in (*_ELEMS, "f32", "f16", "ue8m0", "ue4m3")]
    vec = next((int(m.removeprefix(".scale_vec::")[:-1]) for m in mods if m.startswith(".scale_vec::")), None)
    if kind == "f8f6f4":
        return kind, None, None, types[1], types[2], types[0]
    return kind, vec or _DEFAULT_VEC[kind], types[4], types[1], types[2], types[0]


def kind_mmas(ir_module, entry: str) -> list[KindMma]:
    """The mma.sync kind instructions of ``entry`` (every function it could call is inlined by nvcc here: the
    kernels' mma are in the entry's own body)."""
    out = []
    for ins in ir_module.functions[entry].body:
        if ins.opcode != "mma" or not any(m.startswith(".kind::") for m in ins.mods):
            continue
        form = _form(ins.mods)
        ops = ins.operands
        d, a, b, c = (_names(ops[i]) for i in range(4))
        if form[0] == "f8f6f4":
            out.append(KindMma(ins.line, form, d, a, b, c))
            continue
        sels = []
        for i in (5, 7):
            for item in ops[i].items:
                sels.append(int(item.value) if isinstance(item, Imm) else item.name)
        out.append(KindMma(ins.line, form, d, a, b, c, _names(ops[4])[0], _names(ops[6])[0], tuple(sels)))
    return out


def trace(mmas: list[KindMma]) -> Trace:
    """One Trace of every register of ``mmas`` at their lines, before and after each runs."""
    registers = tuple(dict.fromkeys(r for m in mmas for r in m.registers))
    return Trace(list(registers), lines=[m.line for m in mmas], when="both", limit=1 << 26)


def _visits(records: np.ndarray, line: int, block: tuple) -> tuple[np.ndarray, np.ndarray]:
    """(before rows, after rows) of ``line``, each (V, 32): V warp visits, lanes in order (``block`` the launch's
    block dims, for the lanes and warps); the before row of an after row is its thread's latest one before it."""
    rec = records[records["line"] == line]
    t = rec["thread"].astype(np.int64)
    thread = t[:, 0] + block[0] * (t[:, 1] + block[1] * t[:, 2])
    b = rec["block"].astype(np.int64)
    key = np.lexsort((rec["seq"], thread, b[:, 0], b[:, 1], b[:, 2]))
    rec, thread, b = rec[key], thread[key], b[key]
    after = np.flatnonzero(rec["after"])
    before = after - 1
    if (before < 0).any() or rec["after"][before].any() or (thread[before] != thread[after]).any():
        raise AssertionError(f"PTX line {line}: an after-row without its before-row")
    # a warp's 32 lanes run an mma together: its after rows are one run of seq; order by (block, warp, seq), then
    # each group of 32 by lane
    ta, ba = thread[after], b[after]
    order = np.lexsort((rec["seq"][after], ta // 32, ba[:, 0], ba[:, 1], ba[:, 2]))
    if order.size % 32:
        raise AssertionError(f"PTX line {line}: {order.size} after-rows, not whole warps")
    groups = order.reshape(-1, 32)
    groups = np.take_along_axis(groups, np.argsort(ta[groups] % 32, axis=1, kind="stable"), axis=1)
    if (ta[groups] % 32 != np.arange(32)).any() or (ta[groups] // 32 != ta[groups][:, :1] // 32).any():
        raise AssertionError(f"PTX line {line}: a warp visit without all 32 lanes")
    return rec[before][groups], rec[after][groups]


def _words(rows: np.ndarray, names) -> np.ndarray:
    return np.stack([rows[n].astype(np.uint32) for n in names], axis=-1)


def check(mmas: list[KindMma], tr: Trace, block: tuple) -> dict:
    """Every traced visit of ``mmas`` (a launch of ``block`` threads per block) against mmasim: {"instructions":
    warp-level mmas checked, "mismatches": elements of d that differ, "first": the first mismatch, or None}."""
    from mmasim_block_scale import mmasim_mma  # the oracle: MMA-Sim's model (needs torch and mmasim)

    records = tr.records
    checked, bad, first = 0, 0, None
    for m in mmas:
        before, after = _visits(records, m.line, tuple(block) + (1,) * (3 - len(block)))
        if before.size == 0:
            continue
        kind, n, sf, af, bf, acc = m.form
        four = kind in ("mxf4", "mxf4nvf4")
        amap, bmap = (F.A4, F.B4) if four else (F.A8, F.B8)
        unpack = F.unpack4 if four else F.unpack8
        a = amap.scatter(unpack(_words(before, m.a)))
        b = bmap.scatter(unpack(_words(before, m.b)))
        if not four:
            a, b = blockscale.from_container(np, a, af), blockscale.from_container(np, b, bf)
        cmap = F.C_F16 if acc == "f16" else F.C_F32
        dt = np.float16 if acc == "f16" else np.float32
        unit = np.uint16 if acc == "f16" else np.uint32
        c = cmap.scatter(np.ascontiguousarray(_words(before, m.c)).view(unit)).view(dt)
        got = cmap.scatter(np.ascontiguousarray(_words(after, m.d)).view(unit))
        sa = sb = None
        if n is not None:
            sel = [
                np.full(before.shape[0], s) if isinstance(s, int) else before[s][:, 0].astype(np.int64)
                for s in m.selectors
            ]
            sa = blockscale.scale_codes(
                blockscale.select_scales(_words(before, [m.scale_a])[..., 0], "a", n, sel[0], sel[1]), sf
            )
            sb = blockscale.scale_codes(
                blockscale.select_scales(_words(before, [m.scale_b])[..., 0], "b", n, sel[2], sel[3]), sf
            )
        want = np.asarray(mmasim_mma(m.form, a, b, c, sa, sb), dt).view(unit)
        diff = np.argwhere(want != got)
        checked += before.shape[0]
        bad += len(diff)
        if diff.size and first is None:
            v, i, j = (int(x) for x in diff[0])
            blk, th = after[v, 0]["block"], after[v, 0]["thread"]
            first = (
                f"PTX line {m.line}, block {tuple(blk)}, warp of thread {tuple(th)}: d[{i}, {j}] is "
                f"{int(got[v, i, j]):#x}, mmasim {int(want[v, i, j]):#x}"
            )
    return {"instructions": checked, "mismatches": bad, "first": first}
