"""Shared pytest hooks: every test that needs something an install may lack says so with a marker, and is skipped,
with the reason, where that thing is missing (visible in ``pytest -ra``). The suite passes on the base install
(numpy, sympy, ml_dtypes, numba) with pytest alone (the files of property tests skipped without hypothesis) or
with hypothesis, and on the test extra.

Markers (registered in pyproject.toml):
  ``gpu``             a usable CUDA GPU (flashsim.gpu.runtime.gpu_available: cuda-python, a driver, a device)
  ``nvrtc``           kernel builds without a GPU: cuda.core importable and the NVRTC library loadable
  ``sass``            flashsim.ptx's contraction="sass": a ptxas and an nvdisasm (the ptx extra brings both)
  ``needs("mod", ...)`` each named module importable (matplotlib, jax, torch, mmasim, ...)

Each condition is evaluated once per session, and only when a collected test carries its marker. Fixtures:
``gpu`` is the cuda.core Device; ``cuda_compile`` compiles through the in-process build cache, so a source is
compiled once per (source, arch, defines) for the whole session; ``sass_ops`` is tools/sass_ops.py, for the tests
that read SASS; ``prove_on_the_base_install`` is one ``flashsim prove -v`` run, shared.
"""

from __future__ import annotations

import functools
import importlib
import os
import re

# One BLAS / OpenMP thread per xdist worker: `-n auto` already runs a worker on each core, and numpy's OpenBLAS
# starting as many threads again in each worker oversubscribes the cores (set before numpy loads its BLAS, which reads
# these once; a variable the user set is kept).
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest  # noqa: E402


@functools.cache
def gpu_status() -> tuple[bool, str]:
    from flashsim.gpu.runtime import gpu_available

    return gpu_available()


@functools.cache
def nvrtc_status() -> tuple[bool, str]:
    """(True, "") where kernel builds work here: cuda.core (what flashsim.gpu.build compiles through) imports and
    the NVRTC library loads. No GPU needed."""
    try:
        import cuda.core  # noqa: F401
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()
    except Exception as exc:  # noqa: BLE001 - ImportError, or the loader's error for a missing library
        return False, f"NVRTC not available ({type(exc).__name__}: {exc}); pip install 'flashsim[ptx]'"
    return True, ""


@functools.cache
def sass_status() -> tuple[bool, str]:
    """(True, "") where contraction="sass" can read ptxas's SASS here: a ptxas and an nvdisasm are found."""
    from flashsim.gpu.build import cuda_tools

    missing = [tool for tool in ("ptxas", "nvdisasm") if not cuda_tools(tool)]
    if missing:
        return False, f"needs {' and '.join(missing)} for contraction='sass': pip install 'flashsim[ptx]'"
    return True, ""


@functools.cache
def module_status(name: str) -> tuple[bool, str]:
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or a broken install failing at import
        return False, f"needs {name} ({type(exc).__name__}: {exc})"
    return True, ""


def _why_not(item) -> str | None:
    """The reason ``item`` cannot run here, from its markers; None when it can."""
    for mark in item.iter_markers("needs"):
        for name in mark.args:
            ok, reason = module_status(name)
            if not ok:
                return reason
    if item.get_closest_marker("nvrtc") is not None:
        ok, reason = nvrtc_status()
        if not ok:
            return reason
    if item.get_closest_marker("sass") is not None:
        ok, reason = sass_status()
        if not ok:
            return reason
    if item.get_closest_marker("gpu") is not None:
        ok, reason = gpu_status()
        if not ok:
            return f"no usable GPU: {reason}"
    return None


# a test file that imports hypothesis at its top (the property tests); collected only where hypothesis imports
_IMPORTS_HYPOTHESIS = re.compile(r"^(from hypothesis\b|import hypothesis\b)", re.MULTILINE)


class _NeedsHypothesis(pytest.Module):
    """A test file that imports hypothesis, where it is missing: skipped whole at collection, with the reason."""

    def collect(self):
        reason = f"{self.path.name} {module_status('hypothesis')[1]}; pip install -e '.[test]'"
        pytest.skip(reason, allow_module_level=True)


def pytest_pycollect_makemodule(module_path, parent):
    """The ``needs`` rule for the import every property-test file makes at its top: without hypothesis (pytest alone
    on the base install) such a file is skipped with the reason instead of failing to collect."""
    if not module_status("hypothesis")[0] and _IMPORTS_HYPOTHESIS.search(module_path.read_text()):
        return _NeedsHypothesis.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = _why_not(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))
    # Files with a slow test first, each file's tests in their order: `--dist loadfile` hands files to the workers in
    # this order, so the long files start first and the short ones fill in behind them (longest first), instead of a
    # long file drawn last keeping one worker busy while the other idles.
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def gpu():
    """The current cuda.core Device; skips the test (with the reason) where there is none."""
    ok, reason = gpu_status()
    if not ok:
        pytest.skip(f"no usable GPU: {reason}")
    from flashsim.gpu import runtime as rt

    return rt.require_gpu()


@pytest.fixture(scope="session")
def sass_ops():
    """tools/sass_ops.py as a module (SASS of NVRTC builds); skips the test, with the reason, where no disassembler
    is installed (the test extra's nvidia-cuda-nvdisasm provides one)."""
    from tool_modules import load_tool  # tests/tool_modules.py

    mod = load_tool("sass_ops")
    try:
        mod.disassembler()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    return mod


@pytest.fixture(scope="session")
def cuda_compile():
    """flashsim.gpu.build.compile_cuda (cached in-process: one NVRTC run per distinct source/arch/defines); skips
    the test, with the reason, where NVRTC is missing."""
    ok, reason = nvrtc_status()
    if not ok:
        pytest.skip(reason)
    from flashsim.gpu.build import compile_cuda

    return compile_cuda


@pytest.fixture(scope="session")
def prove_on_the_base_install():
    """``flashsim prove -v`` on the base install (tests/base_install.py), run once for the session: every proof of
    proofs/ and every claim, the sympy work of the budget proof included, done once instead of once per test. The
    proofs' verdicts (tests/test_claims.py) and the base install's behaviour (tests/test_base_install.py) are each
    read from this one run."""
    from base_install import run_command  # tests/base_install.py

    return run_command("prove", "-v", timeout=300)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print the kernel's real build numbers (NVRTC, no GPU needed) for every default configuration, so CI's log
    shows registers, spills and shared memory of what ships. Builds come from the in-process cache when the tests
    already compiled them. Only in CI (CI set, as .ci/run's environment has it) or with FLASHSIM_PRINT_BUILDS=1,
    so that a quick local run of one file does not pay for 16 compiles."""
    import itertools
    import os

    if not (os.environ.get("CI") or os.environ.get("FLASHSIM_PRINT_BUILDS")):
        return
    tr = terminalreporter
    tr.section("kernel builds (NVRTC, ptxas -v)")
    ok, reason = nvrtc_status()
    if not ok:
        tr.write_line(f"not available: {reason}")
        return
    try:
        from flashsim import KernelConfig
        from flashsim.gpu.launch import build_kernel

        for arch in ("sm_120", "sm_90"):
            for d, acc, causal in itertools.product((64, 128), ("f32", "f16"), (False, True)):
                cfg = KernelConfig.default(arch, head_dim=d, pv_accum=acc, causal=causal)
                b = build_kernel(cfg, arch)
                tr.write_line(
                    f"{arch:7} d={d:<3} {acc} {'causal' if causal else 'full  '} warps={cfg.warps} "
                    f"m_tiles={cfg.m_tiles} kv_tile={cfg.kv_tile} stages={cfg.stages}: {b.registers} registers, "
                    f"spills {b.spill_stores}/{b.spill_loads} B, {cfg.smem_bytes // 1024} KB shared memory"
                )
    except Exception as e:  # noqa: BLE001 - a summary must never fail the run; say why it is missing
        tr.write_line(f"not available: {type(e).__name__}: {e}")
