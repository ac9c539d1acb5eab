"""Shared pytest hooks: tests marked ``gpu`` are skipped, with the reason, where no CUDA GPU can be used.

The reason comes from flashsim.gpu.runtime.gpu_available() (missing cuda-python, missing driver, no device) and
shows in ``pytest -ra``. ``gpu`` (fixture) is the cuda.core Device; ``cuda_compile`` compiles through the
in-process build cache, so a source is compiled once per (source, arch, defines) for the whole session.
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
def cuda_compile():
    """flashsim.gpu.build.compile_cuda (cached in-process: one NVRTC run per distinct source/arch/defines)."""
    from flashsim.gpu.build import compile_cuda
    return compile_cuda
