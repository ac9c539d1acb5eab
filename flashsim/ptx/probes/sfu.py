"""Probes of the SFU's approximate instructions (kernel/capture/isa/sfu.cu): every form flashsim models, on the f32
special values, values where each form's SASS sequence switches path (below 2^-126, above 2^126, below -126) and
random bit patterns; the 16-bit forms on every f16 / bf16 special and random halves. tanh.approx.f32 has no probe
here (its model, flashsim.numerics.sfu_tanh, came after these captures; tests/test_ptx_sfu.py runs it through
inline PTX on the H200's sample)."""

from __future__ import annotations

import numpy as np

from ...numerics.sfu_approx import FORMS
from . import Arg, Probe
from .inputs import F32_SPECIAL, f32_bits

N = 2048
SOURCE = "capture/isa/sfu.cu"
H16_SPECIAL = np.array(
    [
        0x0000,
        0x8000,
        0x0001,
        0x8001,
        0x03FF,
        0x0400,
        0x3C00,
        0xBC00,
        0x7BFF,
        0xFBFF,
        0x7C00,
        0xFC00,
        0x7E00,
        0x7C01,
        0x3F80,
        0xBF80,
        0x7F7F,
        0x7F80,
        0xFF80,
        0x7FC0,
        0x0080,
        0x007F,
        0x4B00,
        0xCB00,
        0x5640,
        0xD640,
    ],
    np.uint16,
)  # f16 and bf16 zeros, subnormals, ones, largest finite, infinities, NaNs, and where ex2 / tanh saturate


def sfu_f32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """f32 bits around the path switches of the SASS sequences (|x| near 2^-126 and 2^126, x near -126 and -150)
    and the reduced arguments of sin / cos (multiples of pi / 4), then ``f32_bits``."""
    edges = np.array([2.0**-126, 2.0**126, 126.0, 150.0, 127.0, np.pi / 4, np.pi, 1e4], np.float32).view(np.uint32)
    k = n // 4
    near = edges[rng.integers(0, edges.size, k)].astype(np.int64) + rng.integers(-8, 9, k)
    near = near.astype(np.uint32) | (rng.integers(0, 2, k, dtype=np.uint32) << np.uint32(31))
    sub = rng.integers(0, 1 << 23, k, dtype=np.uint32) | (rng.integers(0, 2, k, dtype=np.uint32) << np.uint32(31))
    return np.concatenate([near, sub, f32_bits(rng, n - 2 * k)])


def _f32_make(rng):
    return np.concatenate([F32_SPECIAL, sfu_f32_bits(rng, N - F32_SPECIAL.size)]).astype(np.uint32)


def _f16_make(rng):
    return np.concatenate([H16_SPECIAL, rng.integers(0, 1 << 16, N - H16_SPECIAL.size, dtype=np.uint32)]).astype(
        np.uint16
    )


def _x2_make(rng):
    pairs = np.stack(np.meshgrid(H16_SPECIAL, H16_SPECIAL, indexing="ij"), -1).reshape(-1, 2).astype(np.uint32)
    grid = pairs[:, 0] | (pairs[:, 1] << np.uint32(16))
    return np.concatenate([grid, rng.integers(0, 1 << 32, N - grid.size, dtype=np.uint64).astype(np.uint32)]).astype(
        np.uint32
    )


def _probe(form: str) -> Probe:
    f = FORMS[form]
    make, dtype = (_f16_make, "u2") if f.width == 16 else ((_x2_make if f.pair else _f32_make), "u4")
    name = form.replace(".", "_")
    return Probe(
        "sfu",
        name,
        SOURCE,
        name,
        (N // 256,),
        (256,),
        (Arg("a", "in", make), Arg("out", "out", shape=(N,), dtype=dtype), Arg("n", "scalar", value=np.int32(N))),
    )


PROBES = [_probe(form) for form in FORMS if form != "tanh.approx.f32"]
