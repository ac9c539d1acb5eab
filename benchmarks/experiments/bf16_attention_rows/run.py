"""A bf16 attention kernel of the public kind (attn_bf16.cu) on the GPU and in flashsim.ptx, output bits compared.

    python run.py --gpu OUT        (device machine: nvcc -O3 -arch=sm_90, cupy) -> OUT/bf16_attention_gpu.npz
    python run.py --compare FILE   (any machine) flashsim.ptx on the same PTX and inputs; prints the mismatches
    python run.py --compare FILE --no-folding    the same with the SFU's model for every instruction (as before
                                   flashsim.numerics.sfu_folding): the defect

The PTX is nvcc 13.0's ``-O3 -arch=sm_90 -ptx`` of attn_bf16.cu on either side (the same compiler, the same text:
its sha256 is stored with the GPU's outputs and checked). Inputs: seeded, one head of N = 512 rows, d = 128, in
three kinds (standard normal; scores spread over a wide range; a few very large keys), so that the row statistics
(max, sum) and the bf16 rounding of O see ordinary and extreme values.
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import subprocess
import sys
import tempfile

import ml_dtypes
import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
N, D = 512, 128
KINDS = ("normal", "wide", "spiky")


def ptx_text() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "attn.ptx"
        subprocess.run(["nvcc", "-O3", "-arch=sm_90", "-ptx", str(HERE / "attn_bf16.cu"), "-o", str(out)], check=True)
        return out.read_text()


def inputs(kind: str):
    rng = np.random.default_rng(KINDS.index(kind) + 20261206)
    q, k, v = (rng.standard_normal((N, D)) for _ in range(3))
    if kind == "wide":
        q *= rng.uniform(0.1, 8.0, (N, 1))
        k *= rng.uniform(0.1, 8.0, (N, 1))
    if kind == "spiky":
        k[rng.choice(N, 8, replace=False)] *= 30.0
    # through float32: ml_dtypes releases differ in how they round float64 straight to bfloat16 (once or twice), and
    # the GPU side's numpy / ml_dtypes are not this machine's; float32 -> bfloat16 rounds to nearest in every release
    return tuple(x.astype(np.float32).astype(ml_dtypes.bfloat16) for x in (q, k, v))


def inputs_sha256(kind: str) -> str:
    return hashlib.sha256(b"".join(x.view(np.uint16).tobytes() for x in inputs(kind))).hexdigest()


def gpu(out_dir: pathlib.Path) -> None:
    import cupy as cp

    text = ptx_text()
    with tempfile.TemporaryDirectory() as tmp:
        cubin = pathlib.Path(tmp) / "attn.cubin"
        subprocess.run(
            ["nvcc", "-O3", "-arch=sm_90", "-cubin", str(HERE / "attn_bf16.cu"), "-o", str(cubin)], check=True
        )
        mod = cp.RawModule(path=str(cubin))
        fn = mod.get_function("attn_bf16")  # loads the module now, while the cubin exists
    saved = {"ptx_sha256": hashlib.sha256(text.encode()).hexdigest()}
    for kind in KINDS:
        saved[f"{kind}_inputs_sha256"] = inputs_sha256(kind)
        q, k, v = (cp.asarray(x.view(np.uint16)) for x in inputs(kind))
        o = cp.zeros((N, D), cp.uint16)
        lse, m, l = (cp.zeros(N, cp.float32) for _ in range(3))
        fn((N // 64,), (128,), (o, lse, q, k, v, np.int32(N), m, l))
        cp.cuda.runtime.deviceSynchronize()
        for name, x in (("o", o), ("lse", lse), ("m", m), ("l", l)):
            saved[f"{kind}_{name}"] = cp.asnumpy(x)
    out_dir.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out_dir / "bf16_attention_gpu.npz", **saved)
    print(f"wrote {out_dir / 'bf16_attention_gpu.npz'}")


def compare(path: pathlib.Path, folding: bool = True) -> int:
    import flashsim.ptx as P

    if not folding:  # the simulator as it was: every SFU instruction on the unit's model, constants or not
        from flashsim.ptx.semantics import special

        special.folded = lambda form, bits: None

    got = np.load(path)
    text = ptx_text()
    if hashlib.sha256(text.encode()).hexdigest() != str(got["ptx_sha256"]):
        sys.exit("the PTX nvcc makes here is not the one the GPU ran (another nvcc?)")
    kernel = P.load(text, arch="sm_90").kernel("attn_bf16")
    bad = 0
    for kind in KINDS:
        if inputs_sha256(kind) != str(got[f"{kind}_inputs_sha256"]):
            sys.exit(f"{kind}: the inputs made here are not the ones the GPU ran")
        q, k, v = (x.view(np.uint16) for x in inputs(kind))
        o = np.zeros((N, D), np.uint16)
        lse, m, l = (np.zeros(N, np.float32) for _ in range(3))
        P.launch(kernel, N // 64, 128, [o, lse, q, k, v, np.int32(N), m, l])
        for name, x in (("o", o), ("lse", lse), ("m", m), ("l", l)):
            unit = np.uint16 if name == "o" else np.uint32
            diff = x.reshape(-1).view(unit) != got[f"{kind}_{name}"].reshape(-1).view(unit)
            rows = np.unique(np.flatnonzero(diff) // (D if name == "o" else 1))
            print(f"{kind:7s} {name:3s}: {int(diff.sum()):6d} of {diff.size} elements differ, in {rows.size} rows")
            bad += int(diff.sum())
    print("bit-equal" if bad == 0 else f"{bad} elements differ")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--gpu", type=pathlib.Path, metavar="OUT")
    g.add_argument("--compare", type=pathlib.Path, metavar="FILE")
    ap.add_argument("--no-folding", action="store_true", help="ignore ptxas's constant folding (the old simulator)")
    a = ap.parse_args()
    sys.exit(gpu(a.gpu) if a.gpu else compare(a.compare, folding=not a.no_folding))
