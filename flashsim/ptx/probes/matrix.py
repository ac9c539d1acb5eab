"""Probes of ldmatrix, stmatrix, movmatrix and mma.sync (kernel/capture/isa/matrix.cu) through shared memory: two
warps, each with 64 rows of 16 bytes, rows addressed in a random order (.shared, .shared::cta and generic
addresses); mma on random register bits (16-bit values mostly of moderate size, the rest raw bits: NaNs,
infinities, subnormals), every form flashsim.mma models; and the kernel's own path, ldmatrix -> mma -> stmatrix."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import Arg, Probe

SOURCE = "capture/isa/matrix.cu"
THREADS = 64
WORDS = 2 * 64 * 4  # shared memory in 32-bit words


def _rows(rng):
    return rng.integers(0, 1 << 32, WORDS, dtype=np.uint64).astype(np.uint32)


def _sel(rng):
    return np.concatenate([rng.permutation(64)[:32] for _ in range(2)]).astype(np.uint32)


def _values(rng, dtype, n):
    """n elements of ``dtype`` as raw bits: nine in ten normal-distributed values, the rest raw bits."""
    dt = np.dtype(dtype)
    unsigned = np.dtype(f"u{dt.itemsize}")
    raw = rng.integers(0, 1 << (8 * dt.itemsize), n, dtype=np.uint64).astype(unsigned)
    if dt.kind in "iu":
        return raw
    vals = (rng.standard_normal(n) * 2.0).astype(np.float32).astype(dt).view(unsigned)
    return np.where(rng.random(n) < 0.9, vals, raw)


def _regs(words: int, dtype=np.uint32, c_dtype=None, c_words: int = 0):
    """REGS: per lane ``words`` registers of packed ``dtype`` elements, then ``c_words`` of ``c_dtype``."""

    def make(rng):
        body = _values(rng, dtype, THREADS * words * 4 // np.dtype(dtype).itemsize)
        body = body.view(np.uint32).reshape(THREADS, words)
        if not c_words:
            return body.reshape(-1)
        c = _values(rng, c_dtype, THREADS * c_words * 4 // np.dtype(c_dtype).itemsize).view(np.uint32)
        return np.concatenate([body, c.reshape(THREADS, c_words)], axis=1).reshape(-1)

    return make


def _probe(name: str, regs, out_words: int) -> Probe:
    args = (
        Arg("rows", "in", _rows),
        Arg("sel", "in", _sel),
        Arg("regs", "in", regs),
        Arg("out", "out", shape=(THREADS * out_words,), dtype="u4"),
        Arg("smem", "out", shape=(WORDS,), dtype="u4"),
    )
    return Probe("matrix", name, SOURCE, name, (1,), (THREADS,), args)


_NONE = _regs(1)
E4M3, E5M2, BF16 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16

PROBES = [
    _probe("ldmatrix_x1", _NONE, 1),
    _probe("ldmatrix_x2", _NONE, 2),
    _probe("ldmatrix_x4", _NONE, 4),
    _probe("ldmatrix_x1_trans", _NONE, 1),
    _probe("ldmatrix_x2_trans", _NONE, 2),
    _probe("ldmatrix_x4_trans", _NONE, 4),
    _probe("ldmatrix_x2_generic", _NONE, 2),
    _probe("ldmatrix_x4_trans_generic", _NONE, 4),
    _probe("stmatrix_x1", _regs(1), 1),
    _probe("stmatrix_x2", _regs(2), 1),
    _probe("stmatrix_x4", _regs(4), 1),
    _probe("stmatrix_x1_trans", _regs(1), 1),
    _probe("stmatrix_x2_trans", _regs(2), 1),
    _probe("stmatrix_x4_trans", _regs(4), 1),
    _probe("stmatrix_x4_generic", _regs(4), 1),
    _probe("movmatrix", _regs(1), 1),
    _probe("mma_m16n8k16_f32_f16", _regs(6, np.float16, np.float32, 4), 4),
    _probe("mma_m16n8k16_f32_bf16", _regs(6, BF16, np.float32, 4), 4),
    _probe("mma_m16n8k16_f16_f16", _regs(6, np.float16, np.float16, 2), 2),
    _probe("mma_m16n8k32_s32_s8", _regs(6, np.int8, np.int32, 4), 4),
    _probe("mma_m16n8k32_f32_e4m3", _regs(6, E4M3, np.float32, 4), 4),
    _probe("mma_m16n8k32_f32_e5m2_e4m3", _regs(6, E5M2, np.float32, 4), 4),
    _probe("mma_m16n8k32_f16_e4m3_e5m2", _regs(6, E4M3, np.float16, 2), 2),
    _probe("ldmatrix_mma_stmatrix", _regs(2, np.float16), 2),
]
