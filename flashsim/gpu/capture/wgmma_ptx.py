"""wgmma's shared-memory descriptors and register fragments on silicon: hand-written PTX GEMM tiles, run on the GPU
and stored, so that tests/test_ptx_wgmma.py replays each one in flashsim.ptx and compares the bits.

``python3 -m flashsim.gpu.capture.wgmma_ptx --out DIR`` (an sm_90 GPU: H100 / H200; about 20 s) writes
DIR/wgmma_ptx_sm90.npz; commit it as tests/data/ptx_isa/wgmma_ptx_sm90.npz.

Each case (``CASES``) is one kernel (``ptx_of``): every block of 128 threads (one warpgroup) copies its shared-memory
image from global memory (ld / st.shared or cp.async), fences it for the async proxy, builds its matrix descriptors
in PTX from the shared address of the image, loads its accumulators (and, for A from registers, its A fragments)
from global memory, runs ``chain`` wgmma.mma_async in each of ``groups`` commit groups (a second accumulator set in
the second group, waited for with wait_group 1 then 0), and stores the accumulators. The image is not laid out for
any particular layout: it is a typed array of random values, so that the GPU itself says which element each
descriptor field selects (swizzle modes, K- and MN-major, LBO / SBO values, base offsets, chunk steps of the
start address). ``inputs(case)`` makes the arrays from the case's seed (small integers by default, so that every
result is exact and a mismatch is a layout mismatch; ``values="normal"`` exercises the arithmetic too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time
from dataclasses import asdict, dataclass

import ml_dtypes
import numpy as np

__all__ = ["Case", "CASES", "ptx_of", "inputs", "descriptors", "simulate", "capture", "CAPTURE"]

CAPTURE = pathlib.Path(__file__).resolve().parents[3] / "tests" / "data" / "ptx_isa" / "wgmma_ptx_sm90.npz"

_DTYPE = {
    "f16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "tf32": np.float32,
    "e4m3": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "s8": np.int8,
    "u8": np.uint8,
    "f32": np.float32,
    "s32": np.int32,
}
_K = {"f16": 16, "bf16": 16, "tf32": 8, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32}
_SWIZZLE_CODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}
_SPAN = {"none": 16, "32B": 32, "64B": 64, "128B": 128}


@dataclass(frozen=True)
class Case:
    """One kernel: types, N, where A comes from, major-ness, swizzles, the base-offset field (the operand then
    starts 128 * base bytes into its pattern), ``k_outer``: for K-major operands, each K block in its own atom
    column (another SBO / LBO arrangement), wgmmas per group, groups (``one_acc``: every group accumulates into the
    first accumulator set, each issued while the previous one is in flight, then wait_group N-1 .. 0), scale-d (1,
    0 or "pred": false in block 0, true in block 1), the +-1 scales, .satfinite, blocks, the copy instruction and
    the value distribution."""

    name: str
    atype: str = "f16"
    btype: str = "f16"
    dtype: str = "f32"
    n: int = 64
    a_regs: bool = False
    trans_a: int = 0
    trans_b: int = 0
    swizzle_a: str = "128B"
    swizzle_b: str = "128B"
    base_a: int = 0
    base_b: int = 0
    k_outer: bool = False
    chain: int = 1
    groups: int = 1
    one_acc: bool = False
    scale_d: object = 1
    scale_a: int = 1
    scale_b: int = 1
    satfinite: bool = False
    blocks: int = 1
    copy: str = "ld"
    values: str = "small"
    seed: int = 0

    @property
    def k(self) -> int:
        return _K[self.atype]


CASES = (
    # every swizzle mode, K-major, f16 -> f32, N 8 / 64 / 256
    *(Case(f"f16_k_{sw}_n{n}", swizzle_a=sw, swizzle_b=sw, n=n) for sw in _SPAN for n in (8, 64, 256)),
    # MN-major (transposed) A and B in every mode
    *(Case(f"f16_mn_{sw}", swizzle_a=sw, swizzle_b=sw, trans_a=1, trans_b=1, n=64, chain=2) for sw in _SPAN),
    Case("bf16_ta_tb0_32B_64B", "bf16", "bf16", trans_a=1, swizzle_a="32B", swizzle_b="64B", n=128, chain=2),
    Case("bf16_tb_none_128B", "bf16", "bf16", trans_b=1, swizzle_a="none", swizzle_b="128B", n=256),
    # chained wgmmas, K steps inside one atom row and across atom columns
    Case("f16_chain4_128B", chain=4, n=64),
    Case("f16_chain4_32B_outer", chain=4, swizzle_a="32B", swizzle_b="32B", n=64, k_outer=True),
    Case("f16_chain2_none_outer", chain=2, swizzle_a="none", swizzle_b="none", n=16, k_outer=True),
    # base offsets: the operand's pattern starts 128 * base past a repeat boundary
    *(
        Case(f"f16_base{b}_{sw}", swizzle_a=sw, swizzle_b=sw, base_a=b, base_b=(b + 1) % 8, n=32)
        for b, sw in ((1, "128B"), (3, "128B"), (5, "128B"), (1, "64B"), (2, "64B"), (1, "32B"))
    ),
    # f16 accumulators, scale-d, negation, two groups in flight
    Case("f16_f16acc_groups2", dtype="f16", n=64, groups=2, chain=2),
    Case("f16_one_acc_groups3", n=64, groups=3, chain=2, one_acc=True),
    Case("f16_scaled0", scale_d=0, n=64),
    Case("f16_scaled_pred", scale_d="pred", n=64, blocks=2),
    Case("f16_neg", scale_a=-1, scale_b=-1, n=32, values="normal"),
    Case("bf16_normal_cpasync", "bf16", "bf16", n=128, chain=2, copy="cp.async", values="normal"),
    # A from registers
    Case("f16_regs_n64", a_regs=True, n=64, chain=2),
    Case("bf16_regs_tb", "bf16", "bf16", a_regs=True, trans_b=1, n=64, swizzle_b="64B"),
    Case("tf32_regs_n32", "tf32", "tf32", a_regs=True, n=32),
    Case("e4m3_regs_n64", "e4m3", "e4m3", a_regs=True, n=64),
    Case("s8_regs_n48", "s8", "s8", "s32", a_regs=True, n=48),
    # tf32, FP8, integer from shared memory
    *(Case(f"tf32_{sw}_n64", "tf32", "tf32", swizzle_a=sw, swizzle_b=sw, n=64, chain=2) for sw in _SPAN),
    *(Case(f"e4m3_{sw}_n64", "e4m3", "e4m3", swizzle_a=sw, swizzle_b=sw, n=64, chain=2) for sw in _SPAN),
    Case("e4m3_e5m2_f16acc", "e4m3", "e5m2", "f16", n=256),
    Case("e5m2_normal", "e5m2", "e4m3", n=64, values="normal", chain=2),
    *(Case(f"s8_{sw}_n64", "s8", "s8", "s32", swizzle_a=sw, swizzle_b=sw, n=64, chain=2) for sw in _SPAN),
    Case("u8_s8_satfinite", "u8", "s8", "s32", n=32, satfinite=True, values="normal"),
    Case("s8_u8_n224", "s8", "u8", "s32", n=224),
    Case("f16_blocks3", n=64, blocks=3, chain=2),
)


# -- the layouts: strides and starts of each descriptor ---------------------------------------------------------


def _operand_layout(rows: int, k: int, bits: int, mn_major: bool, mode: str, chain: int, outer: bool):
    """(lbo, sbo, [start offset of each of the chain's K blocks], bytes) of a compact canonical layout of a rows x
    (chain * k) operand (rows = M or N)."""
    span = _SPAN[mode]
    kbytes = k * bits // 8  # one wgmma's K in bytes (32), K-major
    if not mn_major:
        if mode == "none":  # core matrices of 8 rows x 16 bytes; 2 chunks of K per wgmma
            groups = rows // 8
            if outer:  # the K chunks of a wgmma far apart (LBO), the 8-row groups adjacent
                sbo, lbo = 128, 128 * groups
            else:  # each 8-row group's K chunks adjacent
                lbo, sbo = 128, 128 * 2 * chain
            starts = [2 * j * lbo for j in range(chain)]
            return lbo, sbo, starts, rows * chain * kbytes
        per_row = span // kbytes  # wgmmas side by side in one atom row (K-major, swizzled: LBO unused)
        atom_col = rows * span
        if outer:  # each wgmma's K block in its own atom column
            return 16, 8 * span, [j * atom_col for j in range(chain)], chain * atom_col
        starts = [(j // per_row) * atom_col + (j % per_row) * kbytes for j in range(chain)]
        return 16, 8 * span, starts, -(-chain // per_row) * atom_col
    # MN-major (16-bit types): K in groups of 8 rows, 2 per wgmma
    kgroups = 2 * chain
    if mode == "none":  # core matrices of 8 MN elements x 8 K rows (128 bytes)
        mn_groups = rows // 8
        sbo, lbo = 128, 128 * mn_groups  # MN step, K step
        return lbo, sbo, [2 * j * lbo for j in range(chain)], kgroups * lbo
    atoms = max(rows * bits // 8 // span, 1)  # atoms along MN (a narrow operand uses part of one)
    sbo = 8 * span  # K step: the 8-row groups adjacent
    lbo = kgroups * 8 * span  # MN step between atoms
    return lbo, sbo, [2 * j * sbo for j in range(chain)], atoms * lbo


def descriptors(case: Case) -> dict:
    """The layout of each operand: {"a": ..., "b": ...} each with lbo, sbo, base, swizzle, mn_major, type,
    extents[g] (the bytes of group g's operand in the image) and starts[g][j] (the shared-memory byte offset of the
    operand of wgmma j of group g); "smem" the image's bytes."""
    out = {}
    offset = 0
    for name, rows, bits, mn_major, mode, base, typ in (
        ("a", 64, _bits(case.atype), bool(case.trans_a), case.swizzle_a, case.base_a, case.atype),
        ("b", case.n, _bits(case.btype), bool(case.trans_b), case.swizzle_b, case.base_b, case.btype),
    ):
        if name == "a" and case.a_regs:
            continue
        base = base if mode != "none" else 0
        lbo, sbo, starts, size = _operand_layout(rows, case.k, bits, mn_major, mode, case.chain, case.k_outer)
        starts_g, extents = [], []
        for _g in range(case.groups):
            starts_g.append([offset + 128 * base + s for s in starts])
            end = offset + -(-(size + 128 * base + 1024) // 1024) * 1024
            extents.append((offset, end))
            offset = end
        out[name] = dict(
            lbo=lbo, sbo=sbo, base=base, swizzle=mode, mn_major=mn_major, starts=starts_g, extents=extents, type=typ
        )
    out["smem"] = max(-(-offset // 2048) * 2048, 2048)
    return out


def _bits(t: str) -> int:
    return np.dtype(_DTYPE[t]).itemsize * 8


def _desc_high(lbo: int, sbo: int, base: int, mode: str) -> int:
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | (base & 7) << 49 | _SWIZZLE_CODE[mode] << 62


# -- the inputs -------------------------------------------------------------------------------------------------


def _values(rng, dtype, shape, values: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        if values == "small":
            return rng.integers(max(info.min, -3), min(info.max, 3) + 1, shape).astype(dt)
        return rng.integers(info.min, info.max + 1, shape).astype(dt)
    if values == "small":
        return rng.integers(-3, 4, shape).astype(np.float32).astype(dt)
    return rng.standard_normal(shape).astype(np.float32).astype(dt)


def inputs(case: Case) -> dict:
    """The launch's arrays: img (blocks, smem) uint8, afrag (blocks * 128, 4 * chain * groups) uint32, c and d
    (blocks * 128, accumulator registers * groups) uint32 (d zero)."""
    rng = np.random.default_rng(case.seed + 7919 * CASES_INDEX.get(case.name, 0))
    lay = descriptors(case)
    smem = lay["smem"]
    img = np.zeros((case.blocks, smem), np.uint8)
    for name in ("a", "b"):
        if name not in lay:
            continue
        dt = np.dtype(_DTYPE[lay[name]["type"]])
        for lo, hi in lay[name]["extents"]:
            img[:, lo:hi] = _values(rng, dt, (case.blocks, (hi - lo) // dt.itemsize), case.values).view(np.uint8)
    T = case.blocks * 128
    adt = np.dtype(_DTYPE[case.atype])
    per = 4 * 4 // adt.itemsize  # elements in 4 registers
    afrag = _values(rng, adt, (T, case.chain * case.groups * per), case.values).view(np.uint32)
    ddt = np.dtype(_DTYPE[case.dtype])
    nd = _n_acc(case)
    if case.values == "small" or ddt.kind == "i":
        c_vals = _values(rng, ddt, (T, case.groups * nd * 4 // ddt.itemsize), "small")
    else:
        c_vals = _values(rng, ddt, (T, case.groups * nd * 4 // ddt.itemsize), "normal")
    c = np.ascontiguousarray(c_vals).view(np.uint32).reshape(T, case.groups * nd)
    return {"img": img, "afrag": np.ascontiguousarray(afrag), "c": c, "d": np.zeros_like(c)}


def _n_acc(case: Case) -> int:
    return case.n // 4 if case.dtype == "f16" else case.n // 2


# -- the PTX ----------------------------------------------------------------------------------------------------


def ptx_of(case: Case) -> str:
    """The kernel of ``case`` (entry ``wgmma_probe``), PTX ISA 8.4 for sm_90a."""
    lay = descriptors(case)
    smem = lay["smem"]
    nd = _n_acc(case)
    acc_t = {"f32": ".f32", "f16": ".b32", "s32": ".s32"}[case.dtype]
    na = 4 * case.chain * case.groups
    lines = [
        ".version 8.4",
        ".target sm_90a",
        ".address_size 64",
        "",
        ".visible .entry wgmma_probe(.param .u64 p_img, .param .u64 p_afrag, .param .u64 p_c, .param .u64 p_d)",
        "{",
        "  .reg .b32 %r<16>;",
        "  .reg .b64 %rd<16>;",
        "  .reg .pred %p<4>;",
        f"  .reg .b32 %a<{na}>;",
        f"  .reg {acc_t} %acc<{nd * case.groups}>;",
        f"  .reg .b64 %da<{case.chain * case.groups}>;",
        f"  .reg .b64 %db<{case.chain * case.groups}>;",
        f"  .shared .align 1024 .b8 smem[{smem}];",
        "  mov.u32 %r0, %tid.x;",
        "  mov.u32 %r1, %ctaid.x;",
        "  ld.param.u64 %rd0, [p_img];",
        "  cvta.to.global.u64 %rd0, %rd0;",
        f"  mul.wide.u32 %rd1, %r1, {smem};",
        "  add.u64 %rd0, %rd0, %rd1;",
        "  mov.u32 %r2, smem;",
        "  shl.b32 %r3, %r0, 4;",
        "COPY:",
        f"  setp.ge.u32 %p0, %r3, {smem};",
        "  @%p0 bra DONE;",
        "  cvt.u64.u32 %rd2, %r3;",
        "  add.u64 %rd3, %rd0, %rd2;",
        "  add.u32 %r4, %r2, %r3;",
    ]
    if case.copy == "cp.async":
        lines += ["  cp.async.cg.shared.global [%r4], [%rd3], 16;"]
    else:
        lines += ["  ld.global.v4.u32 {%r5, %r6, %r7, %r8}, [%rd3];", "  st.shared.v4.u32 [%r4], {%r5, %r6, %r7, %r8};"]
    lines += ["  add.u32 %r3, %r3, 2048;", "  bra COPY;", "DONE:"]
    if case.copy == "cp.async":
        lines += ["  cp.async.commit_group;", "  cp.async.wait_group 0;"]
    lines += [
        "  fence.proxy.async;",
        "  bar.sync 0;",
        "  mad.lo.u32 %r9, %r1, 128, %r0;",
        "  ld.param.u64 %rd4, [p_c];",
        "  cvta.to.global.u64 %rd4, %rd4;",
        f"  mul.wide.u32 %rd5, %r9, {4 * nd * case.groups};",
        "  add.u64 %rd4, %rd4, %rd5;",
        *(f"  ld.global.b32 %acc{i}, [%rd4+{4 * i}];" for i in range(nd * case.groups)),
        "  ld.param.u64 %rd6, [p_afrag];",
        "  cvta.to.global.u64 %rd6, %rd6;",
        f"  mul.wide.u32 %rd7, %r9, {4 * na};",
        "  add.u64 %rd6, %rd6, %rd7;",
    ]
    if case.a_regs:
        lines += [f"  ld.global.b32 %a{i}, [%rd6+{4 * i}];" for i in range(na)]
    lines += ["  cvt.u64.u32 %rd8, %r2;"]
    for name, reg in (("a", "%da"), ("b", "%db")):
        if name not in lay:
            continue
        L = lay[name]
        high = _desc_high(L["lbo"], L["sbo"], L["base"], L["swizzle"])
        for g in range(case.groups):
            for j, start in enumerate(L["starts"][g]):
                r = f"{reg}{g * case.chain + j}"
                lines += [
                    f"  add.u64 {r}, %rd8, {start};",
                    f"  shr.u64 {r}, {r}, 4;",
                    f"  and.b64 {r}, {r}, 16383;",
                    f"  or.b64 {r}, {r}, {high};",
                ]
    if case.scale_d == "pred":
        lines += ["  setp.ne.u32 %p1, %r1, 0;"]
        sd = "%p1"
    else:
        sd = str(int(case.scale_d))
    lines += ["  wgmma.fence.sync.aligned;"]
    integer = case.atype in ("s8", "u8")
    sat = ".satfinite" if case.satfinite else ""
    for g in range(case.groups):
        accs = ", ".join(f"%acc{(0 if case.one_acc else g) * nd + i}" for i in range(nd))
        for j in range(case.chain):
            w = g * case.chain + j
            a = "{" + ", ".join(f"%a{4 * w + i}" for i in range(4)) + "}" if case.a_regs else f"%da{w}"
            tail = [sd]
            if not integer:
                tail += [str(case.scale_a), str(case.scale_b)]
                if case.atype in ("f16", "bf16"):
                    tail += ([] if case.a_regs else [str(case.trans_a)]) + [str(case.trans_b)]
            lines += [
                f"  wgmma.mma_async.sync.aligned.m64n{case.n}k{case.k}{sat}.{case.dtype}.{case.atype}.{case.btype} "
                f"{{{accs}}}, {a}, %db{w}, {', '.join(tail)};"
            ]
        lines += ["  wgmma.commit_group.sync.aligned;"]
    lines += [
        "  ld.param.u64 %rd10, [p_d];",
        "  cvta.to.global.u64 %rd10, %rd10;",
        "  add.u64 %rd10, %rd10, %rd5;",
    ]
    for g in range(case.groups):
        lines += [f"  wgmma.wait_group.sync.aligned {case.groups - 1 - g};"]
        stored = (
            range(g * nd, (g + 1) * nd) if not case.one_acc else range(nd * case.groups) if g == case.groups - 1 else ()
        )
        lines += [f"  st.global.b32 [%rd10+{4 * i}], %acc{i};" for i in stored]
    lines += ["  ret;", "}", ""]
    return "\n".join(lines)


CASES_INDEX = {c.name: i for i, c in enumerate(CASES)}


def simulate(case: Case, arrays: dict | None = None, check=None) -> np.ndarray:
    """Run ``case`` in flashsim.ptx on ``arrays`` (default: ``inputs(case)``); the d words it stores."""
    from ...ptx import load
    from ...ptx.launch import launch

    arrays = inputs(case) if arrays is None else {k: np.array(v) for k, v in arrays.items()}
    kernel = load(ptx_of(case), arch="sm_90").kernel("wgmma_probe")
    d = np.zeros_like(arrays["c"])
    launch(kernel, (case.blocks, 1, 1), (128, 1, 1), [arrays["img"], arrays["afrag"], arrays["c"], d], check=check)
    return d


# -- the capture ------------------------------------------------------------------------------------------------


def capture(out: pathlib.Path) -> int:
    """Run every case on the GPU; write out/wgmma_ptx_sm90.npz (inputs and outputs per case, meta); the number of
    cases that failed."""
    from .. import runtime as rt
    from ..build import Build, assemble_ptx, ptxas_version

    dev = rt.require_gpu()
    arch = rt.current_arch()
    arrays, meta, failed = {}, {"arch": arch, "gpu": dev.name, "ptxas": ptxas_version(), "cases": {}}, 0
    meta["date"] = time.strftime("%Y-%m-%d")
    for case in CASES:
        ptx = ptx_of(case)
        try:
            cubin = assemble_ptx(ptx, "sm_90a")
            build = Build.of_cubin(cubin, "sm_90a", case.name)
            kernel = rt.load(build, "wgmma_probe")
            host = inputs(case)
            dev_args = [rt.to_device(host[k]) for k in ("img", "afrag", "c", "d")]
            rt.launch(kernel, (case.blocks, 1, 1), (128, 1, 1), *dev_args)
            d = dev_args[3].to_numpy()
        except Exception as exc:  # a compile error is recorded; a launch error ends the run (the context is gone)
            print(f"  {case.name}: FAILED {type(exc).__name__}: {exc}", flush=True)
            meta.setdefault("failed", {})[case.name] = f"{type(exc).__name__}: {exc}"
            failed += 1
            if rt.sticky_error():
                break
            continue
        for k, v in host.items():
            if k != "d":
                arrays[f"{case.name}/{k}"] = v
        arrays[f"{case.name}/d"] = d
        meta["cases"][case.name] = {"case": asdict(case), "ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest()}
        print(f"  {case.name}: ok", flush=True)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "wgmma_ptx_sm90.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    print(f"{len(meta['cases'])} cases -> {path}", flush=True)
    return failed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flashsim.gpu.capture.wgmma_ptx", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for wgmma_ptx_sm90.npz (needs a GPU)")
    ap.add_argument("--ptx", type=pathlib.Path, help="also write every case's PTX to this folder")
    args = ap.parse_args(argv)
    if args.ptx is not None:
        args.ptx.mkdir(parents=True, exist_ok=True)
        for case in CASES:
            (args.ptx / f"{case.name}.ptx").write_text(ptx_of(case))
    return 1 if capture(args.out) else 0


if __name__ == "__main__":
    sys.exit(main())
