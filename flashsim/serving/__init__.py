"""Serving attention, FlashAttention-2's contracts: a KV cache (contiguous or paged, with per-row lengths) and
variable-length batches, on the one kernel (kernel/flash_fwd.cu built with KernelConfig's serving switches).

problem.py checks the arguments once for the emulator and the GPU runner alike (``ServingProblem``: the shapes,
options and configuration; ``SequenceIndex``: the index arrays' values, checked on the host); splits.py chooses
num_splits the way FlashAttention-2's heuristic does and says which KV tiles a split covers; blocks.py lays out the
kernel's grid (which rows and which tiles each block has), the plan the emulator runs and the kernel mirrors.
"""

from __future__ import annotations

from .problem import SequenceIndex, ServingProblem, prepare_kvcache, prepare_varlen

__all__ = ["ServingProblem", "SequenceIndex", "prepare_kvcache", "prepare_varlen"]
