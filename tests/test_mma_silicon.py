"""flashsim.mma against mma.sync captured on an H200 (tests/data/mma_sm90.npz, made by
``python3 -m flashsim.gpu.capture.mma --out DIR``; its provenance is checked by tests/test_drift.py), and the capture
tool's host logic (no GPU needed)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from flashsim import provenance
from flashsim.gpu.capture import mma as cap
from flashsim.numerics import tensorcore as _tc
from flashsim.numerics.formats import get_format
from flashsim.numerics.tensorcore import generic as _generic
from flashsim.numerics.tensorcore import mma

CAPTURE = pathlib.Path(__file__).parent / "data" / "mma_sm90.npz"


@pytest.fixture(scope="module")
def capture():
    if not CAPTURE.exists():
        pytest.skip("no H200 capture in tests/data yet")
    return cap.load_capture(CAPTURE)


@pytest.mark.parametrize("type_name", list(cap.TYPES))
def test_model_reproduces_every_captured_bit(capture, type_name):
    if type_name not in capture:
        pytest.fail(f"{CAPTURE} has no {type_name} data")
    res = capture[type_name]
    t = cap.TYPES[type_name]
    d = mma(res["a"].view(t.in_dtype), res["b"].view(t.in_dtype), res["c"].view(t.c_dtype), arch="sm_90")
    bad = d.view(t.fc.uint) != res["d"]
    if bad.any():
        per_cat = {name: int(bad[res["category"] == i].sum()) for i, name in enumerate(res["names"])}
        m = int(np.flatnonzero(bad.any(axis=(1, 2)))[0])
        i, j = map(int, np.argwhere(bad[m])[0])
        pytest.fail(
            f"{int(bad.sum())} of {bad.size} outputs differ; per category {per_cat}; first: mma {m} "
            f"d[{i},{j}] silicon 0x{int(res['d'][m, i, j]):x} model 0x{int(d.view(t.fc.uint)[m, i, j]):x}"
        )


@pytest.mark.needs("jax")
@pytest.mark.parametrize("type_name", list(cap.TYPES))
def test_jax_backend_reproduces_every_captured_bit(capture, type_name):
    """The generic routine under jax.jit (``mma(..., backend="jax")``) on the whole capture as well."""
    res = capture[type_name]
    t = cap.TYPES[type_name]
    d = mma(res["a"].view(t.in_dtype), res["b"].view(t.in_dtype), res["c"].view(t.c_dtype), arch="sm_90", backend="jax")
    bad = d.view(t.fc.uint) != res["d"]
    per_cat = {name: int(bad[res["category"] == i].sum()) for i, name in enumerate(res["names"])}
    assert not bad.any(), f"{int(bad.sum())} of {bad.size} outputs differ; per category {per_cat}"


def test_capture_is_a_real_sm90_capture(capture):
    meta = next(iter(capture.values()))["meta"]
    assert meta["arch"] == "sm_90" and "fake" not in str(meta["device"].get("name", ""))
    assert set(capture) == set(cap.TYPES)
    assert len(capture["f32.bf16.bf16.f32"]["category"]) >= 16384 + 4096


# ---------------------------------------------------------------------------------- the capture tool, no GPU


def test_fragment_formulas_of_the_kernel_match_flashsim_layout():
    """The .cu's index formulas (mirrored by lane_fragment_maps) against flashsim.layout's PTX maps."""
    from flashsim.layout import a_coord, b_coord, c_coord

    (ar, ac), (br, bc), (cr, cc) = cap.lane_fragment_maps()
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        assert [(ar[lane, i], ac[lane, i]) for i in range(8)] == [a_coord(g, t, i) for i in range(8)]
        assert [(br[lane, i], bc[lane, i]) for i in range(4)] == [b_coord(g, t, i) for i in range(4)]
        assert [(cr[lane, i], cc[lane, i]) for i in range(4)] == [c_coord(g, t, i) for i in range(4)]
    source = cap.__file__.replace("flashsim/gpu/capture/mma.py", "kernel/capture/mma.cu")
    text = pathlib.Path(source).read_text()
    for formula in (
        "(lane >> 2) + 8 * ((i >> 1) & 1)",
        "(lane & 3) * 2 + (i & 1) + 8 * (i >> 2)",
        "(lane & 3) * 2 + (i & 1) + 8 * (i >> 1)",
        "(lane >> 2) + 8 * (i >> 1)",
    ):
        assert formula in text


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_120"])
def test_capture_kernels_compile(arch):
    from flashsim.gpu.build import compile_file

    build = compile_file(cap.KERNEL, arch=arch, defines=provenance.build_defines(cap.PROVENANCE_NAME))
    assert {t.kernel for t in cap.TYPES.values()} <= set(build.entry_points)
    for entry in build.entry_points.values():
        assert entry.spill_stores == 0 and entry.spill_loads == 0


@pytest.mark.parametrize("version", cap.SUPPORTED_VERSIONS)
def test_generator_is_frozen(version):
    """Stored captures regenerate their inputs from the seed: no generator version may drift. A new probe goes into
    a new GENERATOR_VERSION (with its digests here); the old versions must keep their digests."""
    digests = {
        name: cap.input_digest(*(cap.generate(name, scale=0.01, version=version)[k] for k in "abc"))
        for name in cap.TYPES
    }
    assert digests == FROZEN_DIGESTS[version]


FROZEN_DIGESTS = {
    1: {
        "f32.f16.f16.f32": "1350fb5901c09a737b0cc3f28f3342eb67bcb2ae6258ebff55d9b9dfbbf7d723",
        "f16.f16.f16.f16": "12123b0e6d28cc8fa04423a14fea96a23ceec9c8da051df97a0328b6fa7e6f3b",
        "f32.bf16.bf16.f32": "d04eee973b817101b48d60c79fbafdb1c29ea99511f216ecb0d033471d91ee6f",
    },
    2: {
        "f32.f16.f16.f32": "1bc18b4d57adc3cdce5ffaf744d471742336fde3b75dc33ee07a6fbc7681c22d",
        "f16.f16.f16.f16": "643a0ece1d83531b81943147d829be5e9c7fb74b8bfec9ee6a498ec58b9da281",
        "f32.bf16.bf16.f32": "7ffd7114f05c62af0f5d70a49c59d9eb52c63a57a6a7ef85b7cdf89032549a96",
    },
}


# ------------------------------------------------------------ the capture tells the model from its neighbours

# The variants patch the generic routine (``mma_chain_generic``: the reference every engine is tested against);
# the numpy engine's compiled kernel has no Python hooks.


def _round_subnormal(kind):
    """A variant of the generic routine's one rounding (rounding.round_scaled as tensorcore calls it): f32
    subnormal results rounded to nearest ("rne") or down ("floor") instead of toward zero."""
    fn = np.rint if kind == "rne" else np.floor

    def round_scaled(m, e, fmt, mode="rne", **kw):
        r = ORIGINAL_ROUND(m, e, fmt, mode, **kw)
        if get_format(fmt).name != "f32":
            return r
        v = np.ldexp(np.asarray(m, np.float64), np.asarray(e, np.int64))  # exact: |m| < 2^40
        small = np.abs(v) < 2.0**-126
        r = np.array(r)
        r[small] = (fn(v[small] * 2.0**149) * 2.0**-149 + 0.0).astype(np.float32)
        return r

    return round_scaled


def _subnormal_c_exponent_127(xp, c_bits, acc16, e_zero):
    neg, sig, c_x, ec = ORIGINAL_ACC(xp, c_bits, acc16, e_zero)
    if not acc16:
        ec = np.where((sig != 0) & (sig < (1 << 23)), -127, ec).astype(ec.dtype)
    return neg, sig, c_x, ec


def _normalised_bf16_inputs(xp, x, is_bf16):
    vals, e = ORIGINAL_INPUTS(xp, x, is_bf16)
    if is_bf16:
        v = np.abs(np.asarray(vals, np.float64))
        sub = (v != 0) & (v < 2.0**-126)
        e = np.where(sub, np.floor(np.log2(np.where(sub, v, 1.0))), e).astype(e.dtype)
    return vals, e


ORIGINAL_ROUND, ORIGINAL_ACC, ORIGINAL_INPUTS = (
    _generic.rounding.round_scaled,
    _generic.decode_acc,
    _generic.decode,
)
VARIANTS = {  # name -> (arch field changes, (module, name, replacement) patches, type to check)
    "F = 24": (dict(mma_fraction_bits=24), (), "f32.f16.f16.f32"),
    "F = 26": (dict(mma_fraction_bits=26), (), "f32.f16.f16.f32"),
    "two blocks of 8": (dict(mma_block_k=8), (), "f16.f16.f16.f16"),
    "f32 zero exponent -132": (dict(mma_zero_exponent_f32=-132), (), "f32.bf16.bf16.f32"),
    "f32 zero exponent -134": (dict(mma_zero_exponent_f32=-134), (), "f32.bf16.bf16.f32"),
    "subnormal c takes exponent -127 (H1)": (
        {},
        ((_generic, "decode_acc", _subnormal_c_exponent_127),),
        "f32.bf16.bf16.f32",
    ),
    "subnormal results to nearest (H3)": (
        {},
        ((_generic.rounding, "round_scaled", _round_subnormal("rne")),),
        "f32.bf16.bf16.f32",
    ),
    "subnormal results floored (H4)": (
        {},
        ((_generic.rounding, "round_scaled", _round_subnormal("floor")),),
        "f32.bf16.bf16.f32",
    ),
    "bf16 subnormal inputs normalised (H5)": (
        {},
        ((_generic, "decode", _normalised_bf16_inputs),),
        "f32.bf16.bf16.f32",
    ),
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_capture_refutes_neighbouring_models(capture, variant, monkeypatch):
    """Each nearby model (one parameter off, or one of the bf16-subnormal hypotheses of the capture module)
    disagrees with the silicon somewhere: the capture pins the model, it does not merely fail to contradict it.
    Parameter variants run on the numpy engine's kernel, patched ones on the generic routine."""
    import dataclasses

    from flashsim.arch import get_arch

    fields, patches, type_name = VARIANTS[variant]
    for module, name, fn in patches:
        monkeypatch.setattr(module, name, fn)
    arch = dataclasses.replace(get_arch("sm_90"), **fields)
    res = capture[type_name]
    t = cap.TYPES[type_name]
    a, b, c = res["a"].view(t.in_dtype), res["b"].view(t.in_dtype), res["c"].view(t.c_dtype)
    # the capture in 16 slices, stopping at the first one the variant gets wrong: "somewhere" needs no more
    for part in np.array_split(np.arange(len(a)), 16):
        pa, pb, pc = a[part], b[part], c[part]
        d = _tc.mma_chain_generic(pa, pb, pc, arch) if patches else mma(pa, pb, pc, arch=arch)
        if (d.view(t.fc.uint) != res["d"][part]).any():
            return
    pytest.fail(f"{variant}: every captured output agrees with this neighbouring model")


def test_unpatched_generic_routine_reproduces_the_capture(capture):
    """The routine the variants patch, unpatched, reproduces every captured bit (so each refutation above is the
    patch's doing)."""
    res = capture["f32.bf16.bf16.f32"]
    t = cap.TYPES["f32.bf16.bf16.f32"]
    d = _tc.mma_chain_generic(res["a"].view(t.in_dtype), res["b"].view(t.in_dtype), res["c"].view(t.c_dtype))
    assert (d.view(t.fc.uint) == res["d"]).all()


def test_fake_capture_round_trip(tmp_path):
    rc = cap.main(["--out", str(tmp_path), "--fake", "--scale", "0.02"])
    assert rc == 0
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["mma_sm90.npz", "mma_sm90_summary.json"]
    assert (tmp_path / "mma_sm90.npz").stat().st_size < 6e6 * 0.05
    back = cap.load_capture(tmp_path / "mma_sm90.npz")
    assert set(back) == set(cap.TYPES)
    for name, res in back.items():
        t = cap.TYPES[name]
        want = mma(res["a"].view(t.in_dtype), res["b"].view(t.in_dtype), res["c"].view(t.c_dtype))
        np.testing.assert_array_equal(res["d"], want.view(t.fc.uint))
        assert len(res["names"]) == len(cap.categories(t))
    summary = json.loads((tmp_path / "mma_sm90_summary.json").read_text())
    assert all(v["total_bad"] == 0 for v in summary["verdict"].values())
    current = provenance.fingerprint(cap.PROVENANCE_NAME)  # the build's provenance, in both files
    assert summary["provenance"] == current and next(iter(back.values()))["meta"]["provenance"] == current
    with np.load(tmp_path / "mma_sm90.npz") as z:
        assert json.loads(str(z["provenance"])) == current


def test_fake_capture_reports_mismatches(tmp_path, capsys):
    rc = cap.main(
        ["--out", str(tmp_path), "--fake", "--scale", "0.01", "--types", "f16.f16.f16.f16", "--fake-corrupt", "5"]
    )
    assert rc == 2
    out = capsys.readouterr().out
    assert "differs on 5" in out and "MISMATCH" in out
    back = cap.load_capture(tmp_path / "mma_sm90.npz")
    res = back["f16.f16.f16.f16"]
    want = mma(res["a"].view(np.float16), res["b"].view(np.float16), res["c"].view(np.float16))
    assert int((want.view(np.uint16) != res["d"]).sum()) == 5


def test_bad_arguments_exit_1(tmp_path, capsys):
    assert cap.main(["--out", str(tmp_path), "--fake", "--types", "f64.f64.f64.f64"]) == 1
    assert "unknown type" in capsys.readouterr().err


def test_delta_coding_is_lossless_on_arbitrary_bits():
    rng = np.random.default_rng(0)
    for t in cap.TYPES.values():
        g = cap.generate(t.name, scale=0.005)
        d = rng.integers(0, 1 << t.fc.bits, g["c"].shape, dtype=np.uint64).astype(t.fc.uint)
        delta = cap.encode_d(t, g["a"], g["b"], g["c"], d)
        np.testing.assert_array_equal(cap.decode_d(t, g["a"], g["b"], g["c"], delta), d)
