"""flashsim.gpu: compile kernel/ with NVRTC (any arch, no GPU needed), launch through cuda.core, move data.

    from flashsim.gpu.build import compile_cuda, kernel_path   # works without a GPU
    from flashsim.gpu import runtime as rt                     # needs a GPU: require_gpu, load, to_device, launch

``flashsim.gpu.attention(q, k, v, ...)`` runs the real kernel (DESIGN.md contract). cuda-python is imported
only when a function needs it, so ``import flashsim.gpu`` works everywhere and errors say what to install.
"""
from __future__ import annotations

import sys
import types

from . import build, runtime
from .build import Build, compile_cuda, kernel_path
from .errors import CompileError, GPUError, UnsupportedConfig
from .runtime import gpu_available

__all__ = ["Build", "compile_cuda", "kernel_path", "runtime", "build", "gpu_available", "GPUError",
           "CompileError", "UnsupportedConfig", "attention"]


def __getattr__(name):
    if name == "attention":
        from .attention import attention  # the kernel wrapper (flashsim/gpu/attention.py)
        globals()["attention"] = attention
        return attention
    raise AttributeError(f"module 'flashsim.gpu' has no attribute {name!r}")


class _Package(types.ModuleType):
    """Keeps ``flashsim.gpu.attention`` the public function even after the submodule of that name is imported
    (the import system would otherwise rebind the package attribute to the module)."""

    def __setattr__(self, name, value):
        if name == "attention" and isinstance(value, types.ModuleType):
            value = getattr(value, "attention", value)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
