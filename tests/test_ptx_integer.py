"""flashsim.ptx's integer, bit and predicate instructions against exact Python-integer oracles written here from the
PTX ISA's semantics text (sections "Integer Arithmetic", "Logic and Shift", "Comparison and Selection", prmt), over
raw bit patterns: a grid of edge values (zero, one, all ones, INT_MIN and its neighbours, shift counts around the
width, bit positions past the msb) and random bits drawn by hypothesis. Each case is one hand-written PTX kernel
(flashsim.ptx.load) that applies the instruction to one element per thread; bits are compared exactly.

Where the ISA leaves a result open (division by zero), the oracle states the H200's choice (integer.DIV_BY_ZERO,
read from ptxas's SASS); the silicon probes (flashsim.ptx.probes.integer) hold it against the GPU.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim import ptx
from flashsim.ptx.semantics import integer as integer_semantics

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"
BLOCK = 128


def mask(x: int, w: int) -> int:
    return x & ((1 << w) - 1)


def sx(x: int, w: int) -> int:
    """The w-bit pattern x read as two's complement."""
    x = mask(x, w)
    return x - (1 << w) if x >> (w - 1) else x


# -- the kernel: one instruction on one element per thread -----------------------------------------------


def kernel_text(body: str, ins: tuple, outs: tuple) -> str:
    """A kernel ``k(in0.., out0.., n)``: thread i loads in_k[i] (width ins[k] bits; 1: a predicate from a byte) into
    {a} {b} {c} {e} {f}, runs ``body`` and stores {d} {d1} ... (widths outs; 1: a predicate as a byte)."""
    names = "abcef"
    params = [f".param .u64 in{k}" for k in range(len(ins))] + [f".param .u64 out{k}" for k in range(len(outs))]
    regs = [".reg .b32 %i, %t, %nn;", ".reg .b64 %off, %ptr;", ".reg .pred %outside;", ".reg .b16 %byte;"]
    lines = [
        "mov.u32 %i, %ctaid.x;",
        "mov.u32 %nn, %ntid.x;",
        "mov.u32 %t, %tid.x;",
        "mad.lo.u32 %i, %i, %nn, %t;",
        "ld.param.u32 %nn, [n];",
        "setp.ge.u32 %outside, %i, %nn;",
        "@%outside bra DONE;",
    ]
    fmt = {}
    for k, w in enumerate(ins):
        r = f"%x{k}"
        fmt[names[k]] = r
        regs.append(f".reg .pred {r};" if w == 1 else f".reg .b{w} {r};")
        width = 1 if w == 1 else w // 8
        lines += [
            f"ld.param.u64 %ptr, [in{k}];",
            f"mul.wide.u32 %off, %i, {width};",
            "add.s64 %ptr, %ptr, %off;",
        ]
        if w == 1:
            lines += ["ld.global.u8 %byte, [%ptr];", f"setp.ne.b16 {r}, %byte, 0;"]
        else:
            lines.append(f"ld.global.b{w} {r}, [%ptr];")
    for k, w in enumerate(outs):
        r = f"%y{k}"
        fmt["d" if k == 0 else f"d{k}"] = r
        regs.append(f".reg .pred {r};" if w == 1 else f".reg .b{w} {r};")
    lines.append(body.format(**fmt))
    for k, w in enumerate(outs):
        width = 1 if w == 1 else w // 8
        lines += [
            f"ld.param.u64 %ptr, [out{k}];",
            f"mul.wide.u32 %off, %i, {width};",
            "add.s64 %ptr, %ptr, %off;",
        ]
        if w == 1:
            lines += [f"selp.u16 %byte, 1, 0, %y{k};", "st.global.u8 [%ptr], %byte;"]
        else:
            lines.append(f"st.global.b{w} [%ptr], %y{k};")
    return (
        HEADER
        + f".visible .entry k({', '.join(params + ['.param .u32 n'])})\n{{\n"
        + "\n".join(regs + lines)
        + "\nDONE:\n  ret;\n}\n"
    )


@functools.cache
def kernel(body: str, ins: tuple, outs: tuple):
    return ptx.load(kernel_text(body, ins, outs), contraction="none").kernel("k")


def dtype_of(w: int):
    return np.dtype(bool if w == 1 else f"u{w // 8}")


def run(body: str, ins: tuple, outs: tuple, columns) -> list[np.ndarray]:
    """The outputs of ``body`` on the operand columns (one list of ints per operand)."""
    n = len(columns[0])
    arrays = [np.array(col, dtype=np.uint8 if w == 1 else dtype_of(w)) for col, w in zip(columns, ins)]
    out = [np.zeros(n, np.uint8 if w == 1 else dtype_of(w)) for w in outs]
    ptx.launch(kernel(body, ins, outs), (-(-n // BLOCK),), (BLOCK,), [*arrays, *out, np.uint32(n)])
    return out


# -- operand values ----------------------------------------------------------------------------------------


def edges(w: int) -> list[int]:
    """Zero, one, all ones and its neighbours, INT_MIN / INT_MAX and neighbours, powers of two and small counts."""
    if w == 1:
        return [0, 1]
    top = 1 << (w - 1)
    vals = {0, 1, 2, 3, mask(-1, w), mask(-2, w), top, top - 1, top + 1, 5, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64}
    vals |= {0x55 % (1 << w), 0xAA % (1 << w), mask(0x5555555555555555, w), mask(0x0F0F0F0F0F0F0F0F, w)}
    return sorted(v for v in vals if v < (1 << w))


def grid(ws: tuple, limit: int = 4096) -> list[list[int]]:
    """Every combination of the operands' edge values (truncated per operand so that it stays under ``limit``)."""
    per = [edges(w) for w in ws]
    while np.prod([len(p) for p in per]) > limit:
        k = int(np.argmax([len(p) for p in per]))
        per[k] = per[k][: len(per[k]) - 1]
    combos = list(itertools.product(*per))
    return [list(col) for col in zip(*combos)]


def position(x: int) -> int:
    """A bit position / length / count operand from raw bits: mostly 0..79 (around the widths), else the bits."""
    return x % 80 if x % 4 else x


def small_signed(x: int) -> int:
    """An fns offset from raw bits: mostly -40..40, else the bits."""
    return mask((x % 81) - 40, 32) if x % 4 else x


F32_SPECIALS = [0, 0x80000000, 1, 0x80000001, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001]


def f32_operand(x: int) -> int:
    """An f32 compare operand from raw bits: zeros, subnormals, infinities and NaNs half of the time."""
    return F32_SPECIALS[x % len(F32_SPECIALS)] if x & 1 else x


@dataclass(frozen=True)
class Case:
    """One instruction form: the PTX ``body``, operand and result widths, the oracle (ints -> int or tuple),
    optional per-operand transforms of raw bits (positions, offsets, special floats) and a label."""

    body: str
    ins: tuple
    outs: tuple
    oracle: object
    special: tuple = ()
    label: str = ""

    @property
    def id(self) -> str:
        return self.label or self.body.split()[0]


def check(case: Case, columns) -> None:
    got = run(case.body, case.ins, case.outs, columns)
    for i, row in enumerate(zip(*columns)):
        want = case.oracle(*row)
        want = want if isinstance(want, tuple) else (want,)
        have = tuple(int(g[i]) for g in got)
        assert have == want, (
            f"{case.body} on {[hex(v) for v in row]}: got {[hex(v) for v in have]}, want {[hex(v) for v in want]}"
        )


# -- the oracles (the ISA's semantics, on Python ints) -----------------------------------------------------

INT = {
    "u16": (16, False),
    "s16": (16, True),
    "u32": (32, False),
    "s32": (32, True),
    "u64": (64, False),
    "s64": (64, True),
}


def val(x, t):
    w, signed = INT[t]
    return sx(x, w) if signed else mask(x, w)


def div_oracle(t, rem):
    w, _ = INT[t]

    def fn(a, b):
        x, y = val(a, t), val(b, t)
        if y == 0:
            return mask(-1, w)  # integer.DIV_BY_ZERO: all ones (ptxas's sequences select ~divisor)
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        return mask(x - q * y if rem else q, w)

    return fn


def halves(fn, signed):
    def run2(a, b):
        out = 0
        for s in (0, 16):
            x, y = (a >> s) & 0xFFFF, (b >> s) & 0xFFFF
            if signed:
                x, y = sx(x, 16), sx(y, 16)
            out |= mask(fn(x, y), 16) << s
        return out

    return run2


def _field(w, pos, length):
    """bfe / bfi's position and length: the low byte of each for 32 bits (the ISA's pseudocode), the whole 32-bit
    operand for 64 (ptxas's shift sequence; silicon probes integer/bfe_u64, bfe_s64, bfi_b64)."""
    return (pos & 0xFF, length & 0xFF) if w == 32 else (pos, length)


def bfe_oracle(t):
    w, signed = INT[t]

    def fn(a, b, c):
        msb, (pos, length) = w - 1, _field(w, b, c)
        sbit = 0 if (not signed or length == 0) else (a >> min(pos + length - 1, msb)) & 1
        return sum(((a >> (pos + i)) & 1 if (i < length and pos + i <= msb) else sbit) << i for i in range(w))

    return fn


def bfi_oracle(w):
    def fn(a, b, c, e):
        msb, (pos, length) = w - 1, _field(w, c, e)
        f = b
        i = 0
        while i < length and pos + i <= msb:
            f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
            i += 1
        return f

    return fn


def bmsk_oracle(clamp):
    def fn(a, b):
        a1, b1 = a & 0x1F, b & 0x1F
        mask0 = mask(~0 << a1, 32)
        total = a1 + b1
        mask1 = mask(~0 << total, 32) if total < 32 else 0
        over = total >= 32
        if clamp:
            if a >= 32:
                over, mask0 = True, 0
            if b >= 32:
                over = True
        if over:
            mask1 = 0
        elif b1 == 0:
            mask1 = mask(~0, 32)
        return mask0 & mask(~mask1, 32)

    return fn


def szext_oracle(clamp, signed):
    def fn(a, b):
        b1 = b & 0x1F
        too_large = b >= 32 and clamp
        m = 0 if too_large else mask(~0 << b1, 32)
        sign = 0 if (b1 == 0 or too_large or not signed) else (a >> ((b1 - 1) & 0x1F)) & 1
        return (a & mask(~m, 32)) | (m if sign else 0)

    return fn


def fns_oracle(m, base, offset):
    offset = sx(offset, 32)
    if offset == 0:
        return base if (m >> base) & 1 else 0xFFFFFFFF
    pos, count, inc = base, abs(offset) - 1, 1 if offset > 0 else -1
    while 0 <= pos < 32:
        if (m >> pos) & 1:
            if count == 0:
                return pos
            count -= 1
        pos += inc
    return 0xFFFFFFFF


def fields(x, n, width, signed):
    return [sx(x >> (width * k), width) if signed else (x >> (width * k)) & ((1 << width) - 1) for k in range(n)]


def dp4a_oracle(sa, sb):
    return lambda a, b, c: mask(c + sum(p * q for p, q in zip(fields(a, 4, 8, sa), fields(b, 4, 8, sb))), 32)


def dp2a_oracle(hi, sa, sb):
    def fn(a, b, c):
        va, vb = fields(a, 2, 16, sa), fields(b, 4, 8, sb)
        first = 2 if hi else 0
        return mask(c + va[0] * vb[first] + va[1] * vb[first + 1], 32)

    return fn


def lop3_oracle(lut):
    def fn(a, b, c):
        return sum(((lut >> (((a >> i) & 1) << 2 | ((b >> i) & 1) << 1 | ((c >> i) & 1))) & 1) << i for i in range(32))

    return fn


# prmt's modes as the ISA tabulates them: for the selector's two low bits, the source byte of d.b0 .. d.b3
PRMT_MODES = {
    "f4e": {0: (0, 1, 2, 3), 1: (1, 2, 3, 4), 2: (2, 3, 4, 5), 3: (3, 4, 5, 6)},
    "b4e": {0: (0, 7, 6, 5), 1: (1, 0, 7, 6), 2: (2, 1, 0, 7), 3: (3, 2, 1, 0)},
    "rc8": {0: (0, 0, 0, 0), 1: (1, 1, 1, 1), 2: (2, 2, 2, 2), 3: (3, 3, 3, 3)},
    "ecl": {0: (0, 1, 2, 3), 1: (1, 1, 2, 3), 2: (2, 2, 2, 3), 3: (3, 3, 3, 3)},
    "ecr": {0: (0, 0, 0, 0), 1: (0, 1, 1, 1), 2: (0, 1, 2, 2), 3: (0, 1, 2, 3)},
    "rc16": {0: (0, 1, 0, 1), 1: (2, 3, 2, 3), 2: (0, 1, 0, 1), 3: (2, 3, 2, 3)},
}


def prmt_oracle(mode):
    def fn(a, b, c):
        src = [((b << 32 | a) >> (8 * k)) & 0xFF for k in range(8)]
        out = 0
        for k in range(4):
            if mode is None:
                sel = (c >> (4 * k)) & 0xF
                byte = src[sel & 7]
                if sel & 8:
                    byte = 0xFF if byte & 0x80 else 0
            else:
                byte = src[PRMT_MODES[mode][c & 3][k]]
            out |= byte << (8 * k)
        return out

    return fn


def shift_oracle(op, t):
    w = int(t[1:])
    signed = t[0] == "s"

    def fn(a, n):
        n = min(n, w)
        if op == "shl":
            return mask(a << n, w)
        return mask((sx(a, w) if signed else a) >> n, w)

    return fn


def shf_oracle(left, clamp):
    def fn(a, b, c):
        n = min(c, 32) if clamp else c & 0x1F
        pair = b << 32 | a
        return mask((pair << n) >> 32, 32) if left else mask(pair >> n, 32)

    return fn


COMPARES = {
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
    "lo": lambda x, y: x < y,
    "ls": lambda x, y: x <= y,
    "hi": lambda x, y: x > y,
    "hs": lambda x, y: x >= y,
}
BOOLS = {"and": lambda p, c: p and c, "or": lambda p, c: p or c, "xor": lambda p, c: p != c}


def compare_value(x, t, cmp):
    w, signed = INT.get(t, (int(t[1:]), False))
    return sx(x, w) if signed and cmp not in ("lo", "ls", "hi", "hs") else mask(x, w)


# -- the cases ---------------------------------------------------------------------------------------------


def arithmetic_cases() -> list[Case]:
    cases = []
    for t, (w, signed) in INT.items():
        cases += [
            Case(f"add.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b, w=w: mask(a + b, w)),
            Case(f"sub.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b, w=w: mask(a - b, w)),
            Case(
                f"mul.lo.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b, t=t, w=w: mask(val(a, t) * val(b, t), w)
            ),
            Case(
                f"mul.hi.{t} {{d}}, {{a}}, {{b}};",
                (w, w),
                (w,),
                lambda a, b, t=t, w=w: mask((val(a, t) * val(b, t)) >> w, w),
            ),
            Case(
                f"mad.lo.{t} {{d}}, {{a}}, {{b}}, {{c}};",
                (w, w, w),
                (w,),
                lambda a, b, c, t=t, w=w: mask(val(a, t) * val(b, t) + c, w),
            ),
            Case(
                f"mad.hi.{t} {{d}}, {{a}}, {{b}}, {{c}};",
                (w, w, w),
                (w,),
                lambda a, b, c, t=t, w=w: mask(((val(a, t) * val(b, t)) >> w) + c, w),
            ),
            Case(
                f"sad.{t} {{d}}, {{a}}, {{b}}, {{c}};",
                (w, w, w),
                (w,),
                lambda a, b, c, t=t, w=w: mask(c + abs(val(a, t) - val(b, t)), w),
            ),
            Case(f"div.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), div_oracle(t, False)),
            Case(f"rem.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), div_oracle(t, True)),
            Case(
                f"min.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b, t=t, w=w: mask(min(val(a, t), val(b, t)), w)
            ),
            Case(
                f"max.{t} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b, t=t, w=w: mask(max(val(a, t), val(b, t)), w)
            ),
        ]
        if w < 64:
            cases += [
                Case(
                    f"mul.wide.{t} {{d}}, {{a}}, {{b}};",
                    (w, w),
                    (2 * w,),
                    lambda a, b, t=t, w=w: mask(val(a, t) * val(b, t), 2 * w),
                ),
                Case(
                    f"mad.wide.{t} {{d}}, {{a}}, {{b}}, {{c}};",
                    (w, w, 2 * w),
                    (2 * w,),
                    lambda a, b, c, t=t, w=w: mask(val(a, t) * val(b, t) + c, 2 * w),
                ),
            ]
        if signed:
            cases += [
                Case(f"abs.{t} {{d}}, {{a}};", (w,), (w,), lambda a, t=t, w=w: mask(abs(val(a, t)), w)),
                Case(f"neg.{t} {{d}}, {{a}};", (w,), (w,), lambda a, t=t, w=w: mask(-val(a, t), w)),
            ]
    clamp32 = lambda v: mask(max(-(2**31), min(2**31 - 1, v)), 32)  # noqa: E731
    cases += [
        Case("add.sat.s32 {d}, {a}, {b};", (32, 32), (32,), lambda a, b: clamp32(sx(a, 32) + sx(b, 32))),
        Case("sub.sat.s32 {d}, {a}, {b};", (32, 32), (32,), lambda a, b: clamp32(sx(a, 32) - sx(b, 32))),
        Case(
            "mad.hi.sat.s32 {d}, {a}, {b}, {c};",
            (32, 32, 32),
            (32,),
            lambda a, b, c: clamp32(((sx(a, 32) * sx(b, 32)) >> 32) + sx(c, 32)),
        ),
        Case("add.u16x2 {d}, {a}, {b};", (32, 32), (32,), halves(lambda x, y: x + y, False)),
        Case("add.s16x2 {d}, {a}, {b};", (32, 32), (32,), halves(lambda x, y: x + y, True)),
        Case("min.u16x2 {d}, {a}, {b};", (32, 32), (32,), halves(min, False)),
        Case("max.u16x2 {d}, {a}, {b};", (32, 32), (32,), halves(max, False)),
        Case("min.s16x2 {d}, {a}, {b};", (32, 32), (32,), halves(min, True)),
        Case("max.s16x2 {d}, {a}, {b};", (32, 32), (32,), halves(max, True)),
        Case("min.relu.s16x2 {d}, {a}, {b};", (32, 32), (32,), halves(lambda x, y: max(min(x, y), 0), True)),
        Case("max.relu.s16x2 {d}, {a}, {b};", (32, 32), (32,), halves(lambda x, y: max(x, y, 0), True)),
        Case("min.relu.s32 {d}, {a}, {b};", (32, 32), (32,), lambda a, b: max(min(sx(a, 32), sx(b, 32)), 0)),
        Case("max.relu.s32 {d}, {a}, {b};", (32, 32), (32,), lambda a, b: max(sx(a, 32), sx(b, 32), 0)),
    ]
    for t in ("u32", "s32"):
        s24 = (lambda x: sx(x, 24)) if t == "s32" else (lambda x: x & 0xFFFFFF)
        cases += [
            Case(f"mul24.lo.{t} {{d}}, {{a}}, {{b}};", (32, 32), (32,), lambda a, b, f=s24: mask(f(a) * f(b), 32)),
            Case(
                f"mul24.hi.{t} {{d}}, {{a}}, {{b}};", (32, 32), (32,), lambda a, b, f=s24: mask((f(a) * f(b)) >> 16, 32)
            ),
            Case(
                f"mad24.lo.{t} {{d}}, {{a}}, {{b}}, {{c}};",
                (32, 32, 32),
                (32,),
                lambda a, b, c, f=s24: mask(f(a) * f(b) + c, 32),
            ),
            Case(
                f"mad24.hi.{t} {{d}}, {{a}}, {{b}}, {{c}};",
                (32, 32, 32),
                (32,),
                lambda a, b, c, f=s24: mask(((f(a) * f(b)) >> 16) + c, 32),
            ),
        ]
    cases.append(
        Case(
            "mad24.hi.sat.s32 {d}, {a}, {b}, {c};",
            (32, 32, 32),
            (32,),
            lambda a, b, c: clamp32(sx(mask((sx(a, 24) * sx(b, 24)) >> 16, 32), 32) + sx(c, 32)),
        )
    )
    for sa, sb in itertools.product((False, True), repeat=2):
        ta, tb = ("s32" if sa else "u32"), ("s32" if sb else "u32")
        cases.append(Case(f"dp4a.{ta}.{tb} {{d}}, {{a}}, {{b}}, {{c}};", (32, 32, 32), (32,), dp4a_oracle(sa, sb)))
        for part in ("lo", "hi"):
            cases.append(
                Case(
                    f"dp2a.{part}.{ta}.{tb} {{d}}, {{a}}, {{b}}, {{c}};",
                    (32, 32, 32),
                    (32,),
                    dp2a_oracle(part == "hi", sa, sb),
                )
            )
    return cases


POSITION = position


def bit_cases() -> list[Case]:
    cases = []
    for w in (32, 64):
        cases += [
            Case(f"popc.b{w} {{d}}, {{a}};", (w,), (32,), lambda a: bin(a).count("1")),
            Case(f"clz.b{w} {{d}}, {{a}};", (w,), (32,), lambda a, w=w: w - a.bit_length()),
            Case(f"brev.b{w} {{d}}, {{a}};", (w,), (w,), lambda a, w=w: int(format(a, f"0{w}b")[::-1], 2)),
            Case(
                f"bfi.b{w} {{d}}, {{a}}, {{b}}, {{c}}, {{e}};",
                (w, w, 32, 32),
                (w,),
                bfi_oracle(w),
                (None, None, POSITION, POSITION),
            ),
        ]
        for t in (f"u{w}", f"s{w}"):
            signed = t[0] == "s"

            def bfind(a, shift, w=w, signed=signed):
                if signed and a >> (w - 1):
                    a = mask(~a, w)
                pos = a.bit_length() - 1
                return 0xFFFFFFFF if pos < 0 else (w - 1 - pos if shift else pos)

            cases += [
                Case(f"bfind.{t} {{d}}, {{a}};", (w,), (32,), lambda a, f=bfind: f(a, False)),
                Case(f"bfind.shiftamt.{t} {{d}}, {{a}};", (w,), (32,), lambda a, f=bfind: f(a, True)),
                Case(
                    f"bfe.{t} {{d}}, {{a}}, {{b}}, {{c}};", (w, 32, 32), (w,), bfe_oracle(t), (None, POSITION, POSITION)
                ),
            ]
    for mode in ("clamp", "wrap"):
        cases.append(
            Case(
                f"bmsk.{mode}.b32 {{d}}, {{a}}, {{b}};",
                (32, 32),
                (32,),
                bmsk_oracle(mode == "clamp"),
                (POSITION, POSITION),
            )
        )
        for t in ("u32", "s32"):
            cases.append(
                Case(
                    f"szext.{mode}.{t} {{d}}, {{a}}, {{b}};",
                    (32, 32),
                    (32,),
                    szext_oracle(mode == "clamp", t == "s32"),
                    (None, POSITION),
                )
            )
    cases.append(
        Case(
            "fns.b32 {d}, {a}, {b}, {c};",
            (32, 32, 32),
            (32,),
            fns_oracle,
            (None, position, small_signed),
        )
    )
    for w in (16, 32, 64):
        cases += [
            Case(f"and.b{w} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b: a & b),
            Case(f"or.b{w} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b: a | b),
            Case(f"xor.b{w} {{d}}, {{a}}, {{b}};", (w, w), (w,), lambda a, b: a ^ b),
            Case(f"not.b{w} {{d}}, {{a}};", (w,), (w,), lambda a, w=w: mask(~a, w)),
            Case(f"cnot.b{w} {{d}}, {{a}};", (w,), (w,), lambda a: int(a == 0)),
        ]
        count = position
        cases.append(Case(f"shl.b{w} {{d}}, {{a}}, {{b}};", (w, 32), (w,), shift_oracle("shl", f"b{w}"), (None, count)))
        for k in "bus":
            cases.append(
                Case(f"shr.{k}{w} {{d}}, {{a}}, {{b}};", (w, 32), (w,), shift_oracle("shr", f"{k}{w}"), (None, count))
            )
    for direction, mode in itertools.product("lr", ("clamp", "wrap")):
        cases.append(
            Case(
                f"shf.{direction}.{mode}.b32 {{d}}, {{a}}, {{b}}, {{c}};",
                (32, 32, 32),
                (32,),
                shf_oracle(direction == "l", mode == "clamp"),
                (None, None, position),
            )
        )
    cases.append(Case("prmt.b32 {d}, {a}, {b}, {c};", (32, 32, 32), (32,), prmt_oracle(None)))
    for mode in PRMT_MODES:
        cases.append(Case(f"prmt.b32.{mode} {{d}}, {{a}}, {{b}}, {{c}};", (32, 32, 32), (32,), prmt_oracle(mode)))
    for lut in (0x00, 0xFF, 0x80, 0xFE, 0x96, 0xE8, 0x1A, 0x3C, 0xCA):
        cases.append(
            Case(
                f"lop3.b32 {{d}}, {{a}}, {{b}}, {{c}}, {lut:#x};",
                (32, 32, 32),
                (32,),
                lop3_oracle(lut),
                label=f"lop3-{lut:#x}",
            )
        )
    for bop, lut in itertools.product(("or", "and"), (0x00, 0x3F, 0x80, 0xFE)):
        f = lop3_oracle(lut)
        combine = BOOLS[bop]
        cases.append(
            Case(
                f"lop3.{bop}.b32 {{d}}|{{d1}}, {{a}}, {{b}}, {{c}}, {lut:#x}, {{e}};",
                (32, 32, 32, 1),
                (32, 1),
                lambda a, b, c, q, f=f, combine=combine: (f(a, b, c), int(combine(f(a, b, c) != 0, bool(q)))),
                label=f"lop3.{bop}-{lut:#x}",
            )
        )
        cases.append(
            Case(
                f"lop3.{bop}.b32 _|{{d}}, {{a}}, {{b}}, {{c}}, {lut:#x}, !{{e}};",
                (32, 32, 32, 1),
                (1,),
                lambda a, b, c, q, f=f, combine=combine: int(combine(f(a, b, c) != 0, not q)),
                label=f"lop3.{bop}-sink-{lut:#x}",
            )
        )
    return cases


def compare_cases() -> list[Case]:
    cases = []
    for t in ("u16", "s16", "u32", "s32", "u64", "s64"):
        w = int(t[1:])
        cmps = ("eq", "ne", "lt", "le", "gt", "ge") + (("lo", "ls", "hi", "hs") if t[0] == "u" else ())
        for cmp in cmps:
            f = COMPARES[cmp]
            cases.append(
                Case(
                    f"setp.{cmp}.{t} {{d}}|{{d1}}, {{a}}, {{b}};",
                    (w, w),
                    (1, 1),
                    lambda a, b, f=f, t=t, cmp=cmp: (
                        int(f(compare_value(a, t, cmp), compare_value(b, t, cmp))),
                        int(not f(compare_value(a, t, cmp), compare_value(b, t, cmp))),
                    ),
                )
            )
    for t, cmp in (("s32", "lt"), ("u64", "hs"), ("s16", "ge"), ("b32", "eq"), ("b64", "ne")):
        w = int(t[1:])
        for bop, neg in itertools.product(BOOLS, (False, True)):
            f, combine = COMPARES[cmp], BOOLS[bop]

            def oracle(a, b, c, f=f, combine=combine, t=t, cmp=cmp, neg=neg):
                r = f(compare_value(a, t, cmp), compare_value(b, t, cmp))
                cv = bool(c) != neg
                return int(combine(r, cv)), int(combine(not r, cv))

            cases.append(
                Case(
                    f"setp.{cmp}.{bop}.{t} {{d}}|{{d1}}, {{a}}, {{b}}, {'!' if neg else ''}{{c}};",
                    (w, w, 1),
                    (1, 1),
                    oracle,
                )
            )
    cases.append(Case("setp.gt.u32 _|{d}, {a}, {b};", (32, 32), (1,), lambda a, b: int(not a > b), label="setp-sink"))
    for dtype, stype, cmp in (("u32", "s32", "lt"), ("s32", "u32", "hi"), ("s32", "s64", "ge"), ("u32", "u16", "eq")):
        w = int(stype[1:])
        one = 0x3F800000 if dtype == "f32" else 0xFFFFFFFF
        f = COMPARES[cmp]
        cases.append(
            Case(
                f"set.{cmp}.{dtype}.{stype} {{d}}, {{a}}, {{b}};",
                (w, w),
                (32,),
                lambda a, b, f=f, stype=stype, cmp=cmp, one=one: (
                    one if f(compare_value(a, stype, cmp), compare_value(b, stype, cmp)) else 0
                ),
            )
        )
        cases.append(
            Case(
                f"set.{cmp}.xor.{dtype}.{stype} {{d}}, {{a}}, {{b}}, !{{c}};",
                (w, w, 1),
                (32,),
                lambda a, b, c, f=f, stype=stype, cmp=cmp, one=one: (
                    one if f(compare_value(a, stype, cmp), compare_value(b, stype, cmp)) != (not c) else 0
                ),
            )
        )
    for w in (16, 32, 64):
        cases.append(Case(f"selp.b{w} {{d}}, {{a}}, {{b}}, {{c}};", (w, w, 1), (w,), lambda a, b, c: a if c else b))
        cases.append(
            Case(
                f"slct.b{w}.s32 {{d}}, {{a}}, {{b}}, {{c}};",
                (w, w, 32),
                (w,),
                lambda a, b, c: a if sx(c, 32) >= 0 else b,
            )
        )

        def slct_f32(a, b, c, ftz=False):
            mag, neg = c & 0x7FFFFFFF, c >> 31
            if mag > 0x7F800000:  # NaN: not >= 0
                return b
            return a if (not neg or mag == 0 or (ftz and mag < 0x00800000)) else b

        fspecial = (None, None, f32_operand)
        cases.append(Case(f"slct.b{w}.f32 {{d}}, {{a}}, {{b}}, {{c}};", (w, w, 32), (w,), slct_f32, fspecial))
        cases.append(
            Case(
                f"slct.ftz.b{w}.f32 {{d}}, {{a}}, {{b}}, {{c}};",
                (w, w, 32),
                (w,),
                functools.partial(slct_f32, ftz=True),
                fspecial,
            )
        )
    for op in ("and", "or", "xor"):
        f = BOOLS[op]
        cases.append(Case(f"{op}.pred {{d}}, {{a}}, !{{b}};", (1, 1), (1,), lambda a, b, f=f: int(f(bool(a), not b))))
    cases.append(Case("not.pred {d}, {a};", (1,), (1,), lambda a: int(not a)))
    return cases


CASES = arithmetic_cases() + bit_cases() + compare_cases()


IDS = [c.id if c.label else c.body.split(" {")[0] for c in CASES]


def transformed(case: Case, columns):
    for k, fn in enumerate(case.special):
        if fn is not None:
            columns[k] = [fn(v) for v in columns[k]]
    return columns


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_edge_grid(case):
    """Every combination of the operands' edge values (position operands mapped as ``position`` maps them)."""
    check(case, transformed(case, grid(case.ins, limit=1024)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
@settings(max_examples=3, deadline=None)
@given(raw=st.binary(min_size=64 * 8 * 5, max_size=64 * 8 * 5))
def test_random_bits(case, raw):
    """64 threads of raw bits from hypothesis per example."""
    words = np.frombuffer(raw, np.uint64).reshape(5, 64)
    columns = [[mask(int(v), max(w, 1)) for v in words[k]] for k, w in enumerate(case.ins)]
    check(case, transformed(case, columns))


# -- the carry chain ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("w", [32, 64])
@settings(max_examples=6, deadline=None)
@given(raw=st.binary(min_size=64 * 8 * 4, max_size=64 * 8 * 4))
def test_carry_chain(w, raw):
    """A 3-word add (add.cc, addc.cc, addc), a 3-word subtract (sub.cc, subc.cc, subc) and a mad.lo.cc / madc.hi
    pair equal the multi-word integer results: CC.CF carries per thread from one instruction to the next."""
    body = (
        f"add.cc.u{w} {{d}}, {{a}}, {{b}};\naddc.cc.u{w} {{d1}}, {{b}}, {{c}};\naddc.u{w} {{d2}}, {{c}}, {{a}};\n"
        f"sub.cc.u{w} {{d3}}, {{a}}, {{b}};\nsubc.cc.u{w} {{d4}}, {{b}}, {{c}};\nsubc.u{w} {{d5}}, {{c}}, {{a}};\n"
        f"mad.lo.cc.u{w} {{d6}}, {{a}}, {{b}}, {{c}};\nmadc.hi.u{w} {{d7}}, {{a}}, {{b}}, {{e}};"
    )
    n = 64
    near = edges(w)  # half of the words an edge value (all ones, INT_MIN, ...), where carries ripple
    words = np.frombuffer(raw, np.uint64).reshape(4, n)
    cols = [[near[int(v) % len(near)] if int(v) >> 63 else mask(int(v), w) for v in row] for row in words]
    got = run(body, (w, w, w, w), (w,) * 8, cols)
    for i, (a, b, c, e) in enumerate(zip(*cols)):
        total = (a | b << w | c << 2 * w) + (b | c << w | a << 2 * w)
        diff = (a | b << w | c << 2 * w) - (b | c << w | a << 2 * w)
        lo = a * b % (1 << w) + c
        want = [mask(total >> (k * w), w) for k in range(3)] + [mask(diff >> (k * w), w) for k in range(3)]
        want += [mask(lo, w), mask((a * b >> w) + e + (lo >> w), w)]
        assert [int(g[i]) for g in got] == want, (hex(a), hex(b), hex(c), hex(e))


def test_division_by_zero_is_a_named_choice():
    """The zero-divisor result the oracles use is the one the module names (and documents with ptxas's SASS)."""
    assert integer_semantics.DIV_BY_ZERO == "all ones"
    got = run("div.u32 {d}, {a}, {b};\nrem.s32 {d1}, {a}, {b};", (32, 32), (32, 32), [[7, 0x80000000], [0, 0]])
    assert [int(x) for x in got[0]] == [0xFFFFFFFF] * 2 and [int(x) for x in got[1]] == [0xFFFFFFFF] * 2


def test_lop3_every_lut():
    """All 256 truth tables in one kernel against F(0xF0, 0xCC, 0xAA) = immLut bit by bit."""
    luts = range(256)
    body = "\n".join(
        f"lop3.b32 {{d{k}}}, {{a}}, {{b}}, {{c}}, {lut};" if k else f"lop3.b32 {{d}}, {{a}}, {{b}}, {{c}}, {lut};"
        for k, lut in enumerate(luts)
    )
    rng = np.random.default_rng(3)
    cols = [[0xF0, 0x12345678] + [int(v) for v in rng.integers(0, 1 << 32, 30, dtype=np.uint64)] for _ in range(3)]
    cols[1][0], cols[2][0] = 0xCC, 0xAA
    got = run(body, (32, 32, 32), (32,) * 256, cols)
    for lut in luts:
        assert int(got[lut][0]) & 0xFF == lut  # F(0xF0, 0xCC, 0xAA) is the table itself
        f = lop3_oracle(lut)
        assert [int(x) for x in got[lut]] == [f(a, b, c) for a, b, c in zip(*cols)], f"lut {lut:#x}"


@pytest.mark.parametrize(
    "body",
    [
        "add.sat.u32 {d}, {a}, {b};",
        "sub.u16x2 {d}, {a}, {b};",
        "mul.wide.u64 {d}, {a}, {b};",
        "mad.lo.sat.s32 {d}, {a}, {b}, {c};",
        "min.relu.u32 {d}, {a}, {b};",
        "bmsk.b32 {d}, {a}, {b};",
        "lop3.b64 {d}, {a}, {b}, {c}, 0x80;",
        "setp.lt.b32 {d1}, {a}, {b};",
    ],
)
def test_forms_the_isa_lacks_are_unsupported(body):
    """Forms the PTX ISA does not list (or lists for other types) are named when decoded and raise when run."""
    w = 64 if ("u64" in body or "b64" in body) else 32
    outs = (1,) if "setp" in body else (64 if "wide" in body else w,)
    k = kernel(body.replace("{d1}", "{d}"), (w, w, w), outs)
    (error,) = k.program.unsupported
    assert error.opcode == body.split()[0]
    with pytest.raises(ptx.UnsupportedInstruction):
        run(body.replace("{d1}", "{d}"), (w, w, w), outs, [[1], [2], [3]])
