"""FlashAttention-2's acceptance rule (flashsim.commands.fa2_rule) and `flashsim verify --fa2-rule`.

The rule on synthetic outputs (a perfect one passes, a bad one fails with its ratio, NaN fails), the numpy emulation
of PyTorch's f16 attention against a hand computation, torch's own f16 attention (on the CPU here) against that
emulation, and the verify option on two small cases: on the emulator (no GPU asked for) and on a mocked GPU (the
emulator plays the kernel) where the rule's failures leave the exit status to the bit checks.
"""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest

import flashsim
from flashsim.cli import main
from flashsim.commands import fa2_rule as F
from flashsim.config import SUPPORTED_PV_ACCUM


def test_grid_is_flash_attention_2s():
    cases = F.grid()
    assert len(cases) == 40 and len(set(cases)) == 40
    assert {(c.nq, c.nk) for c in cases} == set(F.SEQLENS)
    assert {(c.d, c.causal) for c in cases} == {(64, False), (64, True), (128, False), (128, True)}
    quick = F.grid(quick=True)
    assert set(quick) == {c for c in cases if c.nq <= 512 and c.nk <= 512} and len(quick) == 24


def test_inputs_are_standard_normal_f16_shared_by_causal_and_not():
    case = F.Case(113, 203, 64, False)
    q, k, v = F.make_inputs(case, 2, 3)
    assert (q.shape, k.shape, v.shape) == ((2, 3, 113, 64), (2, 3, 203, 64), (2, 3, 203, 64))
    assert q.dtype == k.dtype == v.dtype == np.float16
    assert abs(float(q.astype(np.float64).std()) - 1) < 0.05
    again = F.make_inputs(F.Case(113, 203, 64, True), 2, 3)
    assert all(np.array_equal(a, b) for a, b in zip((q, k, v), again))


# -- the rule on synthetic outputs ----------------------------------------------------------------------------


def _synthetic():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal((2, 2, 5, 8)).astype(np.float16)
    pt = ref.copy()
    pt[1, 0, 3, 2] += np.float16(0.0625)  # out_pt's max error: 1/16
    return ref, pt


def test_perfect_output_passes():
    ref, pt = _synthetic()
    r = F.rule(ref.copy(), ref, pt)
    assert r == dict(err=0.0, err_pt=0.0625, ratio=0.0, ok=True)


@pytest.mark.parametrize("bump, ratio, ok", [(0.125, 2.0, True), (0.25, 4.0, False), (0.5, 8.0, False)])
def test_large_error_fails_with_its_ratio(bump, ratio, ok):
    ref, pt = _synthetic()
    out = ref.copy()
    out[0, 1, 4, 7] = ref[0, 1, 4, 7] + np.float16(bump)  # exact in f16: |ref| < 4
    r = F.rule(out, ref, pt)
    assert r["err"] == bump and r["err_pt"] == 0.0625
    assert r["ratio"] == ratio and r["ok"] is ok


def test_nan_output_fails():
    ref, pt = _synthetic()
    out = ref.copy()
    out[0, 0, 0, 0] = np.nan
    r = F.rule(out, ref, pt)
    assert r["ok"] is False and r["ratio"] == math.inf


# -- out_pt: the numpy emulation against a hand computation, torch against the emulation -----------------------------


def _tiny(nq):
    """d=64 (scale 1/8, exact): every query row is e0, keys 2 e0 and 0, so every score row is [1/4, 0]."""
    q = np.zeros((1, 1, nq, 64), np.float16)
    q[..., 0] = 1
    k = np.zeros((1, 1, 2, 64), np.float16)
    k[0, 0, 0, 0] = 2
    v = np.zeros((1, 1, 2, 64), np.float16)
    v[0, 0, 0, :4] = (1, 2, -0.5, 0.75)
    v[0, 0, 1, :4] = (3, -1, 0.25, 1.5)
    return q, k, v


def test_numpy_out_pt_matches_a_hand_computation():
    q, k, v = _tiny(3)
    p0 = 1 / (1 + math.exp(-0.25))  # softmax of [1/4, 0]
    p16 = np.array([p0, 1 - p0]).astype(np.float16)  # P rounded to f16
    both = (p16.astype(np.float64) @ v[0, 0].astype(np.float64)).astype(np.float16)  # exact sums, one rounding
    out = F.pytorch_f16_numpy(q, k, v, causal=False)
    assert out.dtype == np.float16 and out.shape == q.shape
    for row in range(3):
        assert np.array_equal(out[0, 0, row].view(np.uint16), both.view(np.uint16))
    # causal, bottom-right: row 0 sees no key (0), row 1 sees key 0 alone (v0), row 2 sees both
    out = F.pytorch_f16_numpy(q, k, v, causal=True)
    assert np.array_equal(out[0, 0, 0], np.zeros(64, np.float16))
    assert np.array_equal(out[0, 0, 1], v[0, 0, 0])
    assert np.array_equal(out[0, 0, 2].view(np.uint16), both.view(np.uint16))
    # out_ref: f32, not rounded through f16 scores or P
    ref = F.reference_f32(q, k, v, causal=True)
    assert ref.dtype == np.float32
    exact = np.array([p0, 1 - p0]) @ v[0, 0].astype(np.float64)
    np.testing.assert_allclose(ref[0, 0, 2], exact, rtol=1e-6, atol=1e-7)
    assert np.array_equal(ref[0, 0, 0], np.zeros(64)) and np.array_equal(ref[0, 0, 1], v[0, 0, 0])


def test_out_pt_rounds_the_scores_to_f16():
    """out_pt differs from out_ref by more than f16's output rounding: scores and P go through f16."""
    q, k, v = F.make_inputs(F.Case(113, 203, 128, False), 1, 2)
    ref = F.reference_f32(q, k, v, causal=False)
    pt = F.pytorch_f16_numpy(q, k, v, causal=False)
    assert F.max_abs_error(pt, ref) > F.max_abs_error(ref.astype(np.float16), ref)


@pytest.mark.parametrize("causal", [False, True])
def test_torch_f16_attention_agrees_with_the_emulation(causal):
    torch = pytest.importorskip("torch")
    case = F.Case(80, 48, 64, causal)  # Nq > Nk: 32 rows see no key when causal
    q, k, v = F.make_inputs(case, 1, 2)
    flag = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    pt_torch = F.pytorch_f16_torch(q, k, v, causal, device="cpu")
    assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction == flag  # restored
    pt_numpy = F.pytorch_f16_numpy(q, k, v, causal)
    assert pt_torch.dtype == np.float16 and pt_torch.shape == q.shape
    assert np.abs(pt_torch.astype(np.float64) - pt_numpy).max() < 4e-3  # a few f16 ulps
    if causal:
        assert not pt_torch[:, :, :32].any() and not pt_numpy[:, :, :32].any()
    ref = F.reference_f32(q, k, v, causal)
    e_torch, e_numpy = F.max_abs_error(pt_torch, ref), F.max_abs_error(pt_numpy, ref)
    assert 0.5 < e_torch / e_numpy < 2


# -- run_rule with a callable, and `flashsim verify --fa2-rule` ---------------------------------------------------


def test_run_rule_shares_references_across_modes():
    cases = [F.Case(113, 203, 64, False)]
    ref_out = lambda q, k, v, causal, mode: F.reference_f32(q, k, v, causal).astype(np.float16)
    rep = F.run_rule(ref_out, cases=cases, batch=1, heads=1, pv_accums=("f32", "f16"), echo=None)
    assert rep["summary"] == {m: dict(passed=1, total=1, failing=[]) for m in ("f32", "f16")}
    bad = lambda q, k, v, causal, mode: np.zeros_like(q) if mode == "f16" else ref_out(q, k, v, causal, mode)
    rep = F.run_rule(bad, cases=cases, batch=1, heads=1, pv_accums=("f32", "f16"), echo=None)
    failing = rep["summary"]["f16"]["failing"]
    assert rep["summary"]["f32"]["passed"] == 1 and len(failing) == 1
    row = rep["cases"][0]
    assert failing[0] == dict(nq=113, nk=203, d=64, causal=False, ratio=row["modes"]["f16"]["ratio"])
    q, k, v = F.make_inputs(cases[0], 1, 1)
    ref16 = F.reference_f32(q, k, v, False).astype(np.float16)
    assert row["modes"]["f16"]["ratio"] == F.max_abs_error(0, ref16) / row["err_pt"] > 2


@pytest.fixture
def two_small_cases(monkeypatch):
    """The grid cut to its smallest shape at d=64, causal and not: 2 cases (quick: 1 x 2 heads)."""
    monkeypatch.setattr(F, "SEQLENS", ((113, 203),))
    monkeypatch.setattr(F, "HEAD_DIMS", (64,))


def test_verify_fa2_rule_emulator_quick(two_small_cases, monkeypatch, tmp_path, capsys):
    from flashsim.gpu import runtime as rt

    def no_gpu():
        raise AssertionError("--fa2-rule emulator asked for the GPU")

    monkeypatch.setattr(rt, "require_gpu", no_gpu)
    monkeypatch.setattr(F, "out_pt_backend", lambda device_id=None: (F.pytorch_f16_numpy, "numpy"))  # any machine
    path = tmp_path / "r.json"
    assert main(["verify", "--fa2-rule", "emulator", "--fa2-quick", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "FlashAttention-2 acceptance rule on the emulator (sm_90)" in text
    assert "does not change the exit status" in text
    rep = json.loads(path.read_text())
    assert rep["ok"] is None and rep["cases"] == []
    fa2 = rep["fa2_rule"]
    assert fa2["pv_accum"] == list(SUPPORTED_PV_ACCUM) and (fa2["batch"], fa2["heads"]) == (1, 2)
    assert [(c["nq"], c["nk"], c["d"], c["causal"]) for c in fa2["cases"]] == [
        (113, 203, 64, False),
        (113, 203, 64, True),
    ]
    for mode in SUPPORTED_PV_ACCUM:
        s = fa2["summary"][mode]
        assert s["total"] == 2 and s["passed"] == 2 - len(s["failing"])
        assert f"pv_accum {mode:6} {s['passed']}/2 cases pass" in text
    # the report's numbers are the rule applied to the emulator's own output
    q, k, v = F.make_inputs(F.Case(113, 203, 64, True), 1, 2)
    o = flashsim.attention(q, k, v, causal=True, pv_accum="f32", arch="sm_90", progress=False)[0]
    expect = F.rule(o, F.reference_f32(q, k, v, True).astype(np.float16), F.pytorch_f16_numpy(q, k, v, True))
    got = fa2["cases"][1]["modes"]["f32"]
    assert {key: got[key] for key in expect} == expect


def test_verify_fa2_rule_gpu_is_a_report_not_the_exit_status(two_small_cases, monkeypatch, tmp_path, capsys):
    """On a mocked GPU (the emulator plays the kernel) with an out_pt equal to out_ref, every mode fails the rule
    (ratio inf), yet the bit checks pass and so does verify."""
    from flashsim import gpu
    from flashsim.commands import verify
    from flashsim.gpu import runtime as rt

    monkeypatch.setattr(rt, "require_gpu", lambda: None)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(rt, "device_id", lambda: 0)
    monkeypatch.setattr(
        gpu, "attention", lambda q, k, v, **kw: flashsim.attention(q, k, v, arch="sm_90", progress=False, **kw)
    )
    if hasattr(verify, "gpu_outputs"):  # the bit checks' own GPU call
        monkeypatch.setattr(
            verify, "gpu_outputs", lambda q, k, v, config, **kw: verify.emulator_outputs(q, k, v, config, "sm_90", **kw)
        )
    perfect = lambda q, k, v, causal: F.reference_f32(q, k, v, causal).astype(np.float16)
    monkeypatch.setattr(F, "out_pt_backend", lambda device_id=None: (perfect, "out_ref itself"))
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    path = tmp_path / "r.json"
    argv = [
        "--only",
        "--shape",
        "1,1,20,20,64",
        "--kinds",
        "normal",
        "--fa2-rule",
        "gpu",
        "--fa2-quick",
        "--json",
        str(path),
    ]
    assert verify.run(parser.parse_args(argv)) == 0
    text = capsys.readouterr().out
    assert "verdict: every bit agrees" in text and "on the GPU kernel (sm_90)" in text
    rep = json.loads(path.read_text())
    assert rep["ok"] is True and len(rep["cases"]) == len(SUPPORTED_PV_ACCUM)
    for mode in SUPPORTED_PV_ACCUM:
        assert rep["fa2_rule"]["summary"][mode]["passed"] == 0
        assert f"pv_accum {mode:6} 0/2 cases pass; failing (Nq, Nk, d, causal) ratio: (113, 203, 64, False) inf" in text

    # a failure of the report after the bit checks keeps their results and their exit status
    def broken(device_id=None):
        raise RuntimeError("no out_pt today")

    monkeypatch.setattr(F, "out_pt_backend", broken)
    assert verify.run(parser.parse_args(argv + ["--pv-accum", "f32"])) == 0
    out, err = capsys.readouterr()
    assert "FlashAttention-2 rule: not completed (RuntimeError: no out_pt today)" in out and "Traceback" in err
    rep = json.loads(path.read_text())
    assert rep["ok"] is True and rep["fa2_rule"] == {"error": "RuntimeError: no out_pt today"}


def test_verify_fa2_rule_takes_the_pv_accum_option(two_small_cases, tmp_path, capsys):
    path = tmp_path / "r.json"
    mode = SUPPORTED_PV_ACCUM[-1]
    assert main(["verify", "--fa2-rule", "emulator", "--fa2-quick", "--pv-accum", mode, "--json", str(path)]) == 0
    assert list(json.loads(path.read_text())["fa2_rule"]["summary"]) == [mode]


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--fa2-quick"], "--fa2-quick needs --fa2-rule"),
        (["--fa2-rule", "emulator", "--shape", "1,1,8,8,64"], "--fa2-rule emulator runs no GPU cases"),
        (["--fa2-rule", "cpu"], "invalid choice"),
    ],
    ids=["quick alone", "emulator with --shape", "unknown target"],
)
def test_fa2_option_errors_are_one_line(capsys, argv, word):
    try:
        rc = main(["verify", *argv])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1 and word in err, err


# -- on a real GPU (skipped elsewhere) ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_rule_report_equals_the_emulators(two_small_cases, monkeypatch, tmp_path, gpu):
    """The kernel is bit-exact with the emulator, so with the same out_pt both reports carry the same numbers."""
    monkeypatch.setattr(F, "out_pt_backend", lambda device_id=None: (F.pytorch_f16_numpy, "numpy"))
    reports = {}
    for target, extra in (("gpu", ["--only", "--shape", "1,1,20,20,64", "--kinds", "normal"]), ("emulator", [])):
        path = tmp_path / f"{target}.json"
        assert main(["verify", *extra, "--fa2-rule", target, "--fa2-quick", "--json", str(path)]) == 0
        reports[target] = json.loads(path.read_text())["fa2_rule"]
    assert reports["gpu"]["cases"] == reports["emulator"]["cases"]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_torch_cuda_f16_attention_agrees_with_the_emulation(causal, gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    q, k, v = F.make_inputs(F.Case(1023, 1024, 128, causal), 1, 3)
    fn, name = F.out_pt_backend()
    assert name.startswith("torch ")
    pt_cuda, pt_numpy = fn(q, k, v, causal), F.pytorch_f16_numpy(q, k, v, causal)
    assert pt_cuda.dtype == np.float16 and pt_cuda.shape == q.shape
    assert np.abs(pt_cuda.astype(np.float64) - pt_numpy).max() < 4e-3
    ref = F.reference_f32(q, k, v, causal)
    assert 0.5 < F.max_abs_error(pt_cuda, ref) / F.max_abs_error(pt_numpy, ref) < 2
