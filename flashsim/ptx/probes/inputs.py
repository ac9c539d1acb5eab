"""Input generators of the silicon probes: raw bit patterns that reach every path of an instruction (random bits,
the special values of each format, values near the edges where roundings and flushes happen)."""

from __future__ import annotations

import numpy as np

__all__ = ["f32_bits", "f32_special", "operand", "F32_SPECIAL"]

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
