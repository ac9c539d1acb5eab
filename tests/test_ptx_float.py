"""flashsim.ptx's floating-point instructions against an exact oracle (tests/float_oracle.py: fractions, one
rounding per the named direction), bit for bit: add / sub / mul / fma / div / rcp / sqrt in every type and rounding
the ISA allows, with .ftz / .sat / .relu; abs / neg / min / max / copysign / testp / setp / set; the fused pairs of
flashsim.ptx.contraction; the ptxas literal rules; div.approx / div.full against the ISA's accuracy bound and the
SASS sequence; the forms that must raise UnsupportedInstruction. The PTX is hand-written (no NVRTC needed)."""

from __future__ import annotations

from fractions import Fraction

import float_oracle as O
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ptx_elementwise import Forms

from flashsim.numerics import ieee, sfu
from flashsim.numerics.formats import BF16, F16, F32, F64
from flashsim.ptx import UnsupportedInstruction, launch, load
from flashsim.ptx.probes import inputs as I

LANE = {"f32": "f32", "f64": "f64", "f16": "f16", "bf16": "bf16", "f16x2": "f16", "bf16x2": "bf16"}
BITS = {"f32": 32, "f64": 64, "f16": 16, "bf16": 16, "f16x2": 32, "bf16x2": 32}
SPECIAL = {"f32": I.F32_SPECIAL, "f64": I.F64_SPECIAL, "f16": I.F16_SPECIAL, "bf16": I.BF16_SPECIAL}
RANDOM = {"f32": I.f32_bits, "f64": I.f64_bits, "f16": I.f16_bits, "bf16": I.bf16_bits}
MODES = {"rn": "rne", "rz": "rz", "rm": "rm", "rp": "rp"}


# -- the oracle of one lane ---------------------------------------------------------------------------------------


def _inf(fmt, negative):
    e, m, _ = O.FORMATS[fmt]
    return (int(negative) << (e + m)) | (((1 << e) - 1) << m)


def _flush(b, fmt):
    e, m, _ = O.FORMATS[fmt]
    return b & (1 << (e + m)) if (b >> m) & ((1 << e) - 1) == 0 else b


def _exact(op, xs, mode):
    """("nan",) / ("inf", negative) / ("num", Fraction, negative zero?) of op on decoded operands, IEEE's rules."""
    if any(v == O.NAN for _, v in xs):
        return ("nan",)
    signed = [(-v if n else v) if v != O.INF else None for n, v in xs]
    if op in ("add", "sub"):
        (na, va), (nb, vb) = xs
        nb = nb != (op == "sub")
        if va == O.INF or vb == O.INF:
            if va == O.INF and vb == O.INF and na != nb:
                return ("nan",)
            return ("inf", na if va == O.INF else nb)
        s = (-va if na else va) + (-vb if nb else vb)
        return ("num", s, (na and nb) or (na != nb and mode == "rm"))
    if op == "mul" or op == "fma":
        (na, va), (nb, vb) = xs[:2]
        pn = na != nb
        if (va == O.INF and vb == 0) or (va == 0 and vb == O.INF):
            return ("nan",)
        p_inf = O.INF in (va, vb)
        if op == "mul":
            return ("inf", pn) if p_inf else ("num", signed[0] * signed[1], pn)
        nc, vc = xs[2]
        if p_inf:
            return ("nan",) if vc == O.INF and nc != pn else ("inf", pn)
        if vc == O.INF:
            return ("inf", nc)
        return ("num", signed[0] * signed[1] + signed[2], (pn and nc) or (pn != nc and mode == "rm"))
    if op in ("div", "rcp"):
        (na, va), (nb, vb) = [(False, Fraction(1)), xs[0]] if op == "rcp" else xs
        neg = na != nb
        if (va == 0 and vb == 0) or (va == O.INF and vb == O.INF):
            return ("nan",)
        if va == O.INF or vb == 0:
            return ("inf", neg)
        if vb == O.INF:
            return ("num", Fraction(0), neg)
        return ("num", Fraction(va if not na else -va) / (vb if not nb else -vb), neg)
    if op == "sqrt":
        (n, v) = xs[0]
        if n and v != 0:
            return ("nan",)
        if v == O.INF:
            return ("inf", False)
        return ("num", O.sqrt_jammed(v), n)
    raise ValueError(op)


# the order in which an H200 unit prefers NaN operands (O.nan_result): DADD / DMUL the second source, DFMA taken
# as c, b, a, the division sequences the dividend
NAN_ORDER = {"add": (1, 0), "sub": (1, 0), "mul": (1, 0), "fma": (2, 1, 0), "div": (0, 1), "rcp": (0,), "sqrt": (0,)}


def arith_oracle(op, fmt, mode="rne", ftz=False, sat=False, relu=False):
    """The bits one lane of ``op`` gives, from raw operand bits; .ftz flushes subnormal operands and results that
    are tiny before rounding (the H200's rule)."""

    def f(*bits):
        if ftz:
            bits = [_flush(b, fmt) for b in bits]
        r = _exact(op, [O.decode(b, fmt) for b in bits], mode)
        if r[0] == "nan":
            out = O.nan_result(fmt, *(bits[k] for k in NAN_ORDER[op]))
        elif r[0] == "inf":
            out = _inf(fmt, r[1])
        elif ftz and r[1] != 0 and O.tiny_before_rounding(r[1], fmt, mode):
            out = int(r[1] < 0) << (O.width(fmt) - 1)
        else:
            out = O.round_to(r[1], fmt, mode, negative_zero=r[2])
        return _modifiers(out, fmt, sat, relu)

    return f


def _modifiers(out, fmt, sat, relu):
    sign = 1 << (O.width(fmt) - 1)
    is_nan = O.value(out, fmt) == O.NAN
    if sat:
        v = O.value(out, fmt)
        if is_nan or out & sign:
            return 0
        return O.round_to(Fraction(1), fmt, "rne") if v > 1 else out
    if relu:
        return O.nan(fmt) if is_nan else (0 if out & sign else out)
    return out


def lanes(fn, t):
    """``fn`` of one lane made into a function of a whole register of type ``t`` (both halves of a packed one)."""
    if t not in ("f16x2", "bf16x2"):
        return fn
    return lambda *xs: fn(*(x & 0xFFFF for x in xs)) | (fn(*(x >> 16 for x in xs)) << 16)


# -- inputs -------------------------------------------------------------------------------------------------------


def operands(t, arity, n=1536, seed=0):
    """Arrays of raw bits of type t: every combination of (a prefix of) its specials, then random bits, then
    pairs of nearby values (cancellations and ties)."""
    rng = np.random.default_rng(seed)
    lane = LANE[t]
    if t in ("f16x2", "bf16x2"):
        special, random = I.packed(SPECIAL[lane], RANDOM[lane])
    else:
        special, random = SPECIAL[lane], RANDOM[lane]
    cols = [I.operand(k, arity, n, special, random)(np.random.default_rng(seed)) for k in range(arity)]
    near = cols[0][-n // 4 :].astype(np.uint64) ^ rng.integers(0, 8, n // 4).astype(np.uint64)
    if arity >= 2:
        cols[1][-n // 4 :] = (near ^ np.uint64(1 << (BITS[t] - 1 if t not in ("f16x2", "bf16x2") else 15))).astype(
            cols[1].dtype
        )
    return cols


def check(forms: Forms, i: int, oracle, cols):
    got = forms.run(i, *cols)
    want = np.array([oracle(*(int(c[k]) for c in cols)) for k in range(len(cols[0]))], np.uint64)
    bad = np.flatnonzero(got.astype(np.uint64) != want)
    if bad.size:
        k = bad[0]
        pytest.fail(
            f"{forms.forms[i][0]}: {bad.size} of {len(want)} differ; first {[hex(int(c[k])) for c in cols]}: "
            f"{int(got[k]):#x}, oracle {int(want[k]):#x}"
        )


# -- arithmetic ---------------------------------------------------------------------------------------------------


def _arith_forms():
    out = []  # (ptx opcode with modifiers, type, op, mode, ftz, sat, relu)
    for t in ("f32", "f64"):
        for r in MODES:
            for op in ("add", "sub", "mul", "div"):
                out.append((f"{op}.{r}.{t}", t, op, r, False, False, False))
            out.append((f"fma.{r}.{t}", t, "fma", r, False, False, False))
            out.append((f"rcp.{r}.{t}", t, "rcp", r, False, False, False))
            out.append((f"sqrt.{r}.{t}", t, "sqrt", r, False, False, False))
    for t in ("f16", "bf16", "f16x2", "bf16x2"):
        for op in ("add", "sub", "mul", "fma"):
            out.append((f"{op}.rn.{t}", t, op, "rn", False, False, False))
        out.append((f"fma.rn.relu.{t}", t, "fma", "rn", False, False, True))
    out += [
        ("add.rn.ftz.f32", "f32", "add", "rn", True, False, False),
        ("mul.rz.ftz.sat.f32", "f32", "mul", "rz", True, True, False),
        ("fma.rp.ftz.sat.f32", "f32", "fma", "rp", True, True, False),
        ("div.rm.ftz.f32", "f32", "div", "rm", True, False, False),
        ("sqrt.rn.ftz.f32", "f32", "sqrt", "rn", True, False, False),
        ("rcp.rz.ftz.f32", "f32", "rcp", "rz", True, False, False),
        ("mad.rz.f32", "f32", "fma", "rz", False, False, False),
        ("mad.rm.f64", "f64", "fma", "rm", False, False, False),
        ("add.f32", "f32", "add", "rn", False, False, False),  # unrounded, alone: to nearest
        ("mul.f64", "f64", "mul", "rn", False, False, False),
        ("add.rn.ftz.sat.f16", "f16", "add", "rn", True, True, False),
        ("fma.rn.ftz.relu.f16x2", "f16x2", "fma", "rn", True, False, True),
        ("sub.rn.sat.f16x2", "f16x2", "sub", "rn", False, True, False),
        ("mul.f16", "f16", "mul", "rn", False, False, False),
        ("add.bf16x2", "bf16x2", "add", "rn", False, False, False),
    ]
    return out


ARITH = _arith_forms()
_ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "rcp": 1, "sqrt": 1}


def _template(arity):
    """The instruction template of an opcode with ``arity`` sources: "NAME {d}, {0}, {1};" with NAME filled in."""
    return "NAME {d}, " + ", ".join(f"{{{k}}}" for k in range(arity)) + ";"


@pytest.fixture(scope="module")
def arith_forms():
    return Forms(
        [(_template(_ARITY[op]).replace("NAME", name), [BITS[t]] * _ARITY[op], BITS[t], 0) for name, t, op, *_ in ARITH]
    )


@pytest.mark.parametrize("i", range(len(ARITH)), ids=[f[0] for f in ARITH])
def test_arithmetic_is_one_exact_rounding(arith_forms, i):
    name, t, op, r, ftz, sat, relu = ARITH[i]
    oracle = lanes(arith_oracle(op, LANE[t], MODES[r], ftz, sat, relu), t)
    n = 1536 if BITS[t] < 64 and _ARITY[op] > 1 else 900
    check(arith_forms, i, oracle, operands(t, _ARITY[op], n, seed=i))


_RAW = {16: st.integers(0, 2**16 - 1), 32: st.integers(0, 2**32 - 1), 64: st.integers(0, 2**64 - 1)}


@settings(max_examples=12, deadline=None)
@given(data=st.data(), i=st.sampled_from([k for k, f in enumerate(ARITH) if f[2] in ("add", "fma", "div", "sqrt")]))
def test_arithmetic_on_hypothesis_bits(arith_forms, data, i):
    name, t, op, r, ftz, sat, relu = ARITH[i]
    width = BITS[t]
    cols = [np.array(data.draw(st.lists(_RAW[width], min_size=8, max_size=8)), np.uint64)]
    for _ in range(_ARITY[op] - 1):  # the others near the first or anywhere
        delta = np.array(data.draw(st.lists(st.integers(0, 255), min_size=8, max_size=8)), np.uint64)
        far = np.array(data.draw(st.lists(_RAW[width], min_size=8, max_size=8)), np.uint64)
        cols.append(np.concatenate([cols[0] ^ delta ^ np.uint64(1 << (width - 1)), far]))
    cols[0] = np.concatenate([cols[0], cols[0]]) if _ARITY[op] > 1 else cols[0]
    check(arith_forms, i, lanes(arith_oracle(op, LANE[t], MODES[r], ftz, sat, relu), t), cols)


# operands at the subnormal boundary, where .ftz's flush before rounding and a flush after it differ: a product,
# quotient or fma just below the smallest normal that rounds up to it (f32: 2^-126 (1 - 2^-24); f16: 2^-14 (1 -
# 2^-11)), with both signs, addends of either kind, and neighbours that are not tiny
FTZ_EDGES = {
    "f32": [0x00800000, 0x80800000, 0x3F7FFFFF, 0xBF7FFFFF, 0x00FFFFFF, 0x40000000, 0x3F800000, 0x00800001, 0, 1],
    "f16": [0x0400, 0x8400, 0x3BFF, 0xBBFF, 0x07FF, 0x4000, 0x3C00, 0x0401, 0, 1],
}
FTZ_FORMS = [
    ("mul.rn.ftz.f32", "f32", "mul", "rn"),
    ("mul.rp.ftz.f32", "f32", "mul", "rp"),
    ("mul.rm.ftz.f32", "f32", "mul", "rm"),
    ("div.rn.ftz.f32", "f32", "div", "rn"),
    ("div.rp.ftz.f32", "f32", "div", "rp"),
    ("fma.rn.ftz.f32", "f32", "fma", "rn"),
    ("fma.rz.ftz.f32", "f32", "fma", "rz"),
    ("mul.rn.ftz.f16", "f16", "mul", "rn"),
    ("fma.rn.ftz.f16", "f16", "fma", "rn"),
]


def test_ftz_flushes_results_tiny_before_rounding():
    forms = Forms(
        [
            (_template(_ARITY[op]).replace("NAME", name), [BITS[t]] * _ARITY[op], BITS[t], 0)
            for name, t, op, _ in FTZ_FORMS
        ]
    )
    for i, (_, t, op, r) in enumerate(FTZ_FORMS):
        edges = np.array(FTZ_EDGES[t], np.uint64)
        grid = np.stack(np.meshgrid(*[edges] * _ARITY[op], indexing="ij"), -1).reshape(-1, _ARITY[op])
        check(forms, i, arith_oracle(op, t, MODES[r], ftz=True), [grid[:, k] for k in range(_ARITY[op])])
    one_below = np.array([0x00800000], np.uint64), np.array([0x3F7FFFFF], np.uint64)
    assert forms.run(0, *one_below).tolist() == [0]  # rounds to 2^-126, but flushed: the H200's result


# -- abs neg min max copysign -------------------------------------------------------------------------------------


def minmax_oracle(fmt, largest, nan=False, xorsign=False):
    """min / max of one lane: -0 < +0; a NaN operand ignored unless .NaN (both NaN: O.nan_result of b); .xorsign.abs
    compares magnitudes and gives the XOR of the signs."""
    sign = 1 << (O.width(fmt) - 1)

    def f(a, b):
        x, y = (a & (sign - 1), b & (sign - 1)) if xorsign else (a, b)
        vx, vy = O.value(x, fmt), O.value(y, fmt)
        if O.NAN in (vx, vy):
            if nan or vx == vy:
                return O.nan_result(fmt, y)
            r = y if vx == O.NAN else x
        else:
            kx, ky = (vx, -(x >= sign)), (vy, -(y >= sign))
            r = x if ((kx >= ky) if largest else (kx <= ky)) else y
        return r | ((a ^ b) & sign) if xorsign else r

    return f


def _absneg_oracle(fmt, neg, ftz):
    def f(a):
        if ftz:
            a = _flush(a, fmt)
        if O.value(a, fmt) == O.NAN:
            return O.nan_result(fmt, a)
        sign = 1 << (O.width(fmt) - 1)
        return a ^ sign if neg else a & (sign - 1)

    return f


OTHER = [  # (ptx, type, arity, oracle of a lane)
    *[(f"abs.{t}", t, 1, _absneg_oracle(LANE[t], False, False)) for t in LANE],
    *[(f"neg.{t}", t, 1, _absneg_oracle(LANE[t], True, False)) for t in LANE],
    ("abs.ftz.f32", "f32", 1, _absneg_oracle("f32", False, True)),
    ("neg.ftz.f16x2", "f16x2", 1, _absneg_oracle("f16", True, True)),
    *[(f"min.{t}", t, 2, minmax_oracle(LANE[t], False)) for t in LANE],
    *[(f"max.{t}", t, 2, minmax_oracle(LANE[t], True)) for t in LANE],
    *[(f"min.NaN.{t}", t, 2, minmax_oracle(LANE[t], False, nan=True)) for t in ("f32", "f16", "bf16x2")],
    *[(f"max.NaN.{t}", t, 2, minmax_oracle(LANE[t], True, nan=True)) for t in ("f32", "f16x2", "bf16")],
    *[(f"min.xorsign.abs.{t}", t, 2, minmax_oracle(LANE[t], False, xorsign=True)) for t in ("f32", "f16", "bf16")],
    *[(f"max.xorsign.abs.{t}", t, 2, minmax_oracle(LANE[t], True, xorsign=True)) for t in ("f32", "f16x2")],
    ("copysign.f32", "f32", 2, lambda a, b: (a & 0x80000000) | (b & 0x7FFFFFFF)),
    ("copysign.f64", "f64", 2, lambda a, b: (a & (1 << 63)) | (b & ((1 << 63) - 1))),
]


@pytest.fixture(scope="module")
def other_forms():
    return Forms([(_template(k).replace("NAME", name), [BITS[t]] * k, BITS[t], 0) for name, t, k, _ in OTHER])


@pytest.mark.parametrize("i", range(len(OTHER)), ids=[f[0] for f in OTHER])
def test_sign_and_selection(other_forms, i):
    name, t, k, fn = OTHER[i]
    check(other_forms, i, lanes(fn, t), operands(t, k, 1100, seed=100 + i))


def test_signed_zeros_order_in_min_and_max():
    forms = Forms([("min.f32 {d}, {0}, {1};", [32, 32], 32, 0), ("max.f32 {d}, {0}, {1};", [32, 32], 32, 0)])
    a = np.array([0x80000000, 0x00000000], np.uint32)
    b = a[::-1].copy()
    assert forms.run(0, a, b).tolist() == [0x80000000] * 2
    assert forms.run(1, a, b).tolist() == [0x00000000] * 2


# -- compares -------------------------------------------------------------------------------------------------------


def _cmp(cmp, fmt, ftz=False):
    def f(a, b):
        if ftz:
            a, b = _flush(a, fmt), _flush(b, fmt)
        x, y = O.value(a, fmt), O.value(b, fmt)
        unordered = O.NAN in (x, y)
        base = cmp.rstrip("u") if cmp not in ("num", "nan") else cmp
        if cmp == "num":
            return not unordered
        if cmp == "nan":
            return unordered
        if unordered:
            return cmp.endswith("u") and cmp not in ("lt", "le", "gt", "ge", "eq", "ne")
        x = Fraction(x) if not isinstance(x, float) else x
        y = Fraction(y) if not isinstance(y, float) else y
        return {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[base]

    return f


COMPARES = ("eq", "ne", "lt", "le", "gt", "ge", "equ", "neu", "ltu", "leu", "gtu", "geu", "num", "nan")
SETP = [
    *[(f"setp.{c}.f32", "f32", c, False) for c in COMPARES],
    *[(f"setp.{c}.f64", "f64", c, False) for c in COMPARES[::2]],
    *[(f"setp.{c}.f16", "f16", c, False) for c in COMPARES[1::2]],
    *[(f"setp.{c}.bf16", "bf16", c, False) for c in ("lt", "geu", "num")],
    ("setp.lt.ftz.f32", "f32", "lt", True),
    ("setp.eq.ftz.f16", "f16", "eq", True),
    *[(f"setp.{c}.f16x2", "f16x2", c, False) for c in ("lt", "neu", "nan")],
    *[(f"setp.{c}.bf16x2", "bf16x2", c, False) for c in ("ge", "equ")],
    ("setp.le.ftz.f16x2", "f16x2", "le", True),
]


@pytest.fixture(scope="module")
def setp_forms():
    out = []
    for name, t, _, _ in SETP:
        two = t in ("f16x2", "bf16x2")
        out.append((f"{name} {{p}}" + ("|{q}" if two else "") + ", {0}, {1};", [BITS[t]] * 2, 32, 2 if two else 1))
    return Forms(out)


@pytest.mark.parametrize("i", range(len(SETP)), ids=[f[0] for f in SETP])
def test_setp(setp_forms, i):
    name, t, c, ftz = SETP[i]
    fn = _cmp(c, LANE[t], ftz)
    if t in ("f16x2", "bf16x2"):  # p from the low halves, q from the high halves

        def oracle(a, b):
            return int(fn(a & 0xFFFF, b & 0xFFFF)) | (int(fn(a >> 16, b >> 16)) << 1)
    else:

        def oracle(a, b):
            return int(fn(a, b))

    check(setp_forms, i, oracle, operands(t, 2, 1100, seed=200 + i))


def test_setp_combines_with_a_predicate_and_writes_the_complement():
    forms = Forms(
        [
            ("setp.ne.u32 %p3, {2}, 0; setp.lt.or.f32 {p}|{q}, {0}, {1}, !%p3;", [32, 32, 32], 32, 2),
            ("setp.ne.u32 %p3, {2}, 0; setp.gt.and.f16x2 {p}|{q}, {0}, {1}, %p3;", [32, 32, 32], 32, 2),
        ]
    )
    a, b = operands("f32", 2, 600, seed=5)
    c = np.random.default_rng(1).integers(0, 2, 600).astype(np.uint32)
    lt = _cmp("lt", "f32")
    check(forms, 0, lambda x, y, z: int(lt(x, y) or not z) | (int((not lt(x, y)) or not z) << 1), [a, b, c])
    a, b = operands("f16x2", 2, 600, seed=6)
    gt = _cmp("gt", "f16")
    check(
        forms,
        1,
        lambda x, y, z: int(gt(x & 0xFFFF, y & 0xFFFF) and z) | (int(gt(x >> 16, y >> 16) and z) << 1),
        [a, b, c],
    )


SET = [  # (ptx, source type, destination bits, compare, value for true per lane)
    ("set.lt.f32.f32", "f32", 32, "lt", 0x3F800000),
    ("set.geu.u32.f32", "f32", 32, "geu", 0xFFFFFFFF),
    ("set.nan.s32.f64", "f64", 32, "nan", 0xFFFFFFFF),
    ("set.ne.f16.f16", "f16", 16, "ne", 0x3C00),
    ("set.ltu.bf16.bf16", "bf16", 16, "ltu", 0x3F80),
    ("set.le.u16.f16", "f16", 16, "le", 0xFFFF),
    ("set.gt.f16x2.f16x2", "f16x2", 32, "gt", 0x3C00),
    ("set.equ.u32.f16x2", "f16x2", 32, "equ", 0xFFFF),
    ("set.lt.bf16x2.bf16x2", "bf16x2", 32, "lt", 0x3F80),
    ("set.eq.ftz.f32.f32", "f32", 32, "eq", 0x3F800000),
]


@pytest.mark.parametrize("i", range(len(SET)), ids=[f[0] for f in SET])
def test_set_writes_one_or_all_ones_per_its_type(i):
    name, t, dbits, c, true = SET[i]
    forms = Forms([(f"{name} {{d}}, {{0}}, {{1}};", [BITS[t]] * 2, dbits, 0)])
    fn = _cmp(c, LANE[t], ".ftz" in name)

    def lane(a, b):
        return true if fn(a, b) else 0

    check(forms, 0, lanes(lane, t), operands(t, 2, 500, seed=300 + i))


def test_set_with_integer_sources_and_a_predicate():
    forms = Forms([("setp.ne.u32 %p3, {2}, 0; set.lt.xor.f32.s32 {d}, {0}, {1}, %p3;", [32, 32, 32], 32, 0)])
    rng = np.random.default_rng(2)
    a, b, c = (rng.integers(0, 2**32, 400, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    c &= 1

    def s32(x):
        return x - (1 << 32) if x >> 31 else x

    check(forms, 0, lambda x, y, z: 0x3F800000 if (s32(x) < s32(y)) != bool(z) else 0, [a, b, c])


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_testp(t):
    tests = ("finite", "infinite", "number", "notanumber", "normal", "subnormal")
    forms = Forms([(f"testp.{k}.{t} {{p}}, {{0}};", [BITS[t]], 32, 1) for k in tests])
    e, m, _ = O.FORMATS[t]

    def props(a):
        field, frac = (a >> m) & ((1 << e) - 1), a & ((1 << m) - 1)
        nan, inf = field == (1 << e) - 1 and frac, field == (1 << e) - 1 and not frac
        sub = field == 0 and frac != 0
        return [not (nan or inf), inf, not nan, nan, not (nan or inf or sub), sub]

    (a,) = operands(t, 1, 800, seed=7)
    for k in range(len(tests)):
        check(forms, k, lambda x, k=k: int(bool(props(x)[k])), [a])


def test_selp_of_floats_selects_bits():
    forms = Forms(
        [
            ("setp.ne.u32 %p3, {2}, 0; selp.f32 {d}, {0}, {1}, %p3;", [32, 32, 32], 32, 0),
            ("setp.ne.u64 %p3, {2}, 0; selp.f64 {d}, {0}, {1}, %p3;", [64, 64, 64], 64, 0),
        ]
    )
    for i, t in enumerate(("f32", "f64")):
        a, b = operands(t, 2, 300, seed=8)
        c = np.random.default_rng(3).integers(0, 2, 300).astype(np.uint64)
        check(forms, i, lambda x, y, z: x if z else y, [a, b, c])


# -- contraction --------------------------------------------------------------------------------------------------


CONTRACTED = [
    ("mul.{t} %x, {0}, {1}; add.{t} {d}, %x, {2};", "add", False),
    ("mul.{t} %x, {0}, {1}; sub.{t} {d}, %x, {2};", "sub", False),
    ("mul.{t} %x, {0}, {1}; sub.{t} {d}, {2}, %x;", "sub", True),
]
_XREG = {16: "%h6", 32: "%r7", 64: "%rd7"}


@pytest.mark.parametrize("t", list(LANE))
@pytest.mark.parametrize("mode", ["all", "none"])
def test_contracted_pairs_round_once_and_unfused_pairs_twice(t, mode):
    forms = Forms(
        [(tpl.replace("%x", _XREG[BITS[t]]).replace("{t}", t), [BITS[t]] * 3, BITS[t], 0) for tpl, _, _ in CONTRACTED],
        contraction=mode,
    )
    assert len(forms.module.contraction) == (3 if mode == "all" else 0)
    lane, fused = LANE[t], mode == "all"
    neg = 1 << (O.width(lane) - 1)
    for i, (_, op, product_second) in enumerate(CONTRACTED):

        def one(a, b, c, op=op, product_second=product_second):
            if fused:  # one fma: a sub negates the addend (product first) or the product (second)
                return arith_oracle("fma", lane)(
                    a ^ neg if product_second else a, b, c if op == "add" or product_second else c ^ neg
                )
            p = arith_oracle("mul", lane)(a, b)
            return arith_oracle(op, lane)(c, p) if product_second else arith_oracle(op, lane)(p, c)

        check(forms, i, lanes(one, t), operands(t, 3, 700, seed=400 + i))


# -- literals -----------------------------------------------------------------------------------------------------


def test_float_literals_follow_ptxas():
    forms = Forms(
        [
            ("add.f64 {d}, {0}, 0f3F800000;", [64], 64, 0),  # a 0f literal's bits, zero-extended
            ("add.rn.f32 {d}, {0}, 0d3FF0000010000000;", [32], 32, 0),  # 1 + 2^-24: to nearest even, 1.0
            ("mul.rn.f32 {d}, {0}, 1.5;", [32], 32, 0),
            ("fma.rn.f64 {d}, {0}, 0d4000000000000000, 0dBFF0000000000000;", [64], 64, 0),
        ]
    )
    one64 = np.array([0x3FF0000000000000, 0], np.uint64)
    assert forms.run(0, one64).tolist() == [0x3FF0000000000000, 0x3F800000]
    one32 = np.array([0x3F800000, 0x00000000], np.uint32)
    assert forms.run(1, one32).tolist() == [0x40000000, 0x3F800000]
    assert forms.run(2, one32).tolist() == [0x3FC00000, 0]
    assert forms.run(3, one64).tolist() == [0x3FF0000000000000, 0xBFF0000000000000]


def _ptx(body: str, regs=".reg .b16 %h<4>; .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %p<2>;") -> str:
    return f".version 8.3\n.target sm_90\n.address_size 64\n.visible .entry k()\n{{\n{regs}\n{body}\nret;\n}}\n"


@pytest.mark.parametrize(
    "body",
    [
        "add.f16 %h1, %h2, 0f3F800000;",  # half precision takes no literal
        "add.f32 %r1, %r2, 3;",  # float instructions take no integer literal
        "add.rz.f16 %h1, %h2, %h3;",  # half precision rounds to nearest only
        "add.rn.ftz.bf16 %h1, %h2, %h3;",
        "fma.rn.f64 %rd1, %rd2, %rd3, %rd1; sqrt.rn.ftz.f64 %rd1, %rd2;",
        "fma.rn.oob.f16 %h1, %h2, %h3, %h1;",
        "mad.rn.f16 %h1, %h2, %h3, %h1;",
        "div.f32 %r1, %r2, %r3;",
        "div.approx.f64 %rd1, %rd2, %rd3;",
        "rcp.approx.ftz.f64 %rd1, %rd2;",  # the SFU's: no model of MUFU.RCP64H
        "fma.f32 %r1, %r2, %r3, %r1;",
        "min.NaN.f64 %rd1, %rd2, %rd3;",
        "testp.normal.f16 %p1, %h1;",
    ],
)
def test_forms_the_isa_or_the_models_lack_raise(body):
    kernel = load(_ptx(body)).kernel("k")
    (error,) = kernel.program.unsupported  # listed when decoded, raised when a thread reaches it
    assert isinstance(error, UnsupportedInstruction)
    assert any(part.split()[0] == error.opcode for part in body.split(";") if part.strip())
    with pytest.raises(UnsupportedInstruction):
        launch(kernel, 1, 32, [])


# -- div.approx / div.full ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def div_forms():
    return Forms(
        [
            ("div.approx.f32 {d}, {0}, {1};", [32, 32], 32, 0),
            ("div.approx.ftz.f32 {d}, {0}, {1};", [32, 32], 32, 0),
            ("div.full.f32 {d}, {0}, {1};", [32, 32], 32, 0),
            ("div.full.ftz.f32 {d}, {0}, {1};", [32, 32], 32, 0),
            ("rcp.approx.ftz.f32 %r8, {1}; mul.rn.ftz.f32 {d}, {0}, %r8;", [32, 32], 32, 0),
            ("rcp.approx.ftz.f32 %r8, {1}; mul.rn.f32 {d}, {0}, %r8;", [32, 32], 32, 0),
        ]
    )


def _ulps(got, want):
    g, w = (np.asarray(x, np.uint32).view(np.int32).astype(np.int64) for x in (got, want))
    g, w = np.where(g < 0, -(g & 0x7FFFFFFF), g), np.where(w < 0, -(w & 0x7FFFFFFF), w)
    return np.abs(g - w)


@pytest.mark.skipif(sfu.load_tables("sm_90") is None, reason="no MUFU.RCP model for sm_90")
def test_div_approx_and_full_are_the_reciprocal_times_the_dividend(div_forms):
    a, b = operands("f32", 2, 2000, seed=9)
    approx_ftz, product_ftz = div_forms.run(1, a, b), div_forms.run(4, a, b)
    assert (approx_ftz == product_ftz).all()  # div.approx.ftz is rcp.approx.ftz then mul.ftz
    normal = (np.abs(b.view(np.float32)) >= 2.0**-126) & (np.abs(b.view(np.float32)) <= 2.0**126)
    assert (div_forms.run(0, a, b)[normal] == div_forms.run(5, a, b)[normal]).all()
    # the ISA's accuracy: at most 2 ulp for a divisor in [2^-126, 2^126] and a normal, finite quotient
    exact = ieee.div(a, b, F32, "rne")
    q = np.abs(exact.view(np.float32))
    fine = normal & np.isfinite(q) & (q >= 2.0**-126)
    for k in (0, 2):
        assert _ulps(div_forms.run(k, a, b)[fine], exact[fine]).max() <= 2


@pytest.mark.skipif(sfu.load_tables("sm_90") is None, reason="no MUFU.RCP model for sm_90")
def test_div_full_reaches_huge_divisors_and_approx_does_not(div_forms):
    a = np.array([0x7E800000, 0x3F800000], np.uint32)  # 2^126, 1
    b = np.array([0x7F000000, 0x7F000000], np.uint32)  # 2^127
    full = div_forms.run(2, a, b).view(np.float32)
    assert full.tolist() == [0.5, 2.0**-127]  # scaled by 1/4 first: within range
    approx = div_forms.run(0, a, b).view(np.float32)
    assert approx[1] == 0.0  # MUFU.RCP(2^127) flushes to zero: the ISA's range limit of .approx


# -- the numerics on their own: hypothesis over raw bits, every format and direction ------------------------------


_FMT = {"f64": F64, "f32": F32, "f16": F16, "bf16": BF16}


@settings(max_examples=40, deadline=None)
@given(
    fmt=st.sampled_from(list(_FMT)),
    op=st.sampled_from(["add", "mul", "fma", "div", "sqrt"]),
    mode=st.sampled_from(list(MODES.values())),
    data=st.data(),
)
def test_ieee_functions_round_once(fmt, op, mode, data):
    w = O.width(fmt)
    arity = _ARITY[op]
    xs = [data.draw(st.lists(st.integers(0, 2**w - 1), min_size=16, max_size=16)) for _ in range(arity)]
    if arity > 1:  # half the second operands near the first (cancellation, ties)
        xs[1][:8] = [x ^ (1 << (w - 1)) ^ (d & 15) for x, d in zip(xs[0][:8], xs[1][:8])]
    arrays = [np.array(x, np.uint64) for x in xs]
    got = getattr(ieee, op)(*arrays, _FMT[fmt], mode)
    oracle = arith_oracle(op, fmt, mode)
    want = [oracle(*(x[k] for x in xs)) for k in range(16)]
    assert [int(v) for v in got] == want


def test_the_oracle_agrees_with_hardware_float32_and_float64():
    """The oracle itself, where numpy's IEEE arithmetic is the truth: binary32 / binary64 to nearest even."""
    rng = np.random.default_rng(11)
    a32, b32 = (I.f32_bits(rng, 400) for _ in range(2))
    with np.errstate(all="ignore"):
        hw = (a32.view(np.float32) / b32.view(np.float32)).view(np.uint32)
    want = [arith_oracle("div", "f32")(int(x), int(y)) for x, y in zip(a32, b32)]
    nan = np.isnan(hw.view(np.float32))
    assert (hw[~nan] == np.array(want, np.uint32)[~nan]).all()
    a64, b64 = (I.f64_bits(rng, 400) for _ in range(2))
    with np.errstate(all="ignore"):
        hw = (a64.view(np.float64) * b64.view(np.float64)).view(np.uint64)
    want = [arith_oracle("mul", "f64")(int(x), int(y)) for x, y in zip(a64, b64)]
    nan = np.isnan(hw.view(np.float64))
    assert (hw[~nan] == np.array(want, np.uint64)[~nan]).all()
