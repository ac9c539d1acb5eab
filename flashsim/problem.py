"""The attention problem: argument checks and derived scalars shared by the emulator and the GPU runner.

Both executions of the kernel (flashsim.attention on the CPU, flashsim.gpu.attention on the GPU) call
``prepare`` so they accept and reject exactly the same inputs and feed the kernel exactly the same scalars.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .arch import get_arch
from .config import KernelConfig, SUPPORTED_HEAD_DIMS

LOG2E = 1.4426950408889634  # log2(e) in float64


@dataclass(frozen=True)
class Problem:
    batch: int
    heads: int
    nq: int
    nk: int
    head_dim: int
    config: KernelConfig
    arch: str
    softmax_scale: np.float32      # what the kernel receives
    scale_log2: np.float32         # softmax_scale * log2(e), rounded once to f32 on the host

    @property
    def q_blocks(self) -> int:
        return -(-self.nq // self.config.block_m)

    def kv_tiles(self) -> np.ndarray:
        """KV tiles each query block visits, (q_blocks,) int: the kernel's n_tiles, causal skipping included."""
        bm, bc = self.config.block_m, self.config.kv_tile
        r0 = np.arange(self.q_blocks) * bm
        keys = np.full(self.q_blocks, self.nk)
        if self.config.causal:
            keys = np.minimum(self.nk, np.maximum(0, r0 + bm + self.nk - self.nq))
        return -(-keys // bc)


def scales(softmax_scale, head_dim: int) -> tuple[np.float32, np.float32]:
    """(softmax_scale, scale_log2) as float32, the values the kernel is launched with."""
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(head_dim)
    s = float(softmax_scale)
    if not math.isfinite(s) or s <= 0:
        raise ValueError(f"softmax_scale must be a positive finite number, got {softmax_scale!r}")
    s32 = np.float32(s)
    return s32, np.float32(float(s32) * LOG2E)


def _shape_of(x, name):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise ValueError(f"{name} must be an array of shape (B, H, N, d), got {type(x).__name__}")
    return tuple(int(s) for s in shape)


def _dtype_name(x) -> str:
    dt = getattr(x, "dtype", None)
    return str(dt).replace("torch.", "")


def prepare(q, k, v, *, causal=False, softmax_scale=None, pv_accum="f32", arch="sm_90", config=None) -> Problem:
    """Validate q, k, v and the options; return the Problem both executions run.

    q (B, H, Nq, d), k and v (B, H, Nk, d), float16. ``config`` (a KernelConfig) fixes the tiling; its
    head_dim must match d, and ``causal`` / ``pv_accum`` given here override the config's when the config
    is None, and must agree with it otherwise.
    """
    arch_name = get_arch(arch).name
    shapes = {}
    for name, x in (("q", q), ("k", k), ("v", v)):
        shape = _shape_of(x, name)
        if len(shape) != 4:
            raise ValueError(f"{name} must have 4 dimensions (B, H, N, d), got shape {shape}")
        if _dtype_name(x) != "float16":
            raise ValueError(f"{name} must be float16, got {_dtype_name(x)} (nothing is cast silently)")
        shapes[name] = shape
    (b, h, nq, d), (bk, hk, nk, dk), (bv, hv, nv, dv) = shapes["q"], shapes["k"], shapes["v"]
    if shapes["k"] != shapes["v"]:
        raise ValueError(f"k and v must have the same shape, got k {shapes['k']} and v {shapes['v']}")
    if (bk, hk, dk) != (b, h, d):
        raise ValueError(f"k must be (B, H, Nk, d) with B={b}, H={h}, d={d} of q, got {shapes['k']}")
    if nq == 0 or nk == 0:
        raise ValueError(f"sequence lengths must be >= 1, got Nq={nq}, Nk={nk}")
    if b == 0 or h == 0:
        raise ValueError(f"batch and heads must be >= 1, got B={b}, H={h}")
    if d not in SUPPORTED_HEAD_DIMS:
        raise ValueError(f"head dim d={d} is not supported by the kernel; supported: {SUPPORTED_HEAD_DIMS}")
    if config is None:
        config = KernelConfig.default(arch_name, head_dim=d, causal=bool(causal), pv_accum=pv_accum)
    else:
        if not isinstance(config, KernelConfig):
            raise ValueError(f"config must be a flashsim.KernelConfig, got {type(config).__name__}")
        if config.head_dim != d:
            raise ValueError(f"config.head_dim={config.head_dim} does not match the inputs' d={d}")
        if bool(causal) and not config.causal:
            raise ValueError("causal=True conflicts with config.causal=False")
        if pv_accum != "f32" and pv_accum != config.pv_accum:
            raise ValueError(f"pv_accum={pv_accum!r} conflicts with config.pv_accum={config.pv_accum!r}")
    s32, s_log2 = scales(softmax_scale, d)
    return Problem(b, h, nq, nk, d, config, arch_name, s32, s_log2)
