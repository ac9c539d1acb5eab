"""flashsim.gpu: compile kernel/ with NVRTC (any arch, no GPU needed), launch through cuda.core, move data.

    flashsim.gpu.attention(q, k, v, ...)                       # the real kernel, same contract as flashsim.attention
    flashsim.gpu.attention_with_kvcache(q, k_cache, v_cache, ...), flashsim.gpu.attention_varlen(...)   # serving
    flashsim.gpu.check_index_errors()                          # raise a bad index the GPU's check found
    from flashsim.gpu.build import compile_cuda, kernel_path   # works without a GPU
    from flashsim.gpu import runtime as rt                     # needs a GPU: require_gpu, load, to_device, launch

launch.py is the launch plan of kernel/flash_fwd.cu (``build_kernel``, ``build_defines``, ``plan_for``,
``launch_plan``); api.py the public calls (``attention``, ``prepared_launch``), which dispatch to the front-end of the
inputs' library: host.py (numpy, DLPack), cupy_api.py, torch_op.py (the torch custom op). cuda-python is imported only
inside the functions that need it, so ``import flashsim.gpu`` works everywhere and the errors say what to install.
"""

from __future__ import annotations

from ..errors import CompileError, GPUError, UnsupportedConfig
from . import build, runtime
from .api import attention, attention_varlen, attention_with_kvcache, check_index_errors, prepared_launch
from .build import Build, compile_cuda, kernel_path
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
    "attention_with_kvcache",
    "attention_varlen",
    "prepared_launch",
    "check_index_errors",
]
