"""The sm_100+ float forms of flashsim.ptx (what Triton's sm_120a builds emit): .f32x2 add / sub / mul / fma, the
three-input min / max.f32 and the mixed-precision add / sub / fma .f32.f16 / .f32.bf16, run with arch="sm_120".

Oracles: each .f32x2 lane against the scalar .f32 form (held to exact rational arithmetic in test_ptx_float) and,
to nearest, numpy's float32; three-input min / max against a selection written here from the PTX ISA's rule; the
mixed forms against numpy (widen, then one float32 operation) and against ``cvt.f32.{f16,bf16}`` followed by the
scalar .f32 form. Every form is refused with arch="sm_90", as ptxas 13.0 refuses it there.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ptx_elementwise import Forms

from flashsim.ptx import UnsupportedInstruction, launch, load
from flashsim.ptx.probes import inputs as I

N = 1024
CANONICAL = 0x7FFFFFFF  # the f32 NaN result
ROUNDED = ("rn", "rz", "rm", "rp")


def _f32_cols(arity: int, n: int, seed: int) -> list[np.ndarray]:
    """Raw f32 operand bits: the specials in combination (NaN, inf, signed zeros, subnormals, ...), then random."""
    return [I.operand(k, arity, n, I.F32_SPECIAL, I.f32_bits)(np.random.default_rng(seed)) for k in range(arity)]


def _pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


def _lanes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.uint64)
    return (x & np.uint64(0xFFFFFFFF)).astype(np.uint32), (x >> np.uint64(32)).astype(np.uint32)


def _canonical(r: np.ndarray) -> np.ndarray:
    """numpy's float32 result bits, its NaNs as the GPU's canonical NaN."""
    r = np.asarray(r, np.float32)
    return np.where(np.isnan(r), np.uint32(CANONICAL), r.view(np.uint32))


def _same(got, want, what):
    got, want = np.asarray(got).astype(np.uint64), np.asarray(want).astype(np.uint64)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (
        f"{what}: {bad.size} of {got.size} differ; first at {bad[0]}: {got[bad[0]]:#x} != {want[bad[0]]:#x}"
    )


# -- .f32x2 ---------------------------------------------------------------------------------------------------------

_ARITY = {"add": 2, "sub": 2, "mul": 2, "fma": 3}
PACKED = [(op, r, ftz) for op in ("add", "sub", "mul") for r in ("", *ROUNDED) for ftz in ("", ".ftz")]
PACKED += [("fma", r, ftz) for r in ROUNDED for ftz in ("", ".ftz")]


def _name(op, r, ftz, t):
    return f"{op}{'.' + r if r else ''}{ftz}.{t}"


def _template(name, arity):
    return f"{name} {{d}}, " + ", ".join(f"{{{k}}}" for k in range(arity)) + ";"


@pytest.fixture(scope="module")
def packed():
    forms = [(_template(_name(op, r, f, "f32x2"), _ARITY[op]), [64] * _ARITY[op], 64, 0) for op, r, f in PACKED]
    return Forms(forms, arch="sm_120")


@pytest.fixture(scope="module")
def scalar():
    forms = [(_template(_name(op, r, f, "f32"), _ARITY[op]), [32] * _ARITY[op], 32, 0) for op, r, f in PACKED]
    return Forms(forms)  # sm_90's scalar forms: the oracle of each lane


def _check_packed(packed, scalar, i, cols64):
    got_lo, got_hi = _lanes(packed.run(i, *cols64))
    lo, hi = zip(*(_lanes(c) for c in cols64))
    what = _name(*PACKED[i], "f32x2")
    _same(got_lo, scalar.run(i, *lo), f"{what}, lane 0")
    _same(got_hi, scalar.run(i, *hi), f"{what}, lane 1")
    return got_lo, got_hi, lo, hi


@pytest.mark.parametrize("i", range(len(PACKED)), ids=[_name(*f, "f32x2") for f in PACKED])
def test_each_f32x2_lane_is_the_scalar_form(packed, scalar, i):
    op, r, ftz = PACKED[i]
    arity = _ARITY[op]
    lo = _f32_cols(arity, N, seed=i)
    hi = [np.random.default_rng(100 + i).permutation(c) for c in _f32_cols(arity, N, seed=50 + i)]
    cols = [_pack(a, b) for a, b in zip(lo, hi)]
    got_lo, got_hi, lo, hi = _check_packed(packed, scalar, i, cols)
    if op != "fma" and r in ("", "rn") and not ftz:  # numpy's float32 is IEEE to nearest even: a second oracle
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[op]
        with np.errstate(all="ignore"):
            for got, xs in ((got_lo, lo), (got_hi, hi)):
                _same(got, _canonical(fn(*(x.view(np.float32) for x in xs))), f"{op}.f32x2 against numpy")


@settings(max_examples=15, deadline=None)
@given(data=st.data(), i=st.sampled_from(range(len(PACKED))))
def test_f32x2_on_hypothesis_bits(packed, scalar, data, i):
    arity = _ARITY[PACKED[i][0]]
    raw = st.lists(st.integers(0, 2**64 - 1), min_size=16, max_size=16)
    cols = [np.array(data.draw(raw), np.uint64) for _ in range(arity)]
    _check_packed(packed, scalar, i, cols)


# -- three-input min / max ------------------------------------------------------------------------------------------

MINMAX3 = [(op, m) for op in ("max", "min") for m in ("", ".ftz", ".NaN", ".abs", ".ftz.NaN.abs", ".ftz.abs")]


def _minmax3_oracle(op, mods, *bits):
    """The PTX ISA's rule, one element: .ftz flushes subnormal inputs to zeros of their sign, .abs takes |x|; NaN
    inputs are ignored (all NaN: the canonical NaN) unless .NaN, where any NaN gives it; -0 < +0."""
    xs = []
    for b in bits:
        b = int(b)
        if ".ftz" in mods and (b >> 23) & 0xFF == 0:
            b &= 0x80000000
        if ".abs" in mods:
            b &= 0x7FFFFFFF
        xs.append(b)
    nans = [(b & 0x7FFFFFFF) > 0x7F800000 for b in xs]
    if all(nans) or (".NaN" in mods and any(nans)):
        return CANONICAL
    live = [b for b, n in zip(xs, nans) if not n]

    def key(b):
        return (float(np.uint32(b).view(np.float32)), 0 if b >> 31 else 1)

    return (max if op == "max" else min)(live, key=key)


@pytest.fixture(scope="module")
def minmax3():
    return Forms([(f"{op}{m}.f32 {{d}}, {{0}}, {{1}}, {{2}};", [32] * 3, 32, 0) for op, m in MINMAX3], arch="sm_120")


@pytest.mark.parametrize("i", range(len(MINMAX3)), ids=[f"{op}{m}.f32" for op, m in MINMAX3])
def test_three_input_min_max(minmax3, i):
    op, mods = MINMAX3[i]
    cols = _f32_cols(3, N, seed=200 + i)
    cols[2][: N // 4] = cols[0][: N // 4] ^ np.uint32(0x80000000)  # +-0, +-x, NaN against its negation
    want = [_minmax3_oracle(op, mods, *(c[k] for c in cols)) for k in range(N)]
    _same(minmax3.run(i, *cols), want, f"{op}{mods}.f32 (three inputs)")


# -- mixed precision --------------------------------------------------------------------------------------------------

MIXED = [
    (op, r, sat, h) for h in ("f16", "bf16") for op in ("add", "sub") for r in ("", *ROUNDED) for sat in ("", ".sat")
]
MIXED += [("fma", r, sat, h) for h in ("f16", "bf16") for r in ROUNDED for sat in ("", ".sat")]
_HALVES = {"add": 1, "sub": 1, "fma": 2}


def _mixed_form(op, r, sat, h):
    k = _HALVES[op]
    return (
        f"{op}{'.' + r if r else ''}{sat}.f32.{h} {{d}}, " + ", ".join(f"{{{j}}}" for j in range(k + 1)) + ";",
        [16] * k + [32],
        32,
        0,
    )


def _composed_form(op, r, sat, h):
    """cvt.f32.{h} of the half operands, then the scalar .f32 operation: the ISA's definition, spelled in sm_90 PTX."""
    k = _HALVES[op]
    cvts = " ".join(f"cvt.f32.{h} %r{12 + j}, {{{j}}};" for j in range(k))
    srcs = ", ".join([f"%r{12 + j}" for j in range(k)] + [f"{{{k}}}"])
    return (f"{cvts} {op}.{r or 'rn'}{sat}.f32 {{d}}, {srcs};", [16] * k + [32], 32, 0)


@pytest.fixture(scope="module")
def mixed():
    return Forms([_mixed_form(*f) for f in MIXED], arch="sm_120"), Forms([_composed_form(*f) for f in MIXED])


def _half_cols(h, k, n, seed):
    special, random = (I.F16_SPECIAL, I.f16_bits) if h == "f16" else (I.BF16_SPECIAL, I.bf16_bits)
    return [I.operand(j, k + 1, n, special, random)(np.random.default_rng(seed)) for j in range(k)]


@pytest.mark.parametrize("i", range(len(MIXED)), ids=[f"{op}.{r or '-'}{s}.f32.{h}" for op, r, s, h in MIXED])
def test_mixed_precision_is_widen_then_f32(mixed, i):
    op, r, sat, h = MIXED[i]
    k = _HALVES[op]
    cols = _half_cols(h, k, N, seed=300 + i) + [_f32_cols(k + 1, N, seed=300 + i)[k]]
    got = mixed[0].run(i, *cols)
    _same(got, mixed[1].run(i, *cols), f"{MIXED[i]} against cvt then the .f32 form")
    if op != "fma" and r in ("", "rn") and not sat:  # numpy: the exact widening, then one float32 rounding
        a = (
            cols[0].view(np.float16).astype(np.float32)
            if h == "f16"
            else (cols[0].astype(np.uint32) << 16).view(np.float32)
        )
        with np.errstate(all="ignore"):
            want = _canonical(a + cols[1].view(np.float32) if op == "add" else a - cols[1].view(np.float32))
        _same(got, want, f"{MIXED[i]} against numpy")


# -- what is refused ------------------------------------------------------------------------------------------------

SM100_ONLY = [
    "add.rn.f32x2 %rd3, %rd1, %rd2;",
    "sub.f32x2 %rd3, %rd1, %rd2;",
    "mul.rp.ftz.f32x2 %rd3, %rd1, %rd2;",
    "fma.rn.f32x2 %rd3, %rd1, %rd2, %rd1;",
    "max.f32 %r3, %r1, %r2, %r1;",
    "min.NaN.abs.f32 %r3, %r1, %r2, %r1;",
    "add.rn.f32.f16 %r3, %h1, %r2;",
    "sub.f32.bf16 %r3, %h1, %r2;",
    "fma.rz.sat.f32.f16 %r3, %h1, %h2, %r2;",
]
ILLEGAL = [  # ptxas 13.0 rejects these on sm_120a too
    "add.rn.sat.f32x2 %rd3, %rd1, %rd2;",
    "fma.rn.sat.f32x2 %rd3, %rd1, %rd2, %rd1;",
    "fma.f32x2 %rd3, %rd1, %rd2, %rd1;",
    "max.xorsign.abs.f32 %r3, %r1, %r2, %r1;",
    "min.abs.f32 %r3, %r1, %r2;",
    "max.f16 %h3, %h1, %h2, %h1;",
    "max.f64 %fd3, %fd1, %fd2, %fd1;",
    "add.ftz.f32.f16 %r3, %h1, %r2;",
    "fma.f32.bf16 %r3, %h1, %h2, %r2;",
]


def _run_one(insn: str, arch: str):
    target = {"sm_120": "sm_120a"}.get(arch, arch)
    text = f""".version 8.8
.target {target}
.address_size 64
.visible .entry k(.param .u64 p)
{{
  .reg .b64 %rd<4>; .reg .b32 %r<4>; .reg .b16 %h<4>; .reg .f64 %fd<4>;
  mov.b64 %rd1, 0; mov.b64 %rd2, 0; mov.b32 %r1, 0; mov.b32 %r2, 0; mov.b16 %h1, 0; mov.b16 %h2, 0;
  mov.f64 %fd1, 0d0000000000000000; mov.f64 %fd2, 0d0000000000000000;
  {insn}
  ret;
}}"""
    launch(load(text, arch=arch, contraction="none").kernel("k"), 1, 32, [np.zeros(1, np.uint32)])


@pytest.mark.parametrize("insn", SM100_ONLY)
def test_sm100_forms_are_refused_on_sm_90(insn):
    _run_one(insn, "sm_120")  # runs there
    with pytest.raises(UnsupportedInstruction, match="sm_100"):
        _run_one(insn, "sm_90")


@pytest.mark.parametrize("insn", ILLEGAL)
def test_forms_ptxas_rejects_are_refused(insn):
    with pytest.raises(UnsupportedInstruction):
        _run_one(insn, "sm_120")
