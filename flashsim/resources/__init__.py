"""The resource model of the flash_fwd kernel: shared memory, registers and occupancy per arch.

``budget(config=None, arch="sm_120")`` (model.py) returns a Budget: smem_bytes, breakdown, cap_bytes, fits,
blocks_per_sm, occupancy, registers, expressions, table(). Shared memory is flashsim.config.smem_buffers
evaluated on sympy symbols (symbols.py); occupancy follows cuda_occupancy.h (occupancy.py); registers are
ptxas's count of an NVRTC build where one is possible, else a labelled estimate (registers.py); report.py
prints the table and draws the bar figure; whatif.py answers the seed's what-ifs.

Importing this package does not import sympy: the symbolic parts load it when they are first used.
"""

from __future__ import annotations

from .model import Budget, budget
from .occupancy import Occupancy, occupancy, occupancy_expressions

__all__ = ["Budget", "budget", "Occupancy", "occupancy", "occupancy_expressions"]
