"""On the GPU: which part of the decode's time is paid per byte and which per launch. Every kernel that reads the
B=8 decode's K / V (Hkv 8, d 128, bf16) is timed at Nk = 4096, 8192, 16384 and 32768 with the grid unchanged (6 splits
where the kernel takes a split count), and each is fitted to time = fixed + bytes / rate: the rate is what the kernel
streams at once running (against the copy bandwidth of the same run, bytes read plus written, as the serving table),
the fixed part what it pays once (launch, first loads, the last wave's tail, the combine).

    python3 benchmarks/experiments/decode_bulk/streaming_fit.py [--json FILE]

Kernels: read.cu's loads without compute (the whole cache front to back; the decode's (batch, head, split) blocks
at 1, 4 and 8 warps), ring.cu's load path (cp.async and TMA, 64-key tiles, 2 stages), flash_fwd alone and the call
(flash_fwd + flash_combine) at 6 splits, FA2 and cuDNN through torch SDPA (their own split choices). The raw kernels
are timed by do_bench of their launch, the torch calls by do_bench of a CUDA graph replay (bench_serving.timed):
their fixed parts differ by the launch's own cost (a few us), the rates do not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]  # benchmarks/, this folder
import bench_serving as bs  # noqa: E402
from decode_parts import fwd_alone  # noqa: E402

_, B, _, D = bs.DECODE_SHAPES[0]
H, HQ, SPLITS = 8, 32, 6
NS = (4096, 8192, 16384, 32768)
OPTIONS = ("-std=c++17", f"-I{HERE.parents[2] / 'kernel'}", "-arch=sm_90")


def raw_kernels(sms):
    """{name: prepare} of read.cu and ring.cu, where prepare(k, v, n) returns a function that launches the kernel."""
    read = cp.RawModule(code=(HERE / "read.cu").read_text(), options=(*OPTIONS, "-DUNROLL=8"))
    flat, heads = read.get_function("read_flat"), read.get_function("read_heads")
    deep = cp.RawModule(code=(HERE / "read.cu").read_text(), options=(*OPTIONS, "-DUNROLL=16"))
    heads16 = deep.get_function("read_heads")
    out = cp.empty(sms * 16 * 256 + B * H * SPLITS * 256, cp.uint32)
    kernels = {}
    for per_sm in (4, 16):
        kernels[f"read, front to back, {per_sm} x 256 threads an SM"] = lambda k, v, n, p=per_sm: (
            lambda: flat(
                (sms * p,), (256,), (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), np.int64(k.nbytes // 16), out)
            )
        )
    for warps in (1, 2):  # the decode's one-warp block with twice the loads in flight (16 KB a warp), and two
        kernels[f"read 16 deep, decode blocks of {warps} warp(s)"] = lambda k, v, n, w=warps: lambda: heads16(
            (B * H * SPLITS,), (32 * w,), (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), out, np.int32(n),
                                           np.int32(H), np.int32(SPLITS))
        )  # fmt: skip
    for warps in (1, 4, 8):
        kernels[f"read, decode blocks of {warps} warp(s)"] = lambda k, v, n, w=warps: lambda: heads(
            (B * H * SPLITS,), (32 * w,), (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), out, np.int32(n),
                                           np.int32(H), np.int32(SPLITS))
        )  # fmt: skip
    from flashsim.gpu.capture.tma import encode

    for bulk, no_mma in ((0, 0), (2, 0), (0, 1), (2, 1)):  # NO_MMA: the tiles land and are released unread
        defines = (f"-DBULK={bulk}", "-DSTAGES=2", "-DKV_TILE=64", f"-DNO_MMA={no_mma}")
        ring = cp.RawModule(code=(HERE / "ring.cu").read_text(), options=(*OPTIONS, *defines)).get_function("ring")
        smem = 2 * 2 * 64 * 2 * D
        ring.max_dynamic_shared_size_bytes = smem

        def prepare(k, v, n, ring=ring, smem=smem):
            maps = [
                cp.asarray(encode("FLOAT16", t.data_ptr(), (D, H, B * n), (2 * D, 2 * D * H), (64, 1, 64), swizzle=3,
                                  l2=3))
                for t in (k, v)
            ]  # fmt: skip
            args = (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), out, np.int32(n), np.int32(H),
                    np.int32(SPLITS), *maps)  # fmt: skip
            return lambda: ring((B * H * SPLITS,), (32,), args, shared_mem=smem)  # (args holds the maps alive)

        kernels[f"ring.cu {('cp.async', '', 'TMA')[bulk]} 64 x 2" + (", no mma" if no_mma else "")] = prepare
    return kernels


def fit(ns, us, bytes_per_key):
    """(fixed us, TB/s) of time = fixed + bytes / rate, least squares over the points."""
    x = np.array(ns, float) * bytes_per_key
    slope, fixed = np.polyfit(x, np.array(us), 1)
    return fixed, 1e-6 / slope  # bytes per us -> TB/s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    copy = bs.copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}, {sms} SMs; copy {copy:.2f} TB/s (read + written)", flush=True)
    bytes_per_key = 2 * B * H * D * 2
    times = {}
    raw = raw_kernels(sms)
    for n in NS:
        q, k, v = bs.cache(B, n, HQ, H, D, torch.bfloat16)
        for name, prepare in raw.items():
            times.setdefault(name, []).append(bs._do_bench(prepare(k, v, n)) * 1e3)
        fn, prob = bs.ours(q, k, v, num_splits=SPLITS)
        _, plan = bs.kvcache_plan(B, n, D, SPLITS)
        times.setdefault("flashsim call (flash_fwd + combine)", []).append(bs.timed(fn)[0] * 1e3)
        with fwd_alone(plan):
            times.setdefault("flashsim flash_fwd alone", []).append(bs.timed(fn)[0] * 1e3)
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        for other in ("FA2", "cuDNN"):
            times.setdefault(other, []).append(bs.timed(bs.sdpa(other, qt, kt, vt))[0] * 1e3)
        print(f"Nk {n}: " + ", ".join(f"{name} {t[-1]:.1f}" for name, t in times.items()), flush=True)
        del q, k, v
        torch.cuda.empty_cache()
    rows = [dict(name="copy", tb_s=copy, sms=sms, device=torch.cuda.get_device_name())]
    head = " ".join(f"{'Nk ' + str(n):>9}" for n in NS)
    print(f"\n{'kernel (us; of copy at Nk 8192)':48} {head}   fixed    rate (of copy)")
    for name, us in times.items():
        fixed, rate = fit(NS, us, bytes_per_key)
        at8k = bytes_per_key * 8192 / us[NS.index(8192)] / 1e6 / copy
        rows.append(dict(name=name, ns=NS, us=us, fixed_us=fixed, rate_tb_s=rate, rate_of_copy=rate / copy,
                         of_copy_at_8192=at8k))  # fmt: skip
        cells = " ".join(f"{t:9.1f}" for t in us)
        print(f"{name[:40]:40} ({at8k:5.1%}) {cells} {fixed:6.1f} us {rate:5.2f} TB/s ({rate / copy:5.1%})")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
