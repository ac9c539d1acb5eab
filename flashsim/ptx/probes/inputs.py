"""Input generators of the silicon probes: raw bit patterns that reach every path of an instruction (random bits,
the special values of each format, values near the edges where roundings and flushes happen)."""

from __future__ import annotations

import numpy as np

__all__ = ["f32_bits", "f32_special", "operand", "F32_SPECIAL", "F64_SPECIAL", "F16_SPECIAL", "BF16_SPECIAL"]
__all__ += ["INT32_SPECIAL", "INT64_SPECIAL", "float_bits", "f64_bits", "f16_bits", "bf16_bits", "int_bits", "packed"]
__all__ += ["fp8_pairs"]
__all__ += ["int_special", "positions", "POSITION_SPECIAL", "mixed_operand"]
__all__ += ["float_pattern", "int_pattern"]

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


# -- the other formats: special values and random raw bits per format, packed pairs, integers ---------------------

F64_SPECIAL = np.array(
    [
        0x0000000000000000,
        0x8000000000000000,
        0x0000000000000001,
        0x8000000000000001,
        0x000FFFFFFFFFFFFF,
        0x0010000000000000,
        0x8010000000000000,
        0x3FF0000000000000,
        0xBFF0000000000000,
        0x3FF0000000000001,
        0x3FEFFFFFFFFFFFFF,
        0x7FEFFFFFFFFFFFFF,
        0xFFEFFFFFFFFFFFFF,
        0x7FF0000000000000,
        0xFFF0000000000000,
        0x7FF8000000000000,
        0xFFF8000000000000,
        0x7FF0000000000001,
        0x3FE0000000000000,
        0x3FF8000000000000,
        0x4340000000000000,  # 2^53
        0x43E0000000000000,  # 2^63
        0xC3E0000000000000,  # -2^63
        0x43F0000000000000,  # 2^64
        0x41E0000000000000,  # 2^31
        0xC1E0000000200000,  # just below -2^31
        0x47EFFFFFE0000000,  # f32's largest finite
        0x47EFFFFFF0000000,  # its midpoint to 2^128
        0x3690000000000000,  # 2^-150
        0x36A0000000000000,  # 2^-149
        0x380FFFFFF0000000,  # near f32's smallest normal
        0x40EFFE0000000000,  # f16's largest finite (65504)
    ],
    np.uint64,
)

F16_SPECIAL = np.array(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x8400, 0x3C00, 0xBC00, 0x3C01, 0x3BFF, 0x7BFF, 0xFBFF]
    + [0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7DFF, 0x3800, 0x3A00, 0x4000, 0x6400, 0x6800, 0x1400, 0x0200]
    + [0x5BFF, 0x57FF, 0xC500, 0x7800, 0x0C00, 0x2C00],
    np.uint16,
)

BF16_SPECIAL = np.array(
    [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x8080, 0x3F80, 0xBF80, 0x3F81, 0x3F7F, 0x7F7F, 0xFF7F]
    + [0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FBF, 0x3F00, 0x3F40, 0x4000, 0x4B00, 0x4B80, 0x4F00, 0xCF00]
    + [0x5F00, 0x477F, 0x3400, 0x0040, 0x4380, 0xC080],
    np.uint16,
)

INT32_SPECIAL = np.array(
    [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 0x80000001, 0x00FFFFFF, 0x01000000, 0x01000001, 0x00000080]
    + [0x000000FF, 0x00000100, 0xFFFFFF80, 0xFFFFFF7F, 0x00007FFF, 0x00008000, 0x0000FFFF, 0x00010000, 0xFFFF8000]
    + [0xFFFF7FFF, 0x7FFFFFC0, 0x7FFFFF80, 0x00FFFFFF, 0xFF000001, 0x0000FFF0, 0x00000003],
    np.uint32,
)

INT64_SPECIAL = np.array(
    [0, 1, 2**64 - 1, 2**63 - 1, 2**63, 2**63 + 1, 2**53, 2**53 + 1, 2**24 + 1, 2**32 - 1, 2**32, 2**31 - 1]
    + [2**31, 2**64 - 2**31, 2**64 - 2**31 - 1, 2**63 - 2**10, 2**64 - 2**11 + 1, 2**62 + 2**38 + 1, 0xFFFF]
    + [2**64 - 2**32, 2**40 + 1],
    np.uint64,
)


def float_bits(exp_bits: int, frac_bits: int):
    """A generator of raw bit patterns of the format with those fields, like ``f32_bits``: a third uniform, a
    third of moderate magnitude (exponents within a quarter of the range around one), a third near one."""
    width = 1 + exp_bits + frac_bits
    dtype = np.dtype(f"u{width // 8}")
    bias = (1 << (exp_bits - 1)) - 1
    spread = max(2, bias // 4)

    def make(rng: np.random.Generator, n: int) -> np.ndarray:
        k = n // 3
        uniform = rng.integers(0, 1 << 63, k, dtype=np.uint64) << np.uint64(1)
        uniform = (uniform | rng.integers(0, 2, k, dtype=np.uint64)) >> np.uint64(64 - width)
        sign = rng.integers(0, 2, k, dtype=np.uint64) << np.uint64(width - 1)
        exp = rng.integers(bias - spread, bias + spread + 1, k, dtype=np.uint64) << np.uint64(frac_bits)
        frac = rng.integers(0, 1 << min(frac_bits, 62), k, dtype=np.uint64)
        if frac_bits > 62:
            frac = (frac << np.uint64(frac_bits - 62)) | rng.integers(0, 1 << (frac_bits - 62), k, dtype=np.uint64)
        one = np.uint64(bias << frac_bits)
        near = (one.astype(np.int64) + rng.integers(-64, 64, n - 2 * k)).astype(np.uint64)
        return np.concatenate([uniform, sign | exp | frac, near]).astype(dtype)

    return make


f64_bits = float_bits(11, 52)
f16_bits = float_bits(5, 10)
bf16_bits = float_bits(8, 7)


def int_bits(width: int):
    """A generator of ``width``-bit integers: half uniform raw bits, half small magnitudes of either sign (where
    conversions round), as unsigned patterns."""
    dtype = np.dtype(f"u{width // 8}")

    def make(rng: np.random.Generator, n: int) -> np.ndarray:
        k = n // 2
        uniform = rng.integers(0, 1 << 62, k, dtype=np.uint64) << np.uint64(2)
        uniform = (uniform | rng.integers(0, 4, k, dtype=np.uint64)) >> np.uint64(64 - width)
        top = min(width, 32) - 2
        small = rng.integers(-(1 << top), 1 << top, n - k) << rng.integers(0, width - top, n - k)
        return np.concatenate([uniform, small.astype(np.uint64) & np.uint64(2**width - 1)]).astype(dtype)

    return make


def packed(special16: np.ndarray, random16):
    """(special, random) of 32-bit words holding two 16-bit values: the specials in the low half against the
    specials reversed in the high half (every special meets every lane), random halves independently."""
    special = special16.astype(np.uint32) | (special16[::-1].astype(np.uint32) << np.uint32(16))

    def make(rng: np.random.Generator, n: int) -> np.ndarray:
        return random16(rng, n).astype(np.uint32) | (random16(rng, n).astype(np.uint32) << np.uint32(16))

    return special, make


def fp8_pairs(n: int):
    """A ``make(rng)`` of ``n`` 16-bit words holding two 8-bit patterns: every pattern in each half (n >= 256)."""

    def make(rng: np.random.Generator) -> np.ndarray:
        i = np.arange(n, dtype=np.uint32)
        return ((i & np.uint32(0xFF)) | (((i * np.uint32(37) + (i >> np.uint32(8))) & np.uint32(0xFF)) << 8)).astype(
            np.uint16
        )

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


def float_pattern(rng: np.random.Generator, n: int, exponent_bits: int, fraction_bits: int) -> np.ndarray:
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


def int_pattern(rng: np.random.Generator, n: int, bits: int) -> np.ndarray:
    """``n`` integers of ``bits`` (as uint64): uniform raw bits, with the edges 0, 1, the sign boundary and all
    ones among them."""
    hi = rng.integers(0, 1 << 32, n, dtype=np.uint64) << np.uint64(32)
    out = (hi | rng.integers(0, 1 << 32, n, dtype=np.uint64)) & np.uint64((1 << bits) - 1)
    edges = np.array([0, 1, 1 << (bits - 1), (1 << (bits - 1)) - 1, (1 << bits) - 1], np.uint64)
    out[rng.choice(n, edges.size, replace=False)] = edges
    return out
