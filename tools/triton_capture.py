"""Triton kernels on the GPU, from the very cubins built here: build them here, run them there, check the bits in the
tests (tests/test_triton.py, test_the_gpu_bits_of_triton_s_own_cubins).

    python tools/triton_capture.py build [--dest tests/data/triton_cubins]
        here, with Triton installed (no GPU): for each case of CASES, compile the kernel with Triton for its target
        through flashsim.triton, and write DEST/<case>.cubin, DEST/inputs.npz (the seeded inputs) and
        DEST/manifest.json (kernel name, grid, block, dynamic shared memory, and each launch parameter: an input
        buffer, a zero-filled scratch buffer, or raw bytes). The cubin is Triton's own for an sm_90a build; for an
        sm_80 build run on the H200 it is the sm_80 PTX assembled here for sm_90 by the ptxas flashsim reads its
        contraction from (flashsim.gpu.build.select_ptxas): an sm_80 cubin does not run on an H200, and the driver's
        JIT would be another ptxas.
    python3 tools/triton_capture.py capture --out DIR [--cubins tests/data/triton_cubins]
        on the GPU machine, from the repository root (cuda-python only; no Triton, no flashsim build step): load each
        cubin with the driver, copy the inputs in, launch, copy every buffer back, and write DIR/triton_gpu.npz
        (per case: "<case>/in:<name>", "<case>/out:<name>", "<case>/arch", "<case>/device"); then copy it to
        tests/data/triton_cubins/triton_gpu.npz. About 10 s.

``simulate(case, inputs, arch)`` runs a case in flashsim.triton on given inputs and returns every buffer after the
launch (the test's side).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import pathlib
import sys
from dataclasses import dataclass, field

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
CUBINS = REPO / "tests" / "data" / "triton_cubins"


@dataclass(frozen=True)
class Case:
    """One launch: ``kernel`` (a name in tests/triton_kernels.py), ``grid``, ``inputs`` (name -> (dtype name, shape,
    kind of values)) and ``args`` (the positional arguments: input names or Python scalars), ``meta``, ``target``,
    ``arch`` (the GPU the build runs on)."""

    name: str
    kernel: str
    grid: tuple
    inputs: dict
    args: tuple
    target: str
    arch: str = "sm_90"
    meta: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)


def _mm(name, dtype, out, target, block, M=96, N=80, K=128, warps=4):
    BM, BN, BK = block
    grid = (-(-M // BM) * -(-N // BN),)
    return Case(
        name,
        "matmul",
        grid,
        {"a": (dtype, (M, K), "normal"), "b": (dtype, (K, N), "wide"), "c": (out, (M, N), "zero")},
        ("a", "b", "c", M, N, K, K, 1, N, 1, N, 1),
        target,
        meta=dict(BM=BM, BN=BN, BK=BK, GROUP=2),
        options=dict(num_warps=warps),
    )


def _attn(name, causal, target, N=160, H=2, D=64):
    qkv = {x: ("float16", (H, N, D), "normal") for x in "qkv"}
    return Case(
        name,
        "attention",
        (-(-N // 64), H),
        {**qkv, "o": ("float16", (H, N, D), "zero"), "lse": ("float32", (H, N), "zero")},
        ("q", "k", "v", "o", "lse", 0.125, N, N * D, D),
        target,
        meta=dict(CAUSAL=causal, D=D, BM=64, BN=32),
    )


CASES = [
    Case(
        "add_sm90",
        "add",
        (4,),
        {"x": ("float32", (1000,), "normal"), "y": ("float32", (1000,), "normal"), "out": ("float32", (1000,), "zero")},
        ("x", "y", "out", 1000),
        "sm_90",
        meta=dict(BLOCK=256),
    ),  # fmt: skip
    Case(
        "softmax_sm80",
        "softmax",
        (4,),
        {"y": ("float32", (6, 100), "zero"), "x": ("float32", (6, 100), "wide")},
        ("y", "x", 100, 100, 6, 100),
        "sm_80",
        meta=dict(BLOCK=128),
    ),  # fmt: skip
    Case(
        "softmax_sm90",
        "softmax",
        (4,),
        {"y": ("float32", (6, 100), "zero"), "x": ("float32", (6, 100), "wide")},
        ("y", "x", 100, 100, 6, 100),
        "sm_90",
        meta=dict(BLOCK=128),
    ),  # fmt: skip
    Case(
        "layer_norm_sm90",
        "layer_norm",
        (4,),
        {
            "x": ("float16", (4, 200), "normal"),
            "y": ("float16", (4, 200), "zero"),
            "w": ("float32", (200,), "normal"),
            "b": ("float32", (200,), "normal"),
            "mean": ("float32", (4,), "zero"),
            "rstd": ("float32", (4,), "zero"),
        },
        ("x", "y", "w", "b", "mean", "rstd", 200, 200, 1e-5),
        "sm_90",
        meta=dict(BLOCK=64),
        options=dict(enable_fp_fusion=False),
    ),  # fmt: skip
    Case(
        "layer_norm_fused_sm90",
        "layer_norm",
        (64,),
        {
            "x": ("float16", (64, 200), "normal"),
            "y": ("float16", (64, 200), "zero"),
            "w": ("float32", (200,), "normal"),
            "b": ("float32", (200,), "normal"),
            "mean": ("float32", (64,), "zero"),
            "rstd": ("float32", (64,), "zero"),
        },
        ("x", "y", "w", "b", "mean", "rstd", 200, 200, 1e-5),
        "sm_90",
        meta=dict(BLOCK=64),
    ),  # fmt: skip
    Case(
        "layer_norm_fused_sm80",
        "layer_norm",
        (64,),
        {
            "x": ("float16", (64, 200), "wide"),
            "y": ("float16", (64, 200), "zero"),
            "w": ("float32", (200,), "normal"),
            "b": ("float32", (200,), "normal"),
            "mean": ("float32", (64,), "zero"),
            "rstd": ("float32", (64,), "zero"),
        },
        ("x", "y", "w", "b", "mean", "rstd", 200, 200, 1e-5),
        "sm_80",
        meta=dict(BLOCK=64),
    ),  # fmt: skip
    _mm("matmul_f16_sm80", "float16", "float16", "sm_80", (32, 32, 32)),
    _mm("matmul_bf16_sm80", "bfloat16", "float32", "sm_80", (32, 32, 32)),
    _mm("matmul_f16_sm90_mma", "float16", "float16", "sm_90", (32, 32, 32)),
    _mm("matmul_bf16_sm90_mma", "bfloat16", "float32", "sm_90", (32, 32, 32)),
    _mm("matmul_fp8_sm90_mma", "float8_e4m3fn", "float16", "sm_90", (32, 32, 32)),
    _mm("matmul_f16_sm90_wgmma", "float16", "float16", "sm_90", (64, 64, 32)),
    _mm("matmul_bf16_sm90_wgmma", "bfloat16", "float32", "sm_90", (64, 64, 32)),
    _mm("matmul_fp8_sm90_wgmma", "float8_e4m3fn", "float16", "sm_90", (64, 64, 64)),
    _attn("attention_sm80", False, "sm_80"),
    _attn("attention_causal_sm80", True, "sm_80"),
    _attn("attention_sm90", False, "sm_90"),
    _attn("attention_causal_sm90", True, "sm_90"),
]


def _dtype(name: str):
    import ml_dtypes

    return (
        np.dtype(getattr(ml_dtypes, name)) if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2") else np.dtype(name)
    )


def make_inputs(case: Case, seed: int = 20261206) -> dict:
    """The case's seeded inputs: "normal" standard normals, "wide" normals times 2^U(-6, 6) per element (exponent
    spread, subnormal f16 products included), "zero" zeros."""
    rng = np.random.default_rng([seed, sum(map(ord, case.name))])
    out = {}
    for name, (dt, shape, kind) in case.inputs.items():
        if kind == "zero":
            out[name] = np.zeros(shape, _dtype(dt))
            continue
        x = rng.standard_normal(shape)
        if kind == "wide":
            x = x * np.exp2(rng.integers(-6, 7, shape))
        out[name] = x.astype(_dtype(dt))
    return out


def _kernels():
    sys.path.insert(0, str(REPO / "tests"))
    import triton_kernels  # tests/triton_kernels.py

    return triton_kernels


def _call(case: Case, arrays: dict):
    K = _kernels()
    args = [arrays[a] if isinstance(a, str) else a for a in case.args]
    return getattr(K, case.kernel), args


def code_hash(ptx: str) -> str:
    """sha256 of the PTX's code: without comments, ``.file`` / ``.loc`` lines and debug sections (which name the
    checkout's path), so that the same kernel built in another checkout hashes the same."""
    import hashlib
    import re

    text = re.sub(r"//[^\n]*", "", ptx)
    text = re.sub(r"\.section\s+\.debug_\w+\s*\{.*?\n\s*\}", "", text, flags=re.S)
    keep = [
        line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith((".file", ".loc"))
    ]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest()


def simulate(case: Case, inputs: dict, arch: str | None = None, check=None) -> tuple[dict, str]:
    """(every buffer of ``case`` after its launch in flashsim.triton on copies of ``inputs``, the code_hash of the
    PTX that ran)."""
    import flashsim.triton as ft

    arrays = {k: np.array(v).view(_dtype(case.inputs[k][0])) for k, v in inputs.items()}  # npz keeps no bf16 / fp8
    kernel, args = _call(case, arrays)
    report = ft.launch(kernel, case.grid, *args, target=case.target, arch=arch or case.arch, check=check,
                       **case.meta, **case.options)  # fmt: skip
    return arrays, code_hash(report.compiled.ptx)


def build(dest: pathlib.Path) -> int:
    """Here: the cubins, inputs and manifest of every case (module docstring)."""
    import flashsim.triton as ft
    from flashsim.gpu.build import assemble_ptx, ptx_header, select_ptxas, tool_version

    dest.mkdir(parents=True, exist_ok=True)
    manifest, stored = {}, {}
    for case in CASES:
        inputs = make_inputs(case)
        kernel, args = _call(case, inputs)
        p = ft.prepare(kernel, case.grid, *args, target=case.target, arch=case.arch, **case.meta, **case.options)
        c = p.compiled
        if c.target.build == c.arch or c.target.build.rstrip("a") == c.arch:
            cubin, how = c.cubin, f"Triton's own cubin ({c.target.build})"
        else:
            version, _ = ptx_header(c.ptx)
            ptxas = select_ptxas(version)
            cubin, how = (
                assemble_ptx(c.ptx, c.arch, (), ptxas),
                f"the PTX assembled for {c.arch} by {tool_version(ptxas)}",
            )
        (dest / f"{case.name}.cubin").write_bytes(cubin)
        by_id = {id(a): name for name, a in inputs.items()}  # the Pointer of an input array holds that very array
        params = []
        for value in p.arguments():
            if isinstance(value, np.ndarray) and id(value) in by_id:
                params.append({"buffer": by_id[id(value)]})
            elif isinstance(value, np.ndarray):
                params.append({"scratch": int(value.nbytes)})
            else:
                params.append({"bytes": np.asarray(value).tobytes().hex()})
        for name, a in inputs.items():
            stored[f"{case.name}/in:{name}"] = a
        manifest[case.name] = {
            "kernel": c.kernel.name,
            "grid": list(p.grid),
            "block": list(c.block),
            "shared": int(c.metadata.shared or 0),
            "arch": c.arch,
            "target": c.target.build,
            "cubin": how,
            "params": params,
            "inputs": {k: [a.dtype.name, list(a.shape)] for k, a in inputs.items()},
            "ptx_code_sha256": code_hash(c.ptx),
        }
        print(f"{case.name}: {c.kernel.name}, grid {p.grid}, {len(params)} parameters, {how}")
    np.savez_compressed(dest / "inputs.npz", **stored)
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


def _driver():
    from cuda.bindings import driver

    def ok(what, result):
        err = result[0]
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {driver.cuGetErrorName(err)[1]}")
        return result[1] if len(result) == 2 else result[1:]

    return driver, ok


def capture(cubins: pathlib.Path, out: pathlib.Path) -> int:
    """On the GPU: run every case's cubin on its stored inputs (module docstring)."""
    driver, ok = _driver()  # the inputs are bytes here (bf16 / fp8 stored as void): numpy and cuda-python only
    ok("cuInit", driver.cuInit(0))
    dev = ok("cuDeviceGet", driver.cuDeviceGet(0))
    ctx = ok("cuDevicePrimaryCtxRetain", driver.cuDevicePrimaryCtxRetain(dev))
    ok("cuCtxSetCurrent", driver.cuCtxSetCurrent(ctx))
    name = ok("cuDeviceGetName", driver.cuDeviceGetName(64, dev)).split(b"\0")[0].decode()
    manifest = json.loads((cubins / "manifest.json").read_text())
    with np.load(cubins / "inputs.npz", allow_pickle=False) as z:
        stored = {k: z[k] for k in z.files}
    result, failed = {}, 0
    for case, m in manifest.items():
        try:
            result.update(_run_case(driver, ok, cubins, case, m, stored))
            result[f"{case}/arch"] = np.array(m["arch"])
            result[f"{case}/device"] = np.array(name)
            print(f"{case}: captured on {name}")
        except Exception as exc:  # noqa: BLE001 - one case's failure is reported, the others still run
            failed += 1
            print(f"{case}: FAILED: {exc}")
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "triton_gpu.npz", **result)
    print(f"wrote {out / 'triton_gpu.npz'} ({len(manifest) - failed} of {len(manifest)} cases)")
    return 1 if failed else 0


def _run_case(driver, ok, cubins, case, m, stored) -> dict:
    module = ok("cuModuleLoadData", driver.cuModuleLoadData((cubins / f"{case}.cubin").read_bytes()))
    fn = ok("cuModuleGetFunction", driver.cuModuleGetFunction(module, m["kernel"].encode()))
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    ok("cuFuncSetAttribute", driver.cuFuncSetAttribute(fn, attr, m["shared"]))
    inputs = {k.split(":", 1)[1]: v for k, v in stored.items() if k.startswith(f"{case}/in:")}
    device, raw = {}, []
    try:
        for p in m["params"]:
            if "bytes" in p:
                raw.append(bytes.fromhex(p["bytes"]))
                continue
            if "buffer" in p:
                host = np.ascontiguousarray(inputs[p["buffer"]])
                key, nbytes = p["buffer"], host.nbytes
            else:
                host, key, nbytes = None, f"scratch{len(raw)}", p["scratch"]
            ptr = ok("cuMemAlloc", driver.cuMemAlloc(max(nbytes, 1)))
            device[key] = (ptr, nbytes)
            if host is not None:
                ok("cuMemcpyHtoD", driver.cuMemcpyHtoD(ptr, host.ctypes.data, nbytes))
            else:
                ok("cuMemsetD8", driver.cuMemsetD8(ptr, 0, max(nbytes, 1)))
            raw.append(int(ptr).to_bytes(8, "little"))
        buffers = [ctypes.create_string_buffer(r, len(r)) for r in raw]
        pointers = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(b) for b in buffers])
        ok(
            "cuLaunchKernel",
            driver.cuLaunchKernel(fn, *m["grid"], *m["block"], m["shared"], 0, ctypes.addressof(pointers), 0),
        )
        ok("cuCtxSynchronize", driver.cuCtxSynchronize())
        out = {}
        for name, a in inputs.items():
            back = np.empty_like(a)
            ok("cuMemcpyDtoH", driver.cuMemcpyDtoH(back.ctypes.data, device[name][0], a.nbytes))
            out[f"{case}/in:{name}"] = a
            out[f"{case}/out:{name}"] = back
        return out
    finally:
        for ptr, _ in device.values():
            driver.cuMemFree(ptr)
        driver.cuModuleUnload(module)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="here: cubins, inputs and manifest")
    b.add_argument("--dest", type=pathlib.Path, default=CUBINS)
    c = sub.add_parser("capture", help="on the GPU: run them, write DIR/triton_gpu.npz")
    c.add_argument("--out", type=pathlib.Path, required=True)
    c.add_argument("--cubins", type=pathlib.Path, default=CUBINS)
    args = parser.parse_args(argv)
    if args.command == "build":
        return build(args.dest)
    return capture(args.cubins, args.out)


if __name__ == "__main__":
    sys.exit(main())
