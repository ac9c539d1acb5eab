"""What each sanitizer of flashsim.ptx costs on kernel/flash_fwd.cu's sm_90 default (f16, D = 128, one head):
the launch's wall time with check=None, "memcheck", "racecheck" and "initcheck", best of ``--repeat``, and whether
the output stays bit-equal to the numpy engine's.

    python3 benchmarks/bench_ptx_sanitize.py [--n 128 512] [--repeat 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

import flashsim
import flashsim.ptx as P
from flashsim import provenance
from flashsim.gpu import launch as gpu_launch
from flashsim.gpu.build import kernel_dir
from flashsim.problem import prepare

CHECKS = (None, "memcheck", "racecheck", "initcheck")


def measure(n: int, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, 128)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, arch="sm_90")
    cfg = prob.config
    src = (kernel_dir() / "flash_fwd.cu").read_text()
    kern = P.compile(src, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)).kernel("flash_fwd")
    o_ref, _ = flashsim.attention(q, k, v)
    out = {"n": n, "blocks": prob.q_blocks, "threads": cfg.threads, "smem_bytes": cfg.smem_bytes, "seconds": {}}
    for check in CHECKS:
        best, equal = float("inf"), True
        for _ in range(repeat):
            o = np.zeros_like(q)
            lse = np.zeros((1, 1, n), np.float32)
            flag = np.full(1, 2**64 - 1, np.uint64)
            tail = (np.uint64(0), np.uint64(0), np.uint64(0), np.uint64(0), np.int32(0))
            args = [q, k, v, o, lse, flag, *gpu_launch.kernel_scalars(prob), *tail]
            t0 = time.perf_counter()
            P.launch(kern, (prob.q_blocks, 1, 1), cfg.threads, args, shared_mem=cfg.smem_bytes, check=check)
            best = min(best, time.perf_counter() - t0)
            equal &= bool(np.array_equal(o.view(np.uint16), o_ref.view(np.uint16)))
        out["seconds"][str(check)] = round(best, 3)
        out.setdefault("bit_equal", {})[str(check)] = equal
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [measure(n, a.repeat) for n in a.n]
    result = {"machine": platform.processor() or platform.machine(), "numpy": np.__version__, "runs": rows}
    for r in rows:
        base = r["seconds"]["None"]
        cells = ", ".join(f"{c}: {s:.2f} s ({s / base:.1f}x)" for c, s in r["seconds"].items())
        print(f"N={r['n']} ({r['blocks']} blocks of {r['threads']} threads, {r['smem_bytes']} B shared): {cells}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
