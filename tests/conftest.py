"""Shared pytest hooks: tests marked ``gpu`` are skipped, with the reason, where no CUDA GPU can be used.

The reason comes from flashsim.gpu.runtime.gpu_available() (missing cuda-python, missing driver, no device) and
shows in ``pytest -ra``. ``gpu`` (fixture) is the cuda.core Device; ``cuda_compile`` compiles through the
in-process build cache, so a source is compiled once per (source, arch, defines) for the whole session; ``sass_ops``
is tools/sass_ops.py, for the tests that read SASS.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def _gpu_status():
    from flashsim.gpu.runtime import gpu_available

    return gpu_available()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    from flashsim.gpu.runtime import gpu_available

    ok, reason = gpu_available()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"no usable GPU: {reason}")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu(_gpu_status):
    """The current cuda.core Device; skips the test (with the reason) where there is none."""
    ok, reason = _gpu_status
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
    """flashsim.gpu.build.compile_cuda (cached in-process: one NVRTC run per distinct source/arch/defines)."""
    from flashsim.gpu.build import compile_cuda

    return compile_cuda


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
