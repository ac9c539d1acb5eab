"""Probes of the atomics (kernel/capture/isa/memory.cu): every atom / red op and type on locations of their own
(in each state space: the arithmetic, flushes and NaNs bit for bit) and on colliding locations (outputs no
serialisation changes: commuting finals, and the chain check of every op, which is 0 for any order)."""

from __future__ import annotations

import numpy as np

from . import Arg, Probe
from .inputs import BF16_SPECIAL, F16_SPECIAL, F32_SPECIAL, F64_SPECIAL, f32_bits, float_pattern, int_pattern, operand

SOURCE = "capture/isa/memory.cu"
BLOCKS, THREADS = 2, 256
N = BLOCKS * THREADS
LOCS = 5  # colliding locations: 51 or 52 lanes on each
SPACES = {0: "global", 1: "shared", 2: "generic_global", 3: "generic_shared"}
DTYPES = {16: "u2", 32: "u4", 64: "u8"}
FLOATS = {  # type -> (specials, exponent bits, fraction bits, halves per element)
    "f16": (F16_SPECIAL, 5, 10, 1),
    "bf16": (BF16_SPECIAL, 8, 7, 1),
    "f16x2": (F16_SPECIAL, 5, 10, 2),
    "bf16x2": (BF16_SPECIAL, 8, 7, 2),
    "f64": (F64_SPECIAL, 11, 52, 1),
}


def _bits(t: str) -> int:
    return {"f16": 16, "bf16": 16, "b16": 16, "f16x2": 32, "bf16x2": 32}.get(t) or int(t[1:])


def _float_random(t: str):
    if t == "f32":
        return f32_bits
    _, e, f, halves = FLOATS[t]

    def make(rng, n):
        if halves == 1:
            return float_pattern(rng, n, e, f)
        return float_pattern(rng, n, e, f) | (float_pattern(rng, n, e, f) << np.uint64(16))

    return make


def _operands(t: str, n: int):
    """(make of the location's value, make of the operand) for a float add: every pair of specials, then random."""
    if t == "f32":
        special = F32_SPECIAL
    else:
        special, _, _, halves = FLOATS[t]
        special = special.astype(np.uint64)
        if halves == 2:  # a special in the low half, its mirror image in the high one
            special = special | (special[::-1] << np.uint64(16))
    random = _float_random(t)
    dt = DTYPES[_bits(t)]

    def wrap(make):
        return lambda rng: make(rng).astype(dt)

    return wrap(operand(0, 2, n, special, random)), wrap(operand(1, 2, n, special, random))


def _ints(bits: int, n: int, small: bool = False):
    dt = DTYPES[bits]
    if small:  # .inc / .dec: values around the bound, and the bound's own edges
        return lambda rng: np.concatenate([[0, 1, 2**32 - 1, 2**31], rng.integers(0, 9, n - 4)]).astype(dt)
    return lambda rng: int_pattern(rng, n, bits).astype(dt)


def _pool(bits: int, n: int):
    """.cas: a handful of values, so that a quarter of the compares succeed."""
    pool = np.array([0, 1, (1 << bits) - 1, 1 << (bits - 1)], np.uint64)
    return lambda rng: pool[rng.integers(0, pool.size, n)].astype(DTYPES[bits])


def _own_atom(op: str, t: str) -> list[Probe]:
    bits = _bits(t)
    dt = DTYPES[bits]
    if op == "add" and t[0] in "fb":
        mem, b = _operands(t, N)
        c = _ints(bits, N)
    elif op == "cas":
        mem, b, c = _pool(bits, N), _pool(bits, N), _ints(bits, N)
    else:
        small = op in ("inc", "dec")
        mem, b, c = _ints(bits, N, small), _ints(bits, N, small), _ints(bits, N)
    name = f"own_atom_{op}_{t}"
    return [
        Probe(
            "memory",
            f"{name}_{label}",
            SOURCE,
            name,
            (BLOCKS,),
            (THREADS,),
            (
                Arg("mem", "inout", mem),
                Arg("b", "in", b),
                Arg("c", "in", c),
                Arg("old", "out", shape=(N,), dtype=dt),
                Arg("space", "scalar", value=np.int32(space)),
            ),
        )
        for space, label in SPACES.items()
    ]


def _own_red(op: str, t: str) -> list[Probe]:
    bits = _bits(t)
    if op == "add" and t[0] in "fb":
        mem, b = _operands(t, N)
    else:
        small = op in ("inc", "dec")
        mem, b = _ints(bits, N, small), _ints(bits, N, small)
    name = f"own_red_{op}_{t}"
    return [
        Probe(
            "memory",
            f"{name}_{SPACES[space]}",
            SOURCE,
            name,
            (BLOCKS,),
            (THREADS,),
            (Arg("mem", "inout", mem), Arg("b", "in", b), Arg("space", "scalar", value=np.int32(space))),
        )
        for space in (0, 1)
    ]


def _own_vector(t: str, n: int) -> list[Probe]:
    bits = _bits(t)
    dt = DTYPES[bits]
    mem, b = _operands(t, N * n)
    name = f"own_vec_add_v{n}_{t}"
    if n != 4:
        args = (Arg("mem", "inout", mem), Arg("b", "in", b), Arg("old", "out", shape=(N * n,), dtype=dt))
        return [Probe("memory", name, SOURCE, name, (BLOCKS,), (THREADS,), args)]
    return [
        Probe(
            "memory",
            f"{name}_{'atom' if returns else 'red'}",
            SOURCE,
            name,
            (BLOCKS,),
            (THREADS,),
            (
                Arg("mem", "inout", mem),
                Arg("b", "in", b),
                Arg("old", "out", shape=(N * n,), dtype=dt),
                Arg("returns", "scalar", value=np.int32(returns)),
            ),
        )
        for returns in (1, 0)
    ]


COMMUTING = ("add", "min", "max", "and", "or", "xor")


def _collide(op: str, t: str) -> list[Probe]:
    bits = _bits(t)
    if op == "cas":
        mem, b, c = _pool(bits, THREADS), _pool(bits, THREADS), _pool(bits, THREADS)
    else:
        small = op in ("inc", "dec")
        mem, b, c = _ints(bits, THREADS, small), _ints(bits, THREADS, small), _ints(bits, THREADS)
    name = f"collide_{op}_{t}"
    final = "inout" if op in COMMUTING else "in"  # an order-dependent final value is not compared
    return [
        Probe(
            "memory",
            f"{name}_{SPACES[space]}",
            SOURCE,
            name,
            (1,),
            (THREADS,),
            (
                Arg("mem", final, mem),
                Arg("b", "in", b),
                Arg("c", "in", c),
                Arg("chain", "out", shape=(THREADS,), dtype="u4"),
                Arg("space", "scalar", value=np.int32(space)),
                Arg("locs", "scalar", value=np.int32(LOCS)),
            ),
        )
        for space in (0, 1)
    ]


def small_integers(t: str, n: int, low: int, high: int):
    """Bit patterns of the integers low..high of a float type (every sum of a few hundred of them is exact)."""
    conv = {
        "f32": lambda v: v.astype(np.float32).view(np.uint32),
        "f64": lambda v: v.astype(np.float64).view(np.uint64),
        "f16": lambda v: v.astype(np.float16).view(np.uint16),
        "bf16x2": lambda v: v.astype(np.float32).view(np.uint32) >> np.uint32(16),
    }[t]

    def make(rng):
        bits = conv(rng.integers(low, high + 1, n)).astype(np.uint64)
        if t == "bf16x2":
            bits = bits | (conv(rng.integers(low, high + 1, n)).astype(np.uint64) << np.uint64(16))
        return bits.astype(DTYPES[_bits(t)])

    return make


def _collide_float(t: str) -> list[Probe]:
    name = f"collide_add_{t}"
    return [
        Probe(
            "memory",
            f"{name}_{SPACES[space]}",
            SOURCE,
            name,
            (1,),
            (THREADS,),
            (
                Arg("mem", "inout", small_integers(t, THREADS, -8, 8)),
                Arg("b", "in", small_integers(t, THREADS, -3, 3)),
                Arg("space", "scalar", value=np.int32(space)),
                Arg("locs", "scalar", value=np.int32(LOCS)),
            ),
        )
        for space in (0, 1)
    ]


PROBES = [
    *(
        p
        for op, types in {
            "add": ("u32", "s32", "u64", "f32", "f64", "f16", "bf16", "f16x2", "bf16x2"),
            "min": ("u32", "s32", "u64", "s64"),
            "max": ("u32", "s32", "u64", "s64"),
            "inc": ("u32",),
            "dec": ("u32",),
            "and": ("b32", "b64"),
            "or": ("b32", "b64"),
            "xor": ("b32", "b64"),
            "exch": ("b32", "b64"),
            "cas": ("b16", "b32", "b64"),
        }.items()
        for t in types
        for p in _own_atom(op, t)
    ),
    *(
        p
        for op, t in (
            ("add", "u32"),
            ("add", "f32"),
            ("add", "f64"),
            ("add", "f16x2"),
            ("add", "bf16"),
            ("min", "s32"),
            ("max", "u64"),
            ("inc", "u32"),
            ("dec", "u32"),
            ("xor", "b64"),
        )
        for p in _own_red(op, t)
    ),
    *(
        p
        for t, n in (("f32", 4), ("f16", 4), ("bf16", 4), ("f16x2", 4), ("bf16x2", 4), ("f32", 2), ("bf16", 8))
        for p in _own_vector(t, n)
    ),
    *(
        p
        for op, t in (
            ("add", "u32"),
            ("add", "u64"),
            ("min", "s32"),
            ("max", "u32"),
            ("min", "u64"),
            ("max", "s64"),
            ("inc", "u32"),
            ("dec", "u32"),
            ("and", "b32"),
            ("or", "b64"),
            ("xor", "b32"),
            ("exch", "b32"),
            ("exch", "b64"),
            ("cas", "b16"),
            ("cas", "b32"),
            ("cas", "b64"),
        )
        for p in _collide(op, t)
    ),
    *(p for t in ("f32", "f64", "f16", "bf16x2") for p in _collide_float(t)),
    Probe(
        "memory",
        "collide_vec_add_v4_f32",
        SOURCE,
        "collide_vec_add_v4_f32",
        (1,),
        (THREADS,),
        (
            Arg("mem", "inout", small_integers("f32", 4 * LOCS, -8, 8)),
            Arg("b", "in", small_integers("f32", 4 * THREADS, -3, 3)),
            Arg("locs", "scalar", value=np.int32(LOCS)),
        ),
    ),
]
