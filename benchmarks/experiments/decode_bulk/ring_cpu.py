"""On the CPU: ring.cu's three load paths (cp.async, per-row bulk copies, tensor TMA), 2 and 3 stages, 64- and
32-key tiles, in flashsim.ptx on a small shape of full tiles (B 1, N 256, H 2, 2 splits of 128 keys), racecheck on:
every output bit-equal to the cp.async path's of its tile size (the same bytes reach the same fragments, so the TMA
path's swizzled addressing is right before it runs on a GPU); and blocks of two warps, each its own ring over half
the block's keys (WARPS 2, one split), bit-equal to one-warp blocks over two splits.

    python3 benchmarks/experiments/decode_bulk/ring_cpu.py
"""

import sys
from pathlib import Path

import numpy as np

import flashsim.ptx as P

sys.path[:0] = [str(Path(__file__).resolve().parent)]  # this folder
import kernels  # noqa: E402

SRC = (kernels.HERE / "ring.cu").read_text()
B, N, H, D, S = 1, 256, 2, 128, 2


def main() -> int:
    rng = np.random.default_rng(0)
    k = rng.standard_normal((B, N, H, D)).astype(np.float16)
    v = rng.standard_normal((B, N, H, D)).astype(np.float16)
    outs, bad = {}, 0
    for kv_tile in (64, 32):
        maps = [
            np.frombuffer(
                P.tensor_map_tiled(
                    t, data_type="FLOAT16", global_dim=(D, H, B * N), global_strides=(2 * D, 2 * D * H),
                    box_dim=(64, 1, kv_tile), swizzle="128B",
                ).bytes,
                np.uint8,
            ).copy()
            for t in (k, v)
        ]  # fmt: skip
        if kv_tile == 64:
            maps64 = maps
        for bulk in (0, 1, 2) if kv_tile == 64 else (0, 2):
            for stages in (2, 3):
                defines = dict(BULK=bulk, STAGES=stages, KV_TILE=kv_tile)
                kernel = P.compile(SRC, arch="sm_90", defines=defines).kernel("ring")
                out = np.zeros(B * H * S * 32, np.float32)
                smem = kernels.ring_smem(bulk, stages, kv_tile)
                args = [k, v, out, np.int32(N), np.int32(H), np.int32(S), *maps]
                P.launch(kernel, B * H * S, 32, args, shared_mem=smem, check="racecheck")
                first = outs.setdefault(kv_tile, out)
                same = np.array_equal(out.view(np.uint32), first.view(np.uint32))
                bad += not same
                print(f"{('cp.async', 'bulk', 'tma')[bulk]:8} {kv_tile}x{stages}: racecheck clean, "
                      f"{'bit-equal to cp.async' if same else 'DIFFERS from cp.async'}", flush=True)  # fmt: skip
    for bulk in (0, 2):  # two warps a block, one split: the outputs of one-warp blocks with two splits
        defines = dict(BULK=bulk, STAGES=2, KV_TILE=64, WARPS=2)
        kernel = P.compile(SRC, arch="sm_90", defines=defines).kernel("ring")
        out = np.zeros(B * H * S * 32, np.float32)
        args = [k, v, out, np.int32(N), np.int32(H), np.int32(S // 2), *maps64]
        P.launch(kernel, B * H * S // 2, 64, args, shared_mem=kernels.ring_smem(bulk, 2, 64, 2), check="racecheck")
        same = np.array_equal(out.view(np.uint32), outs[64].view(np.uint32))
        bad += not same
        print(f"{('cp.async', 'bulk', 'tma')[bulk]:8} 64x2, 2 warps a block: racecheck clean, "
              f"{'bit-equal to one-warp blocks' if same else 'DIFFERS from one-warp blocks'}", flush=True)  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
