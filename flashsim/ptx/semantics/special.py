"""The special-function unit: ex2.approx, rcp.approx (in floating.py with the other rcp forms), and the other
approximate functions, each the bits of a model of flashsim.numerics.sfu (tables captured on the GPU), never a libm
stand-in: a function without a model for the arch is UnsupportedInstruction."""

from __future__ import annotations

import numpy as np

from ...numerics import sfu
from .. import isa
from ..program import Decoded

F = isa.FLOAT


@isa.implements("ex2", family=F)
def ex2(d: Decoded):
    mods = d.mods
    if not mods.flag(".approx"):
        raise isa.Unsupported("ex2 needs .approx")
    ftz = mods.flag(".ftz")
    t = mods.type()
    mods.done()
    if t != ".f32" or not ftz:
        raise isa.Unsupported(f"ex2.approx{'.ftz' if ftz else ''}{t} (its SASS sequence is not modelled yet)")
    dst, a = d.dst(0), d.src(1, np.uint32)
    arch = d.prog.arch
    if sfu.load_tables(arch) is None:
        raise isa.Unsupported(f"no ex2 model for {arch} (run `flashsim calibrate` on that GPU)")

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint32).view(np.float32)
        g.write(dst, np.asarray(sfu.ex2(x, arch=arch)).view(np.uint32))

    return d.op(run)


def approx(d: Decoded, fn: str, ftz: bool, t: str):
    """The op of ``fn``.approx{.ftz}``t`` for opcodes whose other forms live elsewhere (rcp and sqrt: their IEEE
    forms are in floating.py, which hands the .approx ones here)."""
    if fn == "rcp" and t == ".f32" and ftz:
        dst, a = d.dst(0), d.src(1, np.uint32)
        arch = d.prog.arch

        def run(g):
            x = np.asarray(g.R[a]).astype(np.uint32).view(np.float32)
            g.write(dst, np.asarray(sfu.rcp(x, arch=arch)).view(np.uint32))

        return d.op(run)
    raise isa.Unsupported(f"{fn}.approx{'.ftz' if ftz else ''}{t} (no SFU model of it)")
