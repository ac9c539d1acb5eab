"""The base install (numpy, sympy, ml_dtypes only): the commands run, or say in one line what they need.

Each command runs in a child process whose import system refuses cuda-python, JAX, matplotlib and torch, as if
only ``pip install flashsim`` (no extras) had been done: ``flashsim prove`` runs every proof and every claim and
exits 0 with no traceback (the claims that need NVRTC say so in one line and use the register estimate),
``flashsim budget`` prints the table, ``flashsim emulate`` runs its default problem, ``flashsim verify`` ends
with a one-line error. ``import flashsim`` loads neither sympy nor any optional dependency.
"""

from __future__ import annotations

import re

import pytest
from base_install import BLOCKED, run_base, run_command  # tests/base_install.py


def test_the_blocker_blocks():
    r = run_base("""
        for name in ("cuda.core", "jax", "matplotlib.pyplot"):
            try:
                __import__(name)
            except ImportError:
                print("blocked", name)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["blocked cuda.core", "blocked jax", "blocked matplotlib.pyplot"]


def test_import_flashsim_loads_no_sympy_and_no_optional_dependency():
    r = run_base(
        """
        import flashsim
        assert callable(flashsim.budget) and callable(flashsim.gpu.attention) and callable(flashsim.mma)
        print(sorted({m.partition(".")[0] for m in sys.modules} & {"sympy", "mpmath", *BLOCKED}))
    """.replace("BLOCKED", repr(BLOCKED))
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_prove_on_the_base_install(prove_on_the_base_install):
    r = prove_on_the_base_install
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    assert r.returncode == 0, out
    assert re.search(r"\b(\d+) of \1 proofs hold .*PASS", out), out
    assert "claim 8:" in out, out  # every claim ran
    assert "not checked: NVRTC not installed" in out, out  # claim 7 says why, in one line
    assert "[estimate: NVRTC not installed" in out, out  # the register model stands in


def test_budget_on_the_base_install():
    r = run_command("budget")
    assert "Traceback" not in r.stdout + r.stderr and r.returncode == 0, r.stdout + r.stderr
    assert "estimate: NVRTC not installed" in r.stdout and "occupancy:" in r.stdout


def test_verify_on_the_base_install_says_why_in_one_line():
    r = run_command("verify")
    assert r.returncode != 0 and "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("flashsim verify: ") and "cuda-python" in err[0], r.stderr


@pytest.mark.slow
def test_emulate_on_the_base_install():
    r = run_command("emulate", timeout=300)
    assert "Traceback" not in r.stdout + r.stderr and r.returncode == 0, r.stdout + r.stderr


def test_flashsim_ptx_without_its_extra_says_which_extra_in_one_error():
    r = run_base("""
        import flashsim.ptx as P
        from flashsim.gpu import build
        try:
            P.compile('extern "C" __global__ void k() {}')
        except Exception as exc:
            print("compile:", type(exc).__name__, exc)
        build.cuda_tools = lambda name: []  # as on a machine without a CUDA toolkit
        pair = (".version 9.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k(.param .u64 p)\\n{\\n"
                "\\t.reg .f32 %f<4>;\\n\\t.reg .b64 %rd<2>;\\n\\tld.param.u64 %rd1, [p];\\n"
                "\\tld.global.f32 %f1, [%rd1];\\n\\tmul.f32 %f2, %f1, %f1;\\n\\tadd.f32 %f3, %f2, %f1;\\n"
                "\\tst.global.f32 [%rd1], %f3;\\n\\tret;\\n}\\n")
        try:
            P.load(pair)
        except Exception as exc:
            print("sass:", type(exc).__name__, exc)
    """)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("compile: NvrtcUnavailable") and "pip install 'flashsim[ptx]'" in lines[0], lines
    assert lines[1].startswith("sass: MissingTools") and "pip install 'flashsim[ptx]'" in lines[1], lines
