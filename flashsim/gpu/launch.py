"""Run kernel/flash_fwd.cu on the current GPU: the same contract as flashsim.attention.

The kernel is built with NVRTC for the GPU's own arch from the shared KernelConfig (its defines) plus the
scalar-math constants of flashsim.emulator.kernel_math, so the emulator and the kernel read one description; the
define set is flashsim.provenance.build_defines, which the captures' fingerprints hash too.
"""
from __future__ import annotations

import numpy as np

from .. import provenance
from ..config import KernelConfig
from ..problem import prepare
from . import runtime as rt
from .build import compile_cuda, kernel_path
from .errors import UnsupportedConfig

KERNEL_FILE = "flash_fwd.cu"
KERNEL_NAME = "flash_fwd"


def build_defines(config: KernelConfig) -> dict:
    """Every define the kernel build receives: configuration, expected shared memory, math constants (computed
    in flashsim.provenance.build_defines, the one place the build and the captures' fingerprints share)."""
    return provenance.build_defines(KERNEL_NAME, config)


def build_kernel(config: KernelConfig, arch: str):
    """Compile the kernel for ``arch`` (works with no GPU); returns flashsim.gpu.build.Build."""
    return compile_cuda(kernel_path(KERNEL_FILE).read_text(), arch=arch, defines=build_defines(config))


def _launch_problem(prob, dq, dk, dv):
    cfg = prob.config
    from ..arch import get_arch
    cap = get_arch(prob.arch).smem_per_block_optin
    if cfg.smem_bytes > cap:
        raise UnsupportedConfig(f"configuration needs {cfg.smem_bytes} B of shared memory per block; "
                                f"{prob.arch} allows {cap} B ({cfg.describe()})")
    build = build_kernel(cfg, prob.arch)
    kern = rt.load(build, KERNEL_NAME)
    do = rt.empty((prob.batch, prob.heads, prob.nq, prob.head_dim), np.float16)
    dl = rt.empty((prob.batch, prob.heads, prob.nq), np.float32)
    grid = (prob.q_blocks, prob.heads, prob.batch)
    if prob.heads > 65535 or prob.batch > 65535:
        raise UnsupportedConfig(f"grid y/z limited to 65535: heads={prob.heads}, batch={prob.batch}")
    args = (dq, dk, dv, do, dl, np.int32(prob.nq), np.int32(prob.nk), prob.softmax_scale, prob.scale_log2)
    return kern, grid, (cfg.threads, 1, 1), cfg.smem_bytes, args, do, dl


def attention(q, k, v, *, causal=False, softmax_scale=None, pv_accum="f32", arch=None, config=None):
    """Run the real kernel. Numpy inputs give numpy outputs; GPU tensors (DLPack: torch, cupy) give
    rt.DeviceArray outputs (DLPack-exportable). ``arch`` defaults to, and must equal, the current GPU's."""
    rt.require_gpu()
    gpu_arch = rt.current_arch()
    if arch is not None:
        from ..arch import get_arch
        if get_arch(arch).name != gpu_arch:
            raise ValueError(f"arch={arch!r} but the current GPU is {gpu_arch}")
    go, (do, dl), _ = prepared_launch(q, k, v, causal=causal, softmax_scale=softmax_scale, pv_accum=pv_accum,
                                      config=config)
    go()
    if all(isinstance(x, np.ndarray) for x in (q, k, v)):
        return do.to_numpy(), dl.to_numpy()
    return do, dl


def prepared_launch(q, k, v, **kw):
    """(launch, (o, lse) device outputs, Problem) with the inputs already on the device, so that ``launch()`` does
    no host work but the launch itself (``flashsim bench`` times it). kw: as ``attention`` (not arch)."""
    rt.require_gpu()
    prob = prepare(q, k, v, arch=rt.current_arch(), **kw)
    dq, dk, dv = (rt.to_device(x) for x in (q, k, v))
    kern, grid, block, smem, args, do, dl = _launch_problem(prob, dq, dk, dv)

    def go(sync=True):
        rt.launch(kern, grid, block, *args, smem_bytes=smem, sync=sync)
    return go, (do, dl), prob
