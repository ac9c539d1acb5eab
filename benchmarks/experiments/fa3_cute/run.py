"""FlashAttention's CuTe-DSL Hopper forward (flash_attn/cute/flash_fwd.py, FlashAttentionForwardSm90: a TMA producer
warp, two wgmma consumer warpgroups, an mbarrier pipeline) run in flashsim.ptx from the PTX the DSL emits.

The PTX in .thirdparty/fa3_cute/ is produced on a machine without a GPU by compile.py (nvidia-cutlass-dsl 4.1.0,
flash-attn 2.8.3.post2's sdist; README.md has the pins and commands). This script needs only flashsim (and, for
``capture``, a GPU with cuda-python and ptxas):

    python benchmarks/experiments/fa3_cute/run.py sim [--n 256] [--d 64|128] [--causal] [--check racecheck]
    python benchmarks/experiments/fa3_cute/run.py capture --out DIR
    python benchmarks/experiments/fa3_cute/run.py replay DIR/fa3_cute_sm90.npz

``sim`` launches the kernel on random bf16 inputs and compares O and LSE with a float64 reference within bf16's
bound. ``capture`` runs the same PTX (ptxas -arch=sm_90a) on the GPU through the driver API, with driver tensor maps
encoded from the same cuTensorMapEncodeTiled arguments as the simulator's, and stores inputs, O and LSE per case.
``replay`` simulates every captured case and compares O and LSE bit for bit.

The kernel's parameters (the DSL's lowering of ``__call__``'s arguments, read off the PTX and the host IR):
  0-3   Q, K, V, O coordinate tensors: their dynamic shape, 4 x i32, in FlashAttention's (seqlen, d, head, batch)
        order (the kernel reads seqlen from word 0)
  4     LSE: u64 pointer, shape (seqlen, head, batch) 3 x i32, strides of head and batch 2 x i32 (elements), pad
  5-8   tensor maps of Q, K, V, O: dims (d, seqlen, head, batch) innermost first, box (64, tile rows, 1, 1),
        128-byte swizzle (64 bf16 = 128 bytes: one box per row of d = 64, two of d = 128)
  9     softmax_scale * log2(e) (f32; the host multiplies before the launch)
  10-12 empty structs (softcap and window sizes absent)
  13-   the tile scheduler's parameters: without the causal mask SingleTileScheduler's (num_block, num_head,
        num_batch), grid (num_block, head, batch); with it SingleTileLPTScheduler's 17 words (below), grid
        (num_block * head * batch, 1, 1)
384 threads; dynamic shared memory as shared_bytes() gives it (compile.py checks it against the host IR's constant).
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import hashlib
import math
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
BLOCK_M = 128
THREADS = 384
DIMS = (64, 128)  # the head dims compile.py builds
BOX_D = 64  # the 128-byte swizzle span in bf16
STAGES = 2  # K / V pipeline stages (interface.py's num_stages)
BARRIERS = 128  # bytes of the SharedStorage's mbarrier block
L2_BYTES = 50 * 1024 * 1024  # SingleTileLPTScheduler's size_l2
CASES = [  # (seqlen, causal, heads, batch, d): the capture's and the replay's; case i's inputs are inputs(..., seed=i)
    (128, False, 1, 1, 128),
    (300, False, 1, 1, 128),
    (512, False, 1, 1, 128),
    (128, True, 1, 1, 128),
    (300, True, 1, 1, 128),
    (512, True, 1, 1, 128),
    (256, True, 2, 2, 128),
    (128, False, 1, 1, 64),
    (300, False, 1, 1, 64),
    (512, True, 1, 1, 64),
    (256, True, 2, 2, 64),
]


def block_n(causal: bool) -> int:
    """flash_attn/cute/interface.py's sm90 choice: 192 key rows per tile without a mask, 128 with the causal one."""
    return 128 if causal else 192


# Where compile.py writes the PTX: the repository's .thirdparty/ (ignored by git, carried to the GPU machine), as
# every third-party kernel here is rebuilt from its pinned registry sources, never stored in the repository.
PTX_DIR = HERE.parents[2] / ".thirdparty" / "fa3_cute"


def shared_bytes(d: int, causal: bool) -> int:
    """The DSL's SharedStorage.size_in_bytes() (the host IR's cuFuncSetAttribute constant): the Q tile, STAGES K and
    V tiles in bf16, the mbarriers; 229504 / 163968 bytes at d = 128, 114816 / 82048 at d = 64."""
    return 2 * d * (BLOCK_M + 2 * STAGES * block_n(causal)) + BARRIERS


def ptx_path(causal: bool, d: int = 128) -> Path:
    return PTX_DIR / f"fwd_sm90_bf16_d{d}_{'causal' if causal else 'noncausal'}.ptx"


def inputs(n: int, heads: int, batch: int, seed: int, d: int = 128):
    """q, k, v as bf16 bit patterns (uint16), layout (batch, seqlen, heads, d)."""
    from flashsim.numerics.formats import get_format, to_bits

    bf16 = get_format("bf16").dtype
    rng = np.random.default_rng(seed)
    return [to_bits(rng.standard_normal((batch, n, heads, d)).astype(np.float32).astype(bf16)) for _ in range(3)]


def reference(q, k, v, causal: bool, scale: float):
    """O (float64, (batch, seqlen, heads, d)) and LSE (natural log, (batch, heads, seqlen)) of
    softmax(scale q k^T) v from the bf16 inputs' exact values."""
    from flashsim.numerics.formats import from_bits

    qf, kf, vf = (from_bits(x, "bf16").astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    s = scale * qf @ kf.transpose(0, 1, 3, 2)
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    den = p.sum(axis=-1, keepdims=True)
    return ((p @ vf) / den).transpose(0, 2, 1, 3), (m + np.log(den))[..., 0]


def map_args(n: int, heads: int, batch: int, rows: int, d: int) -> dict:
    """cuTensorMapEncodeTiled's arguments for a (batch, n, heads, d) bf16 tensor, dims innermost first."""
    return dict(
        data_type="BFLOAT16",
        global_dim=(d, n, heads, batch),
        global_strides=(heads * d * 2, d * 2, n * heads * d * 2),
        box_dim=(BOX_D, rows, 1, 1),
        swizzle="128B",
    )


def fast_divmod(divisor: int) -> list[int]:
    """flash_attn/cute/fast_math.py FastDivmod.create: (divisor, multiplier, shift) as the host computes them."""
    p = 31 + (divisor - 1).bit_length()  # find_log2 rounds up
    return [divisor, (((1 << p) + divisor - 1) // divisor) & 0xFFFFFFFF, (p - 32) & 0xFFFFFFFF]


def scheduler(n: int, heads: int, batch: int, causal: bool, d: int = 128) -> tuple[tuple, list[int]]:
    """(grid, the scheduler's parameter words) as flash_attn/cute/tile_scheduler.py's host code makes them."""
    num_block = -(-n // BLOCK_M)
    if not causal:
        return (num_block, heads, batch), [num_block, heads, batch]
    one_head = n * (d + d) * 2  # seqlen_k * (headdim + headdim_v) * element_size
    swizzle = 1 if L2_BYTES < one_head else 1 << ((L2_BYTES // one_head).bit_length() - 1)
    hb = heads * batch
    words = [num_block * hb]
    for divisor in (num_block, heads, swizzle, swizzle * num_block, max(hb % swizzle, 1)):
        words += fast_divmod(divisor)
    return (num_block * hb, 1, 1), words + [hb // swizzle]


def params(n: int, heads: int, batch: int, causal: bool, d: int, lse_address: int, maps: list) -> list:
    """The launch's arguments after the pointers: flashsim.ptx.launch's kinds (bytes for structs, numpy scalars);
    ``maps`` are the four tensor maps (flashsim TensorMaps, or 128 driver bytes)."""
    shape = np.array([n, d, heads, batch], "<i4").tobytes()
    lse = np.array([lse_address], "<u8").tobytes() + np.array([n, heads, batch, n, heads * n, 0], "<i4").tobytes()
    scale = 1.0 / math.sqrt(d)
    _, words = scheduler(n, heads, batch, causal, d)
    return (
        [shape] * 4
        + [lse]
        + maps
        + [np.float32(scale * math.log2(math.e)), b"\0", b"\0", b"\0"]
        + [np.uint32(w) for w in words]
    )


@functools.lru_cache(maxsize=4)
def kernel_of(causal: bool, d: int):
    """The kernel of the staged PTX, loaded (and so decoded) once per process, as a user keeps a module."""
    import flashsim.ptx as P

    module = P.load(ptx_path(causal, d).read_text(), arch="sm_90")
    return module.kernel(module.kernels[0])


def simulate(q, k, v, causal: bool, check=None):
    """(O bits, LSE, report) of the kernel in flashsim.ptx on q, k, v ((batch, n, heads, d) bf16 bits)."""
    import flashsim.ptx as P

    batch, n, heads, d = q.shape
    o = np.zeros_like(q)
    lse = np.zeros((batch, heads, n), np.float32)
    kernel = kernel_of(causal, d)
    rows = (BLOCK_M, block_n(causal), block_n(causal), BLOCK_M)
    maps = [P.tensor_map_tiled(x, **map_args(n, heads, batch, r, d)) for x, r in zip((q, k, v, o), rows)]
    grid, _ = scheduler(n, heads, batch, causal, d)
    args = params(n, heads, batch, causal, d, P.address(lse), maps)
    report = P.launch(kernel, grid, THREADS, args, shared_mem=shared_bytes(d, causal), check=check)
    return o, lse, report


def check(q, k, v, o, lse, causal: bool) -> tuple[bool, str]:
    """O within bf16's bound of the float64 reference (one rounding of O plus P's rounding to bf16 before P V, scaled
    by the row's largest |O|), LSE within 1e-4."""
    from flashsim.numerics.formats import from_bits

    o_ref, lse_ref = reference(q, k, v, causal, 1.0 / math.sqrt(q.shape[-1]))
    err = np.abs(from_bits(o, "bf16").astype(np.float64) - o_ref)
    bound = 2.0**-8 * (np.abs(o_ref) + np.abs(o_ref).max(axis=-1, keepdims=True))
    lse_err = float(np.abs(lse.astype(np.float64) - lse_ref).max())
    ok = bool(np.all(err <= bound)) and lse_err < 1e-4
    return ok, f"O max |err| {err.max():.3e} (worst err / bound {np.max(err / bound):.3f}), LSE max |err| {lse_err:.3e}"


def sim(n: int, causal: bool, heads: int, batch: int, d: int, sanitizer=None) -> int:
    q, k, v = inputs(n, heads, batch, seed=0, d=d)
    t0 = time.time()
    o, lse, report = simulate(q, k, v, causal, sanitizer)
    took = time.time() - t0
    print(
        f"n={n} d={d} causal={causal} heads={heads} batch={batch} check={sanitizer}: {took:.1f} s, "
        f"{report.instructions} warp instrs"
    )
    ok, line = check(q, k, v, o, lse, causal)
    print(line, "PASS" if ok else "FAIL")
    return 0 if ok else 1


# ---- on a GPU: the same PTX through the driver API ---------------------------------------------------------------


def _driver():
    from cuda.bindings import driver

    def call(what, result):
        err, *rest = result if isinstance(result, tuple) else (result,)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"{what}: {err}")
        return rest[0] if len(rest) == 1 else rest

    return driver, call


def gpu_run(cubin: bytes, q, k, v, causal: bool):
    """(O bits, LSE) of the kernel on the current GPU: cuModuleLoadData of ptxas's cubin, cuLaunchKernel with a
    kernelParams array pointing at each argument's bytes, driver-encoded maps of map_args' arguments."""
    from flashsim.gpu.capture.tma import encode

    driver, call = _driver()
    batch, n, heads, d = q.shape
    smem = shared_bytes(d, causal)
    module = call("cuModuleLoadData", driver.cuModuleLoadData(cubin))
    func = call("cuModuleGetFunction", driver.cuModuleGetFunction(module, ptx_name(causal, d).encode()))
    attr = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    call("cuFuncSetAttribute", driver.cuFuncSetAttribute(func, attr, smem))
    o = np.zeros_like(q)
    lse = np.zeros((batch, heads, n), np.float32)
    dev = {}
    for name, x in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
        dev[name] = call("cuMemAlloc", driver.cuMemAlloc(x.nbytes))
        call("cuMemcpyHtoD", driver.cuMemcpyHtoD(dev[name], x.ctypes.data, x.nbytes))
    rows = (BLOCK_M, block_n(causal), block_n(causal), BLOCK_M)
    maps = []
    for name, r in zip("qkvo", rows):
        a = map_args(n, heads, batch, r, d)
        raw = encode(a["data_type"], int(dev[name]), a["global_dim"], a["global_strides"], a["box_dim"], swizzle=3)
        maps.append(raw.tobytes())
    args = params(n, heads, batch, causal, d, int(dev["lse"]), maps)
    holders = [ctypes.create_string_buffer(a if isinstance(a, bytes) else a.tobytes()) for a in args]
    pointers = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
    grid, _ = scheduler(n, heads, batch, causal, d)
    call(
        "cuLaunchKernel",
        driver.cuLaunchKernel(func, *grid, THREADS, 1, 1, smem, 0, ctypes.addressof(pointers), 0),
    )
    call("cuCtxSynchronize", driver.cuCtxSynchronize())
    for name, x in (("o", o), ("lse", lse)):
        call("cuMemcpyDtoH", driver.cuMemcpyDtoH(x.ctypes.data, dev[name], x.nbytes))
    for ptr in dev.values():
        call("cuMemFree", driver.cuMemFree(ptr))
    call("cuModuleUnload", driver.cuModuleUnload(module))
    return o, lse


def ptx_name(causal: bool, d: int) -> str:
    import flashsim.ptx as P

    return P.load(ptx_path(causal, d).read_text(), arch="sm_90").kernels[0]


def capture(out: Path) -> int:
    from flashsim.gpu import runtime as rt
    from flashsim.gpu.build import assemble_ptx

    rt.require_gpu()  # a current context on the first device
    out.mkdir(parents=True, exist_ok=True)
    store, lines = {}, []
    for i, (n, causal, heads, batch, d) in enumerate(CASES):
        ptx = ptx_path(causal, d).read_text()
        cubin = assemble_ptx(ptx, "sm_90a")
        q, k, v = inputs(n, heads, batch, seed=i, d=d)
        o, lse = gpu_run(cubin, q, k, v, causal)
        ok, line = check(q, k, v, o, lse, causal)
        lines.append(
            f"case {i} n={n} d={d} causal={causal} heads={heads} batch={batch}: {line} {'ok' if ok else 'OFF'}"
        )
        print(lines[-1])
        tag = f"c{i}_"
        store.update({tag + "o": o, tag + "lse": lse, tag + "qkv_sha256": np.array(qkv_digest(q, k, v))})
        store[tag + "case"] = np.array([n, int(causal), heads, batch, d], np.int64)
        store[tag + "ptx_sha256"] = np.array(hashlib.sha256(ptx.encode()).hexdigest())
    driver, call = _driver()
    dev = call("cuCtxGetDevice", driver.cuCtxGetDevice())
    store["device"] = np.array(call("cuDeviceGetName", driver.cuDeviceGetName(64, dev)).split(b"\0")[0].decode())
    np.savez_compressed(out / "fa3_cute_sm90.npz", **store)
    (out / "fa3_cute_sm90.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'fa3_cute_sm90.npz'} ({store['device']})")
    return 0


def qkv_digest(q, k, v) -> str:
    """The inputs' sha256: the capture stores it, not the inputs (regenerated from the case's seed)."""
    return hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in (q, k, v))).hexdigest()


def captured_case(data, i: int) -> tuple[int, bool, int, int, int]:
    """Case i's (seqlen, causal, heads, batch, d); captures before d = 64 was built store four numbers (d = 128)."""
    n, causal, heads, batch, d = [int(x) for x in data[f"c{i}_case"]] + [128] * (len(data[f"c{i}_case"]) == 4)
    return n, bool(causal), heads, batch, d


def captured_inputs(data, i: int):
    """Case i's q, k, v, regenerated and checked against the capture's digest."""
    n, _, heads, batch, d = captured_case(data, i)
    q, k, v = inputs(n, heads, batch, seed=i, d=d)
    if qkv_digest(q, k, v) != str(data[f"c{i}_qkv_sha256"]):
        raise ValueError(f"case {i}: the regenerated inputs are not the captured ones (another numpy generator?)")
    return q, k, v


def replay(path: Path) -> int:
    """Simulate every captured case; 0 when O and LSE are bit-equal to the GPU's."""
    data = np.load(path)
    bad = 0
    for i in range(len(CASES)):
        tag = f"c{i}_"
        if tag + "case" not in data:
            break
        n, causal, heads, batch, d = captured_case(data, i)
        if str(data[tag + "ptx_sha256"]) != hashlib.sha256(ptx_path(causal, d).read_bytes()).hexdigest():
            print(f"case {i}: the captured PTX is not .thirdparty/fa3_cute's")
            bad += 1
            continue
        o, lse, _ = simulate(*captured_inputs(data, i), causal)
        o_diff = int((o != data[tag + "o"]).sum())
        lse_diff = int((lse.view(np.uint32) != data[tag + "lse"].view(np.uint32)).sum())
        print(f"case {i} n={n} d={d} causal={causal} heads={heads} batch={batch}: {o_diff} O and {lse_diff} LSE "
              "elements differ from the GPU's")  # fmt: skip
        bad += bool(o_diff or lse_diff)
    return 1 if bad else 0


def bench(n: int, causal: bool, reps: int) -> int:
    """The simulator's time per launch (the module loaded once; first launch apart) against the numpy engine's
    flashsim.attention on the same bf16 problem (B=1, H=1, d=128), medians of ``reps``, with the machine's load."""
    import os
    import statistics

    import flashsim
    from flashsim.numerics.formats import from_bits

    q, k, v = inputs(n, 1, 1, seed=0)
    t0 = time.perf_counter()
    simulate(q, k, v, causal)
    first = time.perf_counter() - t0
    qq, kk, vv = (from_bits(x, "bf16").transpose(0, 2, 1, 3) for x in (q, k, v))
    flashsim.attention(qq, kk, vv, causal=causal)
    runs = {
        "simulator": lambda: simulate(q, k, v, causal),
        "numpy engine": lambda: flashsim.attention(qq, kk, vv, causal=causal),
    }
    wall, cpu = {w: [] for w in runs}, {w: [] for w in runs}
    for _ in range(reps):  # alternating, so that a change of the machine's load falls on both
        for who, fn in runs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[who].append(time.perf_counter() - t0)
            cpu[who].append(time.process_time() - c0)
    s, e = (statistics.median(wall[w]) for w in runs)
    sc, ec = (statistics.median(cpu[w]) for w in runs)
    print(f"FlashAttention CuTe-DSL sm90 forward, B=1 H=1 N={n} d=128 bf16 causal={causal}: simulator median {s:.3f} s "
          f"(of {[round(x, 3) for x in wall['simulator']]}), numpy engine {e:.4f} s (of "
          f"{[round(x, 4) for x in wall['numpy engine']]}): {s / e:.2f}x wall; CPU time {sc:.3f} s against {ec:.4f} s: "
          f"{sc / ec:.2f}x; first launch {first:.2f} s (load and decode included); load {os.getloadavg()}")  # fmt: skip
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["sim", "capture", "replay", "bench"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("npz", nargs="?", type=Path, help="replay: the capture's fa3_cute_sm90.npz")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--d", type=int, default=128, choices=DIMS)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--check", choices=["memcheck", "racecheck", "initcheck"], help="sim: under this sanitizer")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.mode == "bench":
        return bench(a.n, a.causal, a.reps)
    if a.mode == "sim":
        return sim(a.n, a.causal, a.heads, a.batch, a.d, a.check)
    if a.mode == "capture":
        if a.out is None:
            ap.error("capture needs --out DIR")
        return capture(a.out)
    if a.npz is None:
        ap.error("replay needs the npz")
    return replay(a.npz)


if __name__ == "__main__":
    sys.exit(main())
