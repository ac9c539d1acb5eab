"""Symbolic resource model of the flash_fwd kernel: shared memory, registers and occupancy per arch.

``budget(config=None, arch="sm_120")`` returns a Budget (smem_bytes, breakdown, cap_bytes, fits, blocks_per_sm,
occupancy, registers, expressions, table()). Shared memory comes from flashsim.config.smem_buffers evaluated
on sympy symbols; occupancy follows cuda_occupancy.h (see ``occupancy``); registers are ptxas's count of an
NVRTC build where one is possible (``registers``). ``whatif`` answers the seed's what-ifs and ``claims`` checks
the seed's claims.
"""
from __future__ import annotations

import sys
import types

from .model import Budget, budget
from .occupancy import Occupancy, occupancy, occupancy_expressions

__all__ = ["Budget", "budget", "Occupancy", "occupancy", "occupancy_expressions"]


class _CallableModule(types.ModuleType):
    """``flashsim.budget`` is this package once imported; calling it is ``budget(...)`` (the DESIGN.md contract)."""

    def __call__(self, config=None, arch="sm_120", **kwargs) -> Budget:
        return budget(config, arch, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
