"""Probes of integer, bit and predicate instructions (kernel/capture/isa/integer.cu): every form flashsim.ptx's
integer semantics implements, on the combinations of each operand's edge values (zero, all ones, INT_MIN and
neighbours, counts around the widths, positions past the msb) and on random bits. They pin what the ISA leaves
open: division by zero (integer.DIV_BY_ZERO), fns with base > 31, shift counts and field positions past the width,
and INT_MIN's abs / neg / div."""

from __future__ import annotations

import numpy as np

from . import Arg, Probe
from .inputs import F32_SPECIAL, POSITION_SPECIAL, f32_bits, int_bits, int_special, mixed_operand, positions

N = 2048
SOURCE = "capture/isa/integer.cu"

# operand kinds: (special values, random generator, dtype)
_KINDS = {
    "u16": (int_special(16), int_bits(16)),
    "u32": (int_special(32), int_bits(32)),
    "u64": (int_special(64), int_bits(64)),
    "pos": (POSITION_SPECIAL, positions),
    "f32": (F32_SPECIAL, f32_bits),
    "base": (np.array([0, 1, 3, 15, 30, 31, 32, 33, 63, 255, 0xFFFFFFFF], np.uint32), positions),
    "offset": (
        np.array([0, 1, 2, 3, 31, 32, 33, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFE0, 0x80000000, 0x7FFFFFFF], np.uint32),
        lambda rng, n: np.where(
            rng.random(n) < 0.75, rng.integers(-40, 41, n).astype(np.int64) & 0xFFFFFFFF, rng.integers(0, 1 << 32, n)
        ).astype(np.uint32),
    ),
}
_DTYPE = {"u16": "u2", "u32": "u4", "u64": "u8"}


def _probe(name: str, operands: tuple, out: str, per_thread: int = 1, outs: int = 1) -> Probe:
    specials = [_KINDS[k][0] for k in operands]
    randoms = [_KINDS[k][1] for k in operands]
    ins = tuple(Arg("abce"[k], "in", mixed_operand(k, specials, randoms, N)) for k in range(len(operands)))
    res = tuple(
        Arg("out" if j == 0 else f"out{j}", "out", shape=(N * per_thread,), dtype=_DTYPE[out]) for j in range(outs)
    )
    return Probe(
        "integer", name, SOURCE, name, (N // 256,), (256,), (*ins, *res, Arg("n", "scalar", value=np.int32(N)))
    )


def _widths(stem: str, arity: int) -> list[Probe]:
    return [_probe(f"{stem}_{t}{w}", (f"u{w}",) * arity, f"u{w}") for w in (16, 32, 64) for t in "us"]


PROBES = []
for _stem in ("add", "sub", "mul_lo", "mul_hi", "div", "rem", "min", "max"):
    PROBES += _widths(_stem, 2)
for _stem in ("mad_lo", "mad_hi", "sad"):
    PROBES += _widths(_stem, 3)
PROBES += [_probe(n, ("u32", "u32"), "u32") for n in ("add_sat_s32", "sub_sat_s32", "min_relu_s32", "max_relu_s32")]
PROBES += [
    _probe(f"{op}_{t}16x2", ("u32", "u32"), "u32")
    for op, t in (("add", "u"), ("add", "s"), ("min", "u"), ("max", "u"), ("min", "s"), ("max", "s"))
]
PROBES += [_probe(n, ("u32", "u32"), "u32") for n in ("min_relu_s16x2", "max_relu_s16x2")]
PROBES += [_probe("mad_hi_sat_s32", ("u32",) * 3, "u32")]
PROBES += [
    _probe("mul_wide_u16", ("u16", "u16"), "u32"),
    _probe("mul_wide_s16", ("u16", "u16"), "u32"),
    _probe("mul_wide_u32", ("u32", "u32"), "u64"),
    _probe("mul_wide_s32", ("u32", "u32"), "u64"),
    _probe("mad_wide_u32", ("u32", "u32", "u64"), "u64"),
    _probe("mad_wide_s32", ("u32", "u32", "u64"), "u64"),
    _probe("mad_wide_s16", ("u16", "u16", "u32"), "u32"),
]
PROBES += [_probe(f"mul24_{p}_{t}32", ("u32", "u32"), "u32") for p in ("lo", "hi") for t in "us"]
PROBES += [_probe(n, ("u32",) * 3, "u32") for n in ("mad24_lo_s32", "mad24_hi_u32", "mad24_hi_s32", "mad24_hi_sat_s32")]
PROBES += [_probe(f"{op}_s{w}", (f"u{w}",), f"u{w}") for op in ("abs", "neg") for w in (16, 32, 64)]
PROBES += [
    _probe("popc_b32", ("u32",), "u32"),
    _probe("popc_b64", ("u64",), "u32"),
    _probe("clz_b32", ("u32",), "u32"),
    _probe("clz_b64", ("u64",), "u32"),
    _probe("bfind_u32", ("u32",), "u32"),
    _probe("bfind_s32", ("u32",), "u32"),
    _probe("bfind_shiftamt_s32", ("u32",), "u32"),
    _probe("bfind_u64", ("u64",), "u32"),
    _probe("bfind_shiftamt_s64", ("u64",), "u32"),
    _probe("brev_b32", ("u32",), "u32"),
    _probe("brev_b64", ("u64",), "u64"),
    _probe("bfe_u32", ("u32", "pos", "pos"), "u32"),
    _probe("bfe_s32", ("u32", "pos", "pos"), "u32"),
    _probe("bfe_u64", ("u64", "pos", "pos"), "u64"),
    _probe("bfe_s64", ("u64", "pos", "pos"), "u64"),
    _probe("bfi_b32", ("u32", "u32", "pos", "pos"), "u32"),
    _probe("bfi_b64", ("u64", "u64", "pos", "pos"), "u64"),
    _probe("fns_b32", ("u32", "base", "offset"), "u32"),
]
PROBES += [_probe(n, ("pos", "pos"), "u32") for n in ("bmsk_clamp_b32", "bmsk_wrap_b32")]
PROBES += [_probe(f"szext_{m}_{t}32", ("u32", "pos"), "u32") for m in ("clamp", "wrap") for t in "us"]
PROBES += [
    _probe(n, ("u32",) * 3, "u32")
    for n in (
        "dp4a_u32_u32",
        "dp4a_u32_s32",
        "dp4a_s32_u32",
        "dp4a_s32_s32",
        "dp2a_lo_u32_s32",
        "dp2a_hi_s32_u32",
        "dp2a_lo_s32_s32",
        "dp2a_hi_u32_u32",
    )
]
PROBES += [
    _probe("and_b16", ("u16", "u16"), "u16"),
    _probe("or_b32", ("u32", "u32"), "u32"),
    _probe("xor_b64", ("u64", "u64"), "u64"),
    _probe("not_b16", ("u16",), "u16"),
    _probe("cnot_b32", ("u32",), "u32"),
    _probe("cnot_b64", ("u64",), "u64"),
]
PROBES += [_probe(f"shl_b{w}", (f"u{w}", "pos"), f"u{w}") for w in (16, 32, 64)]
PROBES += [
    _probe(n, (f"u{w}", "pos"), f"u{w}")
    for n, w in (("shr_u16", 16), ("shr_s16", 16), ("shr_b32", 32), ("shr_s32", 32), ("shr_u64", 64), ("shr_s64", 64))
]
PROBES += [_probe(f"shf_{d}_{m}_b32", ("u32", "u32", "pos"), "u32") for d in "lr" for m in ("clamp", "wrap")]
PROBES += [_probe(f"prmt_{m}", ("u32",) * 3, "u32") for m in ("b32", "f4e", "b4e", "rc8", "ecl", "ecr", "rc16")]
PROBES += [_probe("lop3_every_lut", ("u32",) * 3, "u32", per_thread=256)]
PROBES += [_probe(n, ("u32",) * 3, "u32", outs=2) for n in ("lop3_or_b32", "lop3_and_b32")]
PROBES += [
    _probe(n, (t, t), "u32")
    for n, t in (
        ("setp_lt_s32", "u32"),
        ("setp_ge_s32", "u32"),
        ("setp_lo_u32", "u32"),
        ("setp_hs_u32", "u32"),
        ("setp_le_u16", "u16"),
        ("setp_gt_s16", "u16"),
        ("setp_ne_b64", "u64"),
        ("setp_lt_s64", "u64"),
        ("setp_hi_u64", "u64"),
    )
]
PROBES += [
    _probe(n, (t, t, "u32"), "u32")
    for n, t in (("setp_eq_and_b32", "u32"), ("setp_lt_or_s32", "u32"), ("setp_ls_xor_u64", "u64"))
]
PROBES += [_probe("set_lt_u32_s32", ("u32", "u32"), "u32"), _probe("set_hi_s32_u64", ("u64", "u64"), "u32")]
PROBES += [_probe("slct_b32_s32", ("u32",) * 3, "u32")]
PROBES += [_probe(n, ("u32", "u32", "f32"), "u32") for n in ("slct_b32_f32", "slct_ftz_b32_f32")]
PROBES += [
    _probe("carry_u32", ("u32",) * 4, "u32", per_thread=8),
    _probe("carry_u64", ("u64",) * 4, "u64", per_thread=8),
]
