"""flashsim.gpu: compile kernel/ with NVRTC (any arch, no GPU needed), launch through cuda.core, move data.

    flashsim.gpu.attention(q, k, v, ...)                       # the real kernel, same contract as flashsim.attention
    from flashsim.gpu.build import compile_cuda, kernel_path   # works without a GPU
    from flashsim.gpu import runtime as rt                     # needs a GPU: require_gpu, load, to_device, launch

launch.py builds and launches kernel/flash_fwd.cu (``attention``, ``prepared_launch``, ``build_kernel``,
``build_defines``). cuda-python is imported only inside the functions that need it, so ``import flashsim.gpu``
works everywhere and the errors say what to install.
"""

from __future__ import annotations

from . import build, runtime
from .build import Build, compile_cuda, kernel_path
from .errors import CompileError, GPUError, UnsupportedConfig
from .launch import attention, prepared_launch
from .runtime import gpu_available

__all__ = [
    "Build",
    "compile_cuda",
    "kernel_path",
    "runtime",
    "build",
    "gpu_available",
    "GPUError",
    "CompileError",
    "UnsupportedConfig",
    "attention",
    "prepared_launch",
]
