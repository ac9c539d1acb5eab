"""flashsim.sfu: the ex2/rcp.approx.ftz.f32 models, their tables, the calibration lookup and the capture's host logic.

Bits are compared as uint32. The models run on synthetic tables here (the correctly rounded tables with
deterministic +-1 ulp noise); the silicon test runs the shipped tables on GPU outputs stored in tests/data.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import shutil
import subprocess
import sys
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashsim
from flashsim import calibration, provenance
from flashsim.gpu.capture import sfu as cap
from flashsim.numerics import sfu

DATA = pathlib.Path(__file__).resolve().parent / "data"
REPO = pathlib.Path(__file__).resolve().parents[1]
F32 = lambda bits: np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)
B32 = lambda x: np.asarray(x, dtype=np.float32).view(np.uint32)
bits32 = st.integers(0, 2**32 - 1)


@pytest.fixture()
def isolated(tmp_path, monkeypatch):
    """Empty user cache and package data folders, fresh warnings and loaded-table state."""
    monkeypatch.setenv("FLASHSIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(calibration, "_PACKAGE_DATA", tmp_path / "data")
    monkeypatch.setattr(calibration, "_warned", set())
    sfu.reload()
    yield tmp_path
    sfu.reload()


@pytest.fixture(scope="module")
def models():
    """Synthetic ex2 (two's complement, toward zero) and rcp models."""
    ex2 = sfu.Ex2Model(cap._perturb(sfu.reference_table("ex2_pos"), 1))
    rcp = sfu.RcpModel(cap._perturb(sfu.reference_table("rcp"), 3))
    return ex2, rcp


def _mp_round_f32(value) -> int:
    """Bits of a positive mpmath value rounded to 24 significant bits (nearest), then to f32 with ftz and overflow."""
    m, e = mpmath.frexp(value)
    t = m * 2**24
    sig = int(mpmath.floor(t))
    sig += 1 if t - sig > 0.5 else 0
    v = float(mpmath.ldexp(sig, e - 24))
    if v < 2.0**-126:
        return 0
    return 0x7F800000 if v >= 2.0**128 else int(np.float32(v).view(np.uint32))


def _nearest_f32(q: Fraction) -> int:
    """Bits of the f32 nearest to the rational q (ties to even), found among the neighbours of a guess."""
    w = np.float32(float(q))
    cands = [np.nextafter(w, np.float32(-np.inf)), w, np.nextafter(w, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(B32(c)) & 1))
    return int(B32(best))


# -- input contract --------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [sfu.ex2, sfu.rcp])
@pytest.mark.parametrize(
    "bad", [np.zeros(3), np.zeros(3, np.float16), np.zeros(3, np.int32), [1.0, 2.0], 1.0, np.float64(1.0)]
)
def test_rejects_anything_but_float32(fn, bad):
    with pytest.raises(ValueError, match="float32"):
        fn(bad)


def test_unknown_arch_is_a_value_error():
    with pytest.raises(ValueError, match="unknown arch"):
        sfu.ex2(np.zeros(2, np.float32), arch="sm_7")


@pytest.mark.parametrize("fn", [sfu.ex2, sfu.rcp])
def test_shapes_and_scalars(fn, isolated):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibration.CalibrationWarning)
        rng = np.random.default_rng(0)
        x = rng.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
        for arr in (x, x[:, ::2, 1:], np.zeros((0, 5), np.float32), np.float32(0.5) * np.ones((), np.float32)):
            y = fn(arr)
            assert y.dtype == np.float32 and y.shape == arr.shape
            assert np.array_equal(B32(y), B32(fn(arr.copy(order="C"))))
        s = fn(np.float32(-0.25))
        assert isinstance(s, np.float32)
        assert B32(s) == B32(fn(np.array([-0.25], np.float32)))[0]
    assert flashsim.sfu is sfu


# -- the correctly rounded references and the fallback ---------------------------------------------


def test_exp2_correctly_rounded_where_libm_could_tip_the_rounding():
    mpmath.mp.prec = 160
    x = sfu.ex2_table_inputs(True).astype(np.float64)
    v = np.exp2(x)
    low = (v.view(np.uint64) & np.uint64((1 << 29) - 1)).astype(np.int64) - (1 << 28)
    near = np.flatnonzero(np.abs(low) < (1 << 11))  # includes every entry the Decimal fix-up handles
    near = np.concatenate([near, np.random.default_rng(1).integers(0, sfu.TABLE_SIZE, 300)])
    ref = sfu.reference_table("ex2_neg")
    assert len(near) > 300
    for i in near:
        assert int(ref[i]) == _mp_round_f32(mpmath.power(2, mpmath.mpf(float(x[i])))), i


def fixture_settings(n: int):
    """Hypothesis settings for tests that also take (function-scoped, example-independent) fixtures."""
    return settings(max_examples=n, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@fixture_settings(300)
@given(
    st.one_of(
        bits32,
        st.integers(0, 2**31 - 1).map(lambda b: b | (1 << 31)),
        st.floats(-130, 130, width=32).map(lambda x: int(B32(np.float32(x)))),
    )
)
def test_fallback_ex2_is_correctly_rounded_with_ftz_and_specials(isolated, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibration.CalibrationWarning)
        got = int(B32(sfu.ex2(F32([b])))[0])
    x = float(F32([b])[0])
    e = (b >> 23) & 0xFF
    if e == 255:
        want = 0x7FFFFFFF if b & 0x7FFFFF else (0 if b >> 31 else 0x7F800000)
    elif e == 0:
        want = 0x3F800000  # ftz input: 2^0
    elif x >= 128:
        want = 0x7F800000
    elif x < -127:
        want = 0
    else:
        mpmath.mp.prec = 100
        want = _mp_round_f32(mpmath.power(2, mpmath.mpf(x)))
    assert got == want, (hex(b), hex(got), hex(want))


def test_fallback_warns_once_and_keeps_the_special_rules(isolated):
    x = np.array(
        [-np.inf, np.inf, np.nan, 128.0, 127.0, -0.0, 0.0, 1e-45, -1e-45, -127.5, -126.0, 1.0], dtype=np.float32
    )
    with pytest.warns(
        calibration.CalibrationWarning,
        match="ex2 model: no calibration table, using correctly rounded exp2: not bit-exact",
    ):
        y = sfu.ex2(x)
    assert [hex(v) for v in B32(y)] == [
        hex(v)
        for v in (
            0,
            0x7F800000,
            0x7FFFFFFF,
            0x7F800000,
            0x7F000000,
            0x3F800000,
            0x3F800000,
            0x3F800000,
            0x3F800000,
            0,
            0x00800000,
            0x40000000,
        )
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sfu.ex2(x)  # the second call is silent
    with pytest.warns(calibration.CalibrationWarning, match="rcp model: no calibration table"):
        r = sfu.rcp(
            np.array([0.0, -0.0, 1e-40, np.inf, -np.inf, np.nan, 2.0**127, -(2.0**126), 4.0, -3.0], dtype=np.float32)
        )
    assert [hex(v) for v in B32(r)] == [
        hex(v)
        for v in (
            0x7F800000,
            0xFF800000,
            0x7F800000,
            0,
            0x80000000,
            0x7FFFFFFF,
            0,
            0x80800000,
            0x3E800000,
            int(B32(np.float32(-1 / 3))),
        )
    ]


@fixture_settings(200)
@given(st.integers(1, 252), st.integers(0, 2**23 - 1), st.booleans())
def test_fallback_rcp_is_the_correctly_rounded_reciprocal(isolated, e, m, neg):
    b = (neg << 31) | (e << 23) | m
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", calibration.CalibrationWarning)
        got = int(B32(sfu.rcp(F32([b])))[0])
    q = 1 / Fraction(float(F32([b & 0x7FFFFFFF])[0]))
    assert got == (neg << 31) | _nearest_f32(q)


# -- table mechanics on synthetic tables -----------------------------------------------------------


def _ex2_expected(model: sfu.Ex2Model, b: int) -> int:
    """The model's definition evaluated with exact rationals, entry by entry (two's complement, toward zero)."""
    x = Fraction(float(F32([b])[0]))
    n = int(x * 2**23)  # int() truncates toward zero
    k, f = n // 2**23, n % 2**23  # floor division: two's complement split
    value = Fraction(float(F32([model.pos[f]])[0])) * Fraction(2) ** k
    if value < Fraction(2) ** -126:
        return 0
    if value >= Fraction(2) ** 128:
        return 0x7F800000
    return int(B32(np.float32(float(value))))  # exact: a power-of-two scaling of an f32


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 1), st.integers(1, 134), st.integers(0, 2**23 - 1))
def test_ex2_table_model_is_2_to_the_k_times_g_of_the_truncated_fraction(models, sign, e, m):
    ex2, _ = models
    b = (sign << 31) | (e << 23) | m
    assert int(ex2.bits(np.array([b], np.uint32))[0]) == _ex2_expected(ex2, b)


def test_ex2_table_model_specials_and_rounding_rules(models):
    ex2, _ = models
    pos = ex2.pos
    x = np.array(
        [-np.inf, np.inf, np.nan, -np.nan, 200.0, -200.0, -0.0, 1e-45, -1e-45, 1.0, -1.0, -(2.0**-30)], dtype=np.float32
    )
    want = [
        0,
        0x7F800000,
        0x7FFFFFFF,
        0x7FFFFFFF,
        0x7F800000,
        0,
        pos[0],
        pos[0],
        pos[0],
        pos[0] + (1 << 23),
        pos[0] - (1 << 23),
        pos[0],
    ]
    assert [hex(v) for v in ex2.bits(B32(x))] == [hex(v) for v in want]
    # the rounding of x * 2^23 matters below 2^-23: down gives g(1 - 2^-23) / 2, up gives g(2^-23)
    tiny = B32(np.array([-(2.0**-30), 2.0**-30], np.float32))
    rd = sfu.Ex2Model(pos, None, {"rounding": "rd"}).bits(tiny)
    ru = sfu.Ex2Model(pos, None, {"rounding": "ru"}).bits(tiny)
    assert list(rd) == [pos[sfu.MASK] - (1 << 23), pos[0]] and list(ru) == [pos[0], pos[1]]
    quiet = sfu.Ex2Model(pos, None, {"nan_mode": "quiet"}).bits(np.array([0x7F800001, 0xFFA00000], np.uint32))
    assert [hex(v) for v in quiet] == ["0x7fc00001", "0xffe00000"]
    with pytest.raises(ValueError, match="rounding"):
        sfu.Ex2Model(pos, None, {"rounding": "rr"})
    with pytest.raises(ValueError, match="neg"):
        sfu.Ex2Model(pos, None, {"neg_mode": "signmag"})


def test_sign_magnitude_mode_with_the_mirrored_table_equals_twos_complement(models):
    ex2, _ = models
    mirrored = sfu.Ex2Model(ex2.pos, cap.twos_negative_table(ex2.pos), {"neg_mode": "signmag"})
    rng = np.random.default_rng(5)
    b = np.concatenate(
        [
            rng.integers(0, 2**32, 1 << 19, dtype=np.uint64).astype(np.uint32),
            B32(-np.exp2(rng.uniform(-40, 8, 1 << 19))),
            B32(rng.uniform(-130, 0, 1 << 18)),
        ]
    )
    assert np.array_equal(mirrored.bits(b), ex2.bits(b))


@settings(max_examples=300, deadline=None)
@given(bits32)
def test_rcp_table_model_shifts_the_mantissa_result_by_the_exponent(models, b):
    _, rcp = models
    got = int(rcp.bits(np.array([b], np.uint32))[0])
    e, m, s = (b >> 23) & 0xFF, b & 0x7FFFFF, b & 0x80000000
    if e == 255:
        want = 0x7FFFFFFF if m else s
    elif e == 0:
        want = s | 0x7F800000
    else:
        value = Fraction(float(F32([rcp.table[m]])[0])) * Fraction(2) ** (127 - e)
        want = s if value < Fraction(2) ** -126 else s | int(B32(np.float32(float(value))))
    assert got == want


def test_tables_round_trip_through_a_file(models, tmp_path):
    ex2, rcp = models
    signmag = sfu.Ex2Model(
        ex2.pos,
        cap._perturb(sfu.reference_table("ex2_neg"), 2),
        {"neg_mode": "signmag", "rounding": "rn", "underflow_bits": 0x80000000},
    )
    path = tmp_path / "t.npz"
    sfu.write_tables(path, signmag, rcp, arch="sm_90", meta={"exact": {"ex2": True, "rcp": True}}, codec="zlib")
    assert path.stat().st_size < 4_000_000
    back = sfu.read_tables(path)
    assert back.arch == "sm_90" and back.meta["exact"]["ex2"] is True
    assert back.ex2.params == signmag.params and back.rcp.params == rcp.params
    assert np.array_equal(back.ex2.pos, signmag.pos) and np.array_equal(back.ex2.neg, signmag.neg)
    assert np.array_equal(back.rcp.table, rcp.table)
    with np.load(path) as z:
        entries = dict(z)
    entries["rcp__sha256"] = np.array("0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        sfu.decode_table("rcp", entries)
    with pytest.raises(ValueError, match="shape"):
        sfu.encode_table("rcp", rcp.table[:10])
    with pytest.raises(ValueError, match="codec"):
        sfu.encode_table("rcp", rcp.table, codec="gzip")


def test_decoded_tables_are_cached_on_disk_by_the_file_sha256(models, isolated):
    """First cached read (load_tables' way): decode (sha256-checked) and write <cache>/derived/...<sha256 of the
    file>.npy atomically; later reads memory-map it. A changed file gets its own entry; a damaged entry is decoded
    again and replaced; without a cache the tables are still decoded."""
    ex2, rcp = models
    path = isolated / "t.npz"
    sfu.write_tables(path, ex2, rcp, arch="sm_90", codec="zlib")
    digest = calibration.file_sha256(path)
    sfu.read_tables(path)  # a plain read does not cache
    derived = calibration.cache_root() / "derived"
    assert not derived.exists()
    first = sfu.read_tables(path, cache=True)
    (entry,) = derived.iterdir()
    assert digest in entry.name and entry.suffix == ".npy"
    assert not [p for p in derived.iterdir() if p.name.endswith(".tmp")]
    second = sfu.read_tables(path, cache=True)
    assert isinstance(second.ex2.pos.base, np.memmap) or isinstance(second.ex2.pos.base.base, np.memmap)
    for a, b in ((first.ex2.pos, second.ex2.pos), (first.rcp.table, second.rcp.table), (ex2.pos, second.ex2.pos)):
        assert np.array_equal(a, b)
    x = np.random.default_rng(2).integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(second.ex2.bits(x), ex2.bits(x)) and np.array_equal(second.rcp.bits(x), rcp.bits(x))
    # a changed file: a new entry, never the old one
    other = sfu.Ex2Model(cap._perturb(sfu.reference_table("ex2_pos"), 7))
    sfu.write_tables(path, other, rcp, arch="sm_90", codec="zlib")
    assert np.array_equal(sfu.read_tables(path, cache=True).ex2.pos, other.pos) and len(list(derived.iterdir())) == 2
    # a damaged entry (cut short) is decoded again and replaced
    entry_new = next(p for p in derived.iterdir() if calibration.file_sha256(path) in p.name)
    entry_new.write_bytes(entry_new.read_bytes()[:1000])
    assert np.array_equal(sfu.read_tables(path, cache=True).ex2.pos, other.pos)
    assert calibration.load_array(entry_new, shape=(2, sfu.TABLE_SIZE), dtype=np.uint32) is not None
    # no cache at all: still decodes
    assert calibration.save_array(path / "under_a_file" / "x.npy", np.zeros(2)) is False  # mkdir fails
    assert np.array_equal(sfu.read_tables(path, cache=False).rcp.table, rcp.table)
    with pytest.raises(ValueError, match="plain file name"):
        calibration.derived_path("../x.npy")


def test_a_second_process_loads_cached_tables_fast_and_small(models, isolated):
    """The shipped layout (user cache, then package) in a fresh process with the decoded cache filled: the load
    takes well under 0.1 s on this machine (asserted with a margin for a loaded CI box) and little memory."""
    ex2, rcp = models
    shipped = calibration.shipped_path("sfu", "sm_90")
    shipped.parent.mkdir(parents=True)
    sfu.write_tables(shipped, ex2, rcp, arch="sm_90", codec="zlib")
    assert sfu.load_tables("sm_90").source.startswith("package")  # fills the cache
    code = (
        "import resource, time, flashsim.calibration as c, pathlib, sys\n"
        f"c._PACKAGE_DATA = pathlib.Path({str(isolated / 'data')!r})\n"
        "from flashsim.numerics import sfu\n"
        "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "t = time.perf_counter(); tables = sfu.load_tables('sm_90'); dt = time.perf_counter() - t\n"
        "grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base\n"
        "print(dt, grew, int(tables.ex2.pos[12345]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "FLASHSIM_CACHE": str(isolated / "cache")},
    ).stdout.split()
    seconds, grew_kb, value = float(out[0]), int(out[1]), int(out[2])
    assert value == int(ex2.pos[12345])
    assert seconds < 0.5, seconds
    assert grew_kb < 64 * 1024, grew_kb  # a decode peaks near 500 MB


# -- calibration lookup ----------------------------------------------------------------------------


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("FLASHSIM_CACHE", str(tmp_path / "c"))
    assert calibration.cache_dir("90") == tmp_path / "c" / "sm_90"
    monkeypatch.delenv("FLASHSIM_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert calibration.cache_dir("sm_120") == tmp_path / "x" / "flashsim" / "sm_120"
    assert calibration.filename("sfu", "sm_120") == "sfu_tables_sm120.npz"
    with pytest.raises(ValueError, match="kind"):
        calibration.filename("a b", "sm_90")


def test_load_order_cache_then_package_then_sm90_with_one_warning(isolated, models):
    ex2, rcp = models
    assert calibration.locate("sfu", "sm_90") is None and calibration.locate("sfu", "sm_120") is None
    shipped = calibration.shipped_path("sfu", "sm_90")
    shipped.parent.mkdir(parents=True)
    sfu.write_tables(shipped, ex2, rcp, arch="sm_90", meta={"exact": {"ex2": True, "rcp": False}}, codec="zlib")
    with warnings.catch_warnings():
        warnings.simplefilter("error", calibration.CalibrationWarning)
        found = calibration.locate("sfu", "sm_90")
    assert (found.path, found.source, found.borrowed) == (shipped, "package", False)
    with pytest.warns(calibration.CalibrationWarning, match="no calibration for sm_120: using sm_90 data"):
        found = calibration.locate("sfu", "sm_120")
    assert found.borrowed and found.arch == "sm_90"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        calibration.locate("sfu", "sm_120")  # once per process
        x = np.linspace(-20, 1, 1000, dtype=np.float32)
        assert np.array_equal(B32(sfu.ex2(x, arch="sm_120")), ex2.bits(B32(x)))
    with pytest.warns(calibration.CalibrationWarning, match="rcp model: the sm_90 tables"):
        sfu.rcp(x)  # captured as not exact: said once
    dest = calibration.install(shipped, "sfu", "sm_120")
    assert dest == calibration.cache_dir("sm_120") / "sfu_tables_sm120.npz"
    found = calibration.locate("sfu", "sm_120")
    assert (found.path, found.source, found.borrowed) == (dest, "cache", False)
    with pytest.raises(ValueError, match="src"):
        calibration.install(isolated / "missing.npz", "sfu", "sm_90")


# -- the kernel's model code (C++) against numpy ---------------------------------------------------

_HARNESS = r"""
#include <math.h>
#define SFU_HD static inline
#include "capture/sfu.cu"
extern "C" void ex2_many(const sfu_u32* x, sfu_u32* y, long n, const sfu_u32* gpos, const sfu_u32* gneg,
                         const sfu_u32* p) { for (long i = 0; i < n; ++i) y[i] = ex2_model(x[i], gpos, gneg, p); }
extern "C" void rcp_many(const sfu_u32* x, sfu_u32* y, long n, const sfu_u32* t, const sfu_u32* p) {
    for (long i = 0; i < n; ++i) y[i] = rcp_model(x[i], t, p); }
"""


@pytest.fixture(scope="module")
def cpp_models(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler to build kernel/capture/sfu.cu's model functions for the host")
    d = tmp_path_factory.mktemp("cpp")
    (d / "h.cpp").write_text(_HARNESS)
    lib = d / "libsfu.so"
    subprocess.run(
        [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-I", str(REPO / "kernel"), str(d / "h.cpp"), "-o", str(lib)],
        check=True,
        capture_output=True,
    )
    return ctypes.CDLL(str(lib))


def _ptr(a):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.mark.parametrize(
    "mode,rounding,nan_mode",
    [
        ("twos", "rz", "const"),
        ("twos", "rd", "quiet"),
        ("twos", "ru", "const"),
        ("twos", "rn", "const"),
        ("signmag", "rz", "quiet"),
        ("signmag", "rn", "const"),
    ],
)
def test_kernel_model_code_equals_numpy_model(cpp_models, models, mode, rounding, nan_mode):
    ex2, rcp = models
    neg = cap._perturb(sfu.reference_table("ex2_neg"), 2)
    params = {
        "neg_mode": mode,
        "rounding": rounding,
        "nan_mode": nan_mode,
        "nan_bits": 0x7FC00000,
        "underflow_bits": 0x1,
        "overflow_bits": 0x7F800001,
        "pinf_bits": 0x2,
        "ninf_bits": 0x3,
    }
    model = sfu.Ex2Model(ex2.pos, neg, params)
    rng = np.random.default_rng(7)
    x = np.concatenate(
        [
            rng.integers(0, 2**32, 1 << 19, dtype=np.uint64).astype(np.uint32),
            B32(rng.uniform(-130, 130, 1 << 18)),
            B32(-np.exp2(rng.uniform(-40, 3, 1 << 18))),
            cap.ex2_specials(),
        ]
    )
    y = np.empty_like(x)
    vec = cap.ex2_param_vector(model.params)
    cpp_models.ex2_many(_ptr(x), _ptr(y), ctypes.c_long(x.size), _ptr(model.pos), _ptr(neg), _ptr(vec))
    assert np.array_equal(y, model.bits(x))
    rmodel = sfu.RcpModel(rcp.table, {"nan_mode": nan_mode, "underflow_pos_bits": 5, "zero_neg_bits": 6})
    rvec = cap.rcp_param_vector(rmodel.params)
    cpp_models.rcp_many(_ptr(x), _ptr(y), ctypes.c_long(x.size), _ptr(rcp.table), _ptr(rvec))
    assert np.array_equal(y, rmodel.bits(x))


@pytest.mark.nvrtc
def test_capture_kernels_compile_for_sm90_and_sm120():
    from flashsim.gpu.build import compile_file

    for arch in ("sm_90", "sm_120"):
        b = compile_file("capture/sfu.cu", arch=arch)
        assert set(b.entry_points) == {
            "ex2_hw_apply",
            "rcp_hw_apply",
            "ex2_model_apply",
            "rcp_model_apply",
            "ex2_sweep",
            "rcp_sweep",
        }
        assert b.spill_stores == 0


# -- the capture's host logic on a numpy stand-in for the GPU --------------------------------------


def test_capture_end_to_end_on_a_fake_gpu(isolated, capsys):
    """The command line on the numpy stand-in, then what `flashsim calibrate` does with the files; the provenance
    (the capture kernel's fingerprint, as tests/test_drift.py checks it for the layout and mma tools) in the sample
    file, its summary and the tables' metadata."""
    out = isolated / "out"
    assert cap.main(["--out", str(out), "--fake", "--random-scale", "0.02"]) == 0
    text = capsys.readouterr().out
    assert "ex2 model EXACT; rcp model EXACT" in text and "(a) sweep" in text and "(b) random" in text
    assert sorted(p.name for p in out.iterdir()) == ["sfu_sample_sm90.npz", "sfu_tables_sm90.npz"]
    tables, sample = out / "sfu_tables_sm90.npz", out / "sfu_sample_sm90.npz"
    assert tables.stat().st_size + sample.stat().st_size < 24_000_000
    back = sfu.read_tables(tables)
    current = provenance.fingerprint(cap.PROVENANCE_NAME)
    assert back.meta["provenance"] == current
    assert back.ex2.params["neg_mode"] == "twos" and back.ex2.params["rounding"] == "rz"
    b = np.random.default_rng(3).integers(0, 2**32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(back.ex2.bits(b), cap.synthetic_ex2()(b))
    assert np.array_equal(back.rcp.bits(b), cap.synthetic_rcp()(b))
    with np.load(sample) as z:
        summary = json.loads(str(z["summary"]))
        assert json.loads(str(z["provenance"])) == current == summary["provenance"]
        assert summary["exact"] == {"ex2": True, "rcp": True}
        assert summary["ex2"]["rule_candidates_mismatches"]["twos/rz"] == 0
        assert min(v for k, v in summary["ex2"]["rule_candidates_mismatches"].items() if k != "twos/rz") > 0
        assert summary["ex2"]["sweep"]["checked"] == int(z["ex2_sweep_checked"].sum()) > 0
        assert z["ex2_mismatch"].shape == (0, 3)
        x_in, x_out, r_in, r_out = z["ex2_in"], z["ex2_out"], z["rcp_in"], z["rcp_out"]
    calibration.install(tables, "sfu", "sm_90")
    assert np.array_equal(B32(sfu.ex2(x_in.view(np.float32))), x_out)
    assert np.array_equal(B32(sfu.rcp(r_in.view(np.float32))), r_out)


class _MockArray:
    """Host memory standing in for rt.DeviceArray."""

    def __init__(self, a):
        self.a = np.array(a)
        self.shape, self.size = self.a.shape, self.a.size

    def to_numpy(self):
        return self.a.copy()

    def zero_(self):
        self.a[...] = 0
        return self


def _kernel_signatures() -> dict[str, list[bool]]:
    """kernel name -> for each parameter, whether it is a pointer (read from kernel/capture/sfu.cu)."""
    import re

    src = (REPO / "kernel" / "capture" / "sfu.cu").read_text()
    return {
        m.group(1): ["*" in p for p in m.group(2).split(",")]
        for m in re.finditer(r'extern "C" __global__ void (\w+)\(([^)]*)\)', src)
    }


@pytest.fixture()
def mock_gpu(monkeypatch, cpp_models):
    """flashsim.gpu.runtime mocked: every launch is checked against the kernel's parameter list in sfu.cu; the
    "instructions" are the synthetic truth, the kernels' model code runs for real (host build of sfu.cu)."""
    from flashsim.gpu import runtime as rt

    sigs = _kernel_signatures()
    assert set(sigs) == {"ex2_hw_apply", "rcp_hw_apply", "ex2_model_apply", "rcp_model_apply", "ex2_sweep", "rcp_sweep"}
    truth = {"ex2": cap.synthetic_ex2(), "rcp": cap.synthetic_rcp()}

    def model(fn, x, tables, params):
        y = np.empty_like(x)
        if fn == "ex2":
            cpp_models.ex2_many(_ptr(x), _ptr(y), ctypes.c_long(x.size), *(_ptr(t.a) for t in tables), _ptr(params.a))
        else:
            cpp_models.rcp_many(_ptr(x), _ptr(y), ctypes.c_long(x.size), _ptr(tables[0].a), _ptr(params.a))
        return y

    def launch(kernel, grid, block, *args, **kw):
        assert len(args) == len(sigs[kernel]), kernel
        for a, is_ptr in zip(args, sigs[kernel]):
            assert isinstance(a, _MockArray) if is_ptr else isinstance(a, np.uint64), (kernel, a)
        fn, kind = kernel.split("_", 1)
        if kind == "hw_apply":
            x, out, n = args
            out.a[: int(n)] = truth[fn](x.a[: int(n)])
        elif kind == "model_apply":
            x, out, n, *tables, params = args
            out.a[: int(n)] = model(fn, x.a[: int(n)], tables, params)
        else:
            start, count, *tables, params, hist, rec, cap_, nrec = args
            xb = ((int(start) + np.arange(int(count), dtype=np.uint64)) & 0xFFFFFFFF).astype(np.uint32)
            got, want = truth[fn](xb), model(fn, xb, tables, params)
            bad = np.flatnonzero(got != want)
            hist.a += np.bincount(xb[bad] >> 23, minlength=512).astype(np.uint64)
            take = bad[: max(0, int(cap_) - int(nrec.a[0]))]
            rec.a[int(nrec.a[0]) : int(nrec.a[0]) + take.size] = np.stack([xb[take], got[take], want[take]], 1)
            nrec.a[0] += bad.size

    class Props:
        multiprocessor_count = 2

    class Dev:
        name, properties = "mock H200", Props()

    monkeypatch.setattr(rt, "require_gpu", lambda: Dev())
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "load", lambda build, name: (build.entry(name), name)[1])
    monkeypatch.setattr(rt, "to_device", lambda a: _MockArray(a))
    monkeypatch.setattr(rt, "empty", lambda shape, dtype: _MockArray(np.full(shape, 0xAB, dtype)))
    monkeypatch.setattr(rt, "launch", launch)
    return truth


@pytest.mark.nvrtc  # GpuDevice compiles kernel/capture/sfu.cu; the GPU is mocked
def test_gpu_device_driver_code_against_the_kernel_signatures(mock_gpu, models):
    ex2, rcp = models
    dev = cap.GpuDevice()
    assert (dev.arch, dev.grid) == ("sm_90", 16)
    x = np.random.default_rng(9).integers(0, 2**32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    assert np.array_equal(dev.hw("ex2", x), mock_gpu["ex2"](x)) and np.array_equal(dev.hw("rcp", x), mock_gpu["rcp"](x))
    tables, vec = (dev.put(ex2.pos), dev.put(ex2.pos)), cap.ex2_param_vector(ex2.params)
    assert np.array_equal(dev.model("ex2", x, tables, vec), ex2.bits(x))
    assert np.array_equal(dev.model("rcp", x, (dev.put(rcp.table),), cap.rcp_param_vector(rcp.params)), rcp.bits(x))
    # a model with other tables than the "GPU": the sweep counts and records the differences
    other = sfu.Ex2Model(cap._perturb(sfu.reference_table("ex2_pos"), 5))
    h, r, n = dev.sweep("ex2", 0xBF000000, 1 << 16, (dev.put(other.pos), dev.put(other.pos)), vec, 10)
    assert h.sum() == n > 10 and h[0x17E] == n and r.shape == (10, 3)
    assert np.array_equal(r[:, 1], mock_gpu["ex2"](r[:, 0])) and np.array_equal(r[:, 2], other.bits(r[:, 0]))


@pytest.mark.nvrtc  # GpuDevice compiles kernel/capture/sfu.cu; the GPU is mocked
def test_calibrate_command_installs_exact_tables_into_the_user_cache(mock_gpu, isolated, capsys, monkeypatch):
    """The whole capture through GpuDevice (mocked runtime), then the install into the user cache."""
    from flashsim.cli import main
    from flashsim.commands import calibrate

    keep = isolated / "keep"
    assert main(["calibrate", "--quick", "--random-scale", "0.01", "--no-mma", "--keep", str(keep)]) == 0
    out = capsys.readouterr().out
    assert "installed the SFU tables for sm_90" in out and "calibrate sm_90: ex2 exact, rcp exact -> OK" in out
    found = calibration.locate("sfu", "sm_90")
    assert found.source == "cache" and (found.path.parent / "sfu_sample_sm90.npz").is_file()
    x = np.linspace(-30, 2, 4096, dtype=np.float32)
    assert np.array_equal(B32(sfu.ex2(x)), mock_gpu["ex2"](B32(x)))
    monkeypatch.setattr(calibrate.importlib.util, "find_spec", lambda name: None)
    assert calibrate._mma_check("sm_90") is None and "skipped" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["rd", "signmag", "not-a-table"])
def test_capture_finds_the_rule_or_reports_the_mismatches(isolated, variant):
    if variant == "not-a-table":  # correctly rounded exp2 of all of x: more than 23 fraction bits matter
        dev = cap.FakeDevice(ex2_hw=sfu._fallback_ex2)
    else:
        dev = cap.FakeDevice(
            ex2_hw=cap.synthetic_ex2(
                rounding="rd" if variant == "rd" else "rz", neg_mode="signmag" if variant == "signmag" else "twos"
            )
        )
    c = cap.Capture(dev, quick=True, random_scale=0.02, log=lambda m: None)
    status = c.run(isolated / "out")
    p = c.summary["ex2"]["params"]
    if variant == "not-a-table":
        assert status == 2 and c.summary["exact"] == {"ex2": False, "rcp": True}
        with np.load(isolated / "out" / "sfu_sample_sm90.npz") as z:
            mism = z["ex2_mismatch"]
        assert mism.shape[0] > 0 and np.array_equal(mism[:, 1], sfu._fallback_ex2(mism[:, 0]))
    else:
        assert status == 0
        assert (p["neg_mode"], p["rounding"]) == (("twos", "rd") if variant == "rd" else ("signmag", "rz"))


def test_calibrate_command_help_and_no_gpu(capsys):
    from flashsim.cli import main
    from flashsim.gpu.runtime import gpu_available

    with pytest.raises(SystemExit) as e:
        main(["calibrate", "--help"])
    assert e.value.code == 0 and "--quick" in capsys.readouterr().out
    if gpu_available()[0]:
        pytest.skip("a GPU is present: the no-GPU error path cannot be shown here")
    assert main(["calibrate", "--no-mma"]) == 2
    assert "no usable GPU" in capsys.readouterr().err


# -- silicon ---------------------------------------------------------------------------------------


def test_models_reproduce_the_stored_h200_capture(tmp_path, monkeypatch):
    path = DATA / "sfu_sample_sm90.npz"
    if not path.is_file():
        pytest.skip("no H200 capture in tests/data yet")
    monkeypatch.setenv("FLASHSIM_CACHE", str(tmp_path))  # the shipped tables, not a user's calibration
    sfu.reload()
    with np.load(path) as z:
        summary = json.loads(str(z["summary"]))
        assert summary["exact"]["ex2"], "the capture itself reported that the ex2 model failed"
        assert np.array_equal(B32(sfu.ex2(z["ex2_in"].view(np.float32), arch="sm_90")), z["ex2_out"])
        if summary["exact"]["rcp"]:
            assert np.array_equal(B32(sfu.rcp(z["rcp_in"].view(np.float32), arch="sm_90")), z["rcp_out"])
    sfu.reload()


@pytest.mark.gpu
@pytest.mark.slow
def test_quick_capture_on_this_gpu(gpu, tmp_path):
    assert cap.main(["--out", str(tmp_path), "--quick", "--random-scale", "0.1"]) == 0
