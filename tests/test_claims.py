"""The seed's claims (flashsim.prove.claims), the proof registry and ``flashsim prove``."""

from __future__ import annotations

import pathlib

import pytest

from flashsim.config import KernelConfig, seed_config
from flashsim.prove import claims as C
from flashsim.prove import runner as P
from flashsim.prove.runner import ProofResult
from flashsim.resources.model import budget

KB = 1024


def _fake_proofs(holds=True):
    return {n: ProofResult(n, n, holds, f"{n} details", 0.0) for n in ("online_softmax", "repack")}


@pytest.fixture(scope="module")
def ours():
    return budget(seed_config(), "sm_120", registers="estimate")  # the design note's block


def test_seed_readings_are_exactly_the_32_32_32_configurations():
    reads = C.seed_readings()
    assert reads, "some configuration must give 32 / 32 / 32 KB"
    for r in reads:
        assert r.block_m * r.head_dim * 2 == 32 * KB
        assert r.total() == 96 * KB
    assert C.SeedReading(128, 128, 64, 1, 4) in reads  # d=128, B_r=128, B_c=64, 1 stage, f32 S/P
    assert C.SeedReading(64, 256, 64, 2, 2) in reads  # d=64, B_r=256, B_c=64, 2 stages, f16 S/P
    assert C.SeedReading(128, 128, 64, 2, 2) not in reads  # our ring (64 KB) + an f16 S/P is 112 KB


def test_claim3_reserved_kb_and_free_space(ours):
    c = C.claim3(ours)
    assert c.verdict.startswith("partly holds")
    assert "3 KB, not 2 KB" in c.verdict
    assert "97 KB" in c.evidence and "V half of a 2-stage ring" in c.evidence


def test_claim4_figure_does_not_hold_but_the_conclusion_does(ours):
    c = C.claim4(ours, "estimate")
    assert "does not fit" in c.evidence and "~102 KB does not hold" in c.verdict
    assert "B_c=32 three stages fit (80 KB)" in c.verdict


def test_claim5_no_o_buffer(ours):
    c = C.claim5(ours)
    assert c.verdict == "holds" and "64 per thread" in c.evidence


def test_claim2_layout_argument():
    c = C.claim2()
    assert c.verdict.startswith("holds for portable WMMA code")
    assert c.evidence.count(": yes") == 3 and "unspecified" in c.evidence


def test_claims_1_and_6_follow_the_proofs():
    assert C.claim1(_fake_proofs(True)).verdict == "holds (proved)"
    assert C.claim1(_fake_proofs(False)).verdict == "PROOF FAILED"
    assert C.claim6(_fake_proofs(True)).verdict == "holds (proved)"
    assert C.claim6({}).verdict.startswith("not checked")


def test_claim7_accumulator_halves_and_says_what_it_could_not_check():
    c = C.claim7(KernelConfig())
    assert c.verdict.startswith("holds for the accumulator")
    assert "f32 64 registers, f16x2 32: halved" in c.evidence
    assert "not checked" in c.evidence  # the Q@K^T timing, at least


def test_claim7_without_nvrtc(monkeypatch):
    from flashsim.resources import registers as R

    def no_nvrtc(*a, **k):
        raise R._unavailable(ModuleNotFoundError("No module named 'cuda'", name="cuda"))

    monkeypatch.setattr(C, "compile_kernel", no_nvrtc)
    c = C.claim7(KernelConfig())
    assert "compiled register counts: not checked: NVRTC not installed" in c.evidence
    assert c.verdict == "holds for the accumulator"
    monkeypatch.setattr(R, "compile_kernel", no_nvrtc)
    b = budget(KernelConfig(head_dim=64), "sm_120")
    assert b.registers_source.startswith("estimate: NVRTC not installed") and not b.reg.compiled


def test_claim8_occupancy(ours):
    c = C.claim8(ours, "estimate")
    assert c.verdict.startswith("holds for the occupancy") and "16.7%" in c.evidence
    assert "not checked" in c.evidence and "RTX 50xx" in c.evidence
    assert "<= 128 registers" in c.evidence


def test_check_claims_returns_eight(ours):
    got = C.check_claims(_fake_proofs(), registers="estimate")
    assert [c.number for c in got] == list(range(1, 9))
    assert all(c.verdict for c in got)


# ---- the registry ------------------------------------------------------------------------------------------
def test_registry_finds_the_proofs():
    found = P.discover()
    assert {"online_softmax", "budget", "pv_error_bound"} <= set(found)
    assert all(p.name.startswith("prove_") for p in found.values())


def test_a_broken_proof_does_not_hold(tmp_path):
    bad = tmp_path / "prove_broken.py"
    bad.write_text("def check():\n    raise RuntimeError('boom')\n")
    r = P.run("broken", bad)
    assert not r.holds and "boom" in r.details
    nocheck = tmp_path / "prove_nocheck.py"
    nocheck.write_text("X = 1\n")
    assert not P.run("nocheck", nocheck).holds
    false = tmp_path / "prove_false.py"
    false.write_text("TITLE = 'always false'\ndef check():\n    return False, 'no'\n")
    r = P.run("false", false)
    assert (r.holds, r.title, r.details) == (False, "always false", "no")


def test_unknown_proof_name():
    with pytest.raises(ValueError, match="unknown proof"):
        P.run_all(["nonexistent"])


def test_prove_command_fast_path(capsys):
    from flashsim.cli import main

    assert main(["prove", "--only", "budget", "--no-claims"]) == 0
    out = capsys.readouterr().out
    assert "[holds] budget" in out and "1 of 1 proofs hold" in out and "PASS" in out
    assert main(["prove", "--only", "nope"]) == 2


def test_prove_command_exit_status_follows_the_proofs(monkeypatch, capsys):
    """One failing proof among holding ones makes the command fail; all holding, it passes (run_all replaced by
    fixed results: the real proofs run in test_prove_command_fast_path and the proof files' own tests)."""
    from flashsim.cli import main

    holds = ProofResult("holds", "a holding proof", True, "", 0.0)
    fails = ProofResult("fake", "a failing proof", False, "counterexample", 0.0)
    monkeypatch.setattr(P, "run_all", lambda names=None: {"holds": holds, "fake": fails})
    assert main(["prove", "--no-claims"]) == 1
    out = capsys.readouterr().out
    assert "[FAILS] fake" in out and "counterexample" in out and "FAIL" in out
    monkeypatch.setattr(P, "run_all", lambda names=None: {"holds": holds})
    assert main(["prove", "--no-claims"]) == 0
    assert "PASS" in capsys.readouterr().out


def test_proof_files_run_alone():
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, str(root / "proofs" / "prove_budget.py")], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PROOF HOLDS" in r.stdout
