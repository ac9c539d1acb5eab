"""The 8-bit ldmatrix / stmatrix forms of sm_100a / sm_120a (PTX ISA 8.6+; refused on other archs, as ptxas 13.0
refuses them): ldmatrix.sync.aligned.m8n16.x{1,2,4}{.shared{::cta}}.b8x16.{b4x16_p64,b6x16_p32},
ldmatrix.sync.aligned.m16n16.x{1,2}.trans{.shared{::cta}}.{b8, b8x16.b4x16_p64, b8x16.b6x16_p32} and
stmatrix.sync.aligned.m16n8.x{1,2,4}.trans{.shared{::cta}}.b8. The register maps, the packed source formats and the
bytes the codes land in are flashsim.layout.ldmatrix's (b8_map, unpack_rows); each lane gives one 16-byte
row address, as the 16-bit forms of flashsim.ptx.semantics.matrix do, whose helpers these share."""

from __future__ import annotations

import numpy as np

from ...layout import ldmatrix as L
from .. import isa
from ..ir import Vec
from ..program import Decoded
from .data import SPACES
from .matrix import FULL, _all_warps, _gather, _regs, _row_addresses, _scatter, _warps

_RULE = "PTX ISA 8.6+: sm_100a, sm_101a, sm_120a (ptxas 13.0 refuses them on sm_90a and on plain sm_120)"
for _op, _shape in (("ldmatrix", ".m8n16"), ("ldmatrix", ".m16n16"), ("stmatrix", ".m16n8")):
    isa.requires(_op, _shape, archs=("sm_100", "sm_120"), source=_RULE)
for _op in ("ldmatrix", "stmatrix"):
    isa.requires(_op, ".b8", archs=("sm_100", "sm_120"), source=_RULE)
isa.requires("ldmatrix", ".b8x16", archs=("sm_100", "sm_120"), source=_RULE)
# stmatrix itself (its m8n8 .b16 forms: flashsim.ptx.semantics.matrix) is sm_90's: "Feature 'stmatrix' requires
# .target sm_90 or higher" (ptxas 13.0); registered here beside its other arch rules
isa.requires("stmatrix", archs=isa.since(90), source="PTX ISA: stmatrix requires sm_90 or higher (ptxas 13.0)")

_SRC_FORMATS = (".b4x16_p64", ".b6x16_p32")


def _form(d: Decoded, opcode: str):
    """(shape, num, source format, state space or None, address base slot, offset) of one of the forms above."""
    mods = d.mods
    if not (mods.flag(".sync") and mods.flag(".aligned")):
        raise isa.Unsupported(f"{opcode} needs .sync.aligned")
    shape = mods.take(".m8n16", ".m16n16", ".m16n8")
    num = {".x1": 1, ".x2": 2, ".x4": 4}.get(mods.take(".x1", ".x2", ".x4"))
    trans = mods.flag(".trans")
    space = mods.take(*SPACES)
    dst_fmt = mods.flag(".b8x16")
    src_fmt = mods.take(*_SRC_FORMATS)
    plain = mods.flag(".b8")
    mods.done()
    name = shape[1:] if shape else None
    spelled = f"{opcode}{shape or ''}"
    if name is None or num not in L.B8_NUMS[name]:
        raise isa.Unsupported(f"{spelled}: .x{num} (the ISA allows .x{' / .x'.join(map(str, L.B8_NUMS[name]))})")
    if trans != (name != "m8n16"):
        raise isa.Unsupported(f"{spelled} {'takes no' if trans else 'needs'} .trans")
    converts = dst_fmt and src_fmt is not None and not plain  # .b8x16.<source format>
    bytes_ = plain and not dst_fmt and src_fmt is None  # .b8
    if not (converts if name == "m8n16" else bytes_ if opcode == "stmatrix" else converts or bytes_):
        allowed = {"m8n16": ".b8x16.b4x16_p64 / .b8x16.b6x16_p32", "m16n8": ".b8"}.get(
            name, ".b8 / .b8x16.b4x16_p64 / .b8x16.b6x16_p32"
        )
        raise isa.Unsupported(f"{spelled} takes {allowed}")
    if space is not None and SPACES[space] != ".shared":
        raise isa.Unsupported(f"{opcode} from {space}")
    _space, base, offset = d.addr(1 if opcode == "ldmatrix" else 0)
    if base is None:
        raise isa.Unsupported(f"{opcode} at a constant address (every lane gives its own row address)")
    sp = ".shared" if space is not None else None
    return name, num, src_fmt or ".b8", sp, base, np.uint64(offset & (2**64 - 1))


@isa.implements_form("ldmatrix", ".m8n16")
@isa.implements_form("ldmatrix", ".m16n16")
def ldmatrix_b8(d: Decoded):
    shape, num, fmt, sp, base, off = _form(d, "ldmatrix")
    n_regs = num * (2 if shape == "m16n16" else 1)
    dsts = [d.reg(x) for x in d.operands[0].items] if isinstance(d.operands[0], Vec) else [d.dst(0)]
    if len(dsts) != n_regs:
        raise isa.Unsupported(f"ldmatrix.{shape}.x{num}: {n_regs} destination registers expected")
    lanes = L.row_lanes(shape, num)
    member = d.prog.const(FULL, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _all_warps(g)
        rows_th, addr = _row_addresses(g, th, lanes // 8, base, off)  # 8 rows a matrix
        raw = g.m.mem.load(sp, addr, 16, rows_th).reshape(th.shape[0], lanes, 16)
        regs = L.load_b8(raw, shape, num, fmt)  # (W, 32, registers)
        _scatter(g, dsts, None if g.mask is None and _warps(g) is None else th, regs)

    return d.op(run)


@isa.implements_form("stmatrix", ".m16n8")
def stmatrix_b8(d: Decoded):
    shape, num, _fmt, sp, base, off = _form(d, "stmatrix")
    srcs = _regs(d, 1, num)
    lanes = L.row_lanes(shape, num)
    member = d.prog.const(FULL, np.uint32)

    def run(g):
        if g.mask is not None and not g.converge(member):
            return
        th = _all_warps(g)
        rows_th, addr = _row_addresses(g, th, lanes // 8, base, off)  # 8 rows a matrix
        rows = L.store_b8(_gather(g, srcs, None if g.mask is None and _warps(g) is None else th), shape, num)
        g.m.mem.store(sp, addr, rows.reshape(-1, 16), rows_th)
        g.m.progress += 1

    return d.op(run)
