"""The seed's claims (flashsim.prove.claims), the proof registry and ``flashsim prove``."""

from __future__ import annotations

import pathlib
import re

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


def number(text: str, pattern: str) -> int | float:
    """The number that ``pattern``'s group 1 matches in ``text`` (the claim's own figure, to compare with ours)."""
    m = re.search(pattern, text)
    assert m, f"{pattern!r} not in {text!r}"
    return float(m.group(1)) if "." in m.group(1) else int(m.group(1))


def kind(claim) -> str:
    """The verdict's class (flashsim.prove.claims: holds, does not hold, partly holds, not checked, PROOF FAILED)."""
    return next(
        k
        for k in ("partly holds", "does not hold", "holds", "not checked", "PROOF FAILED")
        if claim.verdict.startswith(k)
    )


# The design note's block (seed_config) computed here from its shape: d = 128, 8 warps of one m16 tile each, B_c = 64,
# two stages, f16 tiles, a full and an empty mbarrier of 8 B per ring slot; sm_120's opt-in cap of 99 KB.
D, ROWS, BC, STAGES = 128, 8 * 16, 64, 2
Q_BYTES, RING_BYTES, BARRIERS = ROWS * D * 2, STAGES * BC * D * 2, 2 * STAGES * 8
CAP = 99 * KB


def test_the_design_block_is_the_one_computed_here(ours):
    assert (ours.config.head_dim, ours.config.block_m, ours.config.kv_tile, ours.config.stages) == (D, ROWS, BC, STAGES)
    assert ours.smem_bytes == Q_BYTES + 2 * RING_BYTES + BARRIERS and ours.cap_bytes == CAP


def test_claim3_partly_holds_with_3_kb_free_not_2(ours):
    c = C.claim3(ours)
    assert kind(c) == "partly holds"
    assert number(c.evidence, r"the free space is (\d+) KB") == (CAP - 3 * 32 * KB) // KB == 3
    assert [number(c.evidence, rf"{name} (\d+) KB") for name in ("Q tile", "K ring", "V ring")] == [32, 32, 32]
    assert number(c.evidence, r"free (\d+) KB of") == (CAP - ours.smem_bytes) // KB


def test_claim4_three_stages_do_not_fit_at_bc64_but_fit_at_bc32(ours):
    c = C.claim4(ours, "estimate")
    assert kind(c) == "partly holds"
    three = Q_BYTES + 2 * 3 * BC * D * 2 + 2 * 3 * 8
    assert number(c.evidence, r"ours with 3 stages: (\d+) KB") == three // KB == 128 and three > CAP
    # proofs/prove_budget.py: 3 stages fit iff B_c <= 4285/96 (44.6), so the multiples of 16 are 16 and 32
    assert re.search(r"B_c in \[16, 32\]", c.evidence)
    assert number(c.verdict, r"with B_c=32 three stages fit \((\d+) KB\)") == (Q_BYTES + 2 * 3 * 32 * D * 2) // KB


def test_claim5_no_o_buffer_and_its_registers(ours):
    c = C.claim5(ours)
    assert kind(c) == "holds" and not any(n.lower().startswith("o") for n in ours.breakdown)
    assert number(c.evidence, r"(\d+) per thread") == 16 * D // 32  # an m16 tile of d f32 columns over 32 lanes


def test_claim2_layout_argument():
    c = C.claim2()
    assert kind(c) == "holds"
    assert c.evidence.count(": yes") == 3  # the three register-map checks computed from flashsim.layout


def test_claims_1_and_6_follow_the_proofs():
    assert C.claim1(_fake_proofs(True)).verdict == "holds (proved)"
    assert C.claim1(_fake_proofs(False)).verdict == "PROOF FAILED"
    assert C.claim6(_fake_proofs(True)).verdict == "holds (proved)"
    assert C.claim6({}).verdict.startswith("not checked")


def test_claim7_accumulator_halves():
    c = C.claim7(KernelConfig())
    assert kind(c) == "holds"
    d = KernelConfig().head_dim
    assert number(c.evidence, r"f32 (\d+) registers") == 16 * d // 32
    assert number(c.evidence, r"f16x2 (\d+)") == 16 * d // 32 // 2


def test_claim7_without_nvrtc(monkeypatch):
    from flashsim.resources import registers as R

    def no_nvrtc(*a, **k):
        raise R._unavailable(ModuleNotFoundError("No module named 'cuda'", name="cuda"))

    monkeypatch.setattr(C, "compile_kernel", no_nvrtc)
    c = C.claim7(KernelConfig())
    assert kind(c) == "holds"
    assert "compiled register counts: not checked: NVRTC not installed" in c.evidence  # the one line that says why
    monkeypatch.setattr(R, "compile_kernel", no_nvrtc)
    b = budget(KernelConfig(head_dim=64), "sm_120")
    assert b.registers_source.startswith("estimate: NVRTC not installed") and not b.reg.compiled


def test_claim8_occupancy(ours):
    c = C.claim8(ours, "estimate")
    assert kind(c) == "holds"
    assert number(c.evidence, r"= (\d+\.\d)% ") == round(100 * 8 / 48, 1)  # 8 warps of sm_120's 48
    assert number(c.evidence, r"<= (\d+) registers per thread") == 64 * 1024 // (2 * 8 * 32)  # two 8-warp blocks


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


@pytest.mark.parametrize("name", sorted(P.discover()))
def test_every_proof_holds(prove_on_the_base_install, name):
    """Each proof of proofs/, from the session's one ``flashsim prove -v`` run (tests/conftest.py)."""
    out = prove_on_the_base_install.stdout
    assert re.search(rf"^  \[holds\] {name} \(", out, re.MULTILINE), out


def test_prove_command_runs_the_proofs_it_is_given(capsys):
    """The command in this process, on the quickest proof: its line, the count and the verdict."""
    from flashsim.cli import main

    assert main(["prove", "--only", "repack", "--no-claims"]) == 0
    out = capsys.readouterr().out
    assert "[holds] repack" in out and "1 of 1 proofs hold" in out and "PASS" in out
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


def test_a_proof_file_runs_alone():
    """``python3 proofs/prove_x.py`` (the quickest proof; every file ends in the same runner.run_as_script call, the
    proofs themselves run in test_every_proof_holds): exit 0 and PROOF HOLDS."""
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[1]
    r = subprocess.run(
        [sys.executable, str(root / "proofs" / "prove_repack.py")], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.rstrip().endswith("PROOF HOLDS")
