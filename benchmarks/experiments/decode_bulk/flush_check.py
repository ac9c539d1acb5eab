"""On the GPU: bench_serving's timing against triton.testing.do_bench's, and what emptying the L2 by reading instead of
by writing changes (bench_serving's --flush).

    python3 benchmarks/experiments/decode_bulk/flush_check.py [--json FILE]

For the 1 GiB copy (the "of copy" reference), the decode call (B=8 Nk=8192 d=128 bf16, CUDA-graph replay) and FA2 /
cuDNN on the same cache: triton.testing.do_bench's median (warmup 25, rep 100: the L2 zeroed), bench_serving's
_do_bench with flush "zero" (the same method, ours: the two should agree) and with "read". Three rounds, the median
of each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton.testing

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    _, b, n, d = bs.DECODE_SHAPES[0]
    q, k, v = bs.cache(b, n, 32, 8, d, torch.bfloat16)
    sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
    src = torch.empty(bs.COPY_BYTES // 2, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    fns = {
        "copy 1 GiB": lambda: dst.copy_(src),
        "ours (graph)": bs.graph_of(bs.ours(q, k, v, cache_seqlens=sl)[0]),
        "FA2 (graph)": bs.graph_of(bs.sdpa("FA2", qt, kt, vt)),
        "cuDNN (graph)": bs.graph_of(bs.sdpa("cuDNN", qt, kt, vt)),
    }
    methods = {"triton do_bench": lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")}
    methods.update({f"ours, {flush}": lambda fn, flush=flush: bs._do_bench(fn, flush) for flush in bs.FLUSHES})
    out: dict = {"device": torch.cuda.get_device_name()}
    for name, fn in fns.items():
        for method, bench in methods.items():
            out[f"{name} | {method}"] = statistics.median(bench(fn) * 1e3 for _ in range(3))
    nbytes = 2 * k.numel() * k.element_size()
    for key, us in out.items():
        if key == "device":
            print(f"{key:36} {us}")
            continue
        rate = (bs.COPY_BYTES * 2 if key.startswith("copy") else nbytes) / (us * 1e-6) / 1e12
        print(f"{key:36} {us:9.1f} us  {rate:5.2f} TB/s")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
