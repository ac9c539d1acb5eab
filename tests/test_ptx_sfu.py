"""The SFU's approximate forms (flashsim.numerics.sfu_approx, flashsim.ptx.semantics.special): the models against
the H200's outputs (tests/data/sfu_approx_sample_sm90.npz, 2^16 random inputs and the specials per form, captured
by flashsim.gpu.capture.sfu_approx), their arithmetic pieces against exact rational arithmetic, and the PTX
simulator running each form's own PTX on the captured inputs. Bit patterns compared throughout."""

from __future__ import annotations

import math
import pathlib
from fractions import Fraction

import numpy as np
import pytest

from flashsim.numerics import sfu_approx as A

SAMPLE = pathlib.Path(__file__).parent / "data" / "sfu_approx_sample_sm90.npz"
MODELLED_F32 = [f for f, v in A.FORMS.items() if v.width == 32 and not v.pair]
PAIRS = [f for f, v in A.FORMS.items() if v.pair]


@pytest.fixture(scope="module")
def sample():
    with np.load(SAMPLE, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _f32(bits):
    return np.asarray(bits, np.uint32).view(np.float32)


@pytest.mark.parametrize("form", MODELLED_F32)
def test_f32_models_reproduce_the_gpu(sample, form):
    x = sample["in/f32"]
    got = A.apply(form, x)
    want = sample[f"out/{form}"]
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{form}: {bad.size} of {x.size} differ, first x={x[bad[0]]:#010x}"


@pytest.mark.parametrize("form", PAIRS)
def test_half_models_reproduce_the_gpu(sample, form):
    x = sample[f"in/{form}"]
    assert np.array_equal(A.apply(form, x), sample[f"out/{form}"])


def test_tanh_f32_model_is_sm90_only():
    with pytest.raises(A.ModelUnavailable, match="fitted on sm_90"):
        A.model_of("tanh.approx.f32", "sm_120")


@pytest.mark.parametrize("form", ["rsqrt.approx.ftz.f32", "ex2.approx.ftz.f32", "ex2.approx.f16"])
def test_other_archs_have_no_model(form):
    with pytest.raises(A.ModelUnavailable, match="calibrate"):
        A.model_of(form, "sm_120")


# -- the arithmetic pieces against exact arithmetic -------------------------------------------------------------


def _exact(bits) -> Fraction:
    return Fraction(float(np.uint32(bits).view(np.float32)))


def _rz_f32(v: Fraction) -> int:
    """Bits of v rounded toward zero to f32 (finite, below the overflow threshold)."""
    if v == 0:
        return 0
    sign = 0x80000000 if v < 0 else 0
    a = abs(v)
    e = max(math.floor(math.log2(a)), -126)
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    q = math.floor(a / Fraction(2) ** (e - 23))
    return sign | int(np.float32(q * 2.0 ** (e - 23)).view(np.uint32))


def test_mul_rz_is_the_exact_product_truncated():
    rng = np.random.default_rng(1)
    x = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32)
    y = np.full(x.shape, A.INV_2PI_BITS, np.uint32)
    x[:4] = [0x80000001, 0x00000001, 0x80000000, 0x007FFFFF]  # subnormal products, -0
    got = A.mul_rz(_f32(x), _f32(y)).view(np.uint32)
    for xb, yb, g in zip(x, y, got):
        xf = float(np.uint32(xb).view(np.float32))
        if not math.isfinite(xf):
            continue
        p = _exact(xb) * _exact(yb)
        want = _rz_f32(p) if p != 0 else (int(xb) ^ int(yb)) & 0x80000000
        assert int(g) == want, (hex(xb), hex(g), hex(want))


@pytest.mark.parametrize("mode", A.LG2_ROUNDINGS)
def test_round_f64_to_f32_directed(mode):
    rng = np.random.default_rng(2)
    v = rng.standard_normal(2000) * np.exp2(rng.uniform(-60, 60, 2000))
    got = A.round_f64_to_f32(v, mode)
    for vi, g in zip(v, got):
        q = Fraction(float(vi))
        lo = _rz_f32(q)  # toward zero
        lo_val = _exact(lo)
        if lo_val == q:
            want = lo
        else:
            away = lo + 1  # the next f32 away from zero (same sign)
            up_is_away = q > 0
            choose_away = {
                "rz": False,
                "rd": not up_is_away,
                "ru": up_is_away,
                "rn": abs(q - lo_val) > abs(_exact(away) - q)
                or (abs(q - lo_val) == abs(_exact(away) - q) and lo % 2 == 1),
            }[mode]
            want = away if choose_away else lo
        assert int(g) == want, (vi, mode, hex(g), hex(want))


def test_sin_key_is_the_truncated_fixed_point_reduced_argument():
    """key = sign << 25 | floor(frac(|u|) 2^25) with u = RZ(x / (2 pi)), from exact rationals."""
    rng = np.random.default_rng(3)
    x = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32)
    spec = dict(kind=1, frac=25, bits=25, periodic=1, rounding=0, arg_rz_mul=1, mul_bits=A.INV_2PI_BITS)
    keys = A.key_of(x, **spec)
    c = _exact(A.INV_2PI_BITS)
    for xb, k in zip(x, keys):
        xf = float(np.uint32(xb).view(np.float32))
        if not math.isfinite(xf):
            assert k >= 2 << 25
            continue
        u = _exact(_rz_f32(_exact(xb) * c))
        frac = abs(u) - math.floor(abs(u))
        want = (int(xb >> 31) << 25) | math.floor(frac * 2**25)
        assert int(k) == want


def test_lg2_model_is_the_truncated_exact_sum():
    """lg2.approx.ftz of (1 + m 2^-23) 2^E is RZ(E + L) for the model's own L, computed exactly."""
    t = A.load("sm_90")
    T1, T0 = t.tables["lg2_t1"], t.tables["lg2_t0"]
    L = A.lg2_L("t1_above_t0_below", T1, T0)
    rng = np.random.default_rng(4)
    x = (rng.integers(1, 255, 2000).astype(np.uint32) << 23) | rng.integers(0, 1 << 23, 2000).astype(np.uint32)
    got = A.apply("lg2.approx.ftz.f32", x)
    for xb, g in zip(x, got):
        E = int((xb >> 23) & 0xFF) - 127
        m = int(xb & 0x7FFFFF)
        v = E + Fraction(float(L[m + (1 << 23 if E < 0 else 0)]))
        assert int(g) == _rz_f32(v), hex(xb)


def test_models_are_close_to_the_functions():
    """Sanity against the exact functions: rsqrt / sqrt within 2^-21 relative, lg2 within 2^-21 absolute or
    relative, sin / cos within 2^-20 absolute on [-pi, pi] (PTX ISA: rsqrt 2^-22.9, sin / cos 2^-20.5 there)."""
    rng = np.random.default_rng(5)
    x = rng.uniform(0.01, 1e6, 4000).astype(np.float32)
    for form, fn in (("rsqrt.approx.f32", lambda v: 1 / np.sqrt(v)), ("sqrt.approx.f32", np.sqrt)):
        y = _f32(A.apply(form, x.view(np.uint32))).astype(np.float64)
        assert np.max(np.abs(y / fn(x.astype(np.float64)) - 1)) < 2.0**-21
    y = _f32(A.apply("lg2.approx.f32", x.view(np.uint32))).astype(np.float64)
    exact = np.log2(x.astype(np.float64))
    assert np.all(np.abs(y - exact) <= np.maximum(2.0**-21, np.abs(exact) * 2.0**-21))
    t = rng.uniform(-np.pi, np.pi, 4000).astype(np.float32)
    for form, fn in (("sin.approx.f32", np.sin), ("cos.approx.f32", np.cos)):
        y = _f32(A.apply(form, t.view(np.uint32))).astype(np.float64)
        assert np.max(np.abs(y - fn(t.astype(np.float64)))) < 2.0**-20


@pytest.mark.parametrize("dtype", [np.uint16, np.uint32])
def test_table_codec_round_trips(dtype):
    rng = np.random.default_rng(6)
    top = np.iinfo(dtype).max
    values = np.concatenate([[0, top, 0, 1, top - 1], rng.integers(0, top, 5000, dtype=np.uint64)]).astype(dtype)
    entries = A.encode_table("t", values)
    assert np.array_equal(A.decode_table("t", entries), values)
    entries["t__sha256"] = np.array("0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        A.decode_table("t", entries)


# -- the PTX simulator on each form's own PTX ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def sfu_module():
    from flashsim.ptx import load
    from flashsim.ptx import probes as P

    return load(P.ptx_of(P.probes("sfu")[0]), arch="sm_90")


def _simulate(module, form: str, x: np.ndarray) -> np.ndarray:
    from flashsim.ptx import launch

    n = x.size
    out = np.zeros(n, x.dtype)
    launch(module.kernel(form.replace(".", "_")), (n // 256,), (256,), [x, out, np.int32(n)])
    return out


@pytest.mark.nvrtc
@pytest.mark.parametrize("form", [f for f in MODELLED_F32 if f != "tanh.approx.f32"] + PAIRS)  # tanh: no probe
def test_simulator_reproduces_the_gpu(sample, sfu_module, form):
    x = sample["in/f32"] if form in MODELLED_F32 else sample[f"in/{form}"]
    n = 4096
    got = _simulate(sfu_module, form, np.ascontiguousarray(x[:n]))
    assert np.array_equal(got, sample[f"out/{form}"][:n])


@pytest.mark.nvrtc
@pytest.mark.parametrize("form", ["ex2.approx.f16", "tanh.approx.bf16"])
def test_simulator_half_forms_match_the_pair_forms(sample, sfu_module, form):
    """The 16-bit forms on 16-bit registers: the low halves of the x2 form's GPU outputs."""
    pair = [p for p in PAIRS if A.FORMS[p].scalar == form][0]
    x = sample[f"in/{pair}"][:4096]
    got = _simulate(sfu_module, form, (x & 0xFFFF).astype(np.uint16))
    assert np.array_equal(got, (sample[f"out/{pair}"][:4096] & 0xFFFF).astype(np.uint16))


@pytest.mark.nvrtc
def test_simulator_tanh_f32_inline_asm_on_the_h200_sample(sample):
    """tanh.approx.f32 as softcap kernels write it (inline PTX on a register), on the H200's held-out sample."""
    from flashsim.ptx import compile, launch

    src = """extern "C" __global__ void k(const unsigned* a, unsigned* o) {
        unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
        unsigned r; asm("tanh.approx.f32 %0, %1;" : "=r"(r) : "r"(a[i])); o[i] = r; }"""
    module = compile(src, arch="sm_90")
    x = np.ascontiguousarray(sample["in/f32"][:4096])
    out = np.zeros_like(x)
    launch(module.kernel("k"), (16,), (256,), [x, out])
    assert np.array_equal(out, sample["out/tanh.approx.f32"][:4096])
