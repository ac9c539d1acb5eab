"""flashsim.ptx's cvt, bit for bit, against exact oracles (Python integers, tests/float_oracle.py's fractions):
integer <-> integer with .sat and sign / zero extension, integer <-> float in every rounding, float <-> float in
every rounding with .ftz / .sat / .relu / .satfinite, round-to-integral, tf32, the f16x2 / bf16x2 / e4m3x2 /
e5m2x2 packs and the fp8 unpacks; the forms ptxas rejects and the sm_100+ ones raise. Hand-written PTX."""

from __future__ import annotations

from fractions import Fraction

import float_oracle as O
import numpy as np
import pytest
from ptx_elementwise import Forms

from flashsim.ptx import UnsupportedInstruction, launch, load
from flashsim.ptx.probes import inputs as I

MODES = {"rn": "rne", "rz": "rz", "rm": "rm", "rp": "rp", "rna": "rna"}
INT_MODES = {"rni": "rne", "rzi": "rz", "rmi": "rm", "rpi": "rp"}
FLOATS = {"f64": 64, "f32": 32, "f16": 16, "bf16": 16}
INTS = {f"{k}{b}": b for k in "us" for b in (8, 16, 32, 64)}


def _inputs(t: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    special, random = {
        "f64": (I.F64_SPECIAL, I.f64_bits),
        "f32": (I.F32_SPECIAL, I.f32_bits),
        "f16": (I.F16_SPECIAL, I.f16_bits),
        "bf16": (I.BF16_SPECIAL, I.bf16_bits),
        "i32": (I.INT32_SPECIAL, I.int_bits(32)),
        "i64": (I.INT64_SPECIAL, I.int_bits(64)),
        "i16": (I.INT32_SPECIAL.astype(np.uint16), I.int_bits(16)),
    }[t]
    return np.concatenate([special, random(rng, n - len(special))])


def _src_key(t: str) -> str:
    return t if t in FLOATS else f"i{max(INTS[t], 16)}"


def _flush(b, fmt):
    e, m, _ = O.FORMATS[fmt]
    return b & (1 << (e + m)) if (b >> m) & ((1 << e) - 1) == 0 else b


def _signed(x, bits):
    return x - (1 << bits) if x >> (bits - 1) & 1 else x


def _post(out, fmt, sat=False, relu=False):
    sign = 1 << (O.width(fmt) - 1)
    nan = O.value(out, fmt) == O.NAN
    if sat:
        return 0 if nan or out & sign else (O.round_to(Fraction(1), fmt, "rne") if O.value(out, fmt) > 1 else out)
    if relu:
        return O.nan(fmt) if nan else (0 if out & sign else out)
    return out


def float_oracle(src, dst, mode="rne", *, ftz=False, sat=False, relu=False, satfinite=False):
    """One float -> float conversion: flush f32 inputs (.ftz: through the f32 unit, so a NaN becomes canonical),
    round once (.ftz: an f32 result tiny before rounding flushed), then .sat / .relu; NaN as O.convert_nan,
    infinities kept (.satfinite: the largest finite value, as every overflow)."""

    def f(a):
        if ftz and src == "f32":
            a = O.nan(src) if O.value(a, src) == O.NAN else _flush(a, src)
        negative, v = O.decode(a, src)
        if v == O.NAN:
            out = O.convert_nan(a, src, dst)
        elif v == O.INF:
            big = O.max_finite(dst) * (-1 if negative else 1)
            out = O.round_to(big, dst, "rz") if satfinite else _inf_bits(dst, negative)
        elif ftz and dst == "f32" and v != 0 and O.tiny_before_rounding(v, dst, mode):
            out = int(negative) << 31
        else:
            out = O.round_to(-v if negative else v, dst, mode, negative_zero=negative, satfinite=satfinite)
        return _post(out, dst, sat, relu)

    return f


def _inf_bits(fmt, negative):
    e, m, has_inf = O.FORMATS[fmt]
    if not has_inf:
        return O.nan(fmt)
    return (int(negative) << (e + m)) | (((1 << e) - 1) << m)


def int_to_float_oracle(st, dst, mode, sat=False):
    bits, signed = INTS[st], st[0] == "s"

    def f(a):
        a &= (1 << bits) - 1
        v = _signed(a, bits) if signed else a
        return _post(O.round_to(Fraction(v), dst, mode), dst, sat)

    return f


def float_to_int_oracle(src, dt, mode, reg_bits, *, ftz=False):
    """Round in ``mode``, clamp to dt's range; NaN: the H200's F2I gives 0 from f32 / f16 / bf16 to at most 32
    bits, and 1 << (bits - 1) from f64 or to 64 bits (the silicon probes convert/cvt_*)."""
    bits, signed = INTS[dt], dt[0] == "s"
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)

    def f(a):
        if ftz:
            a = _flush(a, src)
        negative, v = O.decode(a, src)
        if v == O.NAN:
            r = 1 << (bits - 1) if src == "f64" or bits == 64 else 0
        elif v == O.INF:
            r = lo if negative else hi
        else:
            r = O._round_int(v, mode, negative) * (-1 if negative else 1)
            r = max(lo, min(hi, r))
        r &= (1 << bits) - 1
        if reg_bits > bits and signed:  # sign-extended into the register
            r = _signed(r, bits) & ((1 << reg_bits) - 1)
        return r

    return f


def int_to_int_oracle(st, dt, sat, reg_bits):
    sb, db = INTS[st], INTS[dt]
    lo, hi = (-(1 << (db - 1)), (1 << (db - 1)) - 1) if dt[0] == "s" else (0, (1 << db) - 1)

    def f(a):
        a &= (1 << sb) - 1
        v = _signed(a, sb) if st[0] == "s" else a
        r = (max(lo, min(hi, v)) if sat else v) & ((1 << db) - 1)
        if reg_bits > db and dt[0] == "s":
            r = _signed(r, db) & ((1 << reg_bits) - 1)
        return r

    return f


def integral_oracle(fmt, mode, ftz=False):
    def f(a):
        if ftz:
            a = _flush(a, fmt)
        negative, v = O.decode(a, fmt)
        if v == O.NAN:
            return O.nan_result(fmt, a)
        if v == O.INF:
            return a
        r = Fraction(O._round_int(v, mode, negative))
        out = O.round_to(-r if negative else r, fmt, "rne", negative_zero=negative)
        return _flush(out, fmt) if ftz else out

    return f


def _reg(bits):
    return max(bits, 16) if bits < 32 else bits


FORMS = []  # (ptx, source key for inputs, source bits, destination register bits, oracle)


def _add(ptx, st, dt_bits, oracle, st_bits=None):
    FORMS.append((ptx, _src_key(st), st_bits or (FLOATS.get(st) or _reg(INTS[st])), dt_bits, oracle))


for r in ("rn", "rz", "rm", "rp"):
    for st, dt in (("f32", "f16"), ("f32", "bf16"), ("f64", "f32"), ("f64", "f16"), ("f64", "bf16")):
        _add(f"cvt.{r}.{dt}.{st}", st, FLOATS[dt], float_oracle(st, dt, MODES[r]))
    _add(f"cvt.{r}.bf16.f16", "f16", 16, float_oracle("f16", "bf16", MODES[r]))
    _add(f"cvt.{r}.f16.bf16", "bf16", 16, float_oracle("bf16", "f16", MODES[r]))
    for st, dt in (("s32", "f32"), ("u32", "f32"), ("s64", "f32"), ("u64", "f64"), ("s64", "f64"), ("s32", "f16")):
        _add(f"cvt.{r}.{dt}.{st}", st, FLOATS[dt], int_to_float_oracle(st, dt, MODES[r]))
    _add(f"cvt.{r}.bf16.u64", "u64", 16, int_to_float_oracle("u64", "bf16", MODES[r]))
    _add(f"cvt.{r}.f16.u16", "u16", 16, int_to_float_oracle("u16", "f16", MODES[r]))
for r, mode in INT_MODES.items():
    for st in FLOATS:
        _add(f"cvt.{r}.{st}.{st}", st, FLOATS[st], integral_oracle(st, mode))
    for st, dt in (("f32", "s32"), ("f32", "u32"), ("f64", "s64"), ("f64", "u64"), ("f16", "s32"), ("bf16", "u32")):
        _add(f"cvt.{r}.{dt}.{st}", st, INTS[dt], float_to_int_oracle(st, dt, mode, INTS[dt]))
    _add(f"cvt.{r}.s8.f32", "f32", 32, float_to_int_oracle("f32", "s8", mode, 32))
    _add(f"cvt.{r}.u16.f64", "f64", 16, float_to_int_oracle("f64", "u16", mode, 16))
    _add(f"cvt.{r}.s64.f32", "f32", 64, float_to_int_oracle("f32", "s64", mode, 64))
for st, dt in (("f16", "f32"), ("f32", "f64"), ("f16", "f64"), ("bf16", "f64")):
    _add(f"cvt.{dt}.{st}", st, FLOATS[dt], float_oracle(st, dt))
_exact_bf16 = float_oracle("bf16", "f32")
# ptxas makes it a shift (SHF.L.U32 by 16): a NaN keeps its payload
_add("cvt.f32.bf16", "bf16", 32, lambda a: a << 16 if O.value(a, "bf16") == O.NAN else _exact_bf16(a))
_add("cvt.f16.bf16", "bf16", 16, float_oracle("bf16", "f16"))  # no modifier: to nearest
_add("cvt.rn.ftz.f16.f32", "f32", 16, float_oracle("f32", "f16", ftz=True))
_add("cvt.rz.ftz.f32.f64", "f64", 32, float_oracle("f64", "f32", "rz", ftz=True))
_add("cvt.ftz.f64.f32", "f32", 64, float_oracle("f32", "f64", ftz=True))
_add("cvt.sat.f32.f16", "f16", 32, float_oracle("f16", "f32", sat=True))
_add("cvt.rn.sat.f16.f64", "f64", 16, float_oracle("f64", "f16", sat=True))
_add("cvt.rp.sat.f32.s32", "s32", 32, int_to_float_oracle("s32", "f32", "rp", sat=True))
_add("cvt.ftz.f32.f32", "f32", 32, float_oracle("f32", "f32", ftz=True))
_add("cvt.sat.f32.f32", "f32", 32, float_oracle("f32", "f32", sat=True))
_add("cvt.f32.f32", "f32", 32, lambda a: a)  # a move: NaN payloads kept
_add("cvt.rni.ftz.f32.f32", "f32", 32, integral_oracle("f32", "rne", ftz=True))
_add("cvt.rzi.ftz.s32.f32", "f32", 32, float_to_int_oracle("f32", "s32", "rz", 32, ftz=True))
_add("cvt.rni.sat.u32.f32", "f32", 32, float_to_int_oracle("f32", "u32", "rne", 32))  # .sat: the default clamp
for relu in (False, True):
    for sf in (False, True):
        mods = ".relu" * relu + ".satfinite" * sf
        for dt in ("f16", "bf16"):
            for r in ("rn", "rz"):
                if relu or sf:
                    _add(
                        f"cvt.{r}{mods}.{dt}.f32", "f32", 16, float_oracle("f32", dt, MODES[r], relu=relu, satfinite=sf)
                    )
for st, dt in (
    ("s32", "s8"),
    ("s32", "u8"),
    ("u32", "s16"),
    ("s32", "u16"),
    ("s64", "s32"),
    ("s64", "u32"),
    ("u64", "s32"),
    ("s64", "u64"),
    ("u64", "s64"),
    ("u32", "u64"),
    ("s32", "s64"),
    ("s16", "s32"),
    ("u16", "u32"),
    ("u16", "s8"),
):
    db = _reg(INTS[dt]) if INTS[dt] < 32 else INTS[dt]
    for sat in (False, True):
        _add(
            f"cvt{'.sat' * sat}.{dt}.{st}",
            st,
            32 if db < 32 else db,
            int_to_int_oracle(st, dt, sat, 32 if db < 32 else db),
        )


@pytest.fixture(scope="module")
def forms():
    return Forms([(f"{ptx} {{d}}, {{0}};", [bits], dbits, 0) for ptx, _, bits, dbits, _ in FORMS])


def check(forms, i, oracle, cols):
    got = forms.run(i, *cols)
    want = np.array([oracle(*(int(c[k]) for c in cols)) for k in range(len(cols[0]))], np.uint64)
    bad = np.flatnonzero(got.astype(np.uint64) != want)
    if bad.size:
        k = bad[0]
        pytest.fail(
            f"{forms.forms[i][0]}: {bad.size} of {len(want)} differ; first {[hex(int(c[k])) for c in cols]}: "
            f"{int(got[k]):#x}, oracle {int(want[k]):#x}"
        )


@pytest.mark.parametrize("i", range(len(FORMS)), ids=[f[0] for f in FORMS])
def test_cvt(forms, i):
    ptx, key, bits, dbits, oracle = FORMS[i]
    x = _inputs(key, 700, seed=i).astype(np.uint64) & np.uint64((1 << bits) - 1 if bits < 64 else 2**64 - 1)
    check(forms, i, oracle, [x])


# -- packs, unpacks, tf32 -------------------------------------------------------------------------------------------


PACKS = [  # (ptx, destination bits, lane oracle, lane width)
    ("cvt.rn.f16x2.f32", 32, float_oracle("f32", "f16"), 16),
    ("cvt.rz.f16x2.f32", 32, float_oracle("f32", "f16", "rz"), 16),
    ("cvt.rn.relu.satfinite.f16x2.f32", 32, float_oracle("f32", "f16", relu=True, satfinite=True), 16),
    ("cvt.rn.bf16x2.f32", 32, float_oracle("f32", "bf16"), 16),
    ("cvt.rz.relu.bf16x2.f32", 32, float_oracle("f32", "bf16", "rz", relu=True), 16),
    ("cvt.rn.satfinite.e4m3x2.f32", 16, float_oracle("f32", "e4m3", satfinite=True), 8),
    ("cvt.rn.satfinite.relu.e4m3x2.f32", 16, float_oracle("f32", "e4m3", satfinite=True, relu=True), 8),
    ("cvt.rn.satfinite.e5m2x2.f32", 16, float_oracle("f32", "e5m2", satfinite=True), 8),
    ("cvt.rn.satfinite.relu.e5m2x2.f32", 16, float_oracle("f32", "e5m2", satfinite=True, relu=True), 8),
]


@pytest.mark.parametrize("i", range(len(PACKS)), ids=[p[0] for p in PACKS])
def test_pack_puts_a_in_the_upper_half(i):
    ptx, dbits, lane, w = PACKS[i]
    forms = Forms([(f"{ptx} {{d}}, {{0}}, {{1}};", [32, 32], dbits, 0)])
    a = _inputs("f32", 600, seed=50 + i)
    b = np.roll(a, 17)
    check(forms, 0, lambda x, y: (lane(x) << w) | lane(y), [a, b])


@pytest.mark.parametrize("dt", ["e4m3x2", "e5m2x2"])
@pytest.mark.parametrize("relu", [False, True])
def test_pack_of_an_f16x2(dt, relu):
    forms = Forms([(f"cvt.rn.satfinite{'.relu' * relu}.{dt}.f16x2 {{d}}, {{0}};", [32], 16, 0)])
    lane = float_oracle("f16", dt[:4], satfinite=True, relu=relu)
    h = _inputs("f16", 600, seed=60).astype(np.uint32)
    x = h | (np.roll(h, 5) << np.uint32(16))
    check(forms, 0, lambda v: (lane(v >> 16) << 8) | lane(v & 0xFFFF), [x])


@pytest.mark.parametrize("st", ["e4m3x2", "e5m2x2"])
@pytest.mark.parametrize("relu", [False, True])
def test_unpack_to_f16x2_is_exact(st, relu):
    forms = Forms([(f"cvt.rn{'.relu' * relu}.f16x2.{st} {{d}}, {{0}};", [16], 32, 0)])
    fmt = st[:4]

    def lane(v):
        negative, value = O.decode(v, fmt)
        if value == O.NAN:  # the canonical f16 NaN (silicon probes convert/cvt_rn_f16x2_e4m3x2, _e5m2x2)
            out = O.nan("f16")
        elif value == O.INF:
            out = (int(negative) << 15) | 0x7C00
        else:
            out = O.round_to(-value if negative else value, "f16", "rne", negative_zero=negative)
        return _post(out, "f16", relu=relu)

    x = I.fp8_pairs(512)(None)
    check(forms, 0, lambda v: (lane(v >> 8) << 16) | lane(v & 0xFF), [x])


def test_tf32():
    forms = Forms(
        [
            ("cvt.rna.tf32.f32 {d}, {0};", [32], 32, 0),
            ("cvt.rna.satfinite.tf32.f32 {d}, {0};", [32], 32, 0),
            ("cvt.rn.tf32.f32 {d}, {0};", [32], 32, 0),
            ("cvt.rz.relu.tf32.f32 {d}, {0};", [32], 32, 0),
        ]
    )
    x = _inputs("f32", 800, seed=70)

    def rna(a, satfinite):  # finite: one rounding to nearest, ties away; inf / NaN: the low 13 bits cleared
        negative, v = O.decode(a, "f32")
        if v in (O.NAN, O.INF):
            r = a & 0xFFFFE000
        else:
            r = O.round_to(-v if negative else v, "tf32", "rna", negative_zero=negative) << 13
        if satfinite and (r >> 23) & 0xFF == 0xFF:
            r -= 0x2000
        return r

    check(forms, 0, lambda a: rna(a, False), [x])
    check(forms, 1, lambda a: rna(a, True), [x])
    check(forms, 2, lambda a: float_oracle("f32", "tf32")(a) << 13, [x])
    check(forms, 3, lambda a: float_oracle("f32", "tf32", "rz", relu=True)(a) << 13, [x])


@pytest.mark.parametrize(
    "body",
    [
        "cvt.f32.s32 %r1, %r2;",  # int -> float needs a rounding
        "cvt.s32.f32 %r1, %r2;",  # float -> int needs an integer rounding
        "cvt.rn.f32.f16 %r1, %h1;",  # a widening takes none
        "cvt.rn.f32.f32 %r1, %r2;",  # the same type rounds to an integer or not at all
        "cvt.f16.f32 %h1, %r1;",
        "cvt.rm.f16x2.f32 %r1, %r2, %r3;",
        "cvt.rm.relu.f16.f32 %h1, %r1;",
        "cvt.rn.e4m3x2.f32 %h1, %r1, %r2;",  # needs .satfinite
        "cvt.rn.satfinite.tf32.f32 %r1, %r2;",  # sm_100+
        "cvt.rs.f16x2.f32 %r1, %r2, %r3, %r1;",
        "cvt.rn.satfinite.e2m1x2.f32 %h1, %r1, %r2;",
        "cvt.rni.u32.u16 %r1, %h1;",
        "cvt.ftz.f64.f16 %rd1, %h1;",
    ],
)
def test_forms_ptxas_rejects_or_sm90_lacks_raise(body):
    text = (
        ".version 8.6\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
        ".reg .b16 %h<4>; .reg .b32 %r<4>; .reg .b64 %rd<4>;\n" + body + "\nret;\n}\n"
    )
    kernel = load(text).kernel("k")
    (error,) = kernel.program.unsupported  # listed when decoded, raised when a thread reaches it
    assert isinstance(error, UnsupportedInstruction)
    assert any(part.split()[0] == error.opcode for part in body.split(";") if part.strip())
    with pytest.raises(UnsupportedInstruction):
        launch(kernel, 1, 32, [])
