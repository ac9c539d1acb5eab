"""On the CPU: read.cu's two read kernels in flashsim.ptx under memcheck on a small cache (B 1, N 200, H 2, d 128;
200 keys so that the unrolled loops' tails run): the XOR of the words they write equals the XOR of every 32-bit
word of K and V, so every byte is read and none twice (an odd count would also pass; the indexing makes each thread
read distinct addresses), and no read leaves the caches (memcheck).

    python3 benchmarks/experiments/decode_bulk/read_cpu.py
"""

import sys
from pathlib import Path

import numpy as np

import flashsim.ptx as P

SRC = (Path(__file__).resolve().parent / "read.cu").read_text()
B, N, H, D = 1, 200, 2, 128


def main() -> int:
    rng = np.random.default_rng(0)
    k, v = (rng.integers(0, 2**16, (B, N, H, D), dtype=np.uint16) for _ in range(2))
    want = np.bitwise_xor.reduce(np.concatenate([k.view(np.uint32).ravel(), v.view(np.uint32).ravel()]))
    bad = 0
    for unroll in (2, 8, 16):
        module = P.compile(SRC, arch="sm_90", defines=dict(UNROLL=unroll))
        runs = [("read_flat", 3, 64, lambda out: [k, v, np.int64(k.nbytes // 16), out])]
        for splits, threads in ((2, 32), (3, 64)):
            runs.append(("read_heads", B * H * splits, threads,
                         lambda out, s=splits: [k, v, out, np.int32(N), np.int32(H), np.int32(s)]))  # fmt: skip
        for name, blocks, threads, args in runs:
            out = np.zeros(blocks * threads, np.uint32)
            P.launch(module.kernel(name), blocks, threads, args(out), check="memcheck")
            ok = np.bitwise_xor.reduce(out) == want
            bad += not ok
            print(f"UNROLL {unroll} {name} {blocks} x {threads}: memcheck clean, "
                  f"{'every word read' if ok else 'WRONG words read'}", flush=True)  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
