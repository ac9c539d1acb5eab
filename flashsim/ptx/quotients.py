"""Approximate divisions as products: the one fact flashsim.ptx.contraction (the candidate pairs) and
flashsim.ptx.sass (the SASS reader) share about them, in a module of its own so that neither imports the other."""

from __future__ import annotations

__all__ = ["approximate_division"]


def approximate_division(ins) -> bool:
    """``div.approx.f32`` / ``div.full.f32`` (.ftz or not): ptxas builds them as MUFU.RCP of the divisor and a multiply
    by the dividend (flashsim/ptx/semantics/floating.py), and that multiply is a product it may fuse into an add that
    reads the quotient, like a mul's (Triton writes ``div.full.f32`` for ``/``: a mean plus an epsilon is one)."""
    return ins.opcode == "div" and ".f32" in ins.mods and (".full" in ins.mods or ".approx" in ins.mods)
