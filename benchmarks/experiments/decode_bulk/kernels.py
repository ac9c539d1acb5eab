"""The experiments' own kernels, built one way for every script of this folder: ring.cu's shared memory, its cupy
build (with the tensor maps of its TMA form), read.cu's cupy build, and the block times that TIMES=1 builds leave
after their outputs. cupy and the GPU are imported only by the functions that launch, so that the CPU scripts
(ring_cpu.py, read_cpu.py) take the same numbers."""

from __future__ import annotations

from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERNEL_DIR = HERE.parents[2] / "kernel"  # ring.cu and the kernel share kernel/async_copy.cuh
D = 128  # ring.cu's and read.cu's head dim (f16 / bf16 rows of 256 bytes)


def ring_smem(bulk: int, stages: int, kv_tile: int, warps: int = 1) -> int:
    """ring.cu's dynamic shared memory: each warp's K and V slots of kv_tile rows, rows padded by 16 bytes in the
    per-row bulk form (BULK 1)."""
    return warps * 2 * stages * kv_tile * (2 * D + (16 if bulk == 1 else 0))


def _cupy_module(source: str, arch: str, defines: dict):
    import cupy as cp

    options = ("-std=c++17", f"-I{KERNEL_DIR}", f"-arch={arch}", *(f"-D{k}={v}" for k, v in defines.items()))
    return cp.RawModule(code=(HERE / source).read_text(), options=options)


def ring(bulk: int, stages: int, kv_tile: int, arch: str = "sm_90", **defines):
    """(ring.cu's kernel built by cupy with BULK, STAGES, KV_TILE and ``defines``, its shared memory in bytes), the
    kernel allowed that much dynamic shared memory."""
    fn = _cupy_module("ring.cu", arch, dict(BULK=bulk, STAGES=stages, KV_TILE=kv_tile, **defines)).get_function("ring")
    smem = ring_smem(bulk, stages, kv_tile, defines.get("WARPS", 1))
    fn.max_dynamic_shared_size_bytes = smem
    return fn, smem


def ring_args(k, v, out, n: int, heads: int, splits: int, tmaps=None) -> tuple:
    """ring.cu's arguments for torch caches k, v (B, N, H, d), the cupy output ``out``, N, H and the split count; the
    tensor maps of its TMA form (``tensor_maps``; kept alive by the tuple), or null pointers for the other forms."""
    maps = tuple(tmaps) if tmaps is not None else (np.uint64(0), np.uint64(0))
    ints = (np.int32(n), np.int32(heads), np.int32(splits))
    return (np.uint64(k.data_ptr()), np.uint64(v.data_ptr()), out, *ints, *maps)


def read(arch: str = "sm_90", **defines):
    """read.cu built by cupy with ``defines``: (read_flat, read_heads)."""
    module = _cupy_module("read.cu", arch, defines)
    return module.get_function("read_flat"), module.get_function("read_heads")


def tensor_maps(k, v, kv_tile: int):
    """ring.cu's TMA maps (BULK 2) of torch caches k, v (B, N, H, d = 128, 2-byte elements) as cupy arrays: (d, H,
    B * N) with boxes of 64 d x 1 head x kv_tile keys, the 128-byte swizzle."""
    import cupy as cp

    from flashsim.gpu.capture.tma import encode

    b, n, h, _ = k.shape
    return [
        cp.asarray(
            encode("FLOAT16", t.data_ptr(), (D, h, b * n), (2 * D, 2 * D * h), (64, 1, kv_tile), swizzle=3, l2=3)
        )
        for t in (k, v)
    ]


def block_times(out, blocks: int, threads: int) -> np.ndarray:
    """(blocks, 2) start / end ns that a TIMES=1 build of ring.cu or read.cu wrote after its ``blocks * threads``
    output words in the cupy array ``out``."""
    import cupy as cp

    words = out.view(cp.uint32)[blocks * threads : blocks * threads + 4 * blocks]
    return cp.asnumpy(words.view(cp.uint64)).reshape(blocks, 2)
