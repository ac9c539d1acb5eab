"""Floating-point arithmetic: add sub mul fma mad div rcp sqrt abs neg min max copysign testp, setp and set of
floats, for .f32 / .f64 / .f16 / .f16x2 / .bf16 / .bf16x2 (PTX ISA, "Floating-Point Instructions" and "Half
Precision Floating-Point Instructions"), and the sm_100+ forms (refused below sm_100, as ptxas refuses them): .f32x2
add / sub / mul / fma (two f32 lanes of a .b64 register), three-input min / max.f32, and the mixed-precision
add / sub / fma .f32.f16 / .f32.bf16 (PTX ISA 8.6+, "Mixed Precision Floating-Point Instructions").

Every rounding is flashsim.numerics' (numerics.ieee: one rounding of the exact result in the named direction;
binary32 to nearest through numerics.ieee32, the kernel's own): no second copy of a rounding lives here. Packed
.f16x2 / .bf16x2 registers run lane-wise (bits 0-15 and 16-31). .ftz replaces subnormal inputs by zeros of their
sign, and results that are tiny before rounding (the H200's rule, numerics.rounding.round_magnitude: a product
just below the smallest normal that rounds up to it is flushed too); .sat clamps to [+0, 1] with NaN -> +0; .relu
makes a negative result +0 and a NaN the canonical NaN. NaN results are numerics.ieee.nan_result's: canonical for
f32 / f16 / bf16 (0x7FFFFFFF, 0x7FFF); for f64 the preferred NaN operand, quieted, or 0xFFF8000000000000.

An unrounded ``mul`` / ``add`` / ``sub`` (no .rn / .rz / .rm / .rp) of any type is ptxas's to contract into a fused
multiply-add: the program's contraction table (flashsim.ptx.contraction) says which pairs it fused; a fused pair
runs as one fma (to nearest) of the product's operands at the add, the product never rounded; unfused, each rounds
to nearest even.

What ptxas makes of the forms the ISA leaves to the implementation (read from nvdisasm of sm_90 cubins; the
silicon probes of flashsim.ptx.probes.floating pin each):
* abs / neg are FADD / HADD2 / HFMA2 / DADD with a -0 addend: the exact |a| or -a, .ftz flushed; a NaN is the
  adder's NaN result (canonical; DADD: a itself quieted, its sign untouched by the |.| or - of the operand).
* div.approx.f32 is MUFU.RCP of the divisor and an FMUL; the non-.ftz form first scales a divisor below 2^-126
  (and the dividend) by 2^24. div.full.f32 is the same with, in addition, both scaled by 1/4 for a divisor above
  2^126 (``_div_sass``). MUFU.RCP is flashsim.numerics.sfu.rcp (the model of rcp.approx.ftz.f32).
* Literals: ptxas rejects literals in half-precision instructions and integer literals in float ones; a 0f
  literal in an .f64 operand is its 32 bits zero-extended (not converted): ``_operand``.
"""

from __future__ import annotations

import functools

import numpy as np

from ...numerics import ieee, ieee32, sfu
from ...numerics.formats import BF16, F16, F32, F64
from .. import isa
from ..ir import Imm, Pair, Reg
from ..program import Decoded
from ..vectorize import ELEMENTWISE
from . import special
from .integer import _COMPARE, BOOL_OPS, _pred_src, _set_dests, setp_common

F = isa.FLOAT
_ROUNDED = (".rn", ".rz", ".rm", ".rp")
MODE = {".rn": "rne", ".rz": "rz", ".rm": "rm", ".rp": "rp"}
FORMAT = {".f32": F32, ".f64": F64, ".f16": F16, ".bf16": BF16, ".f16x2": F16, ".bf16x2": BF16, ".f32x2": F32}
PACKED = (".f16x2", ".bf16x2")
HALF = (".f16", ".bf16", ".f16x2", ".bf16x2")
CONTAINER = {".f32": np.uint32, ".f64": np.uint64, ".f16": np.uint16, ".bf16": np.uint16}
CONTAINER.update({".f16x2": np.uint32, ".bf16x2": np.uint32, ".f32x2": np.uint64})
_LOW16 = np.uint32(0xFFFF)
# packed type -> (container, width of one lane): lane 0 in the low bits
_LANES = {".f16x2": (np.uint32, 16), ".bf16x2": (np.uint32, 16), ".f32x2": (np.uint64, 32)}


def _float_type(d: Decoded, allowed=tuple(FORMAT)):
    t = d.mods.type()
    if t not in allowed:
        raise isa.Unsupported(f"type {t}")
    d.float_kind = {".f32": "f32", ".f32x2": "f32", ".f64": "f64"}.get(t, "f16")
    return t


# The forms sm_100 introduced (.f32x2 arithmetic, three-input min / max, the mixed-precision .f32.f16 / .f32.bf16
# forms): ptxas 13.0 refuses them below sm_100 ("Feature ... requires .target sm_100 or higher"). The .f32x2 and
# mixed forms are refused by the decoder (their modifiers name them); the three-input min / max by its builder.
_SM100_RULE = "PTX ISA 8.6+, ptxas 13.0: requires .target sm_100 or higher"
for _op in ("add", "sub", "mul", "fma"):
    isa.requires(_op, ".f32x2", archs=isa.since(100), source=_SM100_RULE)
for _op in ("add", "sub", "fma"):
    for _half in (".f16", ".bf16"):
        isa.requires(_op, ".f32", _half, archs=isa.since(100), source=_SM100_RULE)
for _op in ("min", "max"):
    isa.requires(_op, name="three inputs", archs=isa.since(100), source=_SM100_RULE)


def _operand(d: Decoded, i: int, t: str) -> int:
    """The slot of source operand ``i`` of float type ``t``, with the literal rules ptxas applies (module
    docstring): an f32 operand takes 0f bits or a double literal rounded to nearest; an f64 operand a double
    literal, or a 0f literal's 32 bits zero-extended; half-precision operands and integer literals none."""
    op = d.operands[i]
    if isinstance(op, Imm):
        if op.kind in ("int", "uint") or t not in (".f32", ".f64"):
            raise isa.Unsupported(f"the literal {op.text} for a {t} operand (ptxas rejects it)")
        if t == ".f64" and op.kind == "f32":
            return d.prog.const(op.value, np.uint64)
    return d.src(i, CONTAINER[t])


def _read(g, slot: int, t: str):
    return np.asarray(g.R[slot]).astype(CONTAINER[t], copy=False)


def lanewise(fn, t: str, *xs):
    """``fn`` applied to the values of type ``t`` in ``xs``: for .f16x2 / .bf16x2 / .f32x2 to both lanes at once
    (stacked on a leading axis), the results packed back (lane 0 from the low bits: PTX ISA, "fA[0] = a[0:31]")."""
    if t not in _LANES:
        return fn(*xs)
    ud, width = _LANES[t]
    low, shift = ud((1 << width) - 1), ud(width)
    xs = np.broadcast_arrays(*(np.asarray(x).astype(ud, copy=False) for x in xs))  # the lanes on a new leading axis
    parts = [np.stack((x & low, x >> shift)) for x in xs]
    r = np.asarray(fn(*parts)).astype(ud)
    return r[0] | (r[1] << shift)


def result_modifiers(r, f, ftz: bool, sat: bool = False, relu: bool = False):
    """The result modifiers in PTX's order: flush, then .sat or .relu. The flush here is that of a subnormal
    result computed exactly (a widening, an abs); a rounded result is flushed by its numerics.ieee function
    (``ftz=``), before rounding, which a flush of the rounded result cannot express."""
    if ftz:
        r = ieee.flush_subnormal(r, f)
    if not (sat or relu):
        return r
    r = np.asarray(r).astype(np.uint64)
    sign = np.uint64(f.sign_mask)
    nan = ieee.unpack(r, f).nan
    if sat:  # [+0, 1]: NaN and every negative value (-0 too) -> +0, above one -> one
        one = np.uint64(f.bias << f.frac_bits)
        r = np.where(nan | ((r & sign) != 0), np.uint64(0), np.minimum(r, one))
    if relu:
        r = np.where(nan, np.uint64(f.canonical_nan), np.where((r & sign) != 0, np.uint64(0), r))
    return r.astype(f.uint)


# The numerics.ieee roundings that apply .ftz themselves (a subnormal operand read as zero, a result never
# subnormal): around them the flushes of the inputs and of the result change nothing, and are not done again.
_APPLY_FTZ = frozenset((ieee.add, ieee.sub, ieee.mul, ieee.fma, ieee.div, ieee.rcp, ieee.sqrt))


def _compute(fn, f, mode: str, ftz: bool, sat: bool, relu: bool, *ys):
    """fn(ys, f, mode, ftz=) with the input flush and the result modifiers (one lane of packed types)."""
    if ftz and (fn in _APPLY_FTZ or getattr(fn, "applies_ftz", False)):
        r = fn(*ys, f, mode, ftz=True)
        return result_modifiers(r, f, False, sat, relu) if (sat or relu) else r
    if ftz:
        ys = [ieee.flush_subnormal(y, f) for y in ys]
    return result_modifiers(fn(*ys, f, mode, ftz=ftz), f, ftz and not getattr(fn, "selects", False), sat, relu)


def _apply(fn, t: str, f, mode: str, ftz: bool, sat: bool, relu: bool, *xs):
    """fn(xs, f, mode, ftz=) with the input flush and the result modifiers, lane-wise (packed halves apart)."""

    def compute(*ys):
        return _compute(fn, f, mode, ftz, sat, relu, *ys)

    return lanewise(compute, t, *xs)


def _elementwise_run(dst: int, srcs, t: str, fn, f, mode: str, ftz: bool, sat: bool, relu: bool):
    """``run`` of a lane-wise arithmetic op whose closure holds its register slots as plain ints and, apart from
    them, only values that two ops of the same kind share (fn a module-level numerics function): what
    flashsim.ptx.vectorize needs to run many such ops as one stacked call."""
    if len(srcs) == 1:
        (a,) = srcs

        def run(g):
            g.write(dst, _apply(fn, t, f, mode, ftz, sat, relu, _read(g, a, t)))

    elif len(srcs) == 2:
        a, b = srcs

        def run(g):
            g.write(dst, _apply(fn, t, f, mode, ftz, sat, relu, _read(g, a, t), _read(g, b, t)))

    else:
        a, b, c = srcs

        def run(g):
            g.write(dst, _apply(fn, t, f, mode, ftz, sat, relu, _read(g, a, t), _read(g, b, t), _read(g, c, t)))

    if len(srcs) == 2 and t == ".f32" and mode == "rne" and not (sat or relu):
        scan = _chain_fn(_CHAINS.get(fn) or getattr(fn, "chain", None), ftz)
        if scan is not None:  # a chain of such ops (a row sum, a row max) runs at once (flashsim.ptx.vectorize)
            run.chain = (dst, tuple(srcs), scan)
    return run


@functools.cache
def _chain_fn(kind, ftz: bool):
    """The numerics of a dependent chain of one f32 form (``kind``: "add", "fmax"; None: none), as
    flashsim.ptx.vectorize runs it: x (n, ...) float32, the chain's first two operands then the next one of each
    step -> the n - 1 results (numerics.ieee32.add_chain / fmax_chain, each held to its steps)."""
    if kind == "add":
        return functools.partial(ieee32.add_chain, ftz=ftz)
    if kind == "fmax":
        return functools.partial(ieee32.fmax_chain, ftz=ftz)
    return None


_CHAINS = {ieee.add: "add"}  # binary32 add to nearest: ieee.add's rule is ieee32.add's, whose chain add_chain is


def _arith(d: Decoded, t: str, fn, mode: str, srcs, ftz: bool, sat=False, relu=False):
    """The op that writes fn(inputs, f, mode, ftz=) of type ``t`` rounded in ``mode``, with .ftz / .sat / .relu;
    lane-wise (flashsim.ptx.vectorize.ELEMENTWISE) where it has a destination and one to three sources."""
    f, dst = FORMAT[t], d.dst(0)
    if dst is not None and 1 <= len(srcs) <= 3:
        return d.op(_elementwise_run(dst, srcs, t, fn, f, mode, ftz, sat, relu), info=ELEMENTWISE)

    def compute(*xs):
        return _compute(fn, f, mode, ftz, sat, relu, *xs)

    def run(g):
        g.write(dst, lanewise(compute, t, *(_read(g, s, t) for s in srcs)))

    return d.op(run)


def _check_mods(t: str, rnd, ftz: bool, sat: bool, relu: bool = False, *, directed: bool):
    """The ISA's modifier rules per type: .f64 takes no .ftz / .sat; .f32x2 no .sat; half types only .rn, bf16 no
    .ftz / .sat."""
    if t == ".f64" and (ftz or sat or relu):
        raise isa.Unsupported(".ftz / .sat / .relu on .f64")
    if t == ".f32x2" and sat:
        raise isa.Unsupported(".sat on .f32x2 (ptxas: illegal modifier)")
    if t in HALF and rnd not in (None, ".rn"):
        raise isa.Unsupported(f"{rnd} on {t} (only .rn)")
    if t in (".bf16", ".bf16x2") and (ftz or sat):
        raise isa.Unsupported(f".ftz / .sat on {t}")
    if relu and t not in HALF:
        raise isa.Unsupported(f".relu on {t}")
    if not directed and rnd not in (None, ".rn"):
        raise isa.Unsupported(f"{rnd} here")


@isa.implements("add", "sub", "mul", family=F)
def add_sub_mul(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    ftz = mods.flag(".ftz")
    sat = mods.flag(".sat")
    op = d.ins.opcode
    if _is_mixed(mods) and op != "mul":
        return _mixed(d, rnd, ftz, sat)
    t = _float_type(d)
    mods.done()
    _check_mods(t, rnd, ftz, sat, directed=True)
    a, b = _operand(d, 1, t), _operand(d, 2, t)
    if rnd is None and op != "mul" and d.key in d.prog.contraction:
        return _fused_add(d, t, a, b, ftz, sat)
    kept = d.prog.kept_operands(d.key, CONTAINER[t]) if rnd is None and op == "mul" else None
    fn = {"add": ieee.add, "sub": ieee.sub, "mul": ieee.mul}[op]
    dst = d.dst(0)
    if kept is not None and dst is not None:
        # a product ptxas fused into its add: the add reads its operands (.f32x2: never a candidate). The two kept
        # slots are this op's registers (written here, read by the add), so that it stays lane-wise: the unrolled
        # softmax's products and their fused adds stack (flashsim.ptx.vectorize) like any other
        d.touched.update(kept)
        d.written.update(kept)
        return d.op(_kept_product_run(dst, a, b, kept, t, fn, FORMAT[t], MODE[".rn"], ftz, sat), info=ELEMENTWISE)
    return _arith(d, t, fn, MODE[rnd or ".rn"], (a, b), ftz, sat)


def _kept_product_run(dst: int, a: int, b: int, kept: tuple, t: str, fn, f, mode: str, ftz: bool, sat: bool):
    """``run`` of a product whose operands a fused add reads: the product, and its operands as they were before it
    wrote (its destination may be one of them) into the kept slots."""
    k0, k1 = kept

    def run(g):
        x, y = g.R[a], g.R[b]
        g.write(dst, _apply(fn, t, f, mode, ftz, sat, False, _read(g, a, t), _read(g, b, t)))
        g.write(k0, x)
        g.write(k1, y)

    return run


def _fused_add(d: Decoded, t: str, a: int, b: int, ftz: bool, sat: bool):
    """The add (or sub) of a contracted pair: one fma of the product's operands (kept when the mul ran) and the
    other addend, rounded once to nearest; ``sub`` negates the product or the addend, as the FMA's operand negation
    does (lane-wise for packed types)."""
    product = d.prog.contraction[d.key]
    mul_dst = d.fn.body[product].operands[0].name
    first = isinstance(d.operands[1], Reg) and d.operands[1].name == mul_dst
    x, y = d.prog.kept_operands((d.fn.name, product), CONTAINER[t])
    d.touched.update((x, y))  # read here, written by the product (its registers too: the order between them)
    c = b if first else a
    negate_c = d.ins.opcode == "sub" and first
    negate_p = d.ins.opcode == "sub" and not first
    return _arith(d, t, _fused_fn(negate_p, negate_c, FORMAT[t].sign_mask), "rne", (x, y, c), ftz, sat)


@functools.cache
def _fused_fn(negate_p: bool, negate_c: bool, sign_mask: int):
    """The numerics of a fused add: fma of the product's operands and the addend, the product or the addend negated
    by the FMA's operand negation. One function per form, so that the fused adds of a block stack."""
    sign = np.uint64(sign_mask)

    def fused(xv, yv, cv, f, mode, ftz=False):
        xv, cv = np.asarray(xv).astype(np.uint64), np.asarray(cv).astype(np.uint64)
        return ieee.fma(xv ^ sign if negate_p else xv, yv, cv ^ sign if negate_c else cv, f, mode, ftz)

    fused.applies_ftz = True  # ieee.fma's .ftz rule
    return fused


_MIXED_TYPES = ((".f32", ".f16"), (".f32", ".bf16"))


def _is_mixed(mods: isa.Mods) -> bool:
    """Whether the instruction is a mixed-precision form (``.f32.f16`` / ``.f32.bf16``: an f32 result)."""
    return tuple(m for m in mods.left if m in isa.TYPES) in _MIXED_TYPES


def _mixed_fn(op: str, half: str):
    """The numerics of ``op{.rnd}.f32{half}``: the half-precision operands widened to f32 (exact: every f16 / bf16
    value, subnormals included, is an f32 normal or zero), then the f32 operation rounded once in ``mode`` (PTX ISA,
    "Mixed Precision Floating-Point Instructions"). One function per form, built once, so that ops of one form
    share it (flashsim.ptx.vectorize groups them)."""
    src = FORMAT[half]

    def wide(x):
        return ieee.convert(np.asarray(x).astype(np.uint64) & np.uint64(0xFFFF), src, F32)

    if op == "fma":

        def fused(a, b, c, f, mode, ftz=False):
            return ieee.fma(wide(a), wide(b), c, f, mode)

        return fused
    arith = ieee.add if op == "add" else ieee.sub

    def add_sub(a, c, f, mode, ftz=False):
        return arith(wide(a), c, f, mode)

    return add_sub


_MIXED = {(op, h): _mixed_fn(op, h) for op in ("add", "sub", "fma") for _, h in _MIXED_TYPES}


def _mixed(d: Decoded, rnd, ftz: bool, sat: bool):
    """add{.rnd}{.sat}.f32.{f16,bf16} d, a, c / sub likewise / fma.rnd{.sat}.f32.{f16,bf16} d, a, b, c (sm_100+):
    a (and b) half precision, c and d f32. No .ftz (ptxas: illegal modifier); add / sub without a rounding
    modifier round to nearest even, and are never fused with a product (flashsim.ptx.contraction pairs only ops of
    one type)."""
    op = d.ins.opcode
    _, half = d.mods.types()
    d.mods.done()
    if ftz:
        raise isa.Unsupported(f".ftz on {op}.f32{half} (ptxas: illegal modifier)")
    if op == "fma" and rnd is None:
        raise isa.Unsupported(f"fma.f32{half} needs a rounding modifier")
    d.float_kind = "f32"
    halves = 2 if op == "fma" else 1
    srcs = tuple(_operand(d, i, half if i <= halves else ".f32") for i in range(1, halves + 2))
    return _arith(d, ".f32", _MIXED[(op, half)], MODE[rnd or ".rn"], srcs, False, sat)


@isa.implements("fma", "mad", family=F)
def fma(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    ftz = mods.flag(".ftz")
    sat = mods.flag(".sat")
    relu = mods.flag(".relu")
    if mods.flag(".oob"):
        raise isa.Unsupported(".oob (the OOB-NaN operands of TMA fills are not modelled)")
    if _is_mixed(mods) and d.ins.opcode == "fma" and not relu:
        return _mixed(d, rnd, ftz, sat)
    t = _float_type(d)
    mods.done()
    if d.ins.opcode == "mad":
        if t in HALF:
            raise isa.Unsupported(f"mad{t} (half precision has fma only)")
        if rnd is None and t == ".f32":
            rnd = ".rn"  # mad.f32 without rounding is fma.rn.f32 (PTX ISA: mad.f32 is fma.f32 on sm_20+)
    if rnd is None:
        raise isa.Unsupported(f"{d.ins.opcode}{t} needs a rounding modifier")
    _check_mods(t, rnd, ftz, sat, relu, directed=True)
    if relu and sat:
        raise isa.Unsupported(".relu with .sat")
    srcs = tuple(_operand(d, i, t) for i in (1, 2, 3))
    return _arith(d, t, ieee.fma, MODE[rnd], srcs, ftz, sat, relu)


@isa.implements("div", family=F)
def div(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    approx = mods.take(".approx", ".full")
    ftz = mods.flag(".ftz")
    t = _float_type(d, (".f32", ".f64"))
    mods.done()
    a, b = _operand(d, 1, t), _operand(d, 2, t)
    if approx is not None:
        if t != ".f32" or rnd is not None:
            raise isa.Unsupported(f"div{approx}{rnd or ''}{t}")
        return _div_sass(d, a, b, ftz, full=approx == ".full")
    if rnd is None:
        raise isa.Unsupported(f"div{t} needs .approx, .full or a rounding modifier")
    _check_mods(t, rnd, ftz, False, directed=True)
    return _arith(d, t, ieee.div, MODE[rnd], (a, b), ftz)


_TWO24, _QUARTER = np.float32(2.0**24), np.float32(0.25)


def _div_sass(d: Decoded, a: int, b: int, ftz: bool, full: bool):
    """div.approx{.ftz}.f32 / div.full{.ftz}.f32 as ptxas builds them for sm_90 (the module docstring):
    a * MUFU.RCP(b) after the range scalings, each FMUL rounded as ieee32.mul (.ftz with the .ftz forms)."""
    dst, arch = d.dst(0), d.prog.arch

    def run(g):
        x, y = (_read(g, s, ".f32").view(np.float32) for s in (a, b))
        x, y = np.broadcast_arrays(x, y)
        mag = np.abs(y)
        if full:  # FSETP.GT |b|, 2^126 (ordered: false for NaN), then both times 1/4
            big = mag > np.float32(2.0**126)
            q = np.full(y.shape, _QUARTER)
            y = np.where(big, ieee32.mul(y, q, ftz), y)
            x = np.where(big, ieee32.mul(x, q, ftz), x)
        if not ftz:  # FSETP.GEU |b|, 2^-126 (unordered: true for NaN); below it both times 2^24
            small = ~(mag >= np.float32(2.0**-126)) & ~np.isnan(mag)
            s = np.full(y.shape, _TWO24)
            y = np.where(small, ieee32.mul(y, s), y)
            x = np.where(small, ieee32.mul(x, s), x)
        r = np.asarray(sfu.rcp(np.ascontiguousarray(y, np.float32), arch=arch), np.float32)
        g.write(dst, np.asarray(ieee32.mul(r, x, ftz)).view(np.uint32))
        if kept is not None:  # its multiply fused into an add (flashsim.ptx.contraction): the add reads x and r
            g.write(kept[0], np.asarray(x, np.float32).view(np.uint32))
            g.write(kept[1], r.view(np.uint32))

    kept = d.prog.kept_operands(d.key, np.uint32)
    return d.op(run)


@isa.implements("rcp", "sqrt", family=F)
def rcp_sqrt(d: Decoded):
    mods = d.mods
    rnd = mods.take(*_ROUNDED)
    approx = mods.flag(".approx")
    ftz = mods.flag(".ftz")
    t = _float_type(d, (".f32", ".f64"))
    mods.done()
    fn = d.ins.opcode
    if approx:
        if rnd is not None:
            raise isa.Unsupported(f"{fn}.approx{rnd}")
        return special.approx(d, fn, ftz, t)  # the SFU's forms (rcp.approx.ftz.f64 too)
    if rnd is None:
        raise isa.Unsupported(f"{fn}{t} needs .approx or a rounding modifier")
    _check_mods(t, rnd, ftz, False, directed=True)
    return _arith(d, t, ieee.rcp if fn == "rcp" else ieee.sqrt, MODE[rnd], (_operand(d, 1, t),), ftz)


def _abs(x, f, mode):
    return np.asarray(x).astype(np.uint64) & np.uint64(f.sign_mask - 1)


def _neg(x, f, mode):
    return np.asarray(x).astype(np.uint64) ^ np.uint64(f.sign_mask)


@isa.implements("abs", "neg", family=F)
def abs_neg(d: Decoded):
    mods = d.mods
    ftz = mods.flag(".ftz")
    t = _float_type(d)
    mods.done()
    _check_mods(t, None, ftz, False, directed=False)
    return _arith(d, t, _abs_neg_fn(d.ins.opcode), "rne", (_operand(d, 1, t),), ftz)


@functools.cache
def _abs_neg_fn(opcode: str):
    """The numerics of abs / neg (the module docstring): one function per opcode, so that such ops of a block stack
    (flashsim.ptx.vectorize groups ops whose closures hold the same values)."""
    fn = _abs if opcode == "abs" else _neg

    def exact(x, f, mode, ftz=False):  # an FADD / DADD of -0: the exact value; NaN: the adder's (DADD: x quieted)
        return np.where(ieee.unpack(x, f).nan, ieee.nan_result(f, x), fn(x, f, mode))

    return exact


@isa.implements("min", "max", family=F)
def min_max(d: Decoded):
    mods = d.mods
    ftz = mods.flag(".ftz")
    nan = mods.flag(".NaN")
    xorsign = mods.flag(".xorsign")
    absolute = mods.flag(".abs")
    t = _float_type(d)
    mods.done()
    if len(d.operands) == 4:
        return _min_max3(d, t, ftz, nan, xorsign, absolute)
    if xorsign != absolute:
        raise isa.Unsupported(".xorsign and .abs come together (.xorsign.abs)")
    if len(d.operands) != 3:
        raise isa.Unsupported(f"{d.ins.opcode} with {len(d.operands) - 1} sources")
    _check_mods(t, None, ftz, False, directed=False)
    if t == ".f64" and (nan or xorsign):
        raise isa.Unsupported(f".NaN / .xorsign.abs on {t}")
    fn = _min_max_fn(d.ins.opcode == "max", nan, xorsign)
    return _arith(d, t, fn, "rne", (_operand(d, 1, t), _operand(d, 2, t)), ftz)


@functools.cache
def _min_max_fn(largest: bool, nan: bool, xorsign: bool):
    """The numerics of one form of min / max: one function per form, so that such ops of a block stack. The inputs
    come flushed (.ftz) and the result is one of them, the canonical NaN, or with .xorsign.abs |one| with a sign
    (a flushed input's magnitude: nothing to flush), so the result is not flushed again (``selects``)."""

    def fn(x, y, f, mode, ftz=False):
        return ieee.minmax(x, y, f, largest=largest, propagate_nan=nan, xorsign_abs=xorsign)

    fn.selects = True
    if largest and not nan and not xorsign:  # max.f32 is numerics.ieee32.fmax (ieee.minmax's f32 route)
        fn.chain = "fmax"
    return fn


@isa.implements("copysign", family=F)
def copysign(d: Decoded):
    """copysign d, a, b: b with a's sign bit (a LOP3 on the bits: NaN payloads kept)."""
    t = _float_type(d, (".f32", ".f64"))
    d.mods.done()
    a, b, dst = _operand(d, 1, t), _operand(d, 2, t), d.dst(0)
    ud = CONTAINER[t]
    sign = ud(FORMAT[t].sign_mask)

    def run(g):
        g.write(dst, (_read(g, a, t) & sign) | (_read(g, b, t) & ~sign))

    return d.op(run)


_TESTS = (".finite", ".infinite", ".number", ".notanumber", ".normal", ".subnormal")


@isa.implements("testp", family=F)
def testp(d: Decoded):
    """testp.op.{f32,f64} p, a: zeros count as normal (PTX ISA, testp)."""
    mods = d.mods
    what = mods.take(*_TESTS)
    t = _float_type(d, (".f32", ".f64"))
    mods.done()
    if what is None:
        raise isa.Unsupported("testp needs one of " + " ".join(_TESTS))
    a, dst, f = _operand(d, 1, t), d.dst(0), FORMAT[t]

    def run(g):
        p = ieee.unpack(_read(g, a, t), f)
        sub = ieee.is_subnormal(_read(g, a, t), f)
        r = {
            ".finite": ~(p.nan | p.inf),
            ".infinite": p.inf,
            ".number": ~p.nan,
            ".notanumber": p.nan,
            ".normal": ~(p.nan | p.inf | sub),
            ".subnormal": sub,
        }[what]
        g.write(dst, r)

    return d.op(run)


# compare -> (numpy comparison or None for .num / .nan, true where an operand is NaN)
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


def _compare_values(cmp: str, t: str, ftz: bool):
    """(x bits, y bits) -> bool: the float compare ``cmp`` of type ``t`` (one lane of a packed type); ordered
    compares (.ne included) are false where an operand is NaN, unordered ones true."""
    fn, unordered = _FLOAT_COMPARE[cmp]
    f = FORMAT[t]

    def compare(x, y):
        if ftz:
            x, y = ieee.flush_subnormal(x, f), ieee.flush_subnormal(y, f)
        xv, yv = ieee.to_float64(x, f), ieee.to_float64(y, f)  # exact: every format here is within binary64
        either = np.isnan(xv) | np.isnan(yv)
        if fn is None:
            return either if unordered else ~either
        with np.errstate(invalid="ignore"):
            r = fn(xv, yv)
        return (r | either) if unordered else (r & ~either)

    return compare


def _float_setp_mods(d: Decoded):
    mods = d.mods
    cmp = mods.take(*_FLOAT_COMPARE)
    ftz = mods.flag(".ftz")
    types = mods.types()
    if cmp is None:
        raise isa.Unsupported("a float compare needs a comparison")
    return cmp, ftz, types


@isa.implements("setp", family=F)
def setp_float(d: Decoded):
    cmp, ftz, types = _float_setp_mods(d)
    if len(types) != 1 or types[0] not in FORMAT:
        raise isa.Unsupported(f"setp{cmp}{''.join(types)}")
    t = types[0]
    d.float_kind = {".f32": "f32", ".f64": "f64"}.get(t, "f16")
    _check_mods(t, None, ftz, False, directed=False)
    a, b = _operand(d, 1, t), _operand(d, 2, t)
    compare = _compare_values(cmp, t, ftz)
    if t in PACKED:
        return _setp_packed(d, compare, a, b, t)
    if t in (".f16", ".bf16") and isinstance(d.operands[0], Pair):
        # the scalar half forms write one predicate (PTX ISA, half-precision setp); ptxas rejects p|q there
        raise isa.Unsupported(f"setp{t} writes one predicate, not p|q")
    run = setp_common(d, lambda g, a, b: compare(_read(g, a, t), _read(g, b, t)), a, b)
    d.mods.done()
    return d.op(run)


def _setp_packed(d: Decoded, compare, a: int, b: int, t: str):
    """setp.{f16x2,bf16x2} p|q, a, b{, c}: p from the low halves, q from the high halves (PTX ISA, half-precision
    setp), each combined with c by the .bop."""
    bop = d.mods.take(*BOOL_OPS)
    d.mods.done()
    if not isinstance(d.operands[0], Pair):
        raise isa.Unsupported(f"setp{t} writes two predicates p|q")
    p, q = _set_dests(d)
    c, nc = _pred_src(d, 3) if bop is not None else (None, False)
    combine = BOOL_OPS.get(bop)

    def run(g):
        x, y = _read(g, a, t), _read(g, b, t)
        lo = compare(x & _LOW16, y & _LOW16)
        hi = compare(x >> np.uint32(16), y >> np.uint32(16))
        if combine is not None:
            cv = np.asarray(g.R[c]).astype(bool)
            cv = ~cv if nc else cv
            lo, hi = combine(lo, cv), combine(hi, cv)
        g.write(p, lo)
        g.write(q, hi)

    return d.op(run)


# what set writes for true, per destination type (false: 0): 1.0 for floats, all ones for integers
_SET_TRUE = {".f32": 0x3F800000, ".f16": 0x3C00, ".bf16": 0x3F80, ".u32": 0xFFFFFFFF, ".s32": 0xFFFFFFFF}
_SET_TRUE.update({".u16": 0xFFFF, ".s16": 0xFFFF, ".f16x2": 0x3C00, ".bf16x2": 0x3F80})


@isa.implements("set")
def set_compare(d: Decoded):
    """set.CmpOp{.BoolOp}{.ftz}.dtype.stype d, a, b{, c}: 1.0 (floats) or all ones (integers) where the compare
    (combined with c) holds, else 0; .f16x2 / .bf16x2 sources compare lane-wise into the two halves of d. Integer
    sources compare as setp does (integer.py's table)."""
    mods = d.mods
    cmp = mods.take(*_FLOAT_COMPARE, *_COMPARE)
    ftz = mods.flag(".ftz")
    bop = mods.take(*BOOL_OPS)
    types = mods.types()
    mods.done()
    if cmp is None or len(types) != 2 or types[0] not in _SET_TRUE:
        raise isa.Unsupported(f"set{cmp or ''}{''.join(types)}")
    dt, st = types
    packed = st in PACKED
    if (dt in PACKED or packed) and dt not in (st, ".u32", ".s32"):
        raise isa.Unsupported(f"set{dt}{st}")
    if st in FORMAT:
        d.float_kind = {".f32": "f32", ".f64": "f64"}.get(st, "f16")
        if cmp not in _FLOAT_COMPARE:
            raise isa.Unsupported(f"set{cmp} on {st}")
        a, b = _operand(d, 1, st), _operand(d, 2, st)
        compare = _compare_values(cmp, st, ftz)
        read = st
    else:
        if cmp not in _COMPARE or ftz:
            raise isa.Unsupported(f"set{cmp}{'.ftz' if ftz else ''}{st}")
        bits = isa.TYPES[st][1]
        ud = np.dtype(f"u{bits // 8}")
        signed = isa.TYPES[st][0] == "s" and cmp not in (".lo", ".ls", ".hi", ".hs")
        a, b = d.src(1, ud), d.src(2, ud)
        fn = _COMPARE[cmp]

        def compare(x, y):
            if signed:
                x, y = x.view(np.dtype(f"i{bits // 8}")), y.view(np.dtype(f"i{bits // 8}"))
            return fn(x, y)

        read = None
    c, nc = _pred_src(d, 3) if bop is not None else (None, False)
    combine = BOOL_OPS.get(bop)
    dst = d.dst(0)
    true = _SET_TRUE[dt]
    lane_true = 0xFFFF if dt in (".u32", ".s32") and packed else true

    def value(g, s):
        if read is not None:
            return _read(g, s, read)
        return np.asarray(g.R[s]).astype(ud, copy=False)

    def run(g):
        x, y = np.broadcast_arrays(value(g, a), value(g, b))
        cv = None
        if combine is not None:
            cv = np.asarray(g.R[c]).astype(bool)
            cv = ~cv if nc else cv

        def outcome(r, on):
            r = combine(r, cv) if combine is not None else r
            return np.where(r, np.uint32(on), np.uint32(0))

        if packed:
            lo = outcome(compare(x & _LOW16, y & _LOW16), lane_true)
            hi = outcome(compare(x >> np.uint32(16), y >> np.uint32(16)), lane_true)
            g.write(dst, lo | (hi << np.uint32(16)))
        else:
            g.write(dst, outcome(compare(x, y), true))

    return d.op(run)


def _minmax3(x, y, z, f, mode, ftz=False, *, largest: bool, propagate_nan: bool, absolute: bool):
    """The three-input min / max: |x|, |y|, |z| first under .abs; then the two-input rule twice (the order of -0 < +0
    and the NaN rules make it associative: a NaN operand is ignored unless .NaN, all NaN give the canonical NaN)."""
    if absolute:
        x, y, z = (_abs(v, f, mode) for v in (x, y, z))
    pair = ieee.minmax(x, y, f, largest=largest, propagate_nan=propagate_nan)
    return ieee.minmax(pair, z, f, largest=largest, propagate_nan=propagate_nan)


# (largest, .NaN, .abs) -> the numerics of that three-input form: one function each, shared by every op of the form
_MINMAX3 = {
    (largest, nan, absolute): functools.partial(_minmax3, largest=largest, propagate_nan=nan, absolute=absolute)
    for largest in (False, True)
    for nan in (False, True)
    for absolute in (False, True)
}


def _min_max3(d: Decoded, t: str, ftz: bool, nan: bool, xorsign: bool, absolute: bool):
    """min / max{.ftz}{.NaN}{.abs}.f32 d, a, b, c (sm_100+; PTX ISA 8.8): .f32 only, .abs without .xorsign."""
    op = d.ins.opcode
    isa.require(op, "three inputs", d.prog.arch)
    if t != ".f32":
        raise isa.Unsupported(f"{op}{t} with three inputs (.f32 only)")
    if xorsign:
        raise isa.Unsupported(f".xorsign on the three-input {op} (ptxas: illegal modifier; .abs alone)")
    fn = _MINMAX3[(op == "max", nan, absolute)]
    return _arith(d, t, fn, "rne", tuple(_operand(d, i, t) for i in (1, 2, 3)), ftz)
