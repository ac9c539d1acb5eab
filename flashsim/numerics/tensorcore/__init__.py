"""Bit-exact model of the tensor cores' ``mma.sync`` (m16n8k16 with f16 / bf16 inputs, m16n8k32 with 8-bit inputs).

The model (MMA-Sim, arXiv:2511.10909; Khattak & Mikaitis, arXiv:2512.07004; checked on the H200 against
tests/data/mma_sm90.npz), per output element and per fused block of ``arch.mma_block_k`` products: every product is
exact; c joins as one more term; a zero term takes the arch's zero exponent; E = the largest exponent of all terms;
each term is truncated toward zero to F = ``arch.mma_fraction_bits`` fraction bits relative to 2^E and the terms are
summed exactly; the sum is rounded once (f32 toward zero, f16 to nearest even, subnormals kept, a zero result +0,
|f32| >= 2^128 -> inf); NaN anywhere, 0 * inf or +inf with -inf give the canonical NaN. With ``mma_block_k == 8``
(sm_80/86/89) a k16 step is two chained blocks; a kernel's loop of k16 steps chains the same way (``mma_chain``).

Modules, one job each: ``types`` (operand types and PTX type strings), ``api`` (``mma``, ``mma_chain``,
``mma_chain_generic`` and their checks), ``generic`` (the one routine, written against the array namespace, for every
engine), ``k32`` (8-bit inputs: s8, and FP8 native or lowered onto the f16 model), ``warpgroup`` (Hopper's
``wgmma.mma_async``: ``wgmma`` and ``wgmma_unchecked``, the same block routine with wgmma's parameters),
``blockscale`` (sm_120a's kind::f8f6f4 and block-scaled kinds: ``mma_block_scale``, ``mma_f8f6f4``, the same block
routine with the kinds' parameters), ``fast`` (the numpy engine's compiled kernel, ``_numba_chain``, its dispatch and
threads). docs/tensorcore.md has the exactness argument, the H200 findings and the measured speeds.
"""

from __future__ import annotations

from .api import mma, mma_chain, mma_chain_generic, mma_unchecked
from .blockscale import block_scale_unchecked, mma_block_scale, mma_chain_block_scale, mma_f8f6f4
from .k32 import mma_chain_k32, mma_chain_s8, mma_k32
from .types import E4M3, E5M2, MMA_TYPES, k32_type, mma_type
from .warpgroup import WGMMA_TYPES, wgmma, wgmma_type, wgmma_unchecked

__all__ = [
    "mma",
    "mma_chain",
    "mma_chain_generic",
    "mma_unchecked",
    "mma_block_scale",
    "mma_f8f6f4",
    "block_scale_unchecked",
    "mma_chain_block_scale",
    "mma_type",
    "MMA_TYPES",
    "mma_k32",
    "k32_type",
    "mma_chain_s8",
    "mma_chain_k32",
    "E4M3",
    "E5M2",
    "wgmma",
    "wgmma_unchecked",
    "wgmma_type",
    "WGMMA_TYPES",
]
