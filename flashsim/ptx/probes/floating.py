"""Probes of floating-point arithmetic and compares (kernel/capture/isa/floating.cu): one kernel per instruction
form, each thread applying it to its operands; the first threads take every combination of the type's special
values (as far as half of the threads hold them), the rest random bits of that type (probes.inputs)."""

from __future__ import annotations

import numpy as np

from . import Arg, Probe
from . import inputs as I

N = 4096
SOURCE = "capture/isa/floating.cu"

_F16X2 = I.packed(I.F16_SPECIAL, I.f16_bits)
_BF16X2 = I.packed(I.BF16_SPECIAL, I.bf16_bits)
# type -> (specials, random generator, the kernel's element dtype)
OPERANDS = {
    "f32": (I.F32_SPECIAL, I.f32_bits, "u4"),
    "f64": (I.F64_SPECIAL, I.f64_bits, "u8"),
    "f16": (I.F16_SPECIAL, I.f16_bits, "u2"),
    "bf16": (I.BF16_SPECIAL, I.bf16_bits, "u2"),
    "f16x2": (*_F16X2, "u4"),
    "bf16x2": (*_BF16X2, "u4"),
}


def elementwise(
    name: str, arity: int, t: str, out: str | None = None, *, extra=(), topic="floating", source=SOURCE, table=None
):
    """A probe of kernel ``name``(a[, b[, c]], [extra inputs], out, n) on operands of type ``t`` (its specials and
    generator from ``table``, OPERANDS by default); ``out`` the result's dtype (t's by default)."""
    special, random, dtype = (table or OPERANDS)[t]
    ins = tuple(Arg("abc"[k], "in", I.operand(k, arity, N, special, random)) for k in range(arity))
    return Probe(
        topic,
        name,
        source,
        name,
        (N // 256,),
        (256,),
        (*ins, *extra, Arg("out", "out", shape=(N,), dtype=out or dtype), Arg("n", "scalar", value=np.int32(N))),
    )


def _pred_in(rng):
    return rng.integers(0, 2, N, dtype=np.uint32)


def _table(t: str, unary=(), binary=(), ternary=()):
    return (
        [elementwise(f"{n}_{t}", 1, t) for n in unary]
        + [elementwise(f"{n}_{t}", 2, t) for n in binary]
        + [elementwise(f"{n}_{t}", 3, t) for n in ternary]
    )


_ROUNDINGS = ("rn", "rz", "rm", "rp")
PROBES = [
    *_table(
        "f32",
        unary=[f"rcp_{r}" for r in _ROUNDINGS]
        + [f"sqrt_{r}" for r in _ROUNDINGS]
        + ["rcp_rn_ftz", "sqrt_rn_ftz", "abs", "abs_ftz", "neg", "neg_ftz"],
        binary=[f"{op}_{r}" for op in ("add", "mul", "div") for r in _ROUNDINGS]
        + ["add_rn_ftz", "add_rn_sat", "add_rm_ftz_sat", "add", "sub_rn", "sub_rp_ftz", "mul_rn_ftz_sat"]
        + ["div_rn_ftz", "div_approx", "div_approx_ftz", "div_full", "div_full_ftz"]
        + ["min", "min_ftz", "min_nan", "min_xorsign_abs", "max", "max_nan_ftz", "max_xorsign_abs", "copysign"],
        ternary=[f"fma_{r}" for r in _ROUNDINGS] + ["fma_rn_ftz_sat", "mad_rm"],
    ),
    *_table(
        "f64",
        unary=[f"{op}_{r}" for op in ("rcp", "sqrt") for r in _ROUNDINGS] + ["abs", "neg"],
        binary=[f"{op}_{r}" for op in ("add", "mul", "div") for r in _ROUNDINGS]
        + ["sub_rn", "mul", "min", "max", "copysign"],
        ternary=[f"fma_{r}" for r in _ROUNDINGS],
    ),
    *_table(
        "f16",
        unary=["abs", "neg_ftz"],
        binary=["add_rn", "add", "add_rn_ftz", "add_rn_sat", "sub_rn", "mul_rn", "mul_rn_ftz_sat"]
        + ["min", "min_nan", "max_ftz", "max_xorsign_abs"],
        ternary=["fma_rn", "fma_rn_ftz", "fma_rn_sat", "fma_rn_relu"],
    ),
    *_table(
        "f16x2",
        unary=["abs", "neg"],
        binary=["add_rn", "sub_rn_ftz", "mul_rn_sat", "min", "max_nan"],
        ternary=["fma_rn", "fma_rn_relu"],
    ),
    *_table(
        "bf16",
        unary=["abs", "neg"],
        binary=["add_rn", "sub_rn", "mul_rn", "min", "max_nan", "min_xorsign_abs"],
        ternary=["fma_rn", "fma_rn_relu"],
    ),
    *_table(
        "bf16x2",
        unary=["abs", "neg"],
        binary=["add_rn", "mul", "max", "min_nan"],
        ternary=["fma_rn", "fma_rn_relu"],
    ),
    *[
        elementwise(f"setp_{cmp}_{t}", 2, t, "u4")
        for cmp, t in [
            ("lt", "f32"),
            ("equ", "f32"),
            ("ne_ftz", "f32"),
            ("num", "f32"),
            ("nan", "f64"),
            ("gtu", "f64"),
            ("le", "f16"),
            ("neu_ftz", "f16"),
            ("ge", "bf16"),
            ("lt", "f16x2"),
            ("nan", "bf16x2"),
        ]
    ],
    elementwise("setp_lt_or_f32", 2, "f32", "u4", extra=(Arg("c", "in", _pred_in),)),
    elementwise("setp_eq_and_f16x2", 2, "f16x2", "u4", extra=(Arg("c", "in", _pred_in),)),
    elementwise("set_lt_f32_f32", 2, "f32"),
    elementwise("set_geu_u32_f32", 2, "f32"),
    elementwise("set_eq_s32_f64", 2, "f64", "u4"),
    elementwise("set_lt_f32_s32", 2, "f32"),  # integer sources: f32's bit patterns compared as s32
    elementwise("set_lt_f16_f16", 2, "f16"),
    elementwise("set_le_bf16_bf16", 2, "bf16"),
    elementwise("set_lt_f16x2_f16x2", 2, "f16x2"),
    elementwise("set_gt_u32_f16x2", 2, "f16x2"),
    elementwise("set_ltu_bf16x2_bf16x2", 2, "bf16x2"),
    elementwise("testp_f32", 1, "f32", "u4"),
    elementwise("testp_f64", 1, "f64", "u4"),
]
