"""Input generators of the silicon probes: raw bit patterns that reach every path of an instruction (random bits,
the special values of each format, values near the edges where roundings and flushes happen)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "f32_bits",
    "f32_special",
    "operand",
    "F32_SPECIAL",
    "F16_SPECIAL",
    "BF16_SPECIAL",
    "F64_SPECIAL",
    "float_bits",
    "int_bits",
]

F32_SPECIAL = np.array(
    [
        0x00000000,
        0x80000000,
        0x00000001,
        0x80000001,
        0x007FFFFF,
        0x807FFFFF,
        0x00800000,
        0x80800000,
        0x3F800000,
        0xBF800000,
        0x3F800001,
        0x3F7FFFFF,
        0x7F7FFFFF,
        0xFF7FFFFF,
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0xFFC00000,
        0x7F800001,
        0x7FBFFFFF,
        0x33800000,
        0x34000000,
        0x4B000000,
        0x4B800000,
        0x3EFFFFFF,
        0x3F000000,
        0x00400000,
        0x4F000000,
        0xCF000000,
        0x5F000000,
        0x2F800000,
        0x0D800000,
    ],
    np.uint32,
)


def f32_special() -> np.ndarray:
    """Zeros, subnormals, the normal edges, one and its neighbours, the largest finite, infinities, NaNs (quiet
    and signalling, both signs), and powers of two where conversions change behaviour."""
    return F32_SPECIAL.copy()


def f32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` float32 bit patterns: a third uniform over all 2^32, a third of moderate magnitude (exponents within
    2^-30..2^30, where sums round), a third near one (the cancellations of a - b with a ~ b)."""
    k = n // 3
    uniform = rng.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32)
    sign = rng.integers(0, 2, k, dtype=np.uint32) << np.uint32(31)
    exp = rng.integers(97, 158, k, dtype=np.uint32) << np.uint32(23)
    moderate = sign | exp | rng.integers(0, 1 << 23, k, dtype=np.uint32)
    near = (np.uint32(0x3F800000) + rng.integers(-64, 64, n - 2 * k).astype(np.int64)).astype(np.uint32)
    return np.concatenate([uniform, moderate, near])


def operand(k: int, arity: int, n: int, special=F32_SPECIAL, random=f32_bits):
    """A ``make(rng)`` for operand ``k`` of an ``arity``-operand instruction run on ``n`` threads: the first
    threads take every combination of the special values (the grid, as far as it fits in half of ``n``), the rest
    ``random(rng, ...)``. The grid needs no generator, so the operands' makers agree on it."""
    special = np.asarray(special)
    per = special.size
    while per**arity > n // 2 and per > 1:
        per -= 1
    grid = np.stack(np.meshgrid(*([special[:per]] * arity), indexing="ij"), -1).reshape(-1, arity)

    def make(rng):
        return np.concatenate([grid[:, k], random(rng, n - len(grid))]).astype(special.dtype)

    return make


# -- the other formats of the atomics probes: float16, bfloat16, float64 bit patterns, integers of every width ------

F16_SPECIAL = np.array(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3C01, 0x3BFF, 0x7BFF,
     0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x1400, 0x0200, 0x6800],
    np.uint16,
)  # fmt: skip
BF16_SPECIAL = np.array(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x807F, 0x0080, 0x8080, 0x3F80, 0xBF80, 0x3F81, 0x3F7F, 0x7F7F,
     0xFF7F, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x3B80, 0x0040, 0x4B00],
    np.uint16,
)  # fmt: skip
F64_SPECIAL = np.array(
    [0, 1 << 63, 1, (1 << 63) | 1, 0x000FFFFFFFFFFFFF, 0x0010000000000000, 0x3FF0000000000000, 0xBFF0000000000000,
     0x3FF0000000000001, 0x7FEFFFFFFFFFFFFF, 0xFFEFFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000,
     0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0x3CA0000000000000, 0x0008000000000000],
    np.uint64,
)  # fmt: skip


def float_bits(rng: np.random.Generator, n: int, exponent_bits: int, fraction_bits: int) -> np.ndarray:
    """``n`` bit patterns of a binary float format (as uint64): a third uniform raw bits, a third of magnitude near
    one (sums that round), a third subnormal or tiny (the flushes)."""
    width = 1 + exponent_bits + fraction_bits
    k = n // 3
    sign = rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(width - 1)
    uniform = rng.integers(0, 1 << (width - 1), k, dtype=np.uint64)
    bias = (1 << (exponent_bits - 1)) - 1
    near = (rng.integers(bias - 4, bias + 4, k, dtype=np.uint64) << np.uint64(fraction_bits)) | rng.integers(
        0, 1 << fraction_bits, k, dtype=np.uint64
    )
    tiny = rng.integers(0, 1 << (fraction_bits + 1), n - 2 * k, dtype=np.uint64)
    return np.concatenate([uniform, near, tiny]) | sign


def int_bits(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """``n`` integers of ``bits`` (as uint64): uniform raw bits, with the edges 0, 1, the sign boundary and all
    ones among them."""
    hi = rng.integers(0, 1 << 32, n, dtype=np.uint64) << np.uint64(32)
    out = (hi | rng.integers(0, 1 << 32, n, dtype=np.uint64)) & np.uint64((1 << bits) - 1)
    edges = np.array([0, 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << bits) - 1], np.uint64)
    out[rng.choice(n, edges.size, replace=False)] = edges
    return out
