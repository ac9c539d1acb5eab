"""Accuracy of the NVFP4 attention (quant "nvfp4", emulated bit for bit by the numpy engine on arch "sm_120") against
float64 attention of the same f16 inputs, beside the f16 kernel (f32 P@V) and the INT8 / FP8 one ("int8-fp8").

    python benchmarks/experiments/nvfp4_attention/accuracy.py [--n 1024] [--heads 2] > log.txt

Metrics over the whole output O (B, H, N, d), each against the float64 reference: cosine similarity, relative L1
(sum |O - ref| / sum |ref|), RMSE, max |O - ref|; and max |LSE - ref|. Inputs (seeded): "normal" q, k, v ~ N(0, 1);
"peaked" q ~ N(0, 3^2) (sharper rows, as trained models' attention); "k-mean" K plus a per-channel offset ~ N(0, 4^2)
(what the smoothing of K removes); "channel outliers" two channels of Q and K times 10; "token outliers" 1% of the
keys times 10 (spiky tokens in some 16-row blocks). No GPU: the kernel's bits are the emulator's (the kernel's own
PTX is held to them in tests/test_nvfp4.py); the SFU tables are the sm_90 ones (no sm_120 calibration here), whose
effect on these metrics is far below the quantization's.

Beside them, "fp4 ideal": float64 attention of Q and K fake-quantized to e2m1 per 16 elements along d with exact
(unrounded) scales amax / 6, nearest e2m1 value, V exact: the accuracy any FP4 Q K^T with 1 x 16 blocks reaches on
these inputs, before the scales' e4m3 rounding and FP8 P V. The kernel's distance to it is what the recipe adds.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from flashsim import emulator
from flashsim.calibration import CalibrationWarning

KERNELS = (("f16 (f32 P@V)", "none"), ("int8-fp8", "int8-fp8"), ("nvfp4", "nvfp4"))


def make(kind: str, rng, b: int, h: int, n: int, d: int):
    q, k, v = (rng.standard_normal((b, h, n, d)) for _ in range(3))
    if kind == "peaked":
        q = q * 3.0
    elif kind == "k-mean":
        k = k + rng.standard_normal((b, h, 1, d)) * 4.0
    elif kind == "channel outliers":
        ch = rng.choice(d, 2, replace=False)
        q[..., ch] *= 10.0
        k[..., ch] *= 10.0
    elif kind == "token outliers":
        tok = rng.random((b, h, n, 1)) < 0.01
        k = np.where(tok, k * 10.0, k)
    return (x.astype(np.float16) for x in (q, k, v))


E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def fp4_ideal(x):
    """x (..., d) -> float64 values of e2m1 per 16 elements along d, scale amax / 6 exact, nearest value."""
    x = x.astype(np.float64)
    blocks = x.reshape(x.shape[:-1] + (-1, 16))
    scale = np.abs(blocks).max(-1, keepdims=True) / 6.0
    y = np.abs(blocks) / np.where(scale > 0, scale, 1.0)
    nearest = E2M1_VALUES[np.abs(y[..., None] - E2M1_VALUES).argmin(-1)]
    return (np.sign(blocks) * nearest * scale).reshape(x.shape)


def reference(q, k, v):
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    s = q64 @ np.swapaxes(k64, -1, -2) / np.sqrt(q.shape[-1])
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    l = p.sum(-1, keepdims=True)
    return p @ v64 / l, (m + np.log(l))[..., 0]


def metrics(o, lse, ref, ref_lse):
    o = o.astype(np.float64)
    e = o - ref
    return {
        "cos": float((o * ref).sum() / (np.linalg.norm(o) * np.linalg.norm(ref))),
        "rel L1": float(np.abs(e).sum() / np.abs(ref).sum()),
        "RMSE": float(np.sqrt((e**2).mean())),
        "max |err|": float(np.abs(e).max()),
        "LSE max |err|": float(np.abs(lse - ref_lse).max()),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1024, help="query and key count N (default 1024)")
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", CalibrationWarning)
    kinds = ("normal", "peaked", "k-mean", "channel outliers", "token outliers")
    print(f"B=1, H={args.heads}, N={args.n}, f16 inputs, arch sm_120 (emulated), seed {args.seed}")
    print(f"{'d':>4} {'inputs':18} {'kernel':14} {'cos':>10} {'rel L1':>8} {'RMSE':>9} {'max |err|':>9} {'LSE err':>8}")
    for d in (64, 128):
        for kind in kinds:
            q, k, v = make(kind, np.random.default_rng(args.seed), 1, args.heads, args.n, d)
            ref, ref_lse = reference(q, k, v)
            q64, k64 = q.astype(np.float64), k.astype(np.float64)
            mean = k64.mean(-2, keepdims=True)  # K smoothed as the kernel's pass does; the LSE gets q . mean back
            ideal, ideal_lse = reference(fp4_ideal(q64), fp4_ideal(k64 - mean), v)
            ideal_lse = ideal_lse + (q64 @ np.swapaxes(mean, -1, -2))[..., 0] / np.sqrt(d)
            m = metrics(ideal, ideal_lse, ref, ref_lse)
            print(
                f"{d:>4} {kind:18} {'fp4 ideal':14} {m['cos']:10.6f} {m['rel L1']:8.4f} {m['RMSE']:9.2e} "
                f"{m['max |err|']:9.2e} {m['LSE max |err|']:8.1e}"
            )
            for label, quant in KERNELS:
                t = time.perf_counter()
                o, lse = emulator.attention(q, k, v, arch="sm_120", quant=quant)[:2]
                m = metrics(o, lse, ref, ref_lse)
                print(
                    f"{d:>4} {kind:18} {label:14} {m['cos']:10.6f} {m['rel L1']:8.4f} {m['RMSE']:9.2e} "
                    f"{m['max |err|']:9.2e} {m['LSE max |err|']:8.1e}   ({time.perf_counter() - t:.1f} s)",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
