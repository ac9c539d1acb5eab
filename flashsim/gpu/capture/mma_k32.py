"""Capture mma.sync.m16n8k32 with 8-bit inputs on the GPU at hand (quantized attention's tensor cores):
``python3 -m flashsim.gpu.capture.mma_k32 --out DIR`` writes DIR/mma_k32_<arch>.npz (with the build's provenance).

Types: s32.s8.s8.s32; f32.e4m3.e4m3.f32, f32.e5m2.e5m2.f32, f32.e4m3.e5m2.f32 (mixed), f16.e4m3.e4m3.f16,
f16.e5m2.e5m2.f16 (kernel/capture/mma_k32.cu, fragments loaded with the PTX formulas). Each type runs every category
of ``CATEGORIES`` (MMAS_PER_CATEGORY mmas each, numpy's PCG64 from the stored seed; the inputs are stored too, they
are small). ``analyze`` then says, per type and category, how much of the capture each candidate model reproduces:

* s8: the exact integer dot product plus c, wrapped to 32 bits (what the PTX ISA specifies without .satfinite);
  any mismatch also means the fragment formulas are wrong; and a register-level probe (``REGISTERS``): registers
  packed from the tiles by flashsim.layout's m16n8k32 maps (A8, B8) and D read back through its C map, so the H200
  checks the maps the project uses;
* FP8: MMA-Sim's fused-dot-product family (arXiv:2511.10909, the model flashsim.mma uses for m16n8k16): per block of
  L products and c, every term truncated toward zero to F fraction bits below the largest exponent E, summed
  exactly, rounded once (f32 toward zero; f16 to nearest even), blocks chained through the rounded value: flashsim.mma's
  own FP8 routine with L in {8, 16, 32} and F in 12..28, the k axis in order. It reproduces 80-85% of the H200's
  outputs; the PTX ISA and MMA-Sim give no model of Hopper's mma.sync FP8;
* FP8, flashsim.mma's model of the capture's arch: on sm_90 ptxas's lowering onto the f16 m16n8k16 model (the low
  halves of the 8-bit registers, k % 4 in {0, 1}, from +0, then the high halves, then c added with one rounding to
  nearest; flashsim.arch, _HOPPER_FP8), the same function as the two blocks of 16 in that order first fitted to
  this capture. ``--seed`` other than the stored one makes a held-out capture to check it on.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import pathlib
import sys

import numpy as np

from ... import provenance
from ...arch import get_arch
from ...layout import A8, B8, C_F32, pack8
from ...numerics.tensorcore import E4M3, E5M2, mma_k32
from .mma import CaptureRunner

KERNEL = "capture/mma_k32.cu"
PROVENANCE_NAME = "mma_k32_capture"
MMAS_PER_CATEGORY = 64
DEFAULT_SEED = 20261130

# name -> (kernel, a dtype, b dtype, accumulator dtype)
TYPES = {
    "s32.s8.s8.s32": ("mma_k32_s32_s8_s8_s32", np.dtype(np.int8), np.dtype(np.int8), np.dtype(np.int32)),
    "f32.e4m3.e4m3.f32": ("mma_k32_f32_e4m3_e4m3_f32", E4M3, E4M3, np.dtype(np.float32)),
    "f32.e5m2.e5m2.f32": ("mma_k32_f32_e5m2_e5m2_f32", E5M2, E5M2, np.dtype(np.float32)),
    "f32.e4m3.e5m2.f32": ("mma_k32_f32_e4m3_e5m2_f32", E4M3, E5M2, np.dtype(np.float32)),
    "f16.e4m3.e4m3.f16": ("mma_k32_f16_e4m3_e4m3_f16", E4M3, E4M3, np.dtype(np.float16)),
    "f16.e5m2.e5m2.f16": ("mma_k32_f16_e5m2_e5m2_f16", E5M2, E5M2, np.dtype(np.float16)),
}
CATEGORIES = (
    "normal",
    "raw_bits",
    "single",
    "two_gap",
    "cancel",
    "big_c",
    "subnormal",
    "spread",
    "big_pair",
    "one_big_many_small",
    "scaled",
)


def _finite_codes(dt) -> np.ndarray:
    codes = np.arange(256, dtype=np.uint8)
    return codes[np.isfinite(codes.view(dt).astype(np.float32))]


def _fp8(rng, dt, shape, kind):
    """Random 8-bit float bit patterns of ``kind``: "finite" (any finite code), "moderate" (exponent near 0),
    "raw" (any code: NaN, inf, subnormals), "subnormal" (the exponent field 0)."""
    if kind == "raw":
        return rng.integers(0, 256, shape, dtype=np.uint8)
    codes = _finite_codes(dt)
    if kind == "subnormal":
        mbits = 3 if dt == E4M3 else 2
        codes = codes[((codes >> mbits) & ((1 << (7 - mbits)) - 1)) == 0]
    elif kind == "moderate":
        vals = np.abs(codes.view(dt).astype(np.float32))
        codes = codes[(vals >= 2.0**-3) & (vals <= 8.0)]
    return codes[rng.integers(0, codes.size, shape)]


def _f32_bits(rng, shape, lo=-8, hi=8):
    """Random normal f32 values 2^[lo, hi) with random signs, as bits."""
    v = rng.uniform(1, 2, shape) * 2.0 ** rng.integers(lo, hi, shape) * rng.choice([-1.0, 1.0], shape)
    return v.astype(np.float32).view(np.uint32)


def generate(name: str, category: str, n: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A (n,16,32) uint8, B (n,32,8) uint8, C (n,16,8) accumulator bits) of one type and category."""
    _, adt, bdt, cdt = TYPES[name]
    if adt == np.int8:
        a = rng.integers(0, 256, (n, 16, 32), dtype=np.uint8)
        b = rng.integers(0, 256, (n, 32, 8), dtype=np.uint8)
        if category in ("single", "spread", "subnormal"):
            a[:] = np.where(rng.random(a.shape) < 0.5, 0x80, 0x7F).astype(np.uint8)  # -128 / 127 extremes
        c = rng.integers(-(2**31), 2**31, (n, 16, 8), dtype=np.int64).astype(np.int32).view(np.uint32)
        if category == "big_c":
            c = (np.int64(2**31 - 1) - rng.integers(0, 1000, (n, 16, 8))).astype(np.int32).view(np.uint32)
        return a, b, c
    acc16 = cdt == np.float16
    kind = {"normal": "moderate", "raw_bits": "raw", "subnormal": "subnormal"}.get(category, "finite")
    a, b = _fp8(rng, adt, (n, 16, 32), kind), _fp8(rng, bdt, (n, 32, 8), kind)
    c = _f32_bits(rng, (n, 16, 8), -6, 6)
    if category == "single":  # one product per output element (row i of A, column j of B: k = i+j)
        a = np.where(np.arange(32)[None, None, :] == (np.arange(16)[None, :, None] % 32), a, 0).astype(np.uint8)
        c = np.where(rng.random(c.shape) < 0.5, 0, c).astype(np.uint32)
    elif category == "two_gap":  # two products, the second 2^-gap of the first: the alignment width
        a[:] = 0
        b = _fp8(rng, bdt, (n, 32, 8), "moderate")
        one = np.float32(1.0)
        a[:, :, 0] = np.asarray(one, np.float32).astype(adt).view(np.uint8)
        gaps = rng.integers(0, 40, (n, 16))
        small = (rng.uniform(1, 2, (n, 16)) * 2.0 ** -np.minimum(gaps, 17)).astype(np.float32)
        a[:, :, 1] = small.astype(adt).view(np.uint8)
        c = np.zeros_like(c)
    elif category == "cancel":  # +x and -x in pairs plus small terms: cancellation, sign of zero
        half = a[:, :, :16]
        a[:, :, 16:] = half ^ np.uint8(0x80)
        b[:, 16:, :] = b[:, :16, :]
        c = np.where(rng.random(c.shape) < 0.5, 0, _f32_bits(rng, c.shape, -20, -10)).astype(np.uint32)
    elif category == "big_c":  # c dwarfs the products: how many product bits survive
        c = _f32_bits(rng, c.shape, 8, 20)
    elif category == "spread":  # products spread over a wide exponent range
        a = _fp8(rng, adt, (n, 16, 32), "finite")
        b = _fp8(rng, bdt, (n, 32, 8), "finite")
    elif category in ("big_pair", "one_big_many_small"):
        # product 0 = 2^k (k = 0..8 by row: is the alignment window relative to the largest product, whatever its
        # size?); the others 2^-gap of it (one of them, or all 31), b = 1 in every column, c = 0
        one = np.asarray(np.float32(1.0), np.float32).astype(bdt).view(np.uint8)
        b = np.full((n, 32, 8), one, np.uint8)
        k = np.arange(16) % 9
        big = (2.0**k).astype(np.float32)
        gaps = rng.integers(0, 30, (n, 16, 32))
        small = (big[None, :, None] * rng.uniform(1, 2, (n, 16, 32)) * 2.0**-gaps).astype(np.float32)
        small = np.where(rng.random(small.shape) < 0.5, -small, small)
        a = small.astype(adt).view(np.uint8)
        a[:, :, 0] = np.broadcast_to(big.astype(adt).view(np.uint8)[None, :], (n, 16))
        if category == "big_pair":
            a[:, :, 2:] = 0
        c = np.zeros_like(c)
    elif category == "scaled":  # full-range random inputs (as "spread") with a scaled by 2^s, s = 0..8
        # by row (e4m3 values past 448 become NaN): the misses do not depend on s (26-29% of the finite outputs
        # in rows with s = 0 and s = 1 alike), so they are not a matter of magnitude
        vals = a.view(adt).astype(np.float32) * (2.0 ** (np.arange(16) % 9))[None, :, None]
        a = vals.astype(adt).view(np.uint8)
        c = np.zeros_like(c)
    if acc16:
        cv = c.view(np.float32)
        with np.errstate(over="ignore"):
            c = np.clip(cv, -60000, 60000).astype(np.float16).view(np.uint16)
    return a, b, c


REGISTERS = "regs|s32.s8.s8.s32"  # the register-level probe of flashsim.layout's m16n8k32 maps
REGISTER_KERNEL = "mma_k32_regs_s32_s8_s8_s32"


def layout_registers(a, b, c):
    """(RA (n,32,4), RB (n,32,2), RC (n,32,4)) uint32: int8 tiles a (n,16,32), b (n,32,8) and the int32 c (n,16,8)
    packed into fragment registers by flashsim.layout's maps (A8, B8, C_F32)."""

    return pack8(A8.gather(a)), pack8(B8.gather(b)), C_F32.gather(c.view(np.uint32))


def registers_to_tile(rd):
    """D registers (n,32,4) -> the (n,16,8) tile by flashsim.layout's C map."""

    return C_F32.scatter(rd)


class GpuRunner(CaptureRunner):
    """The m16n8k32 capture kernels (kernel/capture/mma_k32.cu), one per type: ``runner(name, a, b, c)`` -> D;
    ``runner(REGISTERS, ra, rb, rc)`` -> D's registers."""

    def __init__(self):
        names = {name: t[0] for name, t in TYPES.items()}
        super().__init__(KERNEL, PROVENANCE_NAME, {**names, REGISTERS: REGISTER_KERNEL})

    def __call__(self, name, a, b, c):
        return self.run(name, a, b, c)


def capture(runner, seed: int = DEFAULT_SEED, n: int = MMAS_PER_CATEGORY) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for name in TYPES:
        for cat in CATEGORIES:
            a, b, c = generate(name, cat, n, rng)
            out[f"{name}|{cat}"] = (a, b, c, runner(name, a, b, c))
    a, b, c = generate("s32.s8.s8.s32", "raw_bits", n, rng)  # the layout probe: registers by flashsim.layout
    out[REGISTERS] = (a, b, c, runner(REGISTERS, *layout_registers(a.view(np.int8), b.view(np.int8), c)))
    return out


def save(path, data: dict, meta: dict) -> None:
    arrays = {}
    for key, (a, b, c, d) in data.items():
        k = key.replace("|", "__").replace(".", "_")
        arrays.update({f"{k}__a": a, f"{k}__b": b, f"{k}__c": c, f"{k}__d": d})
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in arrays.values())).hexdigest()
    meta = dict(meta, keys=list(data), sha256=digest)
    np.savez_compressed(path, meta=json.dumps(meta), provenance=json.dumps(meta.get("provenance")), **arrays)


def load(path) -> tuple[dict, dict]:
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
        data = {}
        for key in meta["keys"]:
            k = key.replace("|", "__").replace(".", "_")
            data[key] = tuple(z[f"{k}__{x}"] for x in "abcd")
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for v in data.values() for x in v)).hexdigest()
    if digest != meta["sha256"]:
        raise ValueError(f"{path}: the stored arrays do not hash as recorded")
    return data, meta


# --------------------------------------------------------------------------------- models


def int8_reference(a, b, c) -> np.ndarray:
    """s32 = wrap32(sum a b + c) over the 32 products: flashsim.mma's s8 model (``mma_k32``) on the stored bits."""
    return mma_k32(a.view(np.int8), b.view(np.int8), c.view(np.int32)).view(np.uint32)


def _fp8_arch(L: int, F: int):
    """sm_120's arch record with FP8 blocks of L products and F fraction bits (f32 results kept to 23 bits)."""
    return dataclasses.replace(get_arch("sm_120"), mma8_block_k=L, mma8_fraction_bits=F, mma8_f32_result_frac_bits=23)


def fdpa_family(a, b, c, adt, bdt, cdt, L: int, F: int) -> np.ndarray:
    """MMA-Sim's fused dot product with blocks of L products and F fraction bits (c inside each block, f32 results
    toward zero, f16 to nearest even): flashsim.mma's FP8 routine with those two parameters. Returns d's bits."""
    d = mma_k32(a.view(adt), b.view(bdt), c.view(cdt), _fp8_arch(L, F))
    return d.view(np.uint16 if cdt == np.float16 else np.uint32)


def analyze(data: dict, arch: str = "sm_90") -> dict:
    """Per type: s8 exactness; FP8: the mismatches of flashsim.mma's model for the capture's arch per category (sm_90:
    the lowering onto the f16 mma; flashsim.arch), and for comparison the best of MMA-Sim's single-order family."""
    report = {}
    for name, (_kernel, adt, bdt, cdt) in TYPES.items():
        keys = [k for k in data if k.startswith(name + "|")]
        if adt == np.int8:
            bad = {k.split("|")[1]: int(np.count_nonzero(int8_reference(*data[k][:3]) != data[k][3])) for k in keys}
            if REGISTERS in data:  # registers packed and read by flashsim.layout's maps
                a, b, c, rd = data[REGISTERS]
                bad["registers by flashsim.layout"] = int(
                    np.count_nonzero(registers_to_tile(rd) != int8_reference(a, b, c))
                )
            report[name] = dict(
                model="exact integer, wrapped to 32 bits",
                mismatches=bad,
                outputs=int(sum(data[k][3].size for k in keys)),
            )
            continue
        grid = []
        for L, F in itertools.product((8, 16, 32), range(12, 29)):
            per = {}
            for k in keys:
                a, b, c, d = data[k]
                per[k.split("|")[1]] = float(np.mean(fdpa_family(a, b, c, adt, bdt, cdt, L, F) == d))
            grid.append(dict(L=L, F=F, overall=float(np.mean(list(per.values()))), per_category=per))
        grid.sort(key=lambda r: -r["overall"])
        model = {}
        for k in keys:
            a, b, c, d = data[k]
            with np.errstate(all="ignore"):
                out = mma_k32(a.view(adt), b.view(bdt), c.view(cdt), arch)
            model[k.split("|")[1]] = int(np.count_nonzero(out.view(d.dtype) != d))
        report[name] = dict(
            model="MMA-Sim fused-dot-product family (k in order)",
            best=grid[:5],
            flashsim_model=dict(arch=arch, mismatches=model),
            outputs=int(sum(data[k][3].size for k in keys)),
        )
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=".", help="folder for mma_k32_<arch>.npz and its analysis JSON")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED)
    p.add_argument("--analyze", metavar="FILE.npz", help="analyse an existing capture instead (no GPU)")
    args = p.parse_args(argv)
    out = pathlib.Path(args.out)
    if args.analyze:
        data, meta = load(args.analyze)
        arch = meta["arch"]
    else:
        runner = GpuRunner()
        data = capture(runner, args.seed)
        arch = runner.arch
        meta = dict(
            arch=arch,
            seed=args.seed,
            mmas_per_category=MMAS_PER_CATEGORY,
            categories=list(CATEGORIES),
            provenance=provenance.fingerprint(PROVENANCE_NAME),
        )
        save(out / f"mma_k32_{arch.replace('_', '')}.npz", data, meta)
    report = analyze(data, arch)
    with open(out / f"mma_k32_{arch.replace('_', '')}_analysis.json", "w") as f:
        json.dump(report, f, indent=1)
    for name, r in report.items():
        if "mismatches" in r:
            print(f"{name}: {r['model']}: {sum(r['mismatches'].values())} of {r['outputs']} outputs differ")
        else:
            b = r["best"][0]
            print(
                f"{name}: best of the family L={b['L']} F={b['F']}: {b['overall']:.1%} of "
                f"{r['outputs']} outputs; by category "
                + ", ".join(f"{k} {v:.0%}" for k, v in b["per_category"].items())
            )
            m = r["flashsim_model"]
            print(
                f"    flashsim.mma {m['arch']} model: {sum(m['mismatches'].values())} of {r['outputs']} outputs differ"
                + "".join(f", {k} {v}" for k, v in m["mismatches"].items() if v)
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
