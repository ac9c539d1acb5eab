"""Bit-level numerics: f16 / bf16 / f32 formats, exact rounding, IEEE binary32 ops, the tensor-core model."""
