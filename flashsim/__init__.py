"""flashsim: emulate, prove and verify a raw mma.sync FlashAttention forward kernel, bit for bit.

Public contracts (DESIGN.md): ``mma``, ``attention``, ``reference_attention``, ``sfu.ex2`` / ``sfu.rcp``,
``budget``, ``gpu.attention``. Submodules load lazily so that ``import flashsim`` stays cheap and
works without the optional GPU / JAX / plotting dependencies.
"""
from __future__ import annotations

import importlib

from .arch import ARCHS, Arch, get_arch
from .config import KernelConfig

__version__ = "0.1.0"

_LAZY = {
    "mma": ("flashsim.numerics.tensorcore", "mma"),
    "attention": ("flashsim.emulator", "attention"),
    "reference_attention": ("flashsim.emulator", "reference_attention"),
    "budget": ("flashsim.budget", "budget"),
    "sfu": ("flashsim.numerics.sfu", None),
    "layout": ("flashsim.layout", None),
    "numerics": ("flashsim.numerics", None),
    "gpu": ("flashsim.gpu", None),
}

__all__ = ["ARCHS", "Arch", "get_arch", "KernelConfig", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        mod = importlib.import_module(module)
        value = mod if attr is None else getattr(mod, attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flashsim' has no attribute {name!r}")
