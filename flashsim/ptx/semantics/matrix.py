"""The warp's matrix instructions: mma.sync (every shape and type flashsim.mma models), ldmatrix, stmatrix and
movmatrix. Fragments go in and out of the lanes' registers through the maps of flashsim.layout (the PTX ISA's
formulas, checked on the H200 against CuTe's layouts), and the arithmetic is flashsim.numerics.tensorcore's for the
program's arch: the same model the emulator's kernel program runs, bit for bit what the GPU returns. All of them
are ``.sync.aligned``: every lane of the warp runs them together (they wait for each other, ``Group.converge``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ...arch import get_arch
from ...layout import fragments as F
from ...layout.ldmatrix import load_rows
from ...numerics.tensorcore import fast
from ...numerics.tensorcore import mma as tc_mma
from ...numerics.tensorcore.types import k32_type, mma_type
from .. import isa
from ..batching import MmaInfo
from ..ir import Vec
from ..program import Decoded
from .data import SPACES

_IN = {
    ".f16": np.float16,
    ".bf16": ml_dtypes.bfloat16,
    ".s8": np.int8,
    ".u8": np.uint8,
    ".e4m3": ml_dtypes.float8_e4m3fn,
    ".e5m2": ml_dtypes.float8_e5m2,
}
_ACC = {".f32": np.float32, ".f16": np.float16, ".s32": np.int32}
FULL = 0xFFFFFFFF


def _regs(d: Decoded, i: int, n: int) -> list[int]:
    op = d.operands[i]
    items = op.items if isinstance(op, Vec) else (op,)
    if len(items) != n:
        raise isa.Unsupported(f"operand {i}: {n} registers expected, got {len(items)}")
    return [d.value(x, np.uint32) for x in items]


def _full_warps(g):
    """The warps of the group (all 32 lanes present: the instructions are .aligned) and their first threads."""
    m = g.m
    lanes = g.lanes()
    warps = np.unique(m.warp_of[lanes])
    first = lanes[np.searchsorted(m.warp_of[lanes], warps)]
    if lanes.size != 32 * warps.size or (m.lane_of[first] != 0).any():
        raise m.error(
            "a .aligned warp instruction with part of a warp (its other lanes exited or diverged)", int(lanes[0])
        )
    return first[:, None] + np.arange(32)[None, :]  # (W, 32) thread indices


def _gather(g, slots, threads):
    """(W, 32, len(slots)) uint32: register slot k of every lane of the warps ``threads`` ((W, 32), or None: every
    thread of the machine)."""
    T = g.m.T
    out = np.empty((T, len(slots)), np.uint32)
    for k, s in enumerate(slots):
        out[:, k] = g.R[s]
    out = out.reshape(T // 32, 32, len(slots))
    return out if threads is None else out.reshape(T, -1)[threads]


def _scatter(g, slots, threads, values):
    """Write values (W, 32, len(slots)) uint32 to the lanes' registers."""
    R = g.R
    if threads is None:
        flat = values.reshape(-1, len(slots))
        for k, s in enumerate(slots):
            if s is not None:
                R[s] = np.ascontiguousarray(flat[:, k])
        return
    idx = threads.reshape(-1)
    for k, s in enumerate(slots):
        if s is None:
            continue
        new = np.broadcast_to(np.asarray(R[s]), (g.m.T,)).astype(g.m.dtypes[s], copy=True)
        new[idx] = values[..., k].reshape(-1)
        R[s] = new


def _warps(g):
    """(W, 32) threads of the group's warps, or None when the group is every thread of the machine (and the
    machine's threads are whole warps)."""
    if g.mask is None and g.m.T % 32 == 0 and g.m.block_threads % 32 == 0:
        return None
    return _full_warps(g)


def _tile(words, fmap, dtype):
    """(W, 32, regs) uint32 fragments -> (W, rows, cols) tiles of ``dtype`` (through the map's scatter table)."""
    elems = words.view(np.dtype(f"u{32 // fmap.per_reg // 8}")).reshape(words.shape[0], -1)
    return np.take(elems, _SCATTER[fmap.name], axis=1).view(dtype)


_SCATTER = {m.name: F._flat_tables(m, 1)[1] for m in (F.A, F.B, F.A8, F.B8, F.C_F32, F.C_F16)}
_GATHER = {m.name: F._flat_tables(m, 1)[0] for m in (F.A, F.B, F.A8, F.B8, F.C_F32, F.C_F16)}


@isa.implements("mma")
def mma(d: Decoded):
    mods = d.mods
    if not (mods.flag(".sync") and mods.flag(".aligned")):
        raise isa.Unsupported("mma needs .sync.aligned")
    shape = mods.take(".m16n8k16", ".m16n8k32", ".m16n8k8", ".m8n8k4", ".m16n8k4", ".m16n8k64", ".m8n8k16")
    if not (mods.flag(".row") and mods.flag(".col")):
        raise isa.Unsupported("mma needs .row.col")
    kind = mods.prefixed(".kind::")
    satfinite = mods.flag(".satfinite")
    types = mods.types()
    mods.done()
    if kind is not None or satfinite:
        raise isa.Unsupported(f"mma with {kind or '.satfinite'}")
    if shape not in (".m16n8k16", ".m16n8k32") or len(types) != 4:
        raise isa.Unsupported(f"mma{shape} (flashsim.mma models m16n8k16 and m16n8k32)")
    dt, at, bt, ct = types
    if dt != ct or at not in _IN or bt not in _IN or ct not in _ACC:
        raise isa.Unsupported(f"mma{shape}{''.join(types)}")
    eight = shape == ".m16n8k32"
    if eight != (at in (".s8", ".u8", ".e4m3", ".e5m2")) or (at in (".s8", ".u8")) != (bt in (".s8", ".u8")):
        raise isa.Unsupported(f"mma{shape} with {at} x {bt}")
    if at in (".u8",) or bt in (".u8",):
        raise isa.Unsupported("mma with u8 operands (flashsim.mma models s8)")
    try:  # the operand types flashsim.numerics.tensorcore models (types.MMA_TYPES, k32_type)
        k32_type(_IN[at], _IN[bt], _ACC[ct]) if eight else mma_type(_IN[at], _ACC[ct])
    except ValueError as exc:
        raise isa.Unsupported(f"mma{shape}{''.join(types)}: {exc}") from None
    if not eight and at != bt:
        raise isa.Unsupported(f"mma{shape} with {at} x {bt}")
    amap, bmap = (F.A8, F.B8) if eight else (F.A, F.B)
    cmap = F.C_F16 if ct == ".f16" else F.C_F32
    n_c = cmap.regs
    d_slots = [d.reg(x) for x in d.operands[0].items]
    a_slots, b_slots, c_slots = _regs(d, 1, amap.regs), _regs(d, 2, bmap.regs), _regs(d, 3, n_c)
    if len(d_slots) != n_c:
        raise isa.Unsupported(f"{n_c} destination registers expected")
    a_dt, b_dt, c_dt = np.dtype(_IN[at]), np.dtype(_IN[bt]), np.dtype(_ACC[ct])
    arch = get_arch(d.prog.arch)
    member = d.prog.const(FULL, np.uint32)
    c_unit = np.dtype(np.uint16 if ct == ".f16" else np.uint32)
    gather_c = _GATHER[cmap.name]
    model = fast.chain_fast if not eight else (lambda a, b, c, spec: tc_mma(a, b, c, arch=spec))

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _warps(g)
        a = _tile(_gather(g, a_slots, th), amap, a_dt)  # (W, 16, K)
        b = _tile(_gather(g, b_slots, th), bmap, b_dt)  # (W, K, 8)
        c = _tile(_gather(g, c_slots, th), cmap, c_dt)  # (W, 16, 8)
        out = model(a, b, c, arch)
        vals = np.take(out.view(c_unit).reshape(out.shape[0], -1), gather_c, axis=1)  # (W, 32, elems)
        _scatter(g, d_slots, th, np.ascontiguousarray(vals).view(np.uint32))

    info = MmaInfo(
        key=(shape, *types),
        a=tuple(a_slots),
        b=tuple(b_slots),
        c=tuple(c_slots),
        d=tuple(d_slots),
        member=member,
        maps=(amap, bmap, cmap),
        dtypes=(a_dt, b_dt, c_dt),
        model=lambda a, b, c: model(a, b, c, arch),
        chainable=not eight,
    )
    return d.op(run, info=info)


def _row_order(num: int, trans: bool) -> np.ndarray:
    """(32, 2 num) index of the row element (row 8j + r, column c -> 8 (8j + r) + c) each lane's register half
    holds after ldmatrix (flashsim.layout.ldmatrix.load_rows on an index pattern): the inverse map stmatrix and
    movmatrix store and move through."""
    rows = np.arange(64 * num, dtype=np.uint16).reshape(8 * num, 8)
    return load_rows(rows, trans=trans).view(np.uint16).reshape(32, 2 * num).astype(np.int64)


_ROW_ORDER = {(num, trans): _row_order(num, trans) for num in (1, 2, 4) for trans in (False, True)}


def store_rows(regs: np.ndarray, trans: bool) -> np.ndarray:
    """The inverse of load_rows: registers (W, 32, num) uint32 -> the rows (W, 8 num, 8) uint16 the lanes' row
    addresses receive (stmatrix; ``trans``: the matrices stored transposed)."""
    W, _, num = regs.shape
    halves = np.ascontiguousarray(regs).view(np.uint16).reshape(W, 64 * num)
    rows = np.empty((W, 64 * num), np.uint16)
    rows[:, _ROW_ORDER[num, trans].reshape(-1)] = halves
    return rows.reshape(W, 8 * num, 8)


def _matrix_form(d: Decoded, opcode: str):
    """(num, trans, state space or None for generic, address (base slot, offset)) of ldmatrix / stmatrix
    .sync.aligned.m8n8.x{1,2,4}{.trans}{.shared{::cta}}.b16 (the sm_90 forms; .m16n16 / .m8n16 / .m16n8 and .b8
    are sm_100a's)."""
    mods = d.mods
    if not (mods.flag(".sync") and mods.flag(".aligned")):
        raise isa.Unsupported(f"{opcode} needs .sync.aligned")
    shape = mods.take(".m8n8", ".m16n16", ".m8n16", ".m16n8")
    num = {".x1": 1, ".x2": 2, ".x4": 4}.get(mods.take(".x1", ".x2", ".x4"))
    trans = mods.flag(".trans")
    space = mods.take(*SPACES)
    t = mods.type()
    mods.done()
    if shape != ".m8n8" or t != ".b16" or num is None:
        raise isa.Unsupported(f"{opcode}{shape or ''}{t} (m8n8 .b16 x1 / x2 / x4 only: the sm_90 forms)")
    if space is not None and SPACES[space] != ".shared":
        raise isa.Unsupported(f"{opcode} from {space}")
    _space, base, offset = d.addr(1 if opcode == "ldmatrix" else 0)
    if base is None:
        raise isa.Unsupported(f"{opcode} at a constant address (every lane gives its own row address)")
    # Generic addressing through a 32-bit register is a shared-memory address: ptxas compiles a generic ldmatrix /
    # stmatrix to LDSM / STSM on the low 32 bits of the address (those instructions address shared memory only, and
    # the generic shared window's low 32 bits are the shared offset), so the register's value is the offset. The CuTe
    # DSL emits this form (FlashAttention's CuTe-DSL Hopper epilogue: stmatrix [%r], no state space).
    shared = space is not None or d.prog.dtypes[base].itemsize == 4
    return num, trans, ".shared" if shared else None, base, np.uint64(offset & (2**64 - 1))


def _row_addresses(g, th, num: int, base: int, off):
    """The row-giving threads (lanes 0 .. 8 num - 1 of each warp: lane 8j + r gives row r of matrix j) and their
    addresses (the register plus the offset; a generic address or one in shared memory)."""
    rows_th = th[:, : 8 * num].reshape(-1)
    return rows_th, np.broadcast_to(np.asarray(g.R[base]).astype(np.uint64), (g.m.T,))[rows_th] + off


def _all_warps(g):
    th = _warps(g)
    return np.arange(g.m.T).reshape(-1, 32) if th is None else th


@isa.implements("ldmatrix")
def ldmatrix(d: Decoded):
    """ldmatrix: lane 8j + r gives the address of row r of matrix j (16 bytes); register j of lane l receives
    matrix j's row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 (.trans: the transposed matrix), as
    flashsim.layout.ldmatrix.load_rows maps it."""
    num, trans, sp, base, off = _matrix_form(d, "ldmatrix")
    dsts = [d.reg(x) for x in d.operands[0].items] if isinstance(d.operands[0], Vec) else [d.dst(0)]
    if len(dsts) != num:
        raise isa.Unsupported(f"{num} destinations expected")
    member = d.prog.const(FULL, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _all_warps(g)
        rows_th, addr = _row_addresses(g, th, num, base, off)
        raw = g.m.mem.load(sp, addr, 16, rows_th)  # (W * 8num, 16) bytes
        regs = load_rows(raw.view(np.uint16).reshape(th.shape[0], 8 * num, 8), trans=trans)  # (W, 32, num)
        _scatter(g, dsts, None if g.mask is None and _warps(g) is None else th, regs)

    return d.op(run)


@isa.implements("stmatrix")
def stmatrix(d: Decoded):
    """stmatrix (sm_90): the inverse of ldmatrix; lane 8j + r gives the address where row r of matrix j (its 16
    bytes, from register j of lanes 4r .. 4r + 3; .trans: column r) is stored."""
    num, trans, sp, base, off = _matrix_form(d, "stmatrix")
    srcs = _regs(d, 1, num)
    member = d.prog.const(FULL, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _all_warps(g)
        rows_th, addr = _row_addresses(g, th, num, base, off)
        rows = store_rows(_gather(g, srcs, None if g.mask is None and _warps(g) is None else th), trans)
        g.m.mem.store(sp, addr, rows.reshape(-1, 8).view(np.uint8).reshape(-1, 16), rows_th)
        g.m.progress += 1

    return d.op(run)


@isa.implements("movmatrix")
def movmatrix(d: Decoded):
    """movmatrix.sync.aligned.m8n8.trans.b16 d, a: the 8x8 matrix the warp holds in a (lane l: row l / 4, columns
    2 (l % 4) and 2 (l % 4) + 1) transposed, in the same layout in d."""
    mods = d.mods
    if not (mods.flag(".sync") and mods.flag(".aligned") and mods.flag(".m8n8") and mods.flag(".trans")):
        raise isa.Unsupported("movmatrix needs .sync.aligned.m8n8.trans")
    t = mods.type()
    mods.done()
    if t != ".b16":
        raise isa.Unsupported(f"movmatrix{t}")
    dst, a = d.dst(0), d.src(1, np.uint32)
    member = d.prog.const(FULL, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _warps(g)
        rows = store_rows(_gather(g, [a], th), trans=False)  # (W, 8, 8): the matrix
        _scatter(g, [dst], th, load_rows(rows, trans=True))

    return d.op(run)
