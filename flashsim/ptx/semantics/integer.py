"""Integer and bit instructions, and the predicate ones: add sub mul mad (.lo .hi .wide), mul24 mad24, sad, div rem,
abs neg min max, popc clz bfind brev bfe bfi fns, and or xor not cnot lop3, shl shr shf, prmt, setp (integer and
predicate compares), selp, slct (integer form), and the .pred logic.

Registers hold the bits of their declared width (unsigned numpy integers); a signed type reads them as two's
complement. Arithmetic wraps modulo 2^n as PTX defines, .sat saturates (add / sub .s32), .cc / addc carry through the
per-thread condition-code register. Division by zero gives what the PTX ISA leaves unspecified as the GPU returns
it (``_div``). Everything is elementwise over the running lanes' full arrays (``g.write`` keeps the other lanes).
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Not
from ..program import Decoded
from .common import bits_of, kind_of, sdtype, udtype

I = isa.INTEGER


def _typed(d: Decoded, allowed=("b", "u", "s")):
    t = d.mods.type()
    if kind_of(t) not in allowed:
        raise isa.Unsupported(f"type {t}")
    bits = bits_of(t)
    if bits not in (16, 32, 64) and not (bits == 8 and "8" in d.name):
        raise isa.Unsupported(f"{bits}-bit operands")
    return t, bits, kind_of(t) == "s"


def _binary(d: Decoded, fn, t, bits):
    dst = d.dst(0)
    ud = udtype(bits)
    a, b = d.src(1, ud), d.src(2, ud)

    def run(g):
        g.write(dst, fn(np.asarray(g.R[a]).astype(ud, copy=False), np.asarray(g.R[b]).astype(ud, copy=False)))

    return d.op(run)


def _sat_s32(x):
    return np.clip(x, -(2**31), 2**31 - 1).astype(np.int64).astype(np.int32).view(np.uint32)


@isa.implements("add", "sub", family=I)
def add_sub(d: Decoded):
    mods = d.mods
    sat = mods.flag(".sat")
    cc = mods.flag(".cc")
    t, bits, signed = _typed(d)
    mods.done()
    ud = udtype(bits)
    sub = d.ins.opcode == "sub"
    if cc:
        return _carry_op(d, sub, bits, carry_in=False, carry_out=True)
    if sat:
        if t != ".s32":
            raise isa.Unsupported(".sat needs .s32")
        a, b, dst = d.src(1, ud), d.src(2, ud), d.dst(0)

        def run(g):
            x = np.asarray(g.R[a]).astype(np.uint32).view(np.int32).astype(np.int64)
            y = np.asarray(g.R[b]).astype(np.uint32).view(np.int32).astype(np.int64)
            g.write(dst, _sat_s32(x - y if sub else x + y))

        return d.op(run)
    return _binary(d, (lambda x, y: x - y) if sub else (lambda x, y: x + y), t, bits)


def _carry_op(d: Decoded, sub: bool, bits: int, carry_in: bool, carry_out: bool):
    """add/sub with .cc, addc/subc: the carry (or borrow) flag of each thread in the machine's condition code."""
    ud = udtype(bits)
    a, b, dst = d.src(1, ud), d.src(2, ud), d.dst(0)
    mask = (1 << bits) - 1

    def run(g):
        m = g.m
        cc = m.state.setdefault("cc", np.zeros(m.T, bool))
        x = np.asarray(g.R[a]).astype(np.uint64).astype(object) if bits == 64 else np.asarray(g.R[a]).astype(np.int64)
        y = np.asarray(g.R[b]).astype(np.uint64).astype(object) if bits == 64 else np.asarray(g.R[b]).astype(np.int64)
        c = cc.astype(np.int64) if carry_in else 0
        total = (x - y - c) if sub else (x + y + c)
        if bits == 64:
            total = np.asarray(total, dtype=object)
            out = np.array([int(v) & mask for v in np.broadcast_to(total, (m.T,))], np.uint64)
            flag = np.array([(int(v) < 0) if sub else (int(v) > mask) for v in np.broadcast_to(total, (m.T,))])
        else:
            total = np.broadcast_to(total, (m.T,))
            out = (total & mask).astype(ud)
            flag = (total < 0) if sub else (total > mask)
        g.write(dst, out)
        if carry_out:
            act = g.active()
            m.state["cc"] = np.where(act, flag, cc)

    return d.op(run)


@isa.implements("addc", "subc")
def addc(d: Decoded):
    mods = d.mods
    cc = mods.flag(".cc")
    t, bits, _ = _typed(d)
    mods.done()
    return _carry_op(d, d.ins.opcode == "subc", bits, carry_in=True, carry_out=cc)


def _mul_parts(x, y, bits: int, signed: bool):
    """(low bits, high bits) of the 2*bits-bit product of x and y (unsigned arrays of ``bits``)."""
    if bits <= 32:
        wide = np.int64 if signed else np.uint64
        xs = x.view(sdtype(bits)).astype(np.int64) if signed else x.astype(np.uint64)
        ys = y.view(sdtype(bits)).astype(np.int64) if signed else y.astype(np.uint64)
        p = (xs * ys).astype(wide).view(np.uint64)
        lo = (p & np.uint64((1 << bits) - 1)).astype(udtype(bits))
        hi = ((p >> np.uint64(bits)) & np.uint64((1 << bits) - 1)).astype(udtype(bits))
        return lo, hi
    # 64 x 64: four 32-bit partial products, exact in uint64
    xa, ya = np.broadcast_arrays(np.asarray(x, np.uint64), np.asarray(y, np.uint64))
    m32 = np.uint64(0xFFFFFFFF)
    x0, x1, y0, y1 = xa & m32, xa >> np.uint64(32), ya & m32, ya >> np.uint64(32)
    p00, p01, p10, p11 = x0 * y0, x0 * y1, x1 * y0, x1 * y1
    mid = (p00 >> np.uint64(32)) + (p01 & m32) + (p10 & m32)
    lo = (p00 & m32) | ((mid & m32) << np.uint64(32))
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    if signed:  # two's complement correction of the high word
        hi = hi - np.where(xa.view(np.int64) < 0, ya, np.uint64(0)) - np.where(ya.view(np.int64) < 0, xa, np.uint64(0))
    return lo, hi


@isa.implements("mul", "mad", family=I)
def mul_mad(d: Decoded):
    mods = d.mods
    part = mods.take(".lo", ".hi", ".wide")
    sat = mods.flag(".sat")
    cc = mods.flag(".cc")
    t, bits, signed = _typed(d)
    mods.done()
    if part is None:
        raise isa.Unsupported("mul / mad need .lo, .hi or .wide")
    if cc or (sat and not (t == ".s32" and part == ".hi" and d.ins.opcode == "mad")):
        raise isa.Unsupported(f"{'.cc' if cc else '.sat'} here")
    ud = udtype(bits)
    out_bits = 2 * bits if part == ".wide" else bits
    a, b, dst = d.src(1, ud), d.src(2, ud), d.dst(0)
    c = d.src(3, udtype(out_bits)) if d.ins.opcode == "mad" else None

    def run(g):
        x = np.asarray(g.R[a]).astype(ud, copy=False)
        y = np.asarray(g.R[b]).astype(ud, copy=False)
        lo, hi = _mul_parts(*np.broadcast_arrays(x, y), bits, signed)
        if part == ".lo":
            r = lo
        elif part == ".hi":
            r = hi
        else:
            r = lo.astype(udtype(out_bits)) | (hi.astype(udtype(out_bits)) << np.asarray(bits, udtype(out_bits)))
        if c is not None:
            z = np.asarray(g.R[c]).astype(udtype(out_bits), copy=False)
            if sat:  # mad.hi.sat.s32: x*y >> 32 + c, saturated
                r = _sat_s32(r.view(np.int32).astype(np.int64) + z.view(np.int32).astype(np.int64))
            else:
                r = r + z
        g.write(dst, r)

    return d.op(run)


@isa.implements("mul24", "mad24")
def mul24(d: Decoded):
    mods = d.mods
    part = mods.take(".lo", ".hi")
    t, bits, signed = _typed(d)
    mods.done()
    if bits != 32 or part is None:
        raise isa.Unsupported("mul24 / mad24 take .lo / .hi and 32-bit types")
    a, b, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.dst(0)
    c = d.src(3, np.uint32) if d.ins.opcode == "mad24" else None

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint32) & np.uint32(0xFFFFFF)
        y = np.asarray(g.R[b]).astype(np.uint32) & np.uint32(0xFFFFFF)
        if signed:  # sign-extend the 24-bit operands
            x = ((x.astype(np.int64) ^ 0x800000) - 0x800000).astype(np.int64)
            y = ((y.astype(np.int64) ^ 0x800000) - 0x800000).astype(np.int64)
        else:
            x, y = x.astype(np.int64), y.astype(np.int64)
        p = (x * y).view(np.uint64)  # a 48-bit product
        r = (p & np.uint64(0xFFFFFFFF)) if part == ".lo" else ((p >> np.uint64(16)) & np.uint64(0xFFFFFFFF))
        r = r.astype(np.uint32)
        if c is not None:
            r = r + np.asarray(g.R[c]).astype(np.uint32)
        g.write(dst, r)

    return d.op(run)


@isa.implements("sad")
def sad(d: Decoded):
    t, bits, signed = _typed(d, ("u", "s"))
    d.mods.done()
    ud = udtype(bits)
    a, b, c, dst = d.src(1, ud), d.src(2, ud), d.src(3, ud), d.dst(0)

    def run(g):
        x, y = np.asarray(g.R[a]).astype(ud), np.asarray(g.R[b]).astype(ud)
        if signed:
            x, y = x.view(sdtype(bits)).astype(np.int64), y.view(sdtype(bits)).astype(np.int64)
            diff = np.abs(x - y).astype(np.uint64).astype(ud)
        else:
            diff = np.where(x >= y, x - y, y - x)
        g.write(dst, diff + np.asarray(g.R[c]).astype(ud))

    return d.op(run)


def _div(x, y, bits: int, signed: bool, rem: bool):
    """Quotient / remainder rounding toward zero. A zero divisor: the quotient is all ones and the remainder the
    dividend (the values the ISA leaves unspecified, as the GPU gives them: tests/test_ptx_isa_silicon.py);
    INT_MIN / -1 wraps to INT_MIN with remainder 0."""
    ud = udtype(bits)
    zero = y == 0
    if signed:
        neg_x, neg_y = x.view(sdtype(bits)) < 0, y.view(sdtype(bits)) < 0
        one = np.asarray(1, ud)
        ax = np.where(neg_x, (~x) + one, x)  # |x| as unsigned: exact for INT_MIN too
        ay = np.where(neg_y, (~y) + one, y)
        ay = np.where(zero, one, ay)
        qa, ra = ax // ay, ax % ay
        q = np.where(neg_x != neg_y, (~qa) + one, qa)
        r = np.where(neg_x, (~ra) + one, ra)
    else:
        safe = np.where(zero, np.asarray(1, ud), y)
        q, r = x // safe, x % safe
    q = np.where(zero, np.asarray((1 << bits) - 1, ud), q)
    r = np.where(zero, x, r)
    return (r if rem else q).astype(ud)


@isa.implements("div", "rem", family=I)
def div_rem(d: Decoded):
    t, bits, signed = _typed(d)
    d.mods.done()
    rem = d.ins.opcode == "rem"
    return _binary(d, lambda x, y: _div(*np.broadcast_arrays(x, y), bits, signed, rem), t, bits)


@isa.implements("abs", "neg", family=I)
def abs_neg(d: Decoded):
    t, bits, signed = _typed(d, ("s",))
    d.mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)
    is_abs = d.ins.opcode == "abs"

    def run(g):
        x = np.asarray(g.R[a]).astype(ud)
        neg = (~x) + np.asarray(1, ud)
        g.write(dst, np.where(x.view(sdtype(bits)) < 0, neg, x) if is_abs else neg)

    return d.op(run)


@isa.implements("min", "max", family=I)
def min_max(d: Decoded):
    mods = d.mods
    relu = mods.flag(".relu")
    t, bits, signed = _typed(d, ("u", "s"))
    mods.done()
    ud = udtype(bits)
    a, b, dst = d.src(1, ud), d.src(2, ud), d.dst(0)
    pick = np.minimum if d.ins.opcode == "min" else np.maximum

    def run(g):
        x, y = np.asarray(g.R[a]).astype(ud), np.asarray(g.R[b]).astype(ud)
        if signed:
            r = pick(x.view(sdtype(bits)), y.view(sdtype(bits)))
            if relu:
                r = np.maximum(r, 0)
            g.write(dst, np.asarray(r).view(ud))
        else:
            g.write(dst, pick(x, y))

    return d.op(run)


def _unary_bits(d: Decoded, fn, out_bits=32):
    t, bits, _ = _typed(d)
    d.mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)

    def run(g):
        g.write(dst, fn(np.asarray(g.R[a]).astype(ud), bits).astype(udtype(out_bits)))

    return d.op(run)


def _popcount(x, bits):
    x = x.astype(np.uint64)
    count = np.zeros(x.shape, np.uint64)
    for s in range(0, bits, 8):
        count += _POP8[((x >> np.uint64(s)) & np.uint64(0xFF)).astype(np.int64)]
    return count


_POP8 = np.array([bin(i).count("1") for i in range(256)], np.uint64)


def _bitlen(x, bits):
    """Position of the highest set bit plus one (0 for 0)."""
    x = x.astype(np.uint64)
    n = np.zeros(x.shape, np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        if s >= bits:
            continue
        big = (x >> np.uint64(s)) != 0
        n = np.where(big, n + s, n)
        x = np.where(big, x >> np.uint64(s), x)
    return n + (x != 0)


@isa.implements("popc")
def popc(d: Decoded):
    return _unary_bits(d, _popcount)


@isa.implements("clz")
def clz(d: Decoded):
    return _unary_bits(d, lambda x, bits: (bits - _bitlen(x, bits)).astype(np.uint64))


@isa.implements("bfind")
def bfind(d: Decoded):
    mods = d.mods
    shift = mods.flag(".shiftamt")
    t, bits, signed = _typed(d, ("u", "s"))
    mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)

    def run(g):
        x = np.asarray(g.R[a]).astype(ud)
        if signed:  # the highest bit that differs from the sign bit
            x = np.where(x.view(sdtype(bits)) < 0, ~x, x)
        pos = _bitlen(x, bits) - 1  # -1 for no bit
        r = np.where(pos < 0, np.int64(0xFFFFFFFF), (bits - 1 - pos) if shift else pos)
        g.write(dst, r.astype(np.int64).astype(np.uint64).astype(np.uint32))

    return d.op(run)


@isa.implements("brev")
def brev(d: Decoded):
    t, bits, _ = _typed(d, ("b",))
    d.mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)
    rev8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint64)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint64)
        r = np.zeros(x.shape, np.uint64)
        for k in range(bits // 8):
            byte = (x >> np.uint64(8 * k)) & np.uint64(0xFF)
            r |= rev8[byte.astype(np.int64)] << np.uint64(bits - 8 - 8 * k)
        g.write(dst, r.astype(ud))

    return d.op(run)


@isa.implements("bfe")
def bfe(d: Decoded):
    t, bits, signed = _typed(d, ("u", "s"))
    d.mods.done()
    ud = udtype(bits)
    a, b, c, dst = d.src(1, ud), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint64)
        pos = np.asarray(g.R[b]).astype(np.int64) & 0xFF
        length = np.asarray(g.R[c]).astype(np.int64) & 0xFF
        pos_c = np.minimum(pos, 63).astype(np.uint64)
        field = x >> pos_c
        field = np.where(pos >= bits, 0, field)
        n = np.minimum(length, bits)
        keep = np.where(
            n >= 64, np.uint64(2**64 - 1), (np.uint64(1) << np.minimum(n, 63).astype(np.uint64)) - np.uint64(1)
        )
        field = field & keep
        if signed:  # the sign of the field: its top bit, or the operand's sign past its end
            top = np.minimum(pos + n - 1, bits - 1)
            sign = (x >> top.astype(np.uint64)) & np.uint64(1)
            sign = np.where(n == 0, 0, sign).astype(bool)
            ext = ~keep
            field = np.where(sign, field | ext, field)
        g.write(dst, (field & np.uint64((1 << bits) - 1)).astype(ud))

    return d.op(run)


@isa.implements("bfi")
def bfi(d: Decoded):
    t, bits, _ = _typed(d, ("b",))
    d.mods.done()
    ud = udtype(bits)
    a, b, c, e, dst = d.src(1, ud), d.src(2, ud), d.src(3, np.uint32), d.src(4, np.uint32), d.dst(0)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint64)
        y = np.asarray(g.R[b]).astype(np.uint64)
        pos = np.asarray(g.R[c]).astype(np.int64) & 0xFF
        length = np.asarray(g.R[e]).astype(np.int64) & 0xFF
        n = np.minimum(length, bits)
        keep = np.where(
            n >= 64, np.uint64(2**64 - 1), (np.uint64(1) << np.minimum(n, 63).astype(np.uint64)) - np.uint64(1)
        )
        shifted = np.where(pos >= bits, 0, (keep << np.minimum(pos, 63).astype(np.uint64)))
        field = np.where(pos >= bits, 0, (x << np.minimum(pos, 63).astype(np.uint64)))
        r = (y & ~shifted) | (field & shifted)
        g.write(dst, (r & np.uint64((1 << bits) - 1)).astype(ud))

    return d.op(run)


@isa.implements("and", "or", "xor")
def logic(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[d.ins.opcode]
    if t == ".pred":
        dst = d.dst(0)
        a, na = _pred_src(d, 1)
        b, nb = _pred_src(d, 2)

        def run(g):
            x = np.asarray(g.R[a]).astype(bool)
            y = np.asarray(g.R[b]).astype(bool)
            g.write(dst, fn(~x if na else x, ~y if nb else y))

        return d.op(run)
    if kind_of(t) != "b":
        raise isa.Unsupported(f"{d.ins.opcode}{t}")
    return _binary(d, fn, t, bits_of(t))


def _pred_src(d: Decoded, i: int):
    op = d.operands[i]
    if isinstance(op, Not):
        return d.reg(op.reg), True
    return d.value(op, np.dtype(bool)), False


@isa.implements("not", "cnot")
def not_(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    if t == ".pred":
        dst, (a, na) = d.dst(0), _pred_src(d, 1)

        def run(g):
            x = np.asarray(g.R[a]).astype(bool)
            g.write(dst, x if na else ~x)

        return d.op(run)
    bits = bits_of(t)
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)
    cnot = d.ins.opcode == "cnot"

    def run(g):
        x = np.asarray(g.R[a]).astype(ud)
        g.write(dst, (x == 0).astype(ud) if cnot else ~x)

    return d.op(run)


@isa.implements("lop3")
def lop3(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    if t != ".b32":
        raise isa.Unsupported(f"lop3{t}")
    dst = d.dst(0)
    a, b, c = (d.src(i, np.uint32) for i in (1, 2, 3))
    lut = d.operands[4]
    if not hasattr(lut, "value"):
        raise isa.Unsupported("lop3 needs an immediate LUT")
    table = int(lut.value) & 0xFF

    def run(g):
        x, y, z = (np.asarray(g.R[s]).astype(np.uint32) for s in (a, b, c))
        r = np.zeros(np.broadcast(x, y, z).shape, np.uint32)
        for k in range(8):  # the minterms of the LUT: bit k of table for (a, b, c) = (k>>2 &1, k>>1 &1, k&1)
            if table >> k & 1:
                term = (x if k & 4 else ~x) & (y if k & 2 else ~y) & (z if k & 1 else ~z)
                r |= term
        g.write(dst, r)

    return d.op(run)


@isa.implements("shl", "shr")
def shift(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    bits = bits_of(t)
    ud = udtype(bits)
    signed = kind_of(t) == "s"
    a, b, dst = d.src(1, ud), d.src(2, np.uint32), d.dst(0)
    left = d.ins.opcode == "shl"

    def run(g):
        x = np.asarray(g.R[a]).astype(ud)
        n = np.asarray(g.R[b]).astype(np.uint32).astype(np.int64)
        big = n >= bits
        s = np.minimum(n, bits - 1).astype(ud)
        if left:
            r = np.where(big, 0, x << s)
        elif signed:
            xs = x.view(sdtype(bits))
            r = np.where(big, xs >> (bits - 1), xs >> s.astype(sdtype(bits))).view(ud)
        else:
            r = np.where(big, 0, x >> s)
        g.write(dst, np.asarray(r).astype(ud))

    return d.op(run)


@isa.implements("shf")
def shf(d: Decoded):
    mods = d.mods
    direction = mods.take(".l", ".r")
    mode = mods.take(".clamp", ".wrap")
    t = mods.type()
    mods.done()
    if direction is None or mode is None or t != ".b32":
        raise isa.Unsupported("shf needs .l / .r, .clamp / .wrap and .b32")
    a, b, c, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        lo = np.asarray(g.R[a]).astype(np.uint64)
        hi = np.asarray(g.R[b]).astype(np.uint64)
        n = np.asarray(g.R[c]).astype(np.uint32).astype(np.uint64)
        n = np.minimum(n, np.uint64(32)) if mode == ".clamp" else (n & np.uint64(31))
        pair = (hi << np.uint64(32)) | lo
        if direction == ".l":
            r = (pair << n) >> np.uint64(32)
        else:
            r = pair >> n
        g.write(dst, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32))

    return d.op(run)


@isa.implements("prmt")
def prmt(d: Decoded):
    mods = d.mods
    mode = mods.take(".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16")
    t = mods.type()
    mods.done()
    if t != ".b32":
        raise isa.Unsupported(f"prmt{t}")
    a, b, c, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        x = np.asarray(g.R[a]).astype(np.uint64)
        y = np.asarray(g.R[b]).astype(np.uint64)
        sel = np.asarray(g.R[c]).astype(np.uint64)
        src = x | (y << np.uint64(32))  # bytes 0-3 from a, 4-7 from b
        bytes_ = [((src >> np.uint64(8 * k)) & np.uint64(0xFF)) for k in range(8)]
        stacked = np.stack(np.broadcast_arrays(*bytes_), axis=0)
        out = np.zeros(stacked.shape[1:], np.uint64)
        for k in range(4):
            if mode is None:
                s = (sel >> np.uint64(4 * k)) & np.uint64(0xF)
                idx = (s & np.uint64(7)).astype(np.int64)
                byte = np.take_along_axis(stacked, np.broadcast_to(idx, stacked.shape[1:])[None], 0)[0]
                sign = (byte >> np.uint64(7)) & np.uint64(1)
                byte = np.where((s & np.uint64(8)) != 0, sign * np.uint64(0xFF), byte)
            else:
                pos = _prmt_mode(mode, k, (sel & np.uint64(3)).astype(np.int64))
                byte = np.take_along_axis(stacked, np.broadcast_to(pos, stacked.shape[1:])[None], 0)[0]
            out |= byte << np.uint64(8 * k)
        g.write(dst, out.astype(np.uint32))

    return d.op(run)


def _prmt_mode(mode: str, k: int, s):
    """The source byte of result byte k in prmt's special modes (PTX ISA, prmt), s = the selector's two low bits:
    forward / backward 4 extract, replicate 8, edge clamp left / right, replicate 16."""
    if mode == ".f4e":
        return (s + k) % 8
    if mode == ".b4e":
        return (s - k) % 8
    if mode == ".rc8":
        return s
    if mode == ".ecl":
        return np.maximum(s, k)
    if mode == ".ecr":
        return np.minimum(s, k)
    return 2 * (s & 1) + (k & 1)  # .rc16


_COMPARE = {
    ".eq": np.equal,
    ".ne": np.not_equal,
    ".lt": np.less,
    ".le": np.less_equal,
    ".gt": np.greater,
    ".ge": np.greater_equal,
    ".lo": np.less,
    ".ls": np.less_equal,
    ".hi": np.greater,
    ".hs": np.greater_equal,
}
BOOL_OPS = {".and": np.logical_and, ".or": np.logical_or, ".xor": np.logical_xor}


def _set_dests(d: Decoded):
    """(p slot, q slot or None) of setp's ``p[|q]`` destination."""
    from ..ir import Pair

    op = d.operands[0]
    if isinstance(op, Pair):
        first = None if not hasattr(op.first, "name") else d.reg(op.first)
        return first, d.reg(op.second)
    return d.dst(0), None


def setp_common(d: Decoded, compare_fn, a, b):
    """setp's destinations and optional ``.bop c``: p = cmp BOP c, q = !cmp BOP c."""
    mods = d.mods
    bop = mods.take(*BOOL_OPS)
    p, q = _set_dests(d)
    c = None
    nc = False
    if bop is not None:
        c, nc = _pred_src(d, 3)
    combine = BOOL_OPS.get(bop)

    def run(g):
        r = compare_fn(g, a, b)
        r = np.broadcast_to(r, (g.m.T,)) if np.ndim(r) == 0 else r
        if combine is not None:
            cv = np.asarray(g.R[c]).astype(bool)
            cv = ~cv if nc else cv
            g.write(p, combine(r, cv))
            if q is not None:
                g.write(q, combine(~r, cv))
        else:
            g.write(p, r)
            if q is not None:
                g.write(q, ~r)

    return run


@isa.implements("setp", family=I)
def setp_int(d: Decoded):
    mods = d.mods
    cmp = mods.take(*_COMPARE)
    types = [m for m in mods.left if m in isa.TYPES]
    if len(types) != 1:
        raise isa.Unsupported("setp needs one type")
    t = types[0]
    mods.left.remove(t)
    if cmp is None:
        raise isa.Unsupported("setp needs a comparison")
    bits = bits_of(t)
    ud = udtype(bits)
    signed = kind_of(t) == "s" and cmp not in (".lo", ".ls", ".hi", ".hs")
    if t == ".pred":
        if cmp not in (".eq", ".ne"):
            raise isa.Unsupported(f"setp{cmp}.pred")
        a, b = d.value(d.operands[1], bool), d.value(d.operands[2], bool)
    else:
        a, b = d.src(1, ud), d.src(2, ud)
    fn = _COMPARE[cmp]

    def compare(g, a, b):
        x, y = np.asarray(g.R[a]), np.asarray(g.R[b])
        if t != ".pred":
            x, y = x.astype(ud), y.astype(ud)
            if signed:
                x, y = x.view(sdtype(bits)), y.view(sdtype(bits))
        return fn(x, y)

    run = setp_common(d, compare, a, b)
    mods.done()
    return d.op(run)


@isa.implements("selp")
def selp(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    bits = bits_of(t)
    ud = udtype(bits)
    if kind_of(t) == "f":
        d.float_kind = {16: "f16", 32: "f32", 64: "f64"}[bits]
    dst, a, b = d.dst(0), d.src(1, ud), d.src(2, ud)
    c, nc = _pred_src(d, 3)

    def run(g):
        cond = np.asarray(g.R[c]).astype(bool)
        g.write(dst, np.where(~cond if nc else cond, g.R[a], g.R[b]))

    return d.op(run)
