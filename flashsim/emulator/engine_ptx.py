"""backend="ptx": the kernel's own PTX, instruction by instruction, in flashsim.ptx.

The same launches the GPU runner makes (flashsim.gpu.launch.launch_list: kernel/quantize.cu's pass with a quant,
then flash_fwd), from the PTX NVRTC makes of kernel/ for the problem's KernelConfig (the defines the GPU build
gets), run on the CPU with the arch's numerics. Where the numpy engine replays the kernel's program, this runs
the compiled kernel itself, so the two are independent witnesses of what the GPU returns. Slow next to the numpy
engine (benchmarks/RESULTS.md); meant for verification at small shapes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .. import provenance
from ..gpu import launch as plan
from ..gpu.build import kernel_path
from ..numerics.formats import get_format
from ..problem import Problem, to_bhnd
from ..ptx import Module, address, compile, launch
from ..settings import EngineOptions
from .engine_numpy import Rows

__all__ = ["run", "peak_bytes", "modules"]

MAX_THREADS = 1 << 14  # simulated threads per wave (flashsim.ptx.plan: the register file is this wide)


@lru_cache(maxsize=16)
def _module(kernel: str, defines: tuple, arch: str) -> Module:
    file = plan.KERNEL_FILE if kernel == "flash_fwd" else plan.QUANT_FILE
    return compile(kernel_path(file).read_text(), arch=arch, defines=dict(defines))


def modules(prob: Problem) -> dict:
    """{kernel name: flashsim.ptx.Kernel} of every kernel a launch of ``prob`` runs."""
    cfg, arch = prob.config, prob.arch
    target = cfg.build_arch(arch)  # NVFP4: sm_120a (refused off sm_120)
    out = {
        "flash_fwd": _module(
            "flash_fwd", tuple(sorted(provenance.build_defines("flash_fwd", cfg).items())), target
        ).kernel(plan.KERNEL_NAME)
    }
    if cfg.quantized:
        quant = _module("quantize", tuple(sorted(provenance.build_defines("quantize", cfg).items())), target)
        out.update({name: quant.kernel(name) for name in plan.quant_kernels(cfg)})
    return out


def run(q, k, v, prob: Problem, progress: bool | None = None, options: EngineOptions | None = None):
    """Run the kernel's PTX on numpy q (B, Hq, Nq, d), k, v (B, Hkv, Nk, d) (layout (B, H, N, d)); returns (o like
    q, lse f32, Rows: the overflow flag the kernel set; l is not an output of the kernel, so None)."""
    del progress  # one launch per kernel: launch shows its own progress on a terminal
    executor = (options if options is not None else EngineOptions.from_environment()).ptx_executor
    kernels = modules(prob)
    qs, ks, vs = (np.ascontiguousarray(to_bhnd(x, prob.layout)) for x in (q, k, v))  # the problem's layout
    o = np.zeros(plan.output_shape(prob), get_format(prob.config.dtype).dtype)
    lse = np.zeros((prob.batch, prob.heads, prob.nq), np.float32)
    flag = np.full(1, plan.NO_OVERFLOW, np.uint64)
    scratch = np.zeros(max(plan.scratch_bytes(prob), 1), np.uint8)
    pointers = [address(x) for x in (qs, ks, vs, o, lse)]
    overflow = address(flag) if prob.config.pv_mma_f16 else 0
    for name, grid, block, smem, args in plan.launch_list(prob, *pointers, overflow, address(scratch)):
        launch(kernels[name], grid, block, list(args), shared_mem=smem, max_threads=MAX_THREADS, executor=executor)
    flagged = np.zeros((prob.batch, prob.heads, prob.nq), bool)
    if int(flag[0]) != plan.NO_OVERFLOW:
        flagged.flat[int(flag[0])] = True
    return np.ascontiguousarray(to_bhnd(o, prob.layout)), lse, Rows(None, flagged)


def peak_bytes(prob: Problem) -> int:
    """Estimated peak memory: the arrays (inputs in both layouts, outputs, scratch) and one wave's register file
    (every register slot of flash_fwd's program as an array over the wave's threads, twice for the values being
    replaced) plus its shared and local memory."""
    kernel = modules(prob)["flash_fwd"]
    program = kernel.program
    cfg = prob.config
    fmt = get_format(cfg.dtype).dtype.itemsize
    arrays = 2 * fmt * (prob.batch * prob.heads * prob.nq + 2 * prob.batch * prob.heads_kv * prob.nk) * prob.head_dim
    outputs = fmt * prob.batch * prob.heads * prob.nq * prob.head_dim + 4 * prob.batch * prob.heads * prob.nq
    per_wave = min(MAX_THREADS // cfg.threads, prob.q_blocks * prob.heads * prob.batch)
    threads = per_wave * cfg.threads
    registers = 2 * sum(dt.itemsize for dt, init in zip(program.dtypes, program.init) if init is None) * threads
    memory = per_wave * cfg.smem_bytes + threads * (program.layout.local_size + program.layout.frame_size)
    return int(arrays + outputs + plan.scratch_bytes(prob) + registers + memory)
