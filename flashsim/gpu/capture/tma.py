"""Run the TMA probes (flashsim.ptx.probes.tma) on the GPU at hand with the driver's tensor maps and store what they
wrote: ``python3 -m flashsim.gpu.capture.tma --out DIR`` (one H100 / H200, about 10 s).

For every case the tensor (and the shared image of a store) comes from the case's seed; the map is the driver's
(cuda-python's cuTensorMapEncodeTiled over the device tensor, copied into a 128-byte device buffer: every probe
kernel reads its map through a global pointer), and the kernel is the PTX the simulator runs, assembled by ptxas for
sm_90a. DIR/tma_sm90.npz holds ``names``, ``in_<case>/tensor`` (and ``/img``), ``out_<case>`` (a load's shared
image, a store's or reduction's tensor after it), the bulk-copy cases (``in_bulk<op>/src``, ``/dst``,
``out_bulk<op>``) and ``meta`` (GPU, driver, ptxas, date, each PTX's sha256). tests/test_ptx_tma.py replays every
case in the simulator with flashsim's own map, bit for bit.

DIR/tma_driver_maps_sm90.json dumps the driver's 128 map bytes for the cases and for a series of maps that change
one argument at a time (address, a dim, a stride, a box dim, an element stride, swizzle, type, fill, L2
promotion, interleave), with the bytes that changed: how far the opaque format was looked at (flashsim does not
use it; its own encoding is flashsim.ptx.tensormap's); and under "rules" the driver's accept / refuse on each of
flashsim.ptx.probes.tma.MAP_RULES, which tests/test_ptx_tma.py holds tensor_map_tiled to.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time

import numpy as np

from ...ptx.probes import tma as T
from ...ptx.tensormap import DATA_TYPES
from .. import runtime as rt
from ..build import Build, assemble_ptx, ptxas_version

_SWIZZLE = {"NONE": 0, "32B": 1, "64B": 2, "128B": 3}
_OOB = {"NONE": 0, "NAN_REQUEST_ZERO_FMA": 1, 0: 0, 1: 1}
_ARCH = "sm_90a"


def _kernel(ptx: str, name: str):
    cubin = assemble_ptx(ptx, _ARCH)
    build = Build.of_cubin(cubin, _ARCH, f"{name}.ptx")
    return rt.load(build, name)


def encode(data_type, address: int, dims, strides, box, element_strides=None, swizzle=0, oob=0, l2=0, interleave=0):
    """The driver's map (128 bytes) of these cuTensorMapEncodeTiled arguments (innermost first)."""
    from cuda.bindings import driver

    dt = DATA_TYPES[data_type][0] if isinstance(data_type, str) else int(data_type)
    es = element_strides or (1,) * len(dims)
    if len(dims) == 1:  # cuda-python passes NULL for an empty stride list, which the driver refuses: call it directly
        return _encode_c(dt, address, dims, box, es, swizzle, oob, l2, interleave)
    err, tmap = driver.cuTensorMapEncodeTiled(
        driver.CUtensorMapDataType(dt),
        len(dims),
        address,
        [driver.cuuint64_t(int(d)) for d in dims],  # the typed wrappers: older cuda-bindings take no plain ints
        [driver.cuuint64_t(int(s)) for s in strides],
        [driver.cuuint32_t(int(b)) for b in box],
        [driver.cuuint32_t(int(e)) for e in es],
        driver.CUtensorMapInterleave(interleave),
        driver.CUtensorMapSwizzle(swizzle),
        driver.CUtensorMapL2promotion(l2),
        driver.CUtensorMapFloatOOBfill(oob),
    )
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed: {err}")
    return np.array([int(q) for q in tmap.opaque], np.uint64).view(np.uint8)


def _encode_c(dt: int, address: int, dims, box, es, swizzle, oob, l2, interleave) -> np.ndarray:
    """cuTensorMapEncodeTiled through libcuda itself (ctypes) for a rank-1 map, with a valid (unread) stride
    pointer; RuntimeError with the CUresult when the driver refuses."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    out = (ctypes.c_uint64 * 16)()
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    strides = (u64 * 1)(0)
    err = cuda.cuTensorMapEncodeTiled(
        ctypes.byref(out), ctypes.c_int(dt), u32(1), ctypes.c_void_p(address), (u64 * 1)(*dims), strides,
        (u32 * 1)(*box), (u32 * 1)(*es), ctypes.c_int(interleave), ctypes.c_int(swizzle), ctypes.c_int(l2),
        ctypes.c_int(oob),
    )  # fmt: skip
    if err:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed: CUresult {err}")
    return np.frombuffer(bytes(out), np.uint8).copy()


def run_case(case: T.Case) -> tuple[dict, np.ndarray, str, np.ndarray]:
    """(inputs, output, the PTX's sha256, the driver's map bytes) of one case on the GPU."""
    a = T.arrays(case)
    tensor = rt.to_device(a["tensor"])
    gd, gs = T.dims(case)
    raw = encode(
        case.data_type,
        tensor.ptr,
        gd,
        gs,
        case.box,
        case.element_strides,
        _SWIZZLE[case.swizzle],
        _OOB[case.oob_fill],
    )
    tmap = rt.to_device(raw.copy())
    coords = [np.int32(c) for c in case.coords]
    if case.kind == "load":
        ptx = T.load_ptx(case)
        out = rt.to_device(np.zeros(T.load_out_bytes(case), np.uint8))
        rt.launch(_kernel(ptx, "tma_load"), 1, 128, tmap, out, *coords)
        result = out.to_numpy()
    else:
        ptx = T.store_ptx(case)
        img = rt.to_device(a["img"])
        rt.launch(_kernel(ptx, "tma_store"), 1, 128, tmap, img, *coords)
        result = tensor.to_numpy()
    return a, result, hashlib.sha256(ptx.encode()).hexdigest(), raw


def map_survey(base: int) -> list:
    """Driver maps that differ from a reference in one argument, with the bytes that changed."""
    ref = dict(data_type="FLOAT16", address=base, dims=(64, 40), strides=(128,), box=(64, 16))
    variants = [
        ("reference", {}),
        ("address + 256", dict(address=base + 256)),
        ("dims[0] 64 -> 48", dict(dims=(48, 40))),
        ("dims[1] 40 -> 41", dict(dims=(64, 41))),
        ("strides[0] 128 -> 256", dict(strides=(256,))),
        ("box[0] 64 -> 32", dict(box=(32, 16))),
        ("box[1] 16 -> 8", dict(box=(64, 8))),
        ("element_strides (1, 2)", dict(element_strides=(1, 2))),
        ("swizzle 128B", dict(swizzle=3)),
        ("swizzle 64B, box 32", dict(swizzle=2, box=(32, 16))),
        ("data_type BFLOAT16", dict(data_type="BFLOAT16")),
        ("data_type FLOAT32, box 32", dict(data_type="FLOAT32", box=(32, 16))),
        ("oob NaN", dict(oob=1)),
        ("l2 promotion 128B", dict(l2=2)),
        ("rank 3", dict(dims=(64, 40, 2), strides=(128, 5120), box=(64, 16, 1))),
    ]
    out, reference = [], None
    for what, change in variants:
        args = {**ref, **change}
        raw = encode(
            args["data_type"],
            args["address"],
            args["dims"],
            args["strides"],
            args["box"],
            args.get("element_strides"),
            args.get("swizzle", 0),
            args.get("oob", 0),
            args.get("l2", 0),
        )
        if reference is None:
            reference = raw
        changed = np.flatnonzero(raw != reference).tolist()
        out.append({"variant": what, "args": dict(args), "hex": raw.tobytes().hex(), "changed": changed})
    return out


def map_rules(base: int) -> list:
    """The driver's verdict on each of flashsim.ptx.probes.tma.MAP_RULES at device address ``base``."""
    out = []
    for name, a in T.MAP_RULES:
        try:
            encode(
                a["data_type"],
                base,
                a["dims"],
                a["strides"],
                a["box"],
                a["element_strides"],
                a["swizzle"],
                a["oob"],
                a["l2"],
                a["interleave"],
            )
            verdict = {"accepted": True}
        except Exception as exc:  # noqa: BLE001 - the driver's refusal (or the binding's) is the datum
            verdict = {"accepted": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
        out.append({"rule": name, "args": a, **verdict})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flashsim.gpu.capture.tma", description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=pathlib.Path, required=True, help="folder for the capture files")
    ap.add_argument("--skip", default="", help="comma-separated case names not to run (a case the GPU faults on)")
    ap.add_argument("--only", default="", help="comma-separated case names to run alone (e.g. under compute-sanitizer)")
    ap.add_argument(
        "--isolate", action="store_true", help="each case in a process of its own (a fault ends only that case)"
    )
    args = ap.parse_args(argv)
    if args.isolate:
        return isolated(args.out, args.skip)
    skip, only = set(filter(None, args.skip.split(","))), set(filter(None, args.only.split(",")))
    args.out.mkdir(parents=True, exist_ok=True)
    dev = rt.require_gpu()
    arrays, names, shas, maps, failed = {}, [], {}, {}, {}
    t0 = time.perf_counter()
    for case in T.CASES:
        if case.name in skip or (only and case.name not in only):
            continue
        try:
            inputs, result, sha, raw = run_case(case)
        except Exception as exc:  # a refused map or an assembly error: recorded; a sticky GPU error ends the run
            failed[case.name] = f"{type(exc).__name__}: {exc}"
            print(f"  {case.name}: FAILED {failed[case.name]}", flush=True)
            if rt.sticky_error():
                break
            continue
        names.append(case.name)
        shas[case.name] = sha
        maps[case.name] = raw.tobytes().hex()
        for k, v in inputs.items():
            arrays[f"in_{case.name}/{k}"] = v
        arrays[f"out_{case.name}"] = result
        print(f"  {case.name}: ok", flush=True)
    for reduce in T.BULK:
        name = T.bulk_name(reduce)
        if name in skip or (only and name not in only):
            continue
        try:
            src, dst = T.bulk_inputs(reduce)
            ptx = T.bulk_ptx(src.nbytes, reduce)
            d_src, d_dst = rt.to_device(src), rt.to_device(dst)
            rt.launch(_kernel(ptx, "bulk_copy"), 1, 32, d_src, d_dst)
            arrays[f"in_{name}/src"], arrays[f"in_{name}/dst"], arrays[f"out_{name}"] = src, dst, d_dst.to_numpy()
            names.append(name)
            shas[name] = hashlib.sha256(ptx.encode()).hexdigest()
            print(f"  {name}: ok", flush=True)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
            print(f"  {name}: FAILED {failed[name]}", flush=True)
            if rt.sticky_error():
                break
    from cuda.bindings import driver

    _err, version = driver.cuDriverGetVersion()
    meta = {
        "gpu": dev.name,
        "driver": int(version),
        "ptxas": ptxas_version(),
        "date": time.strftime("%Y-%m-%d"),
        "ptx_sha256": shas,
        "failed": failed,
        "seconds": round(time.perf_counter() - t0, 2),
    }
    path = args.out / "tma_sm90.npz"
    np.savez_compressed(path, names=np.array(names), meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    base = rt.to_device(np.zeros(1 << 16, np.uint8))
    survey = {"cases": maps, "survey": map_survey(int(base.ptr)), "driver": int(version), "gpu": dev.name}
    survey["rules"] = map_rules(int(base.ptr))
    survey["rank1_encode"] = "libcuda through ctypes, a non-NULL stride pointer"
    (args.out / "tma_driver_maps_sm90.json").write_text(json.dumps(survey, indent=1, sort_keys=True))
    print(f"{len(names)} cases -> {path}; {len(failed)} failed", flush=True)
    return 0 if not failed else 1


def isolated(out: pathlib.Path, skip: str = "") -> int:
    """Run every case in a child process of its own (``--only``), then merge their files into out/tma_sm90.npz: a
    case the GPU faults on (a sticky error poisons the process's context) is recorded as failed with the child's
    last lines, and the others still run."""
    import subprocess
    import tempfile

    names = [c.name for c in T.CASES] + [T.bulk_name(r) for r in T.BULK]
    skipped = set(filter(None, skip.split(",")))
    arrays, kept, shas, failed, meta = {}, [], {}, {}, {}
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            if name in skipped:
                continue
            part = pathlib.Path(tmp) / name
            done = subprocess.run(
                [sys.executable, "-m", "flashsim.gpu.capture.tma", "--only", name, "--out", str(part)],
                capture_output=True,
                text=True,
            )
            path = part / "tma_sm90.npz"
            got = np.load(path, allow_pickle=False) if path.exists() else None
            if got is None or name not in [str(n) for n in got["names"]]:
                lines = (done.stdout + done.stderr).strip().splitlines()
                failed[name] = " | ".join(line for line in lines if "FAILED" in line)[:400] or " | ".join(lines[-2:])
                print(f"  {name}: FAILED {failed[name]}", flush=True)
                continue
            part_meta = json.loads(str(got["meta"]))
            meta = meta or part_meta
            shas[name] = part_meta["ptx_sha256"][name]
            kept.append(name)
            for k in got.files:
                if k.startswith((f"in_{name}/", f"out_{name}")):
                    arrays[k] = got[k]
            print(f"  {name}: ok", flush=True)
            if not (out / "tma_driver_maps_sm90.json").exists() and (part / "tma_driver_maps_sm90.json").exists():
                (out / "tma_driver_maps_sm90.json").write_text((part / "tma_driver_maps_sm90.json").read_text())
    meta.update(ptx_sha256=shas, failed=failed)
    path = out / "tma_sm90.npz"
    np.savez_compressed(path, names=np.array(kept), meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
    print(f"{len(kept)} cases -> {path}; {len(failed)} failed", flush=True)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
