"""Probes of floating-point arithmetic (kernel/capture/isa/floating.cu)."""

from __future__ import annotations

import numpy as np

from . import Arg, Probe
from .inputs import operand

N = 4096
SOURCE = "capture/isa/floating.cu"


def _elementwise(name: str, arity: int) -> Probe:
    ins = tuple(Arg("abc"[k], "in", operand(k, arity, N)) for k in range(arity))
    return Probe(
        "floating",
        name,
        SOURCE,
        name,
        (N // 256,),
        (256,),
        (*ins, Arg("out", "out", shape=(N,), dtype="u4"), Arg("n", "scalar", value=np.int32(N))),
    )


PROBES = [
    _elementwise("add_rn_f32", 2),
    _elementwise("mul_rn_f32", 2),
    _elementwise("add_rn_ftz_f32", 2),
    _elementwise("fma_rn_f32", 3),
]
