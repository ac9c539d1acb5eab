"""How much accuracy each GPU's FP8 tensor-core accumulator costs in P@V, from flashsim.mma:

    python benchmarks/fp8_accumulator_study.py --json benchmarks/logs/DATE/fp8_accumulator_study.json

P@V as SageAttention2 quantizes it: P (softmax rows of scores N(0, 1) x 4, row max 1) times 448 into e4m3; V (N(0,1))
with per-channel scales into e4m3 (max |v| -> 448; 2.25 for f16 accumulation). The quantization here is float64's
(the kernel's pass, flashsim.emulator.quantize, rounds its scales in f32: the study is about the accumulators).
D = P8 @ V8 is then computed the way the tensor cores accumulate it, m16n8k32 step after step over the keys:

* f32 chain: one f32 accumulator through all the keys (d = mma(p, v, d));
* two-level: each tile of 64 keys accumulated by the mma from zero, then added to an f32 O with an IEEE add (what
  SageAttention does to work around short accumulators);
* f16 two-level (SageAttention2++'s f16-accumulate FP8 mma, what quant="int8-fp8" runs with pv_accum="f16x2"): P
  times FP8_P_SCALE and V into FP8_V_RANGE["f16x2"] (2.25) so that a group of FP8_F16_KEYS (64) keys cannot overflow
  f16 (proofs/prove_fp8_f16_range.py), each group from zero in f16, then added in f32.

The error reported is the accumulator's alone: D against the exact (float64) product of the same quantized
P8 and V8, relative L2 over O and the largest relative error of a row's norm; beside it, for scale, the error of
the e4m3 quantization itself (exact P8 @ V8, dequantized, against float64 P @ V). Archs: sm_89 (Ada: blocks of 16, 13
fraction bits kept, f32 results truncated to 13 bits) and sm_120 (RTX Blackwell: one block of 32, 25 bits), both
MMA-Sim's parameters as flashsim.arch holds them; sm_90 (Hopper, no FP8 mma in silicon: ptxas's lowering onto two
f16 m16n8k16 mma's, the low register halves then the high, c added last to nearest), every bit of the H200's
captures (tests/data/mma_k32_sm90.npz and a held-out capture).
"""

from __future__ import annotations

import argparse
import json

import ml_dtypes
import numpy as np

from flashsim.constants import FP8_F16_KEYS, FP8_P_SCALE, FP8_V_RANGE
from flashsim.numerics import ieee32
from flashsim.numerics.tensorcore import mma_k32

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
ROWS, D, TILE = 64, 128, FP8_F16_KEYS  # TILE: keys per accumulation from zero in the two-level modes


def inputs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((ROWS, n)) * 4.0
    p = np.exp(s - s.max(axis=1, keepdims=True))  # softmax numerators, row max 1 (what P@V sees)
    v = rng.standard_normal((n, D))
    return p, v


def quantize(p, v, p_scale: float, v_max: float):
    """(P8, V8, dequantization factor per channel): p * p_scale and v / vs in e4m3, vs = max |v| / v_max."""
    vs = np.abs(v).max(axis=0, keepdims=True) / v_max  # per-channel scales
    return (p * p_scale).astype(E4M3), (v / vs).astype(E4M3), vs / p_scale


def tiles(p8, v8, k0: int, k1: int):
    """(A (R/16 * D/8, 16, k1-k0), B (..., k1-k0, 8)) for every (m16, n8) tile of D over keys k0..k1."""
    a = p8[:, k0:k1].reshape(ROWS // 16, 1, 16, k1 - k0)
    b = v8[k0:k1, :].reshape(k1 - k0, D // 8, 8).transpose(1, 0, 2)[None]
    a = np.broadcast_to(a, (ROWS // 16, D // 8, 16, k1 - k0))
    b = np.broadcast_to(b, (ROWS // 16, D // 8, k1 - k0, 8))
    return a, b


def chain(p8, v8, k0, k1, c, arch):
    """d = c, then d = mma(p[:, k:k+32], v[k:k+32], d) for k = k0, k0 + 32, ... (the kernel's k32 steps)."""
    for k in range(k0, k1, 32):
        a, b = tiles(p8, v8, k, k + 32)
        c = mma_k32(np.ascontiguousarray(a), np.ascontiguousarray(b), c, arch)
    return c


def to_matrix(d):
    return d.transpose(0, 2, 1, 3).reshape(ROWS, D).astype(np.float64)


def run(arch: str, n: int, mode: str, seed: int = 0) -> dict:
    p, v = inputs(n, seed)
    p8, v8, deq = quantize(p, v, FP8_P_SCALE, FP8_V_RANGE["f16x2" if mode == "f16 two-level" else "f32"])
    exact = p8.astype(np.float64) @ v8.astype(np.float64)
    truth = p @ v
    quant = float(np.linalg.norm(exact * deq - truth) / np.linalg.norm(truth))  # quantization alone, for scale
    shape = (ROWS // 16, D // 8, 16, 8)
    if mode == "f32 chain":
        d = to_matrix(chain(p8, v8, 0, n, np.zeros(shape, np.float32), arch))
    else:
        acc = np.zeros(shape, np.float16 if mode == "f16 two-level" else np.float32)
        o = np.zeros(shape, np.float32)
        for k0 in range(0, n, TILE):
            t = chain(p8, v8, k0, min(n, k0 + TILE), np.zeros_like(acc), arch)
            o = ieee32.add(o, t.astype(np.float32) if t.dtype == np.float16 else t)
        d = to_matrix(o)
    err = d - exact
    rel_l2 = float(np.linalg.norm(err) / np.linalg.norm(exact))
    row = float((np.linalg.norm(err, axis=1) / np.linalg.norm(exact, axis=1)).max())
    return dict(arch=arch, n=n, mode=mode, rel_l2=rel_l2, max_row_rel=row, quantization_rel_l2=quant)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--n", type=int, action="append", default=[])
    args = ap.parse_args(argv)
    ns = args.n or [1024, 4096, 16384]
    rows = []
    print(
        f"{'arch':7} {'keys':>6} {'accumulation':15} {'rel. L2 of D':>13} {'worst row':>11} "
        f"{'(e4m3 quantization itself)':>27}"
    )
    for arch in ("sm_89", "sm_90", "sm_120"):
        for n in ns:
            for mode in ("f32 chain", "two-level", "f16 two-level"):
                r = run(arch, n, mode)
                rows.append(r)
                print(
                    f"{arch:7} {n:6d} {mode:15} {r['rel_l2']:13.3e} {r['max_row_rel']:11.3e} "
                    f"{r['quantization_rel_l2']:27.3e}",
                    flush=True,
                )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
