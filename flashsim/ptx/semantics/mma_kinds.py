"""sm_120a's mma.sync kinds with 4-, 6- and 8-bit inputs: ``kind::f8f6f4`` (m16n8k32, f32 / f16 accumulators) and the
block-scaled ``kind::mxf8f6f4.block_scale`` (m16n8k32, scale_vec::1X ue8m0), ``kind::mxf4.block_scale`` (m16n8k64,
2X ue8m0) and ``kind::mxf4nvf4.block_scale`` (m16n8k64, 2X / 4X ue8m0, 4X ue4m3), with the scale operands
``scale-a-data, {byte-id-a, thread-id-a}, scale-b-data, {byte-id-b, thread-id-b}``.

Registers through flashsim.layout (fragments' A8 / B8 byte containers, A4 / B4 nibbles, C maps; blockscale's
containers and selectors: the PTX ISA's formulas, checked against CuTe's SM120 atoms), arithmetic through
flashsim.numerics.tensorcore.blockscale (MMA-Sim's RTX Blackwell models, held to mmasim). Forms as the PTX ISA and
ptxas 13.0 take them: ``.scale_vec`` defaults to 1X for mxf8f6f4 and 2X for mxf4 and is required for mxf4nvf4;
selectors out of Table 37's range are refused when immediate (as ptxas refuses them) and, when registers, raise a
SimulationError naming the thread (undefined behaviour in the ISA), as do selectors that differ within a warp.
``scale_vec::4X`` with ``.ue8m0`` is PTX ISA 9.1's (ptxas 13.0, PTX ISA 9.0, refuses it); flashsim runs it. An arch
without the kinds (flashsim.arch: ``mma_kinds``; everything but sm_120) refuses them as ptxas refuses them below
sm_120a.
"""

from __future__ import annotations

import numpy as np

from ...arch import get_arch
from ...layout import blockscale as L
from ...layout import fragments as F
from ...numerics.tensorcore.blockscale import block_scale_unchecked
from ...numerics.tensorcore.types import F8F6F4_FORMATS, block_scale_form, kind_name
from .. import isa
from ..ir import Imm, Reg, Vec
from ..program import Decoded
from .matrix import _GATHER, FULL, _gather, _regs, _scatter, _warps

KINDS = (".kind::f8f6f4", ".kind::mxf8f6f4", ".kind::mxf4", ".kind::mxf4nvf4")
_ELEMS = {"." + f: f for f in F8F6F4_FORMATS}
_SCALES = {".ue8m0": "ue8m0", ".ue4m3": "ue4m3"}
_ACC = {".f32": np.float32, ".f16": np.float16}
_DEFAULT_SCALE_VEC = {"mxf8f6f4": 1, "mxf4": 2}  # mxf4nvf4 must say (PTX ISA, mma)
_SCATTER4 = {m.name: F._flat_tables(m, 1)[1] for m in (F.A4, F.B4)}
_SCATTER = {m.name: F._flat_tables(m, 1)[1] for m in (F.A8, F.B8, F.C_F32, F.C_F16)}


def _take_types(mods) -> list[str]:
    """Remove and return the type modifiers (d, a, b, c and the scale type) in order; the 4- and 6-bit and scale
    types are not register types, so they are not isa.TYPES: read by name here."""
    names = set(_ELEMS) | set(_SCALES) | set(_ACC)
    found = [m for m in mods.left if m in names]
    for m in found:
        mods.left.remove(m)
    return found


def _form(d: Decoded):
    """(kind, K, a format, b format, accumulator PTX type, scale_vec or None, scale format or None) of the
    instruction, or isa.Unsupported naming what is not a form of the PTX ISA / of the arch."""
    mods = d.mods
    if not (mods.flag(".sync") and mods.flag(".aligned")):
        raise isa.Unsupported("mma needs .sync.aligned")
    kind = kind_name(mods.prefixed(".kind::"))
    shape = mods.take(".m16n8k32", ".m16n8k64", ".m16n8k16", ".m16n8k8", ".m8n8k4")
    if not (mods.flag(".row") and mods.flag(".col")):
        raise isa.Unsupported("mma needs .row.col")
    scaled = mods.flag(".block_scale")
    sv = mods.prefixed(".scale_vec::")
    types = _take_types(mods)
    mods.done()
    spec = get_arch(d.prog.arch)
    if not spec.mma_kinds:
        raise isa.Unsupported(f"mma .kind::{kind} requires sm_120a ({d.prog.arch} has none)")
    K = spec.mma_kind(kind).k
    if shape != f".m16n8k{K}":
        raise isa.Unsupported(f"mma .kind::{kind} is m16n8k{K}, not {shape}")
    if kind == "f8f6f4":
        if scaled or sv:
            raise isa.Unsupported("mma .kind::f8f6f4 has no .block_scale / .scale_vec")
        if len(types) != 4 or types[0] != types[3] or types[0] not in _ACC or not all(t in _ELEMS for t in types[1:3]):
            raise isa.Unsupported(f"mma .kind::f8f6f4 with types {''.join(types)} (.dtype.f8f6f4type.f8f6f4type.ctype)")
        return kind, K, _ELEMS[types[1]], _ELEMS[types[2]], types[0], None, None
    if not scaled:
        raise isa.Unsupported(f"mma .kind::{kind} needs .block_scale")
    if sv is None and kind not in _DEFAULT_SCALE_VEC:
        raise isa.Unsupported(f"mma .kind::{kind} needs .scale_vec::2X or ::4X")
    n = _DEFAULT_SCALE_VEC[kind] if sv is None else sv.removeprefix(".scale_vec::")
    if len(types) != 5 or types[0] != ".f32" or types[3] != ".f32" or types[4] not in _SCALES:
        raise isa.Unsupported(f"mma .kind::{kind}.block_scale with types {''.join(types)} (.f32.atype.btype.f32.stype)")
    if types[1] not in _ELEMS or types[2] not in _ELEMS:
        raise isa.Unsupported(f"mma .kind::{kind} with {types[1]} x {types[2]}")
    try:
        _, n = block_scale_form(kind, n, _ELEMS[types[1]], _ELEMS[types[2]], _SCALES[types[4]])
    except ValueError as exc:
        raise isa.Unsupported(f"mma {exc}") from None
    return kind, K, _ELEMS[types[1]], _ELEMS[types[2]], ".f32", n, _SCALES[types[4]]


def _scale_operands(d: Decoded, n: int):
    """Slots of scale-a-data / scale-b-data and the four selectors, each an int (immediate, checked against Table
    37 as ptxas checks it) or a register slot (read at run time)."""
    data, selectors = [], []
    for i in (4, 6):
        op = d.operands[i]
        items = op.items if isinstance(op, Vec) else (op,)
        if len(items) != 1:
            raise isa.Unsupported(f"operand {i}: one .b32 scale register expected, got {len(items)}")
        data.append(d.value(items[0], np.uint32))
    for i in (5, 7):
        op = d.operands[i]
        if not isinstance(op, Vec) or len(op.items) != 2:
            raise isa.Unsupported(f"operand {i}: the selector pair {{byte-id, thread-id}} expected")
        for item in op.items:
            if isinstance(item, Imm):
                selectors.append(int(item.value))
            elif isinstance(item, Reg):
                selectors.append(("reg", d.value(item, np.uint16)))
            else:
                raise isa.Unsupported(f"operand {i}: a selector must be an immediate or a .u16 register")
    immediate = [s for s in selectors if isinstance(s, int)]
    if len(immediate) == 4:
        try:
            L.check_selectors(n, *selectors)
        except ValueError as exc:
            raise isa.Unsupported(str(exc)) from None
    return data, selectors


def _selector_values(g, th, selectors, n: int):
    """The four selectors per warp, (4, W) int arrays: immediates broadcast, registers read from each warp's lanes,
    which must agree and lie in Table 37's range (a SimulationError naming the first thread otherwise)."""
    W = th.shape[0]
    out = np.empty((4, W), np.int64)
    for s, sel in enumerate(selectors):
        if isinstance(sel, int):
            out[s] = sel
            continue
        v = np.broadcast_to(np.asarray(g.R[sel[1]]), (g.m.T,))[th].astype(np.int64)  # (W, 32)
        bad = np.argwhere(v != v[:, :1])
        if bad.size:
            raise g.m.error("mma block_scale: the lanes of a warp give different selectors", int(th[tuple(bad[0])]))
        out[s] = v[:, 0]
    names = ("byte-id-a", "thread-id-a", "byte-id-b", "thread-id-b")
    for s, valid in enumerate(L.SELECTORS[n]):
        bad = np.flatnonzero(~np.isin(out[s], valid))
        if bad.size:
            raise g.m.error(
                f"mma block_scale: {names[s]} = {int(out[s][bad[0]])} with scale_vec::{n}X (valid: "
                f"{', '.join(map(str, valid))}; PTX ISA Table 37: undefined behaviour)",
                int(th[bad[0], 0]),
            )
    return out


def _tile8(words, fmap):
    """(W, 32, regs) uint32 -> (W, rows, cols) uint8 of a one-byte-per-element map."""
    elems = np.ascontiguousarray(words).view(np.uint8).reshape(words.shape[0], -1)
    return np.take(elems, _SCATTER[fmap.name], axis=1)


def _tile4(words, fmap):
    """(W, 32, regs) uint32 -> (W, rows, cols) uint8 4-bit codes of a nibble-per-element map."""
    elems = F.unpack4(np.ascontiguousarray(words)).reshape(words.shape[0], -1)
    return np.take(elems, _SCATTER4[fmap.name], axis=1)


def build(d: Decoded):
    kind, K, af, bf, acc, n, sf = _form(d)
    four = K == 64
    amap, bmap = (F.A4, F.B4) if four else (F.A8, F.B8)
    cmap = F.C_F16 if acc == ".f16" else F.C_F32
    d_slots = [d.reg(x) for x in d.operands[0].items] if isinstance(d.operands[0], Vec) else []
    if len(d_slots) != cmap.regs:
        raise isa.Unsupported(f"{cmap.regs} destination registers expected")
    a_slots, b_slots, c_slots = _regs(d, 1, amap.regs), _regs(d, 2, bmap.regs), _regs(d, 3, cmap.regs)
    scaled = n is not None
    if scaled:
        data, selectors = _scale_operands(d, n)
    elif len(d.operands) != 4:
        raise isa.Unsupported("mma .kind::f8f6f4 takes d, a, b, c")
    arch = d.prog.arch
    member = d.prog.const(FULL, np.uint32)
    c_dt = np.dtype(_ACC[acc])
    c_unit = np.dtype(np.uint16 if acc == ".f16" else np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _warps(g)
        if four:
            a = _tile4(_gather(g, a_slots, th), amap)
            b = _tile4(_gather(g, b_slots, th), bmap)
        else:
            a = L.from_container(np, _tile8(_gather(g, a_slots, th), amap), af)
            b = L.from_container(np, _tile8(_gather(g, b_slots, th), bmap), bf)
        c = _tile_c(_gather(g, c_slots, th), cmap, c_dt)
        sa = sb = None
        if scaled:
            words = _gather(g, data, th)  # (W, 32, 2)
            all_th = np.arange(g.m.T).reshape(-1, 32) if th is None else th
            sel = _selector_values(g, all_th, selectors, n)
            sa = L.scale_codes(L.select_scales(words[..., 0], "a", n, sel[0], sel[1]), sf)
            sb = L.scale_codes(L.select_scales(words[..., 1], "b", n, sel[2], sel[3]), sf)
        out = block_scale_unchecked(a, b, c, sa, sb, kind=kind, a_format=af, b_format=bf, scale_format=sf, arch=arch)
        vals = np.take(out.view(c_unit).reshape(out.shape[0], -1), _GATHER[cmap.name], axis=1)
        _scatter(g, d_slots, th, np.ascontiguousarray(vals).view(np.uint32))

    return d.op(run)


def _tile_c(words, cmap, dtype):
    """(W, 32, regs) uint32 accumulator fragments -> (W, 16, 8) tiles of ``dtype`` (f32 or f16)."""
    unit = np.uint32 if cmap.per_reg == 1 else np.uint16
    elems = np.ascontiguousarray(words).view(unit).reshape(words.shape[0], -1)
    return np.take(elems, _SCATTER[cmap.name], axis=1).view(dtype)


# ptxas 13.0 accepts mma .kind::* on sm_120a alone (it refuses sm_90a, sm_100a and plain sm_120)
_KIND_RULE = "requires sm_120a: ptxas 13.0 accepts mma.sync .kind:: forms there only"
for _kind in KINDS:
    isa.implements_form("mma", _kind)(build)
    isa.requires("mma", _kind, archs=("sm_120",), source=_KIND_RULE)
