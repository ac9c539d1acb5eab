"""The special-function unit's approximate instructions: ex2, rsqrt, lg2, sin, cos, tanh (.approx), and the .approx
forms of rcp and sqrt (floating.py keeps their IEEE forms and hands these here). Each is the bits of a model of
flashsim.numerics.sfu / sfu_approx (measured on the GPU, one model shared with the rest of flashsim), never a libm
stand-in: a form without a model for the program's arch is UnsupportedInstruction saying why (no tables for the
arch, or the hypotheses the GPU refuted).

Forms (PTX ISA, "Floating-Point Instructions: ex2 / rcp / rsqrt / sqrt / lg2 / sin / cos / tanh" and "Half Precision
Floating-Point Instructions: ex2 / tanh"): ``ex2.approx{.ftz}.f32``, ``ex2.approx.{f16,f16x2}``,
``ex2.approx.ftz.{bf16,bf16x2}``, ``{rcp,rsqrt,sqrt,lg2,sin,cos}.approx{.ftz}.f32``, ``tanh.approx.{f32,f16,f16x2,
bf16,bf16x2}``. The .f64 forms (rcp.approx.ftz.f64, rsqrt.approx.f64) are not modelled.
"""

from __future__ import annotations

import numpy as np

from ...numerics import sfu_approx
from ...numerics.sfu_folding import folded
from .. import isa
from ..constants import known_bits
from ..program import Decoded
from ..vectorize import ELEMENTWISE

F = isa.FLOAT
_F32_OPCODES = ("rsqrt", "lg2", "sin", "cos")


def _form_op(d: Decoded, form: str):
    """The op applying ``form``'s model to operand 1, written to operand 0 (16-bit forms on 16-bit registers)."""
    try:
        model = sfu_approx.model_of(form, d.prog.arch)
    except sfu_approx.ModelUnavailable as exc:
        raise isa.Unsupported(str(exc)) from None
    width = sfu_approx.FORMS[form].width
    dtype = np.uint16 if width == 16 else np.uint32
    if form.endswith((".f32", ".f16")):
        d.float_kind = form.rsplit(".", 1)[1]  # literal operands are rounded to the operand type as ptxas does
    dst, a = d.dst(0), d.src(1, dtype)
    known = known_bits(d.prog.definitions(d.fn), d.operands[1]) if width == 32 else None
    value = folded(form, known) if known is not None else None
    if value is not None:  # ptxas evaluated it at compile time (flashsim.numerics.sfu_folding): no MUFU runs
        const = d.prog.const(value, dtype)

        def run_folded(g):
            g.write(dst, g.R[const])

        return d.op(run_folded)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint32)
        g.write(dst, np.asarray(model(x)).astype(dtype))

    # lane-wise, and the model is one object per form and arch, so that the unrolled softmax's ex2's stack
    return d.op(run, info=ELEMENTWISE if dst is not None else None)


def _name(fn: str, ftz: bool, t: str) -> str:
    return f"{fn}.approx{'.ftz' if ftz else ''}{t}"


@isa.implements("ex2", family=F)
def ex2(d: Decoded):
    mods = d.mods
    if not mods.flag(".approx"):
        raise isa.Unsupported("ex2 needs .approx")
    ftz = mods.flag(".ftz")
    t = mods.type()
    mods.done()
    if t in (".bf16", ".bf16x2") and not ftz:
        raise isa.Unsupported(f"ex2.approx{t} (the PTX ISA defines only ex2.approx.ftz{t})")
    if t in (".f16", ".f16x2") and ftz:
        raise isa.Unsupported(f"ex2.approx.ftz{t} (the PTX ISA defines only ex2.approx{t})")
    return approx(d, "ex2", ftz, t)


@isa.implements(*_F32_OPCODES, family=F)
def unary_f32(d: Decoded):
    mods = d.mods
    if not mods.flag(".approx"):
        raise isa.Unsupported(f"{d.ins.opcode} needs .approx")
    ftz = mods.flag(".ftz")
    t = mods.type()
    mods.done()
    return approx(d, d.ins.opcode, ftz, t)


@isa.implements("tanh", family=F)
def tanh(d: Decoded):
    mods = d.mods
    if not mods.flag(".approx"):
        raise isa.Unsupported("tanh needs .approx")
    t = mods.type()
    mods.done()
    return approx(d, "tanh", False, t)


def approx(d: Decoded, fn: str, ftz: bool, t: str):
    """The op of ``fn``.approx{.ftz}``t`` (also for opcodes whose other forms live elsewhere: rcp and sqrt)."""
    form = _name(fn, ftz, t)
    if form not in sfu_approx.FORMS:
        raise isa.Unsupported(f"{form} (no SFU model of it)")
    return _form_op(d, form)
