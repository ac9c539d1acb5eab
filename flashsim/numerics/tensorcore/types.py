"""The operand types of the mma.sync instructions flashsim models, and their PTX type strings."""

from __future__ import annotations

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

# (input dtype, accumulator dtype) -> PTX type string d.a.b.c
MMA_TYPES = {
    (F16, F32): "f32.f16.f16.f32",
    (F16, F16): "f16.f16.f16.f16",
    (BF16, F32): "f32.bf16.bf16.f32",
}

ZERO_F16 = -64  # exponent of a zero f16 input (int8): ea + eb of a zero product <= -48 < -28
ZERO_BF16 = -1000  # exponent of a zero bf16 input (int16): ea + eb of a zero product <= -872 < -252


def mma_type(a_dtype, c_dtype) -> str:
    """PTX type string ("f32.f16.f16.f32", ...) for input dtype ``a_dtype`` and accumulator ``c_dtype``."""
    key = (np.dtype(a_dtype), np.dtype(c_dtype))
    if key not in MMA_TYPES:
        raise ValueError(
            f"no mma.sync m16n8k16 for inputs {key[0]} with accumulator {key[1]}; "
            f"supported: {', '.join(MMA_TYPES.values())}"
        )
    return MMA_TYPES[key]


E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
E5M2 = np.dtype(ml_dtypes.float8_e5m2)
S8, S32 = np.dtype(np.int8), np.dtype(np.int32)
FP8_FIELDS = {E4M3: (4, 3, 7), E5M2: (5, 2, 15)}  # exponent bits, fraction bits, bias
ZERO_FP8 = -64  # exponent of a zero FP8 input (int8): ea + eb of a zero product <= -64 + 15 < -28
K32_NAMES = {E4M3: "e4m3", E5M2: "e5m2", F32: "f32", F16: "f16"}


def k32_type(a_dtype, b_dtype, c_dtype) -> str:
    """PTX type string of mma.sync.m16n8k32 for these operand dtypes ("s32.s8.s8.s32", "f32.e4m3.e5m2.f32", ...)."""
    a, b, c = (np.dtype(x) for x in (a_dtype, b_dtype, c_dtype))
    if a == S8 and b == S8 and c == S32:
        return "s32.s8.s8.s32"
    if a in FP8_FIELDS and b in FP8_FIELDS and c in (F32, F16):
        return f"{K32_NAMES[c]}.{K32_NAMES[a]}.{K32_NAMES[b]}.{K32_NAMES[c]}"
    raise ValueError(
        f"no mma.sync m16n8k32 for a {a}, b {b}, c {c}: int8 x int8 + int32, or float8_e4m3fn / "
        "float8_e5m2 (mixed allowed) + float32 / float16"
    )


def check_batch(c_shape: tuple, **operands) -> None:
    """ValueError naming the operand whose leading (batch) dimensions do not broadcast to c's (numpy rules): one B
    may serve many A's, and d always has c's shape."""
    batch = tuple(c_shape[:-2])
    for name, x in operands.items():
        try:
            ok = np.broadcast_shapes(x.shape[:-2], batch) == batch
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{name}'s batch dimensions {x.shape[:-2]} do not broadcast to c's batch dimensions {batch}"
            )


# sm_120a's mma.sync kinds with 4-, 6- and 8-bit inputs, one uint8 code per element (PTX ISA, mma: "Alternate floating
# point type" and "... with block scaling"; Table 36, valid combinations of .kind, .stype and .scale_vec_size)
F8F6F4_FORMATS = ("e4m3", "e5m2", "e3m2", "e2m3", "e2m1")
BLOCK_SCALE_FORMS = {  # (kind, scale_vec: scales per row of A / column of B, scale format) -> element formats
    ("mxf8f6f4", 1, "ue8m0"): F8F6F4_FORMATS,
    ("mxf4", 2, "ue8m0"): ("e2m1",),
    ("mxf4nvf4", 2, "ue8m0"): ("e2m1",),
    ("mxf4nvf4", 4, "ue8m0"): ("e2m1",),
    ("mxf4nvf4", 4, "ue4m3"): ("e2m1",),
}
BLOCK_SCALE_KINDS = ("mxf8f6f4", "mxf4", "mxf4nvf4")


def scale_vec_count(scale_vec) -> int:
    """1, 2 or 4 from a .scale_vec_size ("1X", "scale_vec::2X", 4, ...); ValueError otherwise."""
    text = str(scale_vec).strip().upper().removeprefix(".").removeprefix("SCALE_VEC::").removesuffix("X")
    if text not in ("1", "2", "4"):
        raise ValueError(f"scale_vec must be '1X', '2X' or '4X', got {scale_vec!r}")
    return int(text)


def kind_name(kind) -> str:
    """ "f8f6f4", "mxf8f6f4", "mxf4" or "mxf4nvf4" from a kind ("kind::mxf4" and ".kind::mxf4" too); ValueError."""
    text = str(kind).strip().lower().removeprefix(".").removeprefix("kind::")
    if text not in ("f8f6f4",) + BLOCK_SCALE_KINDS:
        raise ValueError(f"kind must be one of f8f6f4, {', '.join(BLOCK_SCALE_KINDS)}, got {kind!r}")
    return text


def block_scale_form(kind, scale_vec, a_format: str, b_format: str, scale_format: str) -> tuple[str, int]:
    """(kind, scales per row) of a valid block-scaled form (Table 36); one ValueError naming the rule otherwise."""
    k, n = kind_name(kind), scale_vec_count(scale_vec)
    if k not in BLOCK_SCALE_KINDS:
        raise ValueError(f"kind {k!r} has no block scales (flashsim.mma(..., kind='f8f6f4') runs it)")
    sf = str(scale_format).lower()
    key = (k, n, sf)
    if key not in BLOCK_SCALE_FORMS:
        valid = "; ".join(f"scale_vec {v}X with {s}" for kk, v, s in BLOCK_SCALE_FORMS if kk == k)
        raise ValueError(f"kind::{k} has no scale_vec {n}X with scale format {scale_format!r}: its forms are {valid}")
    for name, fmt in (("a_format", a_format), ("b_format", b_format)):
        if str(fmt).lower() not in BLOCK_SCALE_FORMS[key]:
            raise ValueError(
                f"{name} {fmt!r} is not an element format of kind::{k}: {', '.join(BLOCK_SCALE_FORMS[key])}"
            )
    return k, n


# every form of the kinds: (kind, scale_vec or None, scale format or None, a format, b format, accumulator)
KIND_FORMS = tuple(
    [("f8f6f4", None, None, x, y, acc) for acc in ("f32", "f16") for x in F8F6F4_FORMATS for y in F8F6F4_FORMATS]
    + [(k, n, s, x, y, "f32") for (k, n, s), fmts in BLOCK_SCALE_FORMS.items() for x in fmts for y in fmts]
)
