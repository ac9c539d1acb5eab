"""What ptxas computes at compile time for an SFU instruction whose operand it knows: ``folded(form, bits)``.

ptxas (CUDA 13.0, sm_90) evaluates ``rcp / rsqrt / sqrt / ex2 / lg2 / sin / cos .approx{.ftz}.f32`` of a constant
operand itself and emits the constant: no MUFU runs, so the GPU's result is not the SFU's. Read from ptxas's SASS
(tests/test_ptx_folding.py holds it against ptxas: one kernel per constant, the immediate its SASS stores): the
folded value is ptxas's own expansion of the form (the SASS sequence around the bare MUFU that
flashsim.numerics.sfu_approx's ``composed_bits`` models: range scalings by FMUL) with the MUFU replaced by the
correctly rounded f32 of the exact function (here: the float64 function rounded to nearest f32; a tie of that double
rounding has probability about 2^-29 per input and never occurred there), its operand and result flushed as the unit
flushes them. So a folded ``rcp.approx.f32`` of 1e38 is 0.25 * RN(1 / (x / 4)), one ulp below the correctly rounded
subnormal, and ``sin.approx.f32`` of a subnormal is 0; where the result is NaN (a negative operand of sqrt / rsqrt /
lg2, a NaN operand) or for lg2 of zero, ptxas keeps the MUFU (``folded`` returns None: the SFU's model applies), and
``tanh.approx.f32`` and the 16-bit forms are never folded. The case that showed it: ``rsqrtf(128.0f)`` is 0x3DB504F3
from ptxas against MUFU.RSQ's 0x3DB504F2, which moved 66 outputs of a bf16 attention kernel by 1-2 ulp.
"""

from __future__ import annotations

import numpy as np

from .sfu_approx import composed_bits

__all__ = ["FOLDED_FUNCTIONS", "folded"]

FOLDED_FUNCTIONS = {
    "rcp": lambda x: 1.0 / x,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sqrt": np.sqrt,
    "ex2": np.exp2,
    "lg2": np.log2,
    "sin": np.sin,
    "cos": np.cos,
}


def _flush(x: np.float32) -> np.float32:
    return np.float32(np.copysign(0.0, x)) if 0 < abs(x) < np.float32(2.0**-126) else x


_NAN = 0x7FFFFFFF


def _bare(fn: str, bits: int) -> int:
    """ptxas's value of the bare MUFU of ``fn`` (the .ftz form) at ``bits``: correctly rounded, operand and result
    flushed; NaN bits where ptxas keeps the unit (a NaN result, lg2 of zero)."""
    x = _flush(np.uint32(bits).view(np.float32))
    if np.isnan(x) or (fn == "lg2" and x == 0):
        return _NAN
    with np.errstate(all="ignore"):
        r = np.float32(FOLDED_FUNCTIONS[fn](np.float64(x)))  # to nearest, subnormals and overflow to inf included
    return _NAN if np.isnan(r) else int(_flush(r).view(np.uint32))


def folded(form: str, bits: int) -> int | None:
    """The f32 bits ptxas puts in place of ``form`` (e.g. "rsqrt.approx.f32") applied to the constant ``bits``, or
    None where ptxas leaves the instruction to the SFU (the module docstring)."""
    parts = form.split(".")
    fn = parts[0]
    if fn not in FOLDED_FUNCTIONS or parts[-1] != "f32" or parts[1] != "approx":
        return None
    if ".ftz" in form:
        r = _bare(fn, bits)
    else:  # the SASS sequence around the MUFU, folded with it (sfu_approx.composed_bits: the same sequence)
        base = lambda xs: np.array([_bare(fn, int(b)) for b in np.atleast_1d(xs)], np.uint32)
        r = int(composed_bits(form, np.array([bits], np.uint32), base)[0])
    return None if np.isnan(np.uint32(r).view(np.float32)) else r
