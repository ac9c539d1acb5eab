"""The errors of the GPU side and of configurations: one family, so callers can catch GPU trouble apart from bad
input. A neutral module: the argument checks (flashsim.problem) raise UnsupportedConfig too.

GPUError: no usable GPU / driver / cuda-python, or a CUDA call failed (the message names the call or kernel).
CompileError: NVRTC rejected a source; ``.log`` holds the full compiler log.
UnsupportedConfig: a request the kernel or the device cannot serve (a ValueError: it is bad input).
"""

from __future__ import annotations


class GPUError(RuntimeError):
    """A GPU is missing or a CUDA call failed."""


class CompileError(GPUError):
    """NVRTC failed; ``log`` is the complete compiler output, also shown in the message."""

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(f"{message}\n{log}".rstrip() if log else message)


class UnsupportedConfig(ValueError):
    """The configuration cannot run (e.g. more shared memory than the device allows per block)."""
