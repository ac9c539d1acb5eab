"""Registers per thread of the flash_fwd kernel: ptxas's count from an NVRTC build, else an estimate.

The build is ``compile_cuda(kernel/flash_fwd.cu, arch, defines)`` with the kernel's own defines
(flashsim.gpu.launch.build_defines: config.defines(), FS_EXPECTED_SMEM = config.smem_bytes, math constants).
The kernel static_asserts that its own shared-memory layout equals FS_EXPECTED_SMEM, so every successful build
is also the check "symbolic shared memory == the compiled kernel's".

The estimate (used only when no build is possible) is the live-fragment floor of
``symbols.fragment_register_expressions`` plus the P operand of one k16 step (B_c / 4 registers: it is
rebuilt from S tile by tile) plus ESTIMATE_OVERHEAD for addresses, loop state, masks and the transient K / V
B-operand fragments, capped at 255. Calibration: over 14 NVRTC 13.0 builds for sm_120 (d 64/128, B_c 32..128,
4/8 warps, f32/f16, causal) ptxas used 36..93 registers above that floor; 64 is the middle. It is a documented
guess, labelled "estimate" wherever it is shown, never reported as a measurement.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..arch import get_arch
from ..config import KernelConfig

KERNEL_FILE = "flash_fwd.cu"
KERNEL_ENTRY = "flash_fwd"
ESTIMATE_OVERHEAD = 64


@dataclass(frozen=True)
class RegisterCount:
    """Registers per thread and where the number comes from."""

    registers: int
    source: str  # "ptxas (NVRTC, sm_120)" or "estimate: <why no build>"
    spill_stores: int | None = None
    spill_loads: int | None = None
    build: object = None  # flashsim.gpu.build.Build when compiled

    @property
    def compiled(self) -> bool:
        return self.build is not None

    @property
    def entry(self):
        """flash_fwd's resource record in the build, or None uncompiled (``kernel_entry``)."""
        return None if self.build is None else kernel_entry(self.build)


def kernel_entry(build):
    """flash_fwd's resource record in ``build`` (a split build has flash_combine too; a build without a resource
    report stands for itself)."""
    return build.entry(KERNEL_ENTRY) if getattr(build, "entry_points", None) else build


def estimate(config: KernelConfig) -> int:
    """The documented estimate of registers per thread (see the module docstring)."""
    from . import symbols  # sympy: loaded with the first estimate, not with the module

    floor = sum(symbols.evaluate(symbols.fragment_register_expressions(), config).values())
    return min(floor + config.kv_tile // 4 + ESTIMATE_OVERHEAD, get_arch("sm_120").regs_per_thread_max)


class BuildUnavailable(RuntimeError):
    """No build possible here: the reason is the message (not a compile error of the kernel)."""


def _unavailable(e: ImportError) -> BuildUnavailable:
    """Name what is missing: the gpu extra (cuda-python / NVRTC) or a flashsim module."""
    if (getattr(e, "name", "") or "").split(".")[0] == "cuda":
        return BuildUnavailable("NVRTC not installed (pip install 'flashsim[gpu]')")
    return BuildUnavailable(f"flashsim.gpu not importable ({e})")


def kernel_source() -> str:
    """The text of kernel/flash_fwd.cu; BuildUnavailable if flashsim.gpu or the file is missing."""
    try:
        from ..gpu.build import kernel_path
    except ImportError as e:  # the gpu extra (cuda-core, NVRTC) is not installed
        raise _unavailable(e) from None
    try:
        path = kernel_path(KERNEL_FILE)
    except Exception as e:  # kernel_path raises when kernel/ cannot be found
        raise BuildUnavailable(f"kernel/{KERNEL_FILE} not found ({e})") from None
    if not path.exists():
        raise BuildUnavailable(f"kernel/{KERNEL_FILE} not written yet")
    return path.read_text()


def build_defines(config: KernelConfig, expected_smem: int | None = None) -> dict:
    """Every define of the kernel build (flashsim.gpu.launch.build_defines), optionally with another
    FS_EXPECTED_SMEM (the negative test: a wrong value must make the kernel's static_assert fail)."""
    try:
        from ..gpu.launch import build_defines as kernel_build_defines
    except ImportError as e:
        raise _unavailable(e) from None
    defines = dict(kernel_build_defines(config))
    if expected_smem is not None:
        defines["FS_EXPECTED_SMEM"] = int(expected_smem)
    return defines


@functools.lru_cache(maxsize=256)
def compile_kernel(config: KernelConfig, arch: str, expected_smem: int | None = None):
    """Build flash_fwd for ``config`` on ``arch`` (cached). CompileError propagates; BuildUnavailable if no NVRTC."""
    source = kernel_source()
    defines = build_defines(config, expected_smem)
    try:
        from ..errors import CompileError
        from ..gpu.build import compile_cuda
    except ImportError as e:
        raise _unavailable(e) from None
    try:
        return compile_cuda(source, arch=config.build_arch(get_arch(arch).name), defines=defines)
    except ImportError as e:  # cuda.core imported lazily inside compile_cuda
        raise _unavailable(e) from None
    except CompileError:
        raise
    except Exception as e:  # compile_cuda wraps a failed cuda.core import in a GPUError: NVRTC is not installed
        if isinstance(e.__cause__, ImportError):
            raise _unavailable(e.__cause__) from None
        raise


def registers(config: KernelConfig, arch="sm_120", mode: str = "auto") -> RegisterCount:
    """Registers per thread: mode "auto" (compile if possible, else estimate), "compile" (must), "estimate"."""
    if mode not in ("auto", "compile", "estimate"):
        raise ValueError(f"mode must be 'auto', 'compile' or 'estimate', got {mode!r}")
    a = get_arch(arch)
    if mode == "estimate":
        return RegisterCount(estimate(config), "estimate (requested)")
    try:
        build = compile_kernel(config, a.name)
    except BuildUnavailable as why:
        if mode == "compile":
            raise
        return RegisterCount(estimate(config), f"estimate: {why}")
    except Exception as e:  # CompileError (with the NVRTC log) or a driver-side failure of the build
        if mode == "compile":
            raise
        first = (str(e).strip().splitlines() or [""])[0][:120]
        return RegisterCount(estimate(config), f"estimate: the build failed ({type(e).__name__}: {first})")
    entry = kernel_entry(build)
    return RegisterCount(
        int(entry.registers), f"ptxas (NVRTC, {build.arch})", int(entry.spill_stores), int(entry.spill_loads), build
    )
