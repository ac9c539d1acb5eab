"""cvt to and from the OCP MX formats (sm_100a / sm_120a, PTX ISA 8.6+) in flashsim.ptx with arch="sm_120": the
e2m1x2 / e2m3x2 / e3m2x2 packs (.rn.satfinite{.relu}) and unpacks to f16x2 (.rn{.relu}), the ue8m0x2 scales
(.rz / .rp {.satfinite}) from f32 and bf16x2 and back to bf16x2. Hand-written PTX, each form run by the simulator on
every f16 and every bf16 value (widened to f32 where the source is f32), every code, and f32 bit patterns drawn by
hypothesis; held bit for bit to two oracles: the formulas written here (ml_dtypes' float4_e2m1fn / float6_* for the
element roundings, which round to nearest even and saturate as .satfinite does; frexp for the scales) and NVIDIA's
reference conversions in CUDA 13.0's headers (tests/mx_oracle.py). ptxas -arch=sm_120a assembles every form used
here, and refuses the forms the simulator refuses."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mx_oracle import Oracle
from ptx_elementwise import Forms

from flashsim.numerics import ieee
from flashsim.numerics.formats import E2M1, E3M2, F32
from flashsim.ptx import UnsupportedInstruction, load

ELEMENT = {"e2m1": ml_dtypes.float4_e2m1fn, "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn}
WIDTH = {"e2m1": 4, "e2m3": 8, "e3m2": 8}  # bits per packed code (e2m3 / e3m2: 6 bits in a byte)

# (name, PTX template, input widths, output width)
FORMS: list = []
for _e in ELEMENT:
    _d = "8" if _e == "e2m1" else "16"
    for _relu in ("", ".relu"):
        FORMS.append(
            (f"{_e}.f32{_relu}", f"cvt.rn.satfinite{_relu}.{_e}x2.f32 {{d}}, {{0}}, {{1}};", (32, 32), int(_d))
        )
        FORMS.append((f"f16.{_e}{_relu}", f"cvt.rn{_relu}.f16x2.{_e}x2 {{d}}, {{0}};", (int(_d),), 32))
for _relu in ("", ".relu"):
    FORMS.append((f"e2m1.f16{_relu}", f"cvt.rn.satfinite{_relu}.e2m1x2.f16x2 {{d}}, {{0}};", (32,), 8))
for _rnd in ("rz", "rp"):
    for _sat in ("", ".satfinite"):
        FORMS.append((f"ue8m0.f32.{_rnd}{_sat}", f"cvt.{_rnd}{_sat}.ue8m0x2.f32 {{d}}, {{0}}, {{1}};", (32, 32), 16))
        FORMS.append((f"ue8m0.bf16.{_rnd}{_sat}", f"cvt.{_rnd}{_sat}.ue8m0x2.bf16x2 {{d}}, {{0}};", (32,), 16))
FORMS.append(("bf16.ue8m0", "cvt.rn.bf16x2.ue8m0x2 {d}, {0};", (16,), 32))
INDEX = {name: i for i, (name, *_rest) in enumerate(FORMS)}

ALL16 = np.arange(1 << 16, dtype=np.uint32)
F16_AS_F32 = ALL16.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32)  # every f16 value
BF16_AS_F32 = ALL16 << np.uint32(16)  # every bf16 value


@pytest.fixture(scope="module")
def forms():
    return Forms([(*f[1:], 0) for f in FORMS], arch="sm_120")


@pytest.fixture(scope="module")
def oracle(tmp_path_factory):
    built = Oracle.build(tmp_path_factory.mktemp("mx_oracle"))
    if built is None:
        pytest.skip("no C++ compiler or CUDA 13.0 headers (cuda_fp4.h) here for NVIDIA's reference conversions")
    return built


def run(forms, name, *arrays):
    return forms.run(INDEX[name], *arrays)


# -- the formulas of the ISA, written here ------------------------------------------------------------------------


def element_codes(bits32, e: str, relu: bool = False) -> np.ndarray:
    """cvt.rn.satfinite{.relu}: ml_dtypes' rounding (nearest even; past the largest finite value, infinities too, the
    largest of the sign), a NaN +MAX_NORM (the formats have no NaN), .relu a set sign bit +0."""
    x = np.asarray(bits32, np.uint32).view(np.float32)
    codes = x.astype(ELEMENT[e]).view(np.uint8)
    top = np.array(float(ml_dtypes.finfo(ELEMENT[e]).max), ELEMENT[e]).view(np.uint8)
    codes = np.where(np.isnan(x), top, codes)
    sign = np.uint8(1 << (3 if e == "e2m1" else 5))
    return np.where(relu & ((codes & sign) != 0), np.uint8(0), codes).astype(np.uint8)


def element_f16(codes, e: str, relu: bool = False) -> np.ndarray:
    mask = np.uint8(0xF if e == "e2m1" else 0x3F)
    h = (np.asarray(codes, np.uint8) & mask).view(ELEMENT[e]).astype(np.float16).view(np.uint16)
    return np.where(relu & (h >= 0x8000), np.uint16(0), h).astype(np.uint16)


def ue8m0_codes(values, mode: str, satfinite: bool) -> np.ndarray:
    """floor (rz) / ceil (rp) of log2 |x|, + 127, clamped to [0, 255]; a NaN 255; .satfinite 255 -> 254 unless NaN."""
    with np.errstate(invalid="ignore"):  # NaN inputs: their code is set below
        a = np.abs(np.asarray(values, np.float64))
    m, e = np.frexp(np.where(np.isfinite(a), a, 1.0))
    log2 = e - 1 if mode == "rz" else np.where(m == 0.5, e - 1, e)
    code = np.where(a == 0, 0, np.clip(log2 + 127, 0, 255))
    code = np.where(np.isinf(a), 255, code)
    if satfinite:
        code = np.where(code == 255, 254, code)
    return np.where(np.isnan(a), 255, code).astype(np.uint8)


def ue8m0_bf16(codes) -> np.ndarray:
    c = np.asarray(codes, np.uint8)
    with np.errstate(over="ignore"):  # code 255 (2^128 overflows f32): the NaN, set below
        v = np.ldexp(1.0, c.astype(np.int64) - 127).astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    return np.where(c == 255, np.uint16(0x7FFF), v).astype(np.uint16)


def pair(hi, lo, width: int) -> np.ndarray:
    dt = np.uint8 if width == 4 else np.uint16 if width == 8 else np.uint32
    return ((np.asarray(hi).astype(np.uint64) << np.uint64(width)) | np.asarray(lo).astype(np.uint64)).astype(dt)


def check_f32_forms(forms, bits32, reference) -> None:
    """Every form with f32 sources run on (bits32, bits32 reversed), against ``reference(name, bits32)``."""
    a = np.ascontiguousarray(bits32, np.uint32)
    b = np.ascontiguousarray(a[::-1])
    for name, _t, widths, _out in FORMS:
        if widths != (32, 32):
            continue
        width = 4 if name.startswith("e2m1") else 8
        got = run(forms, name, a, b)
        want = pair(reference(name, a), reference(name, b), width)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (
            f"{name}: input {a[bad[0]]:#010x}, {b[bad[0]]:#010x} -> {got[bad[0]]:#x}, want {want[bad[0]]:#x}"
        )


def formula(name: str, bits32) -> np.ndarray:
    kind, _src, *rest = name.split(".")
    if kind == "ue8m0":
        return ue8m0_codes(np.asarray(bits32, np.uint32).view(np.float32), rest[0], "satfinite" in rest)
    return element_codes(bits32, kind, relu="relu" in rest)


# -- the tests -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [F16_AS_F32, BF16_AS_F32], ids=["every-f16", "every-bf16"])
def test_f32_sources_exhaustive_against_the_formulas(forms, values):
    check_f32_forms(forms, values, formula)


@pytest.mark.parametrize("values", [F16_AS_F32, BF16_AS_F32], ids=["every-f16", "every-bf16"])
def test_f32_sources_exhaustive_against_nvidia(forms, oracle, values):
    check_f32_forms(forms, values, lambda name, x: _nvidia_column(oracle, name, x))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=512))
def test_f32_bit_patterns(forms, patterns):
    check_f32_forms(forms, np.array(patterns, np.uint32), formula)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=2048))
def test_f32_bit_patterns_against_nvidia(forms, oracle, patterns):
    bits = np.array(patterns, np.uint32)
    check_f32_forms(forms, bits, lambda name, x: _nvidia_column(oracle, name, x))


def _nvidia_column(oracle, name, bits32):
    kind, _src, *rest = name.split(".")
    codes = oracle.from_f32(bits32)
    if kind == "ue8m0":
        return codes[".".join(rest)]
    c = codes[kind]
    return np.where(("relu" in rest) & ((c & (8 if kind == "e2m1" else 32)) != 0), 0, c).astype(np.uint8)


@pytest.mark.parametrize("relu", ["", ".relu"])
def test_e2m1_from_f16x2_every_f16(forms, relu):
    x = ALL16.astype(np.uint32)
    packed = (x << np.uint32(16)) | x[::-1]  # upper half -> bits 4-7
    got = run(forms, f"e2m1.f16{relu}", packed)
    hi, lo = (element_codes(F16_AS_F32[i], "e2m1", relu=bool(relu)) for i in (x, x[::-1]))
    assert np.array_equal(got, pair(hi, lo, 4))


@pytest.mark.parametrize("rnd", ["rz", "rp"])
@pytest.mark.parametrize("sat", ["", ".satfinite"])
def test_ue8m0_from_bf16x2_every_bf16(forms, rnd, sat):
    x = ALL16.astype(np.uint32)
    got = run(forms, f"ue8m0.bf16.{rnd}{sat}", (x << np.uint32(16)) | x[::-1])
    values = BF16_AS_F32.view(np.float32)
    want = pair(ue8m0_codes(values, rnd, bool(sat)), ue8m0_codes(values[::-1], rnd, bool(sat)), 8)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("rnd", ["rz", "rp"])
@pytest.mark.parametrize("sat", ["", ".satfinite"])
def test_ue8m0_from_bf16x2_every_bf16_against_nvidia(forms, oracle, rnd, sat):
    x = ALL16.astype(np.uint32)
    got = run(forms, f"ue8m0.bf16.{rnd}{sat}", (x << np.uint32(16)) | x[::-1])
    column = oracle.from_bf16(ALL16.astype(np.uint16))[f"{rnd}{sat}"]
    assert np.array_equal(got, pair(column, column[::-1], 8))


@pytest.mark.parametrize("e", list(ELEMENT))
@pytest.mark.parametrize("relu", ["", ".relu"])
def test_element_unpacks_every_code(forms, e, relu):
    width = WIDTH[e]
    n = 1 << (2 * width)
    codes = np.arange(n, dtype=np.uint8 if width == 4 else np.uint16)
    got = run(forms, f"f16.{e}{relu}", codes)
    mask = (1 << width) - 1
    want = pair(element_f16(codes >> width, e, bool(relu)), element_f16(codes & mask, e, bool(relu)), 16)
    assert np.array_equal(got, want)


def test_element_unpacks_against_nvidia(forms, oracle):
    ref = oracle.decode()
    for e, width in WIDTH.items():
        codes = np.arange(1 << width, dtype=np.uint8 if width == 4 else np.uint16)  # the upper code 0
        got = run(forms, f"f16.{e}", codes)
        assert np.array_equal(got & np.uint32(0xFFFF), ref[e][: 1 << width].astype(np.uint32)), e


def test_ue8m0_unpack_every_code(forms, oracle):
    codes = np.arange(1 << 16, dtype=np.uint16)
    got = run(forms, "bf16.ue8m0", codes)
    want = pair(ue8m0_bf16(codes >> 8), ue8m0_bf16(codes & 0xFF), 16)
    assert np.array_equal(got, want)
    assert np.array_equal(ue8m0_bf16(np.arange(256)), oracle.decode()["ue8m0"])


def test_e2m3_e3m2_padding_bits_are_zero_and_not_read(forms):
    x = F16_AS_F32
    for e in ("e2m3", "e3m2"):
        got = run(forms, f"{e}.f32", x, x[::-1].copy())
        assert not (got & np.uint16(0xC0C0)).any()  # bits 6-7 and 14-15 of the pack are zero
        codes = np.arange(1 << 16, dtype=np.uint16)
        # the ISA asks for the top two bits of each byte zero; the simulator does not read them (module docstring)
        assert np.array_equal(run(forms, f"f16.{e}", codes), run(forms, f"f16.{e}", codes & np.uint16(0x3F3F)))


def test_known_values(forms):
    a = np.array([1.0, 2.5, -7.0, np.nan, np.inf, -0.1], np.float32).view(np.uint32)
    b = np.array([0.5, -0.1, 3.0, 1e-9, -np.inf, 0.25], np.float32).view(np.uint32)
    # e2m1: 1 -> 0x2, 0.5 -> 0x1; 2.5 (a tie) -> 2 (0x4), -0.1 -> -0 (0x8); -7 -> -6 (0xF), 3 -> 0x5; NaN -> +6
    # (0x7), 1e-9 -> +0; inf -> +6, -inf -> -6; -0.1 -> -0, 0.25 (a tie between 0 and 0.5) -> +0
    assert run(forms, "e2m1.f32", a, b).tolist() == [0x21, 0x48, 0xF5, 0x70, 0x7F, 0x80]
    # ue8m0 rz: 1 -> 127, 0.5 -> 126; 2.5 -> 128, 0.1 -> 2^-4 (123); 7 -> 129, 3 -> 128; NaN 255, 1e-9 -> 2^-30;
    # inf -> 255 (no .satfinite); 0.1 -> 123, 0.25 -> 125
    assert run(forms, "ue8m0.f32.rz", a, b).tolist() == [0x7F7E, 0x807B, 0x8180, 0xFF61, 0xFFFF, 0x7B7D]
    assert run(forms, "ue8m0.f32.rp.satfinite", a, b).tolist() == [0x7F7E, 0x817C, 0x8281, 0xFF62, 0xFEFE, 0x7C7D]


# -- what ptxas accepts, and what the simulator refuses --------------------------------------------------------------

REFUSED = [  # each refused by ptxas 13.0 -arch=sm_120a (its message) and by the simulator
    ("cvt.rn.e2m1x2.f32 %c1, %r1, %r2;", "'.satfinite' modifier required"),
    ("cvt.rz.satfinite.e2m1x2.f32 %c1, %r1, %r2;", "Illegal rounding modifier"),
    ("cvt.f16x2.e2m1x2 %r1, %c1;", "Rounding modifier required"),
    ("cvt.rn.satfinite.f16x2.e2m1x2 %r1, %c1;", "Unexpected instruction types"),
    ("cvt.rn.satfinite.e2m3x2.f16x2 %h1, %r1;", "Unexpected instruction types"),
    ("cvt.rn.e3m2x2.f32 %h1, %r1, %r2;", "'.satfinite' modifier required"),
    ("cvt.rn.ue8m0x2.f32 %h1, %r1, %r2;", "Illegal rounding modifier"),
    ("cvt.rz.relu.ue8m0x2.f32 %h1, %r1, %r2;", "Illegal modifier '.relu'"),
    ("cvt.rz.bf16x2.ue8m0x2 %r1, %h1;", "Illegal rounding modifier"),
    ("cvt.rn.relu.bf16x2.ue8m0x2 %r1, %h1;", "Illegal modifier '.relu'"),
    ("cvt.rn.f16x2.ue8m0x2 %r1, %h1;", "Unexpected instruction types"),
    ("cvt.rz.ue8m0x2.f16x2 %h1, %r1;", "Unexpected instruction types"),
    ("cvt.rn.bf16x2.e2m1x2 %r1, %c1;", "Unexpected instruction types"),
    ("cvt.rn.satfinite.ftz.e2m1x2.f32 %c1, %r1, %r2;", "Illegal modifier '.ftz'"),
]


def _module(body: str, target: str = "sm_120a") -> str:
    return "\n".join(
        [".version 8.8", f".target {target}", ".address_size 64", ".visible .entry k()", "{"]
        + ["  .reg .b8 %c<4>; .reg .b16 %h<4>; .reg .b32 %r<8>;", body, "  ret;", "}"]
    )


def _ptxas(text: str, arch: str, tmp_path) -> subprocess.CompletedProcess:
    path = tmp_path / "probe.ptx"
    path.write_text(text)
    return subprocess.run(["ptxas", f"-arch={arch}", str(path), "-o", "/dev/null"], capture_output=True, text=True)


needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA 13.0) is not on PATH")


@needs_ptxas
def test_ptxas_accepts_every_form_here(forms, tmp_path):
    done = _ptxas(forms.module.ptx, "sm_120a", tmp_path)
    assert done.returncode == 0, done.stderr


@needs_ptxas
@pytest.mark.parametrize("insn, message", REFUSED)
def test_ptxas_refusals_are_refusals(insn, message, tmp_path):
    done = _ptxas(_module("  " + insn), "sm_120a", tmp_path)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    program = load(_module("  " + insn), arch="sm_120").kernel("k").program
    assert program.unsupported, f"the simulator accepts {insn}"


@pytest.mark.parametrize("arch", ["sm_90", "sm_89", "sm_80"])
@pytest.mark.parametrize("name", ["e2m1.f32", "f16.e3m2", "ue8m0.bf16.rp", "bf16.ue8m0"])
def test_mx_forms_refused_before_sm_100(arch, name):
    form = Forms([(*FORMS[INDEX[name]][1:], 0)], arch=arch)
    args = [np.zeros(4, np.dtype(f"u{w // 8}")) for w in FORMS[INDEX[name]][2]]
    with pytest.raises(UnsupportedInstruction, match=rf"refused on {arch} \(accepted on sm_100, sm_120: PTX ISA 8.6"):
        form.run(0, *args)


def test_fp8_packs_refused_before_sm_89():
    form = Forms([("cvt.rn.satfinite.e4m3x2.f32 {d}, {0}, {1};", (32, 32), 16, 0)], arch="sm_80")
    with pytest.raises(UnsupportedInstruction, match="refused on sm_80"):
        form.run(0, np.zeros(4, np.uint32), np.zeros(4, np.uint32))


@needs_ptxas
@pytest.mark.parametrize("target", ["sm_90a", "sm_120"])
def test_ptxas_refuses_mx_forms_off_the_arch_specific_targets(target, tmp_path):
    done = _ptxas(_module("  cvt.rn.satfinite.e2m1x2.f32 %c1, %r1, %r2;", target), target, tmp_path)
    assert done.returncode != 0 and "not supported on .target" in done.stderr


def test_formats_without_infinity_need_satfinite():
    """numerics.ieee.convert refuses to round into e2m1 / e2m3 / e3m2 without overflow="finite": their first
    pattern past the largest finite one is the sign bit, not an infinity."""
    for f in (E2M1, E3M2):
        with pytest.raises(ValueError, match="has no infinity"):
            ieee.convert(np.zeros(1, np.uint32), F32, f)
