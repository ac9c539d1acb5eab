"""Probes of unrounded mul / add pairs (kernel/capture/isa/contraction.cu): pairs ptxas fuses into one FFMA and
pairs it keeps apart, so the capture pins both what the contraction table (flashsim.ptx.sass) reads from the SASS
and the arithmetic of each. The operands are one array of three rows x, y, z (thread i reads x[i], y[i], z[i]):
every combination of special values, random bits, and a quarter where z almost cancels x * y (z = -fl(x * y)
moved by a few ulps), where one rounding and two differ most."""

from __future__ import annotations

import numpy as np

from . import Arg, Probe
from .inputs import f32_bits, operand

N = 4096
SOURCE = "capture/isa/contraction.cu"


def operands(rng: np.random.Generator) -> np.ndarray:
    """The rows x, y, z (N each, concatenated) of float32 bit patterns: the module docstring."""
    x, y, z = (operand(k, 3, N, random=f32_bits)(rng) for k in range(3))
    q = N // 4
    moderate = np.uint32(0x3F800000) + (rng.integers(-20, 21, (2, q)) << 23).astype(np.int64)
    xs, ys = (m.astype(np.uint32) ^ rng.integers(0, 1 << 23, q, dtype=np.uint32) for m in moderate)
    xs |= rng.integers(0, 2, q, dtype=np.uint32) << np.uint32(31)
    with np.errstate(all="ignore"):
        product = (xs.view(np.float32) * ys.view(np.float32)).view(np.uint32)
    zs = ((product ^ np.uint32(0x80000000)).astype(np.int64) + rng.integers(-3, 4, q)).astype(np.uint32)
    x[-q:], y[-q:], z[-q:] = xs, ys, zs
    return np.concatenate([x, y, z])


def _probe(name: str, outputs: int, note: str) -> Probe:
    outs = tuple(Arg(f"out{k + 1 if k else ''}", "out", shape=(N,), dtype="u4") for k in range(outputs))
    return Probe(
        "contraction",
        name,
        SOURCE,
        name,
        (N // 256,),
        (256,),
        (Arg("xyz", "in", operands), *outs, Arg("n", "scalar", value=np.int32(N))),
        note=note,
    )


PROBES = [
    _probe("mul_add", 1, "fused: x * y + z rounded once"),
    _probe("mul_sub", 2, "fused: z - x * y and x * y - z rounded once"),
    _probe("mul_add_ftz", 1, "fused: .ftz, subnormal operands and results flushed"),
    _probe("two_readers", 2, "fused twice: x * y + z and z - x * y, one product read by both"),
    _probe("two_products", 1, "x * y fused, z * x rounded: fl(x * y + fl(z * x))"),
    _probe("product_stored", 2, "kept apart: fl(fl(x * y) + z), and fl(x * y) itself"),
    _probe("across_blocks", 1, "kept apart: plain C++, fl(fl(x * y) + s), s = z on odd threads, else 0"),
]
