"""Run flashsim as on the base install (numpy, sympy, ml_dtypes, numba only), in a child process whose import
system refuses cuda-python, JAX, matplotlib, torch, cupy and mmasim: tests/test_base_install.py and the session's
shared ``flashsim prove`` run (tests/conftest.py, ``prove_on_the_base_install``)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]
BLOCKED = ("cuda", "jax", "jaxlib", "matplotlib", "torch", "cupy", "mmasim", "triton", "distributed", "dask")

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
