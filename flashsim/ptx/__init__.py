"""flashsim.ptx: run a kernel's own PTX on a CPU, bit for bit, with sanitizers and no GPU.

    mod = flashsim.ptx.compile(cuda_source, arch="sm_90")        # NVRTC, no GPU; or flashsim.ptx.load(ptx_text)
    report = flashsim.ptx.launch(mod.kernel("my_kernel"), grid, block, [out, x, np.int32(n)], check="memcheck")

The parser (flashsim.ptx.parser, into flashsim.ptx.ir), the instruction table (flashsim.ptx.isa) and its semantics
(flashsim/ptx/semantics/, which call flashsim.numerics and flashsim.layout: no rounding written twice), the decoded
program (flashsim.ptx.program), the machine (flashsim.ptx.machine: SIMT warps, scheduling, barriers), the memory
(flashsim.ptx.memory), the sanitizers (flashsim.ptx.sanitize) and the front-ends (this module, ``flashsim ptx``,
``flashsim.attention(..., backend="ptx")``) are separate modules. docs/ptx.md is the user's page.
"""

from __future__ import annotations

from .errors import (
    BlockRace,
    Deadlock,
    InitcheckError,
    LaunchError,
    MemcheckError,
    MemoryFault,
    PTXSyntaxError,
    RaceError,
    SimulationError,
    UnknownKernel,
    UnsupportedInstruction,
    WorkerError,
)
from .launch import Report, launch
from .memory import address
from .module import Kernel, Module, compile, load
from .tensormap import TensorMap, tensor_map_tiled
from .trace import Trace

__all__ = [
    "compile",
    "load",
    "launch",
    "address",
    "tensor_map_tiled",
    "TensorMap",
    "Module",
    "Kernel",
    "Report",
    "Trace",
    "PTXSyntaxError",
    "UnknownKernel",
    "UnsupportedInstruction",
    "LaunchError",
    "SimulationError",
    "Deadlock",
    "MemoryFault",
    "MemcheckError",
    "RaceError",
    "InitcheckError",
    "BlockRace",
    "WorkerError",
]
