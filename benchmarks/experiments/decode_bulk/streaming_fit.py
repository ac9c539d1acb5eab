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
import kernels  # noqa: E402
from decode_parts import fwd_alone  # noqa: E402

_, B, _, D = bs.DECODE_SHAPES[0]
H, HQ, SPLITS = 8, 32, 6
NS = (4096, 8192, 16384, 32768)


def raw_kernels(sms):
    """{name: prepare} of read.cu and ring.cu, where prepare(k, v, n) returns a function that launches the kernel."""
    flat, heads = kernels.read(UNROLL=8)
    _, heads16 = kernels.read(UNROLL=16)
    out = cp.empty(sms * 16 * 256 + B * H * SPLITS * 256, cp.uint32)
    found = {}
    for per_sm in (4, 16):
        found[f"read, front to back, {per_sm} x 256 threads an SM"] = lambda k, v, n, p=per_sm: (
            lambda: flat(
                (sms * p,), (256,), (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), np.int64(k.nbytes // 16), out)
            )
        )
    # the decode's partition, 8 rows in flight a half-warp; then 16 (a one-warp block with twice the loads in flight)
    for label, fn, warp_counts in (("read,", heads, (1, 4, 8)), ("read 16 deep,", heads16, (1, 2))):
        for warps in warp_counts:
            found[f"{label} decode blocks of {warps} warp(s)"] = lambda k, v, n, fn=fn, w=warps: lambda: fn(
                (B * H * SPLITS,), (32 * w,), (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), out, np.int32(n),
                                               np.int32(H), np.int32(SPLITS))
            )  # fmt: skip
    for bulk, no_mma in ((0, 0), (2, 0), (0, 1), (2, 1)):  # NO_MMA: the tiles land and are released unread
        ring, smem = kernels.ring(bulk, 2, 64, NO_MMA=no_mma)

        def prepare(k, v, n, ring=ring, smem=smem):
            args = kernels.ring_args(k, v, out, n, H, SPLITS, kernels.tensor_maps(k, v, 64))
            return lambda: ring((B * H * SPLITS,), (32,), args, shared_mem=smem)  # (args holds the maps alive)

        found[f"ring.cu {('cp.async', '', 'TMA')[bulk]} 64 x 2" + (", no mma" if no_mma else "")] = prepare
    return found


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
