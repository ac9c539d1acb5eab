"""The proof registry: every proofs/prove_*.py exposes ``check() -> (holds, details)``; this finds and runs them.

proofs/ is not a package: each file runs alone (``python3 proofs/prove_x.py``) and under pytest. The folder is
found next to the flashsim package (a checkout or an editable install) or, in a regular install, as the
package data ``flashsim/prove/_proofs`` (a link to proofs/ that the build turns into files).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import time
from dataclasses import dataclass

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
PROOF_DIRS = (_PACKAGE_DIR.parent.parent / "proofs", _PACKAGE_DIR / "_proofs")


@dataclass(frozen=True)
class ProofResult:
    name: str  # file stem without "prove_", e.g. "online_softmax"
    title: str  # the module's TITLE or first docstring line
    holds: bool
    details: str
    seconds: float


def proofs_dir() -> pathlib.Path:
    for d in PROOF_DIRS:
        if d.is_dir() and any(d.glob("prove_*.py")):
            return d
    raise FileNotFoundError(
        "no proofs/ folder with prove_*.py found; looked in: " + ", ".join(str(d) for d in PROOF_DIRS)
    )


def discover() -> dict[str, pathlib.Path]:
    """name -> path of every proofs/prove_*.py, sorted by name."""
    return {p.stem[len("prove_") :]: p for p in sorted(proofs_dir().glob("prove_*.py"))}


def load(path: pathlib.Path):
    """Import one proof file as a module (not a package member: a unique private module name)."""
    name = f"_flashsim_proof_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def run(name: str, path: pathlib.Path | None = None) -> ProofResult:
    """Run one proof's check(); an exception, or a missing check(), is a proof that does not hold."""
    path = path or discover()[name]
    t0 = time.perf_counter()
    title = name
    try:
        module = load(path)
        title = getattr(module, "TITLE", None) or (module.__doc__ or name).strip().splitlines()[0]
        if not callable(getattr(module, "check", None)):
            raise AttributeError(f"{path.name} has no check() function")
        holds, details = module.check()
        holds = bool(holds)
    except Exception as e:  # a proof that cannot run does not hold
        holds, details = False, f"error: {type(e).__name__}: {e}"
    return ProofResult(name, title, holds, str(details), time.perf_counter() - t0)


def run_all(names=None) -> dict[str, ProofResult]:
    found = discover()
    if names:
        unknown = sorted(set(names) - set(found))
        if unknown:
            raise ValueError(f"unknown proof(s) {', '.join(unknown)}; known: {', '.join(found)}")
        found = {k: v for k, v in found.items() if k in names}
    return {name: run(name, path) for name, path in found.items()}


def run_steps(steps) -> tuple[bool, str]:
    """Run a proof's (name, fn) steps, each fn() -> (ok, detail): (holds, one line per step).

    A step that raises does not hold (its error is the detail), so a broken proof can never pass.
    """
    lines, holds = [], True
    for name, fn in steps:
        try:
            ok, detail = fn()
        except Exception as e:  # noqa: BLE001 - any failure of a step is a failed step
            ok, detail = False, f"error: {type(e).__name__}: {e}"
        holds &= bool(ok)
        lines.append(f"[{'holds' if ok else 'FAILS'}] {name}: {detail}")
    return holds, "\n".join(lines)


def run_as_script(title: str, check) -> None:
    """The ``python3 proofs/prove_x.py`` entry: print the steps and the verdict, exit 0 iff the proof holds."""
    holds, details = check()
    print(title)
    print(details)
    print("PROOF HOLDS" if holds else "PROOF FAILS")
    sys.exit(0 if holds else 1)
