"""flashsim.triton: run a ``@triton.jit`` kernel on the CPU as it runs on a chosen GPU, bit for bit.

    import flashsim.triton as ft
    report = ft.launch(add_kernel, (n // 1024,), x, y, out, n, BLOCK=1024, target="sm_80")   # out written in place
    ft.jit(add_kernel)[grid](x, y, out, n, BLOCK=1024)                                        # Triton's spelling
    ft.compare(add_kernel, grid, x, y, out, n, BLOCK=1024, target="sm_80")                    # against TRITON_INTERPRET

Triton's own compiler builds the kernel for the target (no GPU, no driver); flashsim.ptx runs its PTX with Triton's
argument conventions (flashsim.triton.launch). docs/triton.md is the user's page. Needs ``flashsim[triton]``.
"""

from __future__ import annotations

from .args import tensor_descriptor
from .build import Compiled, clear_cache
from .compare import Comparison, compare
from .launch import jit, launch, prepare
from .support import (
    SUPPORTED,
    TARGETS,
    TritonArgumentError,
    TritonCompileError,
    TritonUnavailable,
)

__all__ = [
    "launch",
    "jit",
    "compare",
    "prepare",
    "tensor_descriptor",
    "Comparison",
    "Compiled",
    "clear_cache",
    "TARGETS",
    "SUPPORTED",
    "TritonArgumentError",
    "TritonCompileError",
    "TritonUnavailable",
]
