"""flashsim: emulate, prove and verify a raw mma.sync FlashAttention forward kernel, bit for bit.

Public contracts: ``mma`` (the tensor-core model), ``wgmma`` (Hopper's warpgroup MMA, the same model family),
``mma_block_scale`` (sm_120a's block-scaled FP4 / FP6 / FP8 mma.sync, the same family),
``attention`` / ``reference_attention`` (the emulator and its float64 reference), ``attention_with_kvcache`` /
``attention_varlen`` (serving: a KV cache, paged or not, and variable-length batches, with their references),
``sfu.ex2`` / ``sfu.rcp``, ``budget`` (the resource model: shared memory, registers, occupancy), ``gpu.attention``
(the real kernel), ``EngineOptions`` (how the emulator's engines run), and the ``layout`` and ``numerics`` packages.
``import flashsim`` needs only numpy and ml_dtypes: sympy loads when a symbolic function is called, and
cuda-python (the gpu extra), JAX and matplotlib only inside the functions that use them.
"""

from __future__ import annotations

from . import gpu, layout, numerics
from .arch import ARCHS, Arch, get_arch
from .config import KernelConfig
from .emulator import (
    attention,
    attention_varlen,
    attention_with_kvcache,
    reference_attention,
    reference_attention_varlen,
    reference_attention_with_kvcache,
)
from .numerics import sfu
from .numerics.tensorcore import mma, mma_block_scale, wgmma
from .resources import budget
from .settings import EngineOptions

__version__ = "0.1.0"

__all__ = [
    "ARCHS",
    "Arch",
    "get_arch",
    "KernelConfig",
    "EngineOptions",
    "mma",
    "mma_block_scale",
    "wgmma",
    "attention",
    "reference_attention",
    "attention_with_kvcache",
    "attention_varlen",
    "reference_attention_with_kvcache",
    "reference_attention_varlen",
    "budget",
    "sfu",
    "layout",
    "numerics",
    "gpu",
]
