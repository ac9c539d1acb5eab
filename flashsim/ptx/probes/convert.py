"""Probes of cvt (kernel/capture/isa/convert.cu): one kernel per form, each thread converting its operand(s):
special values of the source type first (probes.inputs), random bits of it after."""

from __future__ import annotations

import re

import numpy as np

from . import Arg, Probe
from . import inputs as I
from .floating import OPERANDS, elementwise

N = 4096
SOURCE = "capture/isa/convert.cu"

OPERANDS = {
    **OPERANDS,
    "s32": (I.INT32_SPECIAL, I.int_bits(32), "u4"),
    "u32": (I.INT32_SPECIAL, I.int_bits(32), "u4"),
    "s16": (I.INT32_SPECIAL.astype(np.uint16), I.int_bits(16), "u2"),
    "u16": (I.INT32_SPECIAL.astype(np.uint16), I.int_bits(16), "u2"),
    "s64": (I.INT64_SPECIAL, I.int_bits(64), "u8"),
    "u64": (I.INT64_SPECIAL, I.int_bits(64), "u8"),
}
# the register width the kernel gives each destination type (narrow integers in 32-bit registers, see convert.cu)
_WIDTH = {"u8": "u4", "s8": "u4", "u16": "u4", "s16": "u4", "f16": "u2", "bf16": "u2", "tf32": "u4"}
_WIDTH.update(
    {"u32": "u4", "s32": "u4", "f32": "u4", "u64": "u8", "s64": "u8", "f64": "u8", "f16x2": "u4", "bf16x2": "u4"}
)
_WIDTH.update({"e4m3x2": "u2", "e5m2x2": "u2"})
_SIXTEEN_BIT_DESTINATIONS = {"cvt_rzi_u16_f16"}  # kernels whose narrow integer result is a 16-bit register

_FORMS = """
cvt_u8_u32 cvt_s8_s32 cvt_sat_s8_s32 cvt_sat_u8_s32 cvt_sat_u16_s32 cvt_sat_s16_u32 cvt_s32_s16 cvt_u32_u16
cvt_s64_s32 cvt_u64_u32 cvt_u32_u64 cvt_sat_s32_s64 cvt_sat_u32_s64 cvt_sat_s32_u64 cvt_sat_u64_s64 cvt_sat_s64_u64
cvt_rn_f32_s32 cvt_rz_f32_s32 cvt_rm_f32_s32 cvt_rp_f32_s32 cvt_rn_f32_u32 cvt_rn_sat_f32_s32 cvt_rz_f32_u64
cvt_rm_f32_s64 cvt_rn_f64_s64 cvt_rp_f64_u64 cvt_rn_f64_s32 cvt_rn_f16_s32 cvt_rz_f16_u32 cvt_rn_bf16_s32
cvt_rm_bf16_u64
cvt_rni_s32_f32 cvt_rzi_s32_f32 cvt_rmi_s32_f32 cvt_rpi_s32_f32 cvt_rni_u32_f32 cvt_rzi_ftz_s32_f32 cvt_rpi_u8_f32
cvt_rmi_s16_f32 cvt_rzi_u64_f32 cvt_rni_s64_f32 cvt_rzi_s64_f64 cvt_rni_u64_f64 cvt_rmi_s32_f64 cvt_rni_s32_f16
cvt_rzi_u16_f16 cvt_rni_s32_bf16
cvt_rn_f16_f32 cvt_rz_f16_f32 cvt_rm_f16_f32 cvt_rp_f16_f32 cvt_rn_ftz_f16_f32 cvt_rn_relu_f16_f32
cvt_rn_satfinite_f16_f32 cvt_rn_bf16_f32 cvt_rz_bf16_f32 cvt_rm_bf16_f32 cvt_rp_bf16_f32
cvt_rz_relu_satfinite_bf16_f32 cvt_rn_f32_f64 cvt_rz_f32_f64 cvt_rm_f32_f64 cvt_rp_f32_f64 cvt_rn_ftz_f32_f64
cvt_rn_f16_f64 cvt_rz_bf16_f64 cvt_rn_bf16_f16 cvt_rz_f16_bf16 cvt_f16_bf16 cvt_f32_f16 cvt_sat_f32_f16
cvt_f32_bf16 cvt_f64_f32 cvt_ftz_f64_f32 cvt_f64_f16 cvt_f64_bf16 cvt_f32_f32 cvt_ftz_f32_f32 cvt_sat_f32_f32
cvt_rni_f32_f32 cvt_rzi_f32_f32 cvt_rmi_f32_f32 cvt_rpi_f32_f32 cvt_rni_ftz_f32_f32 cvt_rni_f64_f64
cvt_rzi_f16_f16 cvt_rmi_bf16_bf16
cvt_rna_tf32_f32 cvt_rna_satfinite_tf32_f32 cvt_rn_tf32_f32 cvt_rz_tf32_f32 cvt_rn_relu_tf32_f32
cvt_rn_satfinite_e4m3x2_f16x2 cvt_rn_satfinite_relu_e5m2x2_f16x2
""".split()
_PACKS = """
cvt_rn_f16x2_f32 cvt_rz_f16x2_f32 cvt_rn_relu_f16x2_f32 cvt_rn_satfinite_f16x2_f32 cvt_rn_bf16x2_f32
cvt_rz_relu_satfinite_bf16x2_f32 cvt_rn_satfinite_e4m3x2_f32 cvt_rn_satfinite_relu_e4m3x2_f32
cvt_rn_satfinite_e5m2x2_f32
""".split()
_UNPACKS = "cvt_rn_f16x2_e4m3x2 cvt_rn_f16x2_e5m2x2 cvt_rn_relu_f16x2_e4m3x2".split()


def _types(name: str) -> tuple[str, str]:
    """(destination, source) type of a kernel name cvt_<modifiers>_<dtype>_<stype>."""
    dt, st = re.findall(r"[a-z0-9]+", name)[-2:]
    return dt, st


def _form(name: str) -> Probe:
    dt, st = _types(name)
    out = "u2" if name in _SIXTEEN_BIT_DESTINATIONS else _WIDTH[dt]
    return elementwise(name, 1, st, out, topic="convert", source=SOURCE, table=OPERANDS)


def _pack(name: str) -> Probe:
    return elementwise(name, 2, "f32", _WIDTH[_types(name)[0]], topic="convert", source=SOURCE)


def _unpack(name: str) -> Probe:
    return Probe(
        "convert",
        name,
        SOURCE,
        name,
        (N // 256,),
        (256,),
        (
            Arg("a", "in", I.fp8_pairs(N), dtype="u2"),
            Arg("out", "out", shape=(N,), dtype="u4"),
            Arg("n", "scalar", value=np.int32(N)),
        ),
    )


PROBES = [*(_form(n) for n in _FORMS), *(_pack(n) for n in _PACKS), *(_unpack(n) for n in _UNPACKS)]
