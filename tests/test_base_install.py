"""The base install (numpy, sympy, ml_dtypes only): the commands run, or say in one line what they need.

Each command runs in a child process whose import system refuses cuda-python, JAX, matplotlib and torch, as if
only ``pip install flashsim`` (no extras) had been done: ``flashsim prove`` runs every proof and every claim and
exits 0 with no traceback (the claims that need NVRTC say so in one line and use the register estimate),
``flashsim budget`` prints the table, ``flashsim emulate`` runs its default problem, ``flashsim verify`` ends
with a one-line error. ``import flashsim`` loads neither sympy nor any optional dependency.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCKED = ("cuda", "jax", "jaxlib", "matplotlib", "torch", "cupy", "mmasim")

# Prepended to every child: a meta-path finder that makes the optional dependencies unimportable.
BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys

    class _BaseInstall(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: base install)", name=name)
            return None

    sys.meta_path.insert(0, _BaseInstall())
""")


def run_base(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env.pop("CI", None)
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT / "tests",
        env=env,
        timeout=timeout,
    )


def run_command(*argv: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return run_base(f"from flashsim.cli import main\nsys.exit(main({list(argv)!r}))", timeout)


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


@pytest.mark.slow
def test_prove_on_the_base_install():
    r = run_command("prove")
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
