"""Floating-point arithmetic: add sub mul fma mad div rcp sqrt abs neg min max, setp and selp of floats.

Every rounding is flashsim.numerics' (ieee32 for binary32, the one implementation the emulator's kernel program
uses): no second copy of a rounding lives here. An unrounded ``mul`` / ``add`` / ``sub`` (no .rn / .rz / .rm / .rp)
is ptxas's to contract into a fused multiply-add: the program's contraction table (flashsim.ptx.contraction, read
from the SASS ptxas made of this PTX) says which pairs it fused; a fused pair runs as one fma of the product's
operands at the add, and the product alone is never rounded.
"""

from __future__ import annotations

import numpy as np

from ...numerics import ieee32
from .. import isa
from ..ir import Reg
from ..program import Decoded
from . import special
from .integer import setp_common

F = isa.FLOAT
_ROUNDED = (".rn", ".rz", ".rm", ".rp")


def _f32_args(g, slots):
    return [np.asarray(g.R[s]).astype(np.uint32, copy=False).view(np.float32) for s in slots]


def _bits(x):
    return np.asarray(x, np.float32).view(np.uint32)


def _float_type(d: Decoded):
    t = d.mods.type()
    if t not in (".f32", ".f64", ".f16", ".f16x2", ".bf16", ".bf16x2"):
        raise isa.Unsupported(f"type {t}")
    d.float_kind = {".f32": "f32", ".f64": "f64"}.get(t, "f16")
    return t


@isa.implements("add", "sub", "mul", family=F)
def add_sub_mul(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    ftz = mods.flag(".ftz")
    sat = mods.flag(".sat")
    t = _float_type(d)
    mods.done()
    op = d.ins.opcode
    if t == ".f32":
        if rnd not in (None, ".rn"):
            raise isa.Unsupported(f"{rnd} for .f32 (only .rn so far)")
        fn = {"add": ieee32.add, "sub": ieee32.sub, "mul": ieee32.mul}[op]
        dst, a, b = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32)
        if rnd is None and op != "mul" and d.key in d.prog.contraction:
            return _fused_add(d, a, b, ftz, sat)
        kept = d.prog.kept_operands(d.key, np.uint32) if rnd is None and op == "mul" else None

        def run(g):
            x, y = _f32_args(g, (a, b))
            r = fn(x, y, ftz)
            if sat:
                r = _saturate(r)
            g.write(dst, _bits(r))
            if kept is not None:  # a product ptxas fused into its add: the add reads its operands
                g.write(kept[0], g.R[a])
                g.write(kept[1], g.R[b])

        return d.op(run)
    if t == ".f64" and rnd in (None, ".rn") and not (ftz or sat):
        dst, a, b = d.dst(0), d.src(1, np.uint64), d.src(2, np.uint64)
        npf = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]

        def run(g):
            x, y = (np.asarray(g.R[s]).astype(np.uint64).view(np.float64) for s in (a, b))
            with np.errstate(all="ignore"):
                r = npf(x, y)
            g.write(dst, _canonical64(r))

        return d.op(run)
    raise isa.Unsupported(f"{op}{rnd or ''}{t}")


def _fused_add(d: Decoded, a: int, b: int, ftz: bool, sat: bool):
    """The add (or sub) of a contracted pair: one fma of the product's operands (kept when the mul ran) and the
    other addend, rounded once; ``sub`` negates the product or the addend, as FFMA's operand negation does."""
    product = d.prog.contraction[d.key]
    mul_dst = d.fn.body[product].operands[0].name
    first = isinstance(d.operands[1], Reg) and d.operands[1].name == mul_dst
    x, y = d.prog.kept_operands((d.fn.name, product), np.uint32)
    dst, c = d.dst(0), (b if first else a)
    negate_c = d.ins.opcode == "sub" and first
    negate_p = d.ins.opcode == "sub" and not first
    sign = np.uint32(0x80000000)

    def run(g):
        xv, yv, cv = (np.asarray(g.R[s]).astype(np.uint32, copy=False) for s in (x, y, c))
        if negate_c:
            cv = cv ^ sign
        if negate_p:
            xv = xv ^ sign
        r = ieee32.fma(xv.view(np.float32), yv.view(np.float32), cv.view(np.float32), ftz)
        if sat:
            r = _saturate(r)
        g.write(dst, _bits(r))

    return d.op(run)


def _canonical64(r):
    bits = np.asarray(r, np.float64).view(np.uint64)
    return np.where(np.isnan(r), np.uint64(0x7FFFFFFFFFFFFFFF), bits)


def _saturate(r):
    """.sat: clamp to [0, 1], NaN -> +0."""
    r = np.asarray(r, np.float32)
    return np.where(np.isnan(r), np.float32(0), np.clip(r, np.float32(0), np.float32(1)))


@isa.implements("fma", "mad", family=F)
def fma(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    ftz = mods.flag(".ftz")
    sat = mods.flag(".sat")
    t = _float_type(d)
    mods.done()
    if d.ins.opcode == "mad" and rnd is None and t == ".f32":
        rnd = ".rn"  # mad.f32 without rounding is fma.rn.f32 (PTX ISA: mad.f32 is the same as fma.f32 on sm_20+)
    if t != ".f32" or rnd != ".rn":
        raise isa.Unsupported(f"fma{rnd or ''}{t} (only .rn.f32 so far)")
    dst, a, b, c = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32)

    def run(g):
        x, y, z = _f32_args(g, (a, b, c))
        r = ieee32.fma(x, y, z, ftz)
        if sat:
            r = _saturate(r)
        g.write(dst, _bits(r))

    return d.op(run)


@isa.implements("div", family=F)
def div(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    approx = mods.take(".approx", ".full")
    ftz = mods.flag(".ftz")
    t = _float_type(d)
    mods.done()
    if t != ".f32" or approx is not None or rnd != ".rn":
        raise isa.Unsupported(f"div{approx or rnd or ''}{t} (only .rn.f32 so far)")
    dst, a, b = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32)

    def run(g):
        x, y = _f32_args(g, (a, b))
        g.write(dst, _bits(ieee32.div(x, y, ftz)))

    return d.op(run)


@isa.implements("rcp", family=F)
def rcp(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    approx = mods.flag(".approx")
    ftz = mods.flag(".ftz")
    t = _float_type(d)
    mods.done()
    dst, a = d.dst(0), d.src(1, np.uint32)
    if t != ".f32":
        raise isa.Unsupported(f"rcp{t}")
    if approx:
        return special.approx(d, "rcp", ftz, t)
    if rnd != ".rn":
        raise isa.Unsupported(f"rcp{rnd}{t}")
    one = np.float32(1.0)

    def run(g):
        (x,) = _f32_args(g, (a,))
        g.write(dst, _bits(ieee32.div(np.full(x.shape, one), x, ftz)))

    return d.op(run)


@isa.implements("abs", "neg", family=F)
def abs_neg(d: Decoded):
    mods = d.mods
    ftz = mods.flag(".ftz")
    t = _float_type(d)
    mods.done()
    if t != ".f32":
        raise isa.Unsupported(f"{d.ins.opcode}{t}")
    dst, a = d.dst(0), d.src(1, np.uint32)
    is_abs = d.ins.opcode == "abs"

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint32)
        if ftz:
            x = _bits(ieee32.flush_subnormals(x.view(np.float32)))
        g.write(dst, (x & np.uint32(0x7FFFFFFF)) if is_abs else (x ^ np.uint32(0x80000000)))

    return d.op(run)


@isa.implements("min", "max", family=F)
def min_max(d: Decoded):
    mods = d.mods
    ftz = mods.flag(".ftz")
    nan = mods.flag(".NaN")
    t = _float_type(d)
    mods.done()
    if t != ".f32" or nan:
        raise isa.Unsupported(f"{d.ins.opcode}{'.NaN' if nan else ''}{t} (only .f32 so far)")
    dst, a, b = d.dst(0), d.src(1, np.uint32), d.src(2, np.uint32)
    is_max = d.ins.opcode == "max"

    def run(g):
        x, y = _f32_args(g, (a, b))
        if ftz:
            x, y = ieee32.flush_subnormals(x), ieee32.flush_subnormals(y)
        if is_max:
            r = ieee32.fmax(x, y)
        else:  # min: the same total order reversed (-0 < +0), NaN operands ignored
            r = -ieee32.fmax(-x, -y)
            r = np.where(np.isnan(x) & np.isnan(y), np.float32(np.nan), r)
            r = _bits(r)
            r = np.where((r & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000), np.uint32(0x7FFFFFFF), r)
            g.write(dst, r)
            return
        g.write(dst, _bits(r))

    return d.op(run)


_FLOAT_COMPARE = {
    ".eq": (np.equal, False),
    ".ne": (np.not_equal, False),
    ".lt": (np.less, False),
    ".le": (np.less_equal, False),
    ".gt": (np.greater, False),
    ".ge": (np.greater_equal, False),
    ".equ": (np.equal, True),
    ".neu": (np.not_equal, True),
    ".ltu": (np.less, True),
    ".leu": (np.less_equal, True),
    ".gtu": (np.greater, True),
    ".geu": (np.greater_equal, True),
    ".num": (None, False),
    ".nan": (None, True),
}


@isa.implements("setp", family=F)
def setp_float(d: Decoded):
    mods = d.mods
    cmp = mods.take(*_FLOAT_COMPARE)
    ftz = mods.flag(".ftz")
    t = _float_type(d)
    if cmp is None or t not in (".f32", ".f64"):
        raise isa.Unsupported(f"setp{cmp or ''}{t}")
    fn, unordered = _FLOAT_COMPARE[cmp]
    ud, fd = (np.uint32, np.float32) if t == ".f32" else (np.uint64, np.float64)
    a, b = d.src(1, ud), d.src(2, ud)
    # ordered compares (.ne included) are false where an operand is NaN; unordered ones true

    def compare(g, a, b):
        x = np.asarray(g.R[a]).astype(ud).view(fd)
        y = np.asarray(g.R[b]).astype(ud).view(fd)
        if ftz and t == ".f32":
            x, y = ieee32.flush_subnormals(x), ieee32.flush_subnormals(y)
        either = np.isnan(x) | np.isnan(y)
        if fn is None:
            return either if unordered else ~either
        with np.errstate(invalid="ignore"):
            r = fn(x, y)
        return (r | either) if unordered else (r & ~either)

    run = setp_common(d, compare, a, b)
    mods.done()
    return d.op(run)
