"""Input generators of the silicon probes: raw bit patterns that reach every path of an instruction (random bits,
the special values of each format, values near the edges where roundings and flushes happen)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "f32_bits",
    "f32_special",
    "operand",
    "F32_SPECIAL",
    "int_special",
    "int_bits",
    "positions",
    "POSITION_SPECIAL",
    "mixed_operand",
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


def int_special(bits: int) -> np.ndarray:
    """The integer edges of a ``bits``-wide operand: 0, 1, 2, all ones and its neighbour, INT_MIN / INT_MAX and
    their neighbours, small counts around 8 / 16 / 32 / 64 (shift and field widths), alternating bit patterns."""
    top = 1 << (bits - 1)
    full = (1 << bits) - 1
    vals = [0, 1, 2, 3, full, full - 1, top, top - 1, top + 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65]
    vals += [0x5555555555555555 & full, 0xAAAAAAAAAAAAAAAA & full, 0x0F0F0F0F0F0F0F0F & full, 0x80 & full]
    out = []
    for v in vals:
        if v <= full and v not in out:
            out.append(v)
    return np.array(out, dtype=f"u{max(bits, 8) // 8}")


def int_bits(bits: int):
    """A ``random(rng, n)`` of uniform ``bits``-wide raw bit patterns."""

    def random(rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(0, 1 << bits, n, dtype=np.uint64).astype(f"u{bits // 8}")

    return random


def positions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Bit positions, lengths and shift counts (u32): three quarters in 0..79 (around every width), the rest
    uniform bits (past 255 too)."""
    small = rng.integers(0, 80, n, dtype=np.uint64)
    wide = rng.integers(0, 1 << 32, n, dtype=np.uint64)
    return np.where(rng.random(n) < 0.75, small, wide).astype(np.uint32)


POSITION_SPECIAL = np.array([0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 255, 256, 0xFFFFFFFF], np.uint32)


def mixed_operand(k: int, specials: list, randoms: list, n: int):
    """Like ``operand`` for operands of different kinds: ``specials[j]`` / ``randoms[j]`` of operand j; the first
    threads take every combination of the operands' special values (trimmed to fit half of ``n``)."""
    per = [len(s) for s in specials]
    while int(np.prod(per)) > n // 2:
        j = int(np.argmax(per))
        per[j] -= 1
    grids = np.meshgrid(*[np.asarray(s)[:p].astype(np.uint64) for s, p in zip(specials, per)], indexing="ij")
    column = grids[k].reshape(-1)
    dtype = np.asarray(specials[k]).dtype

    def make(rng):
        return np.concatenate([column.astype(dtype), randoms[k](rng, n - column.size).astype(dtype)])

    return make
