"""Integer and bit instructions, and the predicate ones (PTX ISA "Integer Arithmetic Instructions", "Logic and Shift
Instructions", "Comparison and Selection Instructions", prmt of "Data Movement"): add sub (.sat .cc, the packed
.u16x2 / .s16x2 add), addc subc, mul mad (.lo .hi .wide, mad.hi.sat, .cc), madc, mul24 mad24, sad, div rem, abs neg,
min max (.relu, packed), popc clz bfind fns brev bfe bfi bmsk szext, dp4a dp2a, and or xor not cnot lop3 (and its
.BoolOp form), shl shr shf, prmt, setp and set (integer compares, .BoolOp), selp, slct, and the .pred logic.

Registers hold the bits of their declared width (unsigned numpy integers); a signed type reads them as two's
complement. Arithmetic wraps modulo 2^n as PTX defines; the carry flag CC.CF is per thread
(``Machine.state["cc"]``). Where the ISA leaves a result open, the module names the H200's (``DIV_BY_ZERO``);
the silicon probes (flashsim.ptx.probes.integer) pin every such choice. Everything is elementwise over the running
lanes' full arrays (``g.write`` keeps the other lanes); the only loops run over bits or bytes of a register.
"""

from __future__ import annotations

import numpy as np

from .. import isa
from ..ir import Not, Pair, Sink
from ..program import Decoded
from ..vectorize import ELEMENTWISE
from .common import bits_of, kind_of, sdtype, udtype

I = isa.INTEGER

# Division by zero (div / rem, every width and sign): the ISA leaves it unspecified. ptxas (CUDA 13.0, sm_90)
# expands div and rem into a reciprocal sequence (32 bits), a float sequence (16 bits) or a subroutine (64 bits)
# that each end in a select on "divisor != 0": the result is then ~divisor = all ones, for the quotient and the
# remainder alike (LOP3.LUT r, RZ, divisor, RZ, 0x33 / SEL r, r, 0xffffffff). Probes: integer/div_*, rem_*.
DIV_BY_ZERO = "all ones"
# INT_MIN / -1 wraps to INT_MIN and INT_MIN % -1 is 0: the sequences divide magnitudes (IABS(INT_MIN) is 2^(n-1)
# as an unsigned number) and negate the quotient only when the signs differ.

_ARITH = ("u", "s", "b")
_PACKED = {".u16x2": False, ".s16x2": True}  # packed half-word types -> signed


def _val(g, slot, dtype):
    """Register or constant ``slot`` as an array (or scalar) of ``dtype`` (its low bits)."""
    return np.asarray(g.R[slot]).astype(dtype, copy=False)


def _typed(d: Decoded, kinds=_ARITH, widths=(16, 32, 64)):
    """(type, bits, signed) of an instruction with exactly one integer type among ``kinds`` and ``widths``."""
    t = d.mods.type()
    if t not in isa.TYPES or kind_of(t) not in kinds or bits_of(t) not in widths:
        raise isa.Unsupported(f"type {t}")
    return t, bits_of(t), kind_of(t) == "s"


def _as_int64(x, bits: int, signed: bool):
    x = np.asarray(x).astype(udtype(bits), copy=False)
    return x.view(sdtype(bits)).astype(np.int64) if signed else x.astype(np.int64)


def _sat_s32(x):
    """int64 values clamped to the s32 range, as u32 bits."""
    return np.asarray(np.clip(x, -(2**31), 2**31 - 1)).astype(np.int64).astype(np.int32).view(np.uint32)


def _binary(d: Decoded, fn, bits: int, elementwise: bool = False):
    """d = fn(a, b) on the low ``bits`` of both operands (unsigned arrays). ``elementwise``: fn is one shared,
    broadcasting function, so the op can run stacked with its like (flashsim.ptx.vectorize)."""
    ud = udtype(bits)
    dst, a, b = d.dst(0), d.src(1, ud), d.src(2, ud)

    def run(g):
        g.write(dst, fn(_val(g, a, ud), _val(g, b, ud)))

    return d.op(run, info=ELEMENTWISE if elementwise and dst is not None else None)


def _wrapping_add(x, y):
    return x + y


def _wrapping_sub(x, y):
    return x - y


def _packed_or_type(mods: isa.Mods) -> str:
    """The packed half-word type (.u16x2 / .s16x2: not among isa.TYPES, so the table routes them to the integer
    family) or the one ordinary type."""
    packed = mods.take(*_PACKED)
    if packed is not None:
        if mods.types():
            raise isa.Unsupported(f"{packed} with another type")
        return packed
    return mods.type()


def _halves(fn, signed: bool):
    """fn applied to the two 16-bit halves of u32 operands (read signed when ``signed``), repacked."""

    def run(x, y):
        out = np.zeros(np.broadcast(x, y).shape, np.uint32)
        for shift in (0, 16):
            hx = ((x >> np.uint32(shift)) & np.uint32(0xFFFF)).astype(np.uint16)
            hy = ((y >> np.uint32(shift)) & np.uint32(0xFFFF)).astype(np.uint16)
            if signed:
                hx, hy = hx.view(np.int16), hy.view(np.int16)
            h = np.asarray(fn(hx, hy)).astype(np.int64) & 0xFFFF
            out |= h.astype(np.uint32) << np.uint32(shift)
        return out

    return run


# -- add, sub and the carry chain -------------------------------------------------------------------------


@isa.implements("add", "sub", family=I)
def add_sub(d: Decoded):
    mods = d.mods
    sat = mods.flag(".sat")
    cc = mods.flag(".cc")
    sub = d.ins.opcode == "sub"
    t = _packed_or_type(mods)
    mods.done()
    if t in _PACKED:  # add.u16x2 / add.s16x2 (sm_90): two independent wrapping half-word adds
        if sub or sat or cc:
            raise isa.Unsupported(f"{d.ins.opcode}{'.sat' if sat else ''}{'.cc' if cc else ''}{t}")
        return _binary(d, _halves(lambda x, y: x.astype(np.int64) + y.astype(np.int64), False), 32)
    if kind_of(t) not in _ARITH or bits_of(t) not in (16, 32, 64):
        raise isa.Unsupported(f"type {t}")
    bits = bits_of(t)
    if cc:
        if sat or bits == 16:
            raise isa.Unsupported(f"{d.ins.opcode}.cc{t}{' with .sat' if sat else ''}")
        return _carry_op(d, sub, bits, carry_in=False, carry_out=True)
    if sat:
        if t != ".s32":
            raise isa.Unsupported(".sat needs .s32")

        def sat_fn(x, y):
            x, y = _as_int64(x, 32, True), _as_int64(y, 32, True)
            return _sat_s32(x - y if sub else x + y)

        return _binary(d, sat_fn, 32)
    return _binary(d, _wrapping_sub if sub else _wrapping_add, bits, elementwise=True)


def _cc(g):
    m = g.m
    cc = m.state.get("cc")
    if cc is None:
        cc = m.state["cc"] = np.zeros(m.T, bool)
    return cc


def _set_cc(g, flag):
    """CC.CF := ``flag`` on the running lanes."""
    cc = _cc(g)
    g.m.state["cc"] = np.where(g.active(), np.broadcast_to(flag, cc.shape), cc)


def _add_carry(x, y, cin, sub: bool):
    """(x + y + cin, carry out) or (x - y - cin, borrow out), wrapped to the unsigned dtype of x and y; cin a bool
    array or False. The ISA's CC.CF holds the carry of an add and the borrow of a sub (add.cc, sub.cc, addc,
    subc)."""
    one = x.dtype.type(1)
    c = np.asarray(cin).astype(x.dtype)
    if sub:
        r = x - y - c
        flag = (x < y) | ((x == y) & (c == one))
    else:
        s = x + y
        r = s + c
        flag = (s < x) | ((r < s) & (c == one))
    return r, flag


def _carry_op(d: Decoded, sub: bool, bits: int, carry_in: bool, carry_out: bool):
    """add/sub with .cc, addc/subc: d = a +- b (+- CC.CF), the carry (borrow) written to CC.CF with .cc."""
    ud = udtype(bits)
    a, b, dst = d.src(1, ud), d.src(2, ud), d.dst(0)

    def run(g):
        x, y = np.broadcast_arrays(_val(g, a, ud), _val(g, b, ud))
        r, flag = _add_carry(x, y, _cc(g) if carry_in else False, sub)
        g.write(dst, r)
        if carry_out:
            _set_cc(g, flag)

    return d.op(run)


@isa.implements("addc", "subc")
def addc(d: Decoded):
    mods = d.mods
    cc = mods.flag(".cc")
    t, bits, _ = _typed(d, widths=(32, 64))
    mods.done()
    return _carry_op(d, d.ins.opcode == "subc", bits, carry_in=True, carry_out=cc)


# -- multiplication --------------------------------------------------------------------------------------


def _mul_parts(x, y, bits: int, signed: bool):
    """(low bits, high bits) of the 2*bits-bit product of x and y (unsigned arrays of ``bits``)."""
    x, y = np.broadcast_arrays(np.asarray(x).astype(udtype(bits)), np.asarray(y).astype(udtype(bits)))
    if bits <= 32:
        p = (_as_int64(x, bits, signed) * _as_int64(y, bits, signed)).view(np.uint64)  # exact in 64 bits
        mask = np.uint64((1 << bits) - 1)
        return (p & mask).astype(udtype(bits)), ((p >> np.uint64(bits)) & mask).astype(udtype(bits))
    # 64 x 64: four 32-bit partial products, exact in uint64
    m32 = np.uint64(0xFFFFFFFF)
    x0, x1, y0, y1 = x & m32, x >> np.uint64(32), y & m32, y >> np.uint64(32)
    p00, p01, p10, p11 = x0 * y0, x0 * y1, x1 * y0, x1 * y1
    mid = (p00 >> np.uint64(32)) + (p01 & m32) + (p10 & m32)
    lo = (p00 & m32) | ((mid & m32) << np.uint64(32))
    hi = p11 + (p01 >> np.uint64(32)) + (p10 >> np.uint64(32)) + (mid >> np.uint64(32))
    if signed:  # two's complement correction of the high word
        hi = hi - np.where(x.view(np.int64) < 0, y, np.uint64(0)) - np.where(y.view(np.int64) < 0, x, np.uint64(0))
    return lo, hi


def _product(x, y, bits: int, signed: bool, part: str):
    """The .lo / .hi / .wide part of a * b (.wide: 2*bits wide)."""
    lo, hi = _mul_parts(x, y, bits, signed)
    if part == ".lo":
        return lo
    if part == ".hi":
        return hi
    wide = udtype(2 * bits)
    return lo.astype(wide) | (hi.astype(wide) << wide.type(bits))


@isa.implements("mul", "mad", "madc", family=I)
def mul_mad(d: Decoded):
    """mul / mad (.lo .hi .wide; mad.hi.sat.s32; mad{.lo,.hi}.cc) and madc{.lo,.hi}{.cc}: d = part(a * b) (+ c)
    (+ CC.CF)."""
    mods = d.mods
    op = d.ins.opcode
    part = mods.take(".lo", ".hi", ".wide")
    sat = mods.flag(".sat")
    cc = mods.flag(".cc")
    t, bits, signed = _typed(d)
    mods.done()
    if part is None:
        raise isa.Unsupported(f"{op} needs {'.lo or .hi' if op == 'madc' else '.lo, .hi or .wide'}")
    if part == ".wide" and (bits == 64 or op == "madc" or cc):
        raise isa.Unsupported(f"{op}.wide{'.cc' if cc else ''}{t}")
    if sat and not (op == "mad" and t == ".s32" and part == ".hi" and not cc):
        raise isa.Unsupported(f"{op}{part}.sat{t} (only mad.hi.sat.s32)")
    if (cc or op == "madc") and (bits == 16 or op == "mul"):
        raise isa.Unsupported(f"{op}{part}{'.cc' if cc else ''}{t}")
    ud = udtype(bits)
    out = udtype(2 * bits if part == ".wide" else bits)
    a, b, dst = d.src(1, ud), d.src(2, ud), d.dst(0)
    c = d.src(3, out) if op != "mul" else None
    carry_in = op == "madc"

    def run(g):
        r = _product(_val(g, a, ud), _val(g, b, ud), bits, signed, part)
        if c is None:
            g.write(dst, r)
            return
        z = _val(g, c, out)
        if sat:  # mad.hi.sat.s32: the high word plus c, clamped to the s32 range
            g.write(dst, _sat_s32(_as_int64(r, 32, True) + _as_int64(z, 32, True)))
            return
        if carry_in or cc:
            r, z = np.broadcast_arrays(r, z)
            r, flag = _add_carry(r, z, _cc(g) if carry_in else False, False)
            g.write(dst, r)
            if cc:
                _set_cc(g, flag)
            return
        g.write(dst, r + z)

    return d.op(run)


@isa.implements("mul24", "mad24")
def mul24(d: Decoded):
    """The 48-bit product of the low 24 bits of a and b (sign-extended from bit 23 for .s32): .lo its bits 31..0,
    .hi its bits 47..16; mad24 adds c (mad24.hi.sat.s32 clamps the sum to the s32 range)."""
    mods = d.mods
    part = mods.take(".lo", ".hi")
    sat = mods.flag(".sat")
    t, bits, signed = _typed(d, ("u", "s"), (32,))
    mods.done()
    mad = d.ins.opcode == "mad24"
    if part is None:
        raise isa.Unsupported(f"{d.ins.opcode} needs .lo or .hi")
    if sat and not (mad and part == ".hi" and signed):
        raise isa.Unsupported(f"{d.ins.opcode}{part}.sat{t} (only mad24.hi.sat.s32)")
    a, b, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.dst(0)
    c = d.src(3, np.uint32) if mad else None

    def low24(x):
        x = x.astype(np.int64) & 0xFFFFFF
        return ((x ^ 0x800000) - 0x800000) if signed else x

    def run(g):
        p = (low24(_val(g, a, np.uint32)) * low24(_val(g, b, np.uint32))).view(np.uint64)
        r = ((p >> np.uint64(16)) if part == ".hi" else p) & np.uint64(0xFFFFFFFF)
        r = r.astype(np.uint32)
        if c is not None:
            z = _val(g, c, np.uint32)
            r = _sat_s32(_as_int64(r, 32, True) + _as_int64(z, 32, True)) if sat else r + z
        g.write(dst, r)

    return d.op(run)


@isa.implements("sad")
def sad(d: Decoded):
    """d = c + |a - b| (the exact difference, then wrapped)."""
    t, bits, signed = _typed(d, ("u", "s"))
    d.mods.done()
    ud = udtype(bits)
    a, b, c, dst = d.src(1, ud), d.src(2, ud), d.src(3, ud), d.dst(0)

    def run(g):
        x, y = _val(g, a, ud), _val(g, b, ud)
        less = (x.view(sdtype(bits)) < y.view(sdtype(bits))) if signed else (x < y)
        g.write(dst, np.where(less, y - x, x - y) + _val(g, c, ud))

    return d.op(run)


def _div(x, y, bits: int, signed: bool, rem: bool):
    """Quotient / remainder rounding toward zero; a zero divisor gives ``DIV_BY_ZERO`` (all ones) for both."""
    ud = udtype(bits)
    x, y = np.broadcast_arrays(np.asarray(x).astype(ud), np.asarray(y).astype(ud))
    zero = y == 0
    one = ud.type(1)
    if signed:
        neg_x, neg_y = x.view(sdtype(bits)) < 0, y.view(sdtype(bits)) < 0
        ax = np.where(neg_x, (~x) + one, x)  # |x| as unsigned: exact for INT_MIN too
        ay = np.where(neg_y, (~y) + one, y)
        ay = np.where(zero, one, ay)
        qa, ra = ax // ay, ax % ay
        q = np.where(neg_x != neg_y, (~qa) + one, qa)
        r = np.where(neg_x, (~ra) + one, ra)
    else:
        safe = np.where(zero, one, y)
        q, r = x // safe, x % safe
    out = r if rem else q
    return np.where(zero, ud.type((1 << bits) - 1), out).astype(ud)


@isa.implements("div", "rem", family=I)
def div_rem(d: Decoded):
    t, bits, signed = _typed(d, ("u", "s"))
    d.mods.done()
    rem = d.ins.opcode == "rem"
    return _binary(d, lambda x, y: _div(x, y, bits, signed, rem), bits)


@isa.implements("abs", "neg", family=I)
def abs_neg(d: Decoded):
    """abs / neg of .s16 .s32 .s64, wrapping: abs(INT_MIN) = neg(INT_MIN) = INT_MIN."""
    t, bits, signed = _typed(d, ("s",))
    d.mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)
    is_abs = d.ins.opcode == "abs"

    def run(g):
        x = _val(g, a, ud)
        neg = (~x) + ud.type(1)
        g.write(dst, np.where(x.view(sdtype(bits)) < 0, neg, x) if is_abs else neg)

    return d.op(run)


@isa.implements("min", "max", family=I)
def min_max(d: Decoded):
    """min / max of .u16 .. .s64 and the packed .u16x2 / .s16x2; .relu (.s32, .s16x2) clamps the result at 0."""
    mods = d.mods
    relu = mods.flag(".relu")
    t = _packed_or_type(mods)
    mods.done()
    pick = np.minimum if d.ins.opcode == "min" else np.maximum
    if relu and t not in (".s32", ".s16x2"):
        raise isa.Unsupported(f".relu{t} (only .s32 and .s16x2)")

    def chosen(x, y):
        r = pick(x, y)
        return np.maximum(r, 0) if relu else r

    if t in _PACKED:
        return _binary(d, _halves(chosen, _PACKED[t]), 32)
    if kind_of(t) not in ("u", "s") or bits_of(t) not in (16, 32, 64):
        raise isa.Unsupported(f"type {t}")
    bits = bits_of(t)
    if kind_of(t) == "s":
        return _binary(
            d, lambda x, y: np.asarray(chosen(x.view(sdtype(bits)), y.view(sdtype(bits)))).view(udtype(bits)), bits
        )
    return _binary(d, pick, bits)


# -- bit counting and fields ------------------------------------------------------------------------------


def _unary_bits(d: Decoded, fn, kinds=("b",)):
    """d (.u32) = fn(a, bits) of a .b32 / .b64 operand."""
    t, bits, signed = _typed(d, kinds, (32, 64))
    d.mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)

    def run(g):
        g.write(dst, np.asarray(fn(_val(g, a, ud), bits, signed)).astype(np.int64).astype(np.uint32))

    return d.op(run)


def _bitlen(x, bits):
    """Position of the highest set bit plus one (0 for 0)."""
    x = np.asarray(x).astype(np.uint64)
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
    return _unary_bits(d, lambda x, bits, _s: np.bitwise_count(x))


@isa.implements("clz")
def clz(d: Decoded):
    return _unary_bits(d, lambda x, bits, _s: bits - _bitlen(x, bits))


@isa.implements("bfind")
def bfind(d: Decoded):
    """The position of the most significant non-sign bit (0xffffffff if none); .shiftamt: msb - position."""
    shift = d.mods.flag(".shiftamt")

    def fn(x, bits, signed):
        if signed:  # negative inputs: the most significant 0
            x = np.where(x.view(sdtype(bits)) < 0, ~x, x)
        pos = _bitlen(x, bits) - 1
        return np.where(pos < 0, 0xFFFFFFFF, (bits - 1 - pos) if shift else pos)

    return _unary_bits(d, fn, ("u", "s"))


_REV8 = np.array([int(f"{i:08b}"[::-1], 2) for i in range(256)], np.uint64)


@isa.implements("brev")
def brev(d: Decoded):
    def fn(x, bits, _s):
        x = x.astype(np.uint64)
        r = np.zeros(x.shape, np.uint64)
        for k in range(bits // 8):
            byte = (x >> np.uint64(8 * k)) & np.uint64(0xFF)
            r |= _REV8[byte.astype(np.int64)] << np.uint64(bits - 8 - 8 * k)
        return r

    t, bits, _ = _typed(d, ("b",), (32, 64))
    d.mods.done()
    ud = udtype(bits)
    a, dst = d.src(1, ud), d.dst(0)

    def run(g):
        g.write(dst, fn(_val(g, a, ud), bits, False).astype(ud))

    return d.op(run)


def _low_mask(n, bits: int):
    """uint64 masks of the low ``n`` bits (n an int64 array in 0..bits; bits <= 64)."""
    n = np.asarray(n, np.int64)
    full = np.uint64(2**64 - 1)
    return np.where(n >= 64, full, (np.uint64(1) << np.minimum(n, 63).astype(np.uint64)) - np.uint64(1))


def _field_bounds(g, pos_slot, len_slot, bits: int):
    """(pos, len) of bfe / bfi as int64 arrays. The 32-bit forms are the BFE / BFI instructions, which read the
    low byte of each (PTX ISA: pos = b & 0xff, len = c & 0xff). sm_90 has no 64-bit bit-field instruction: ptxas
    builds the .u64 / .s64 / .b64 forms from 64-bit funnel shifts of the whole 32-bit operands (mask = (1 << len) -
    1, field = a >> pos), and those shifts clamp at 64. So on the H200 a position of 256 or more is past the msb
    and a length of 256 or more covers the whole register, where the low byte would say otherwise (silicon probes
    integer/bfe_u64, bfe_s64, bfi_b64: tests/data/ptx_isa/integer_sm90.npz)."""
    pos = _val(g, pos_slot, np.uint32).astype(np.int64)
    length = _val(g, len_slot, np.uint32).astype(np.int64)
    if bits == 32:
        return pos & 0xFF, length & 0xFF
    return pos, length


@isa.implements("bfe")
def bfe(d: Decoded):
    """Bit field extract (PTX ISA bfe): pos = b & 0xff, len = c & 0xff for .u32 / .s32, the whole of b and c for
    .u64 / .s64 (``_field_bounds``); bit i of d is a[pos + i] for i < len and pos + i <= msb, else the sign bit: 0
    for unsigned types and len 0, a[min(pos + len - 1, msb)] for signed ones (so a field running past the msb, or
    starting past it, is filled with a's sign)."""
    t, bits, signed = _typed(d, ("u", "s"), (32, 64))
    d.mods.done()
    ud = udtype(bits)
    a, b, c, dst = d.src(1, ud), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        x = _val(g, a, ud).astype(np.uint64)
        pos, length = _field_bounds(g, b, c, bits)
        inside = np.clip(np.minimum(length, bits - pos), 0, bits)  # bits copied from a
        field = np.where(pos >= bits, np.uint64(0), x >> np.minimum(pos, 63).astype(np.uint64)) & _low_mask(
            inside, bits
        )
        if signed:
            top = np.minimum(pos + length - 1, bits - 1)
            sbit = ((x >> np.maximum(top, 0).astype(np.uint64)) & np.uint64(1)).astype(bool) & (length > 0)
            field = np.where(sbit, field | ~_low_mask(inside, bits), field)
        g.write(dst, (field & np.uint64((1 << bits) - 1)).astype(ud))

    return d.op(run)


@isa.implements("bfi")
def bfi(d: Decoded):
    """Bit field insert (PTX ISA bfi): f = b with bits pos .. pos + len - 1 (those <= msb) taken from a's low
    bits; pos = c & 0xff, len = d & 0xff for .b32, the whole of c and d for .b64 (``_field_bounds``)."""
    t, bits, _ = _typed(d, ("b",), (32, 64))
    d.mods.done()
    ud = udtype(bits)
    a, b, c, e, dst = d.src(1, ud), d.src(2, ud), d.src(3, np.uint32), d.src(4, np.uint32), d.dst(0)

    def run(g):
        x = _val(g, a, ud).astype(np.uint64)
        y = _val(g, b, ud).astype(np.uint64)
        pos, length = _field_bounds(g, c, e, bits)
        shift = np.minimum(pos, 63).astype(np.uint64)
        where = np.where(pos >= bits, np.uint64(0), _low_mask(np.minimum(length, bits), bits) << shift)
        r = (y & ~where) | ((x << shift) & where)
        g.write(dst, (r & np.uint64((1 << bits) - 1)).astype(ud))

    return d.op(run)


@isa.implements("bmsk")
def bmsk(d: Decoded):
    """A mask of b bits from bit a (PTX ISA bmsk): .wrap takes a and b modulo 32; .clamp makes a >= 32 an empty
    mask and b >= 32 a mask to the msb; a mask running past bit 31 ends there."""
    mods = d.mods
    mode = mods.take(".clamp", ".wrap")
    t = mods.type()
    mods.done()
    if mode is None or t != ".b32":
        raise isa.Unsupported("bmsk needs .clamp / .wrap and .b32")
    a, b, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.dst(0)

    def run(g):
        av = _val(g, a, np.uint32).astype(np.int64)
        bv = _val(g, b, np.uint32).astype(np.int64)
        a1, b1 = av & 31, bv & 31
        full = np.uint64(0xFFFFFFFF)
        mask0 = (full << a1.astype(np.uint64)) & full
        total = a1 + b1
        mask1 = (full << np.minimum(total, 32).astype(np.uint64)) & full
        stop = total >= 32
        if mode == ".clamp":
            mask0 = np.where(av >= 32, np.uint64(0), mask0)
            stop = stop | (av >= 32) | (bv >= 32)
        mask1 = np.where(stop, np.uint64(0), np.where(b1 == 0, full, mask1))
        g.write(dst, (mask0 & ~mask1 & full).astype(np.uint32))

    return d.op(run)


@isa.implements("szext")
def szext(d: Decoded):
    """Sign- (.s32) or zero- (.u32) extend the low N = b bits of a (PTX ISA szext): N 0 gives 0; N >= 32 keeps a
    with .clamp, and N mod 32 with .wrap."""
    mods = d.mods
    mode = mods.take(".clamp", ".wrap")
    t, bits, signed = _typed(d, ("u", "s"), (32,))
    mods.done()
    if mode is None:
        raise isa.Unsupported("szext needs .clamp or .wrap")
    a, b, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.dst(0)

    def run(g):
        x = _val(g, a, np.uint32).astype(np.uint64)
        bv = _val(g, b, np.uint32).astype(np.int64)
        b1 = bv & 31
        too_large = (bv >= 32) if mode == ".clamp" else np.zeros(np.shape(bv), bool)
        full = np.uint64(0xFFFFFFFF)
        mask = np.where(too_large, np.uint64(0), (full << b1.astype(np.uint64)) & full)
        if signed:
            sbit = ((x >> ((b1 - 1) & 31).astype(np.uint64)) & np.uint64(1)).astype(bool) & (b1 != 0) & ~too_large
        else:
            sbit = False
        r = (x & ~mask & full) | np.where(sbit, mask, np.uint64(0))
        g.write(dst, r.astype(np.uint32))

    return d.op(run)


@isa.implements("fns")
def fns(d: Decoded):
    """The position of the n-th set bit of mask counting from bit base, upward for offset > 0 and downward for
    offset < 0 (offset 0: base itself if set), 0xffffffff if there is none (PTX ISA fns). The ISA calls base > 31
    undefined; its pseudo-code then finds nothing (0xffffffff), and so does ptxas's sequence (its masks
    1 << base and ~0 << base come from SHF.L.U32, which clamps the count at 32): the model follows both, the
    probe integer/fns pins it."""
    t = d.mods.type()
    d.mods.done()
    if t != ".b32":
        raise isa.Unsupported(f"fns{t}")
    mask_s, base_s, off_s, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        mask = _val(g, mask_s, np.uint32)
        base = _val(g, base_s, np.uint32).astype(np.int64)
        off = _val(g, off_s, np.uint32).view(np.int32).astype(np.int64)
        mask, base, off = np.broadcast_arrays(mask, base, off)
        want = np.maximum(np.abs(off), 1)  # offset 0: the first set bit at base itself
        up = off >= 0
        count = np.zeros(mask.shape, np.int64)
        found = np.full(mask.shape, -1, np.int64)
        for step in range(32):  # positions base + step (upward) or base - step (downward)
            pos = np.where(up, base + step, base - step)
            ok = (base < 32) & (pos >= 0) & (pos < 32) & ((off != 0) | (step == 0))
            bit = ok & (((mask >> np.clip(pos, 0, 31).astype(np.uint32)) & np.uint32(1)) != 0)
            count = count + bit
            found = np.where((found < 0) & bit & (count == want), pos, found)
        g.write(dst, (found & 0xFFFFFFFF).astype(np.uint32))

    return d.op(run)


def _bytes(x, signed: bool, n: int, width: int):
    """The ``n`` fields of ``width`` bits of u32 ``x``, zero- or sign-extended, as int64 arrays."""
    out = []
    for k in range(n):
        f = (x.astype(np.int64) >> (width * k)) & ((1 << width) - 1)
        if signed:
            f = (f ^ (1 << (width - 1))) - (1 << (width - 1))
        out.append(f)
    return out


@isa.implements("dp4a", "dp2a")
def dot(d: Decoded):
    """dp4a: c + the dot product of a's and b's four bytes; dp2a.lo / .hi: c + a's two half-words dotted with b's
    low / high two bytes; each field sign-extended for an .s32 operand type; the sum wraps to 32 bits."""
    mods = d.mods
    two = d.ins.opcode == "dp2a"
    part = mods.take(".lo", ".hi") if two else None
    types = mods.types()
    mods.done()
    if len(types) != 2 or any(x not in (".u32", ".s32") for x in types) or (two and part is None):
        raise isa.Unsupported(f"{d.ins.opcode} needs {'.lo / .hi and ' if two else ''}.atype.btype in .u32 / .s32")
    sa, sb = (x == ".s32" for x in types)
    a, b, c, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        x, y = _val(g, a, np.uint32), _val(g, b, np.uint32)
        vb = _bytes(y, sb, 4, 8)
        if two:
            va = _bytes(x, sa, 2, 16)
            first = 0 if part == ".lo" else 2
            total = va[0] * vb[first] + va[1] * vb[first + 1]
        else:
            va = _bytes(x, sa, 4, 8)
            total = sum(p * q for p, q in zip(va, vb))
        g.write(dst, ((total + _val(g, c, np.uint32).astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32))

    return d.op(run)


# -- logic and shifts -------------------------------------------------------------------------------------


def _pred_src(d: Decoded, i: int):
    """(slot, negated) of predicate operand ``i`` (``p`` or ``!p``; an immediate 0 / 1 becomes a constant)."""
    op = d.operands[i]
    if isinstance(op, Not):
        return d.reg(op.reg), True
    return d.value(op, np.dtype(bool)), False


def _pred(g, slot, negated):
    v = np.asarray(g.R[slot]).astype(bool)
    return ~v if negated else v


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
            g.write(dst, fn(_pred(g, a, na), _pred(g, b, nb)))

        return d.op(run)
    if kind_of(t) != "b" or bits_of(t) not in (16, 32, 64):
        raise isa.Unsupported(f"{d.ins.opcode}{t}")
    return _binary(d, fn, bits_of(t))


@isa.implements("not", "cnot")
def not_(d: Decoded):
    t = d.mods.type()
    d.mods.done()
    cnot = d.ins.opcode == "cnot"
    if t == ".pred" and not cnot:
        dst, (a, na) = d.dst(0), _pred_src(d, 1)

        def run(g):
            g.write(dst, ~_pred(g, a, na))

        return d.op(run)
    if kind_of(t) != "b" or bits_of(t) not in (16, 32, 64):
        raise isa.Unsupported(f"{d.ins.opcode}{t}")
    ud = udtype(bits_of(t))
    a, dst = d.src(1, ud), d.dst(0)

    def run(g):
        x = _val(g, a, ud)
        g.write(dst, (x == 0).astype(ud) if cnot else ~x)

    return d.op(run)


def lut3(table: int, x, y, z):
    """The bitwise function with truth table ``table`` of x, y, z (lop3's immLut: bit (a << 2 | b << 1 | c) of the
    table is F(a, b, c), which is what F(0xF0, 0xCC, 0xAA) computes)."""
    r = np.zeros(np.broadcast(x, y, z).shape, np.asarray(x).dtype)
    for k in range(8):
        if table >> k & 1:
            r |= (x if k & 4 else ~x) & (y if k & 2 else ~y) & (z if k & 1 else ~z)
    return r


@isa.implements("lop3")
def lop3(d: Decoded):
    """lop3.b32 d, a, b, c, immLut; and lop3.{or,and}.b32 d|p, a, b, c, immLut, q: p = (d != 0) BoolOp q."""
    mods = d.mods
    bop = mods.take(".or", ".and")
    t = mods.type()
    mods.done()
    if t != ".b32":
        raise isa.Unsupported(f"lop3{t}")
    out = d.operands[0]
    if bop is not None:
        if not isinstance(out, Pair):
            raise isa.Unsupported(f"lop3{bop} needs a d|p destination")
        dst = None if isinstance(out.first, Sink) else d.reg(out.first)
        pdst = d.reg(out.second)
        q, nq = _pred_src(d, 5)
    else:
        dst, pdst = d.dst(0), None
    a, b, c = (d.src(i, np.uint32) for i in (1, 2, 3))
    lut = d.operands[4]
    if not hasattr(lut, "value") or hasattr(lut, "name"):
        raise isa.Unsupported("lop3 needs an immediate LUT")
    table = int(lut.value) & 0xFF
    combine = np.logical_or if bop == ".or" else np.logical_and

    def run(g):
        r = lut3(table, *(_val(g, s, np.uint32) for s in (a, b, c)))
        g.write(dst, r)
        if pdst is not None:
            g.write(pdst, combine(r != 0, _pred(g, q, nq)))

    return d.op(run)


@isa.implements("shl", "shr")
def shift(d: Decoded):
    """Shifts by the unsigned 32-bit b; a count past the width acts as the width (0, or the sign for shr.s)."""
    t, bits, signed = _typed(d, ("b", "u", "s") if d.ins.opcode == "shr" else ("b",))
    d.mods.done()
    ud = udtype(bits)
    a, b, dst = d.src(1, ud), d.src(2, np.uint32), d.dst(0)
    left = d.ins.opcode == "shl"

    def run(g):
        x = _val(g, a, ud)
        n = _val(g, b, np.uint32).astype(np.int64)
        big = n >= bits
        s = np.minimum(n, bits - 1).astype(ud)
        if left:
            r = np.where(big, ud.type(0), x << s)
        elif signed:
            xs = x.view(sdtype(bits))
            r = np.where(big, xs >> (bits - 1), xs >> s.astype(sdtype(bits))).view(ud)
        else:
            r = np.where(big, ud.type(0), x >> s)
        g.write(dst, np.asarray(r).astype(ud))

    return d.op(run)


@isa.implements("shf")
def shf(d: Decoded):
    """Funnel shift of the 64-bit {b, a} by n = min(c, 32) (.clamp) or c & 31 (.wrap): .l the high word of the
    left shift, .r the low word of the right shift."""
    mods = d.mods
    direction = mods.take(".l", ".r")
    mode = mods.take(".clamp", ".wrap")
    t = mods.type()
    mods.done()
    if direction is None or mode is None or t != ".b32":
        raise isa.Unsupported("shf needs .l / .r, .clamp / .wrap and .b32")
    a, b, c, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        lo = _val(g, a, np.uint32).astype(np.uint64)
        hi = _val(g, b, np.uint32).astype(np.uint64)
        n = _val(g, c, np.uint32).astype(np.uint64)
        n = np.minimum(n, np.uint64(32)) if mode == ".clamp" else (n & np.uint64(31))
        pair = (hi << np.uint64(32)) | lo
        r = ((pair << n) >> np.uint64(32)) if direction == ".l" else (pair >> n)
        g.write(dst, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32))

    return d.op(run)


@isa.implements("prmt")
def prmt(d: Decoded):
    """Byte permute of {b, a} (bytes 0-3 from a, 4-7 from b): the generic form takes four 4-bit selectors from c
    (bit 3 of one: replicate the sign of the byte), the modes .f4e .b4e .rc8 .ecl .ecr .rc16 the two low bits."""
    mods = d.mods
    mode = mods.take(".f4e", ".b4e", ".rc8", ".ecl", ".ecr", ".rc16")
    t = mods.type()
    mods.done()
    if t != ".b32":
        raise isa.Unsupported(f"prmt{t}")
    a, b, c, dst = d.src(1, np.uint32), d.src(2, np.uint32), d.src(3, np.uint32), d.dst(0)

    def run(g):
        x, y, sel = np.broadcast_arrays(*(_val(g, s, np.uint32).astype(np.uint64) for s in (a, b, c)))
        src = x | (y << np.uint64(32))
        out = np.zeros(src.shape, np.uint64)
        for k in range(4):
            if mode is None:
                s = (sel >> np.uint64(4 * k)) & np.uint64(0xF)
                byte = (src >> (np.uint64(8) * (s & np.uint64(7)))) & np.uint64(0xFF)
                sign = (byte >> np.uint64(7)) * np.uint64(0xFF)
                byte = np.where((s & np.uint64(8)) != 0, sign, byte)
            else:
                pos = _prmt_mode(mode, k, (sel & np.uint64(3)).astype(np.int64)).astype(np.uint64)
                byte = (src >> (np.uint64(8) * pos)) & np.uint64(0xFF)
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


# -- compares and selects ---------------------------------------------------------------------------------

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
_UNSIGNED_COMPARES = (".lo", ".ls", ".hi", ".hs")
BOOL_OPS = {".and": np.logical_and, ".or": np.logical_or, ".xor": np.logical_xor}


def _set_dests(d: Decoded):
    """(p slot or None, q slot or None) of setp's ``p[|q]`` destination (``_`` for either: None)."""
    op = d.operands[0]
    if isinstance(op, Pair):
        first = None if isinstance(op.first, Sink) else d.reg(op.first)
        return first, d.reg(op.second)
    return d.dst(0), None


def _combiner(d: Decoded, index: int):
    """setp / set's optional ``.BoolOp {!}c`` (operand ``index``): a function (g, t) -> t BoolOp c."""
    bop = d.mods.take(*BOOL_OPS)
    if bop is None:
        if len(d.operands) > index:
            raise isa.Unsupported("a predicate operand without a .and / .or / .xor")
        return lambda g, r: r
    c, nc = _pred_src(d, index)
    combine = BOOL_OPS[bop]
    return lambda g, r: combine(r, _pred(g, c, nc))


def setp_common(d: Decoded, compare_fn, a, b):
    """setp's destinations and optional ``.BoolOp c``: p = cmp BOP c, q = !cmp BOP c (``compare_fn(g, a, b)``)."""
    p, q = _set_dests(d)
    combine = _combiner(d, 3)

    def run(g):
        r = np.asarray(compare_fn(g, a, b))
        if r.ndim == 0:
            r = np.broadcast_to(r, (g.m.T,))
        g.write(p, combine(g, r))
        if q is not None:
            g.write(q, combine(g, ~r))

    return run


def set_common(d: Decoded, compare_fn, a, b, dtype: str):
    """set's destination: 0xffffffff (.u32 / .s32) or 1.0f (.f32) where ``compare_fn(g, a, b)`` BoolOp c holds, else
    0 (PTX ISA set); for the float builder's set too."""
    if dtype not in (".u32", ".s32", ".f32"):
        raise isa.Unsupported(f"set with destination type {dtype}")
    one = np.uint32(0x3F800000 if dtype == ".f32" else 0xFFFFFFFF)
    dst = d.dst(0)
    combine = _combiner(d, 3)

    def run(g):
        g.write(dst, np.where(combine(g, np.asarray(compare_fn(g, a, b))), one, np.uint32(0)))

    return run


def _integer_compare(d: Decoded, cmp: str, t: str):
    """(compare_fn, a slot, b slot) of an integer (or .pred eq / ne) compare of operands 1 and 2."""
    if t == ".pred":
        if cmp not in (".eq", ".ne"):
            raise isa.Unsupported(f"{cmp} of .pred")
        a, b = d.value(d.operands[1], bool), d.value(d.operands[2], bool)

        def pred_compare(g, a, b):
            return _COMPARE[cmp](np.asarray(g.R[a]).astype(bool), np.asarray(g.R[b]).astype(bool))

        return pred_compare, a, b
    if kind_of(t) not in _ARITH or bits_of(t) not in (16, 32, 64):
        raise isa.Unsupported(f"an integer compare of {t}")
    bits = bits_of(t)
    ud = udtype(bits)
    signed = kind_of(t) == "s" and cmp not in _UNSIGNED_COMPARES
    if kind_of(t) == "b" and cmp not in (".eq", ".ne"):
        raise isa.Unsupported(f"{cmp} of the bit-size type {t} (eq / ne only)")
    fn = _COMPARE[cmp]

    def compare(g, a, b):
        x, y = _val(g, a, ud), _val(g, b, ud)
        if signed:
            x, y = x.view(sdtype(bits)), y.view(sdtype(bits))
        return fn(x, y)

    return compare, d.src(1, ud), d.src(2, ud)


@isa.implements("setp", family=I)
def setp_int(d: Decoded):
    mods = d.mods
    cmp = mods.take(*_COMPARE)
    if cmp is None:
        raise isa.Unsupported("setp needs an integer comparison")
    t = mods.type()
    compare, a, b = _integer_compare(d, cmp, t)
    run = setp_common(d, compare, a, b)
    mods.done()
    return d.op(run)


@isa.implements("selp")
def selp(d: Decoded):
    """d = c ? a : b, the bits of any type."""
    t = d.mods.type()
    d.mods.done()
    bits = bits_of(t)
    ud = udtype(bits)
    if kind_of(t) == "f":
        d.float_kind = {16: "f16", 32: "f32", 64: "f64"}[bits]
    dst, a, b = d.dst(0), d.src(1, ud), d.src(2, ud)
    c, nc = _pred_src(d, 3)

    def run(g):
        g.write(dst, np.where(_pred(g, c, nc), _val(g, a, ud), _val(g, b, ud)))

    return d.op(run)


@isa.implements("slct")
def slct(d: Decoded):
    """d = (c >= 0) ? a : b, with c .s32 or .f32 (a NaN c is not >= 0; -0.0 is; .ftz: a subnormal c counts as
    zero). a and b are copied bit for bit."""
    mods = d.mods
    ftz = mods.flag(".ftz")
    types = mods.types()
    mods.done()
    if len(types) != 2 or types[1] not in (".s32", ".f32") or (ftz and types[1] != ".f32"):
        raise isa.Unsupported("slct needs .dtype.s32 or {.ftz}.dtype.f32")
    dtype, ctype = types
    bits = bits_of(dtype)
    ud = udtype(bits)
    if kind_of(dtype) == "f":
        d.float_kind = {16: "f16", 32: "f32", 64: "f64"}[bits]
    dst, a, b = d.dst(0), d.src(1, ud), d.src(2, ud)
    d.float_kind = "f32" if ctype == ".f32" else None
    c = d.src(3, np.uint32)

    def run(g):
        cv = _val(g, c, np.uint32)
        if ctype == ".s32":
            keep = cv.view(np.int32) >= 0
        else:
            mag = cv & np.uint32(0x7FFFFFFF)
            small = mag < np.uint32(0x00800000) if ftz else mag == 0
            keep = (mag <= np.uint32(0x7F800000)) & (((cv >> np.uint32(31)) == 0) | small)
        g.write(dst, np.where(keep, _val(g, a, ud), _val(g, b, ud)))

    return d.op(run)
