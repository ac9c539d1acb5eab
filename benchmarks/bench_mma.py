"""flashsim.mma vs mmasim, per mma, on the same inputs, in one run; and the tensor-core engines on kernel-sized chains.

    python3 benchmarks/bench_mma.py [--batch 2048 8192] [--mmasim-mmas 24] [--repeats 7]
    python3 benchmarks/bench_mma.py --engines [--units 64] [--repeats 3] [--no-generic] [--no-jax]

For each type (f32.f16.f16.f32, f16.f16.f16.f16, f32.bf16.bf16.f32) and each batch size: flashsim.mma on the whole
batch (best of --repeats, wall clock), mmasim (one mma per call, its only form) on the first --mmasim-mmas mmas of
the same batch, checked bit for bit against flashsim on those, and the ratio of the per-mma times.
mmasim runs twice: with torch's default intra-op threads and with torch.set_num_threads(1). Its tensors are tiny,
so on a small or busy machine the thread hand-offs dominate and the single-thread run is several times faster:
both are reported, the single-thread one is the fair baseline.
Inputs: N(0,1) values rounded to the input type, c N(0,1) (the normal attention-like case).

--engines: flashsim.numerics.tensorcore.mma_chain on the emulator's two chains, S = Q K^T (a (U, 128, 128) f16,
b = K^T (U, 128, 64) as a transposed view, c f32 zeros) and O += P V (a = P (U, 128, 64), b = V (U, 64, 128),
c = O f32 or f16), by each engine: the numpy engine's fast path (the compiled numba kernel, on one thread and on
the threads it takes by default: FLASHSIM_MMA_THREADS or the CPUs this process may use), the generic routine on
numpy, and the generic routine under jax.jit on the CPU (compiled once, not timed; the numba kernel's compilation
or cache load is not timed either). ns per product = time / (outputs x K); "cpu" is the process's CPU time (all
threads: what a busy shared machine does not distort), "wall" the elapsed time; best of --repeats. Every engine's
result is checked bit for bit against the fast path's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import time

import ml_dtypes
import numpy as np

import flashsim

TYPES = {
    "f32.f16.f16.f32": (np.float16, np.float32),
    "f16.f16.f16.f16": (np.float16, np.float16),
    "f32.bf16.bf16.f32": (ml_dtypes.bfloat16, np.float32),
}


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def to_torch(x, torch):
    x = np.ascontiguousarray(x)
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def time_mmasim(type_name, a, b, c, arch_name, threads=None):
    import torch
    from mmasim.nv_ptx.sim import MMA

    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        op = MMA(arch_name, "m16n8k16." + type_name)
        ta = [to_torch(x, torch) for x in a]
        tb = [to_torch(x, torch) for x in b]
        tc = [to_torch(x, torch) for x in c]
        op(ta[0], tb[0], tc[0])  # warm-up
        out = []
        t0 = time.perf_counter()
        for i in range(len(ta)):
            out.append(op(ta[i], tb[i], tc[i]))
        dt = (time.perf_counter() - t0) / len(ta)
    finally:
        torch.set_num_threads(saved)
    res = np.stack([(o.view(torch.int16).numpy() if o.dtype == torch.bfloat16 else o.numpy()) for o in out])
    return dt, res


def _best(fn, repeats):
    """(best CPU seconds, best wall seconds) of ``repeats`` calls, after one warm-up call; the last result."""
    out = fn()
    cpu = wall = float("inf")
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        out = fn()
        cpu, wall = min(cpu, time.process_time() - c0), min(wall, time.perf_counter() - w0)
    return cpu, wall, out


@contextlib.contextmanager
def _threads_env(n: int):
    """FLASHSIM_MMA_THREADS=n within the body (the numba kernel reads it per call)."""
    saved = os.environ.get("FLASHSIM_MMA_THREADS")
    os.environ["FLASHSIM_MMA_THREADS"] = str(n)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["FLASHSIM_MMA_THREADS"]
        else:
            os.environ["FLASHSIM_MMA_THREADS"] = saved


def engines(args) -> None:
    from flashsim.numerics import tensorcore as tc
    from flashsim.numerics.xp import enable_x64

    print(
        f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; numpy {np.__version__}; python "
        f"{platform.python_version()}; arch {args.arch}"
    )
    jax = None
    if not args.no_jax:
        try:
            import jax
            import jax.numpy as jnp

            print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
        except ImportError:
            print("jax not installed: no jax column")
    rng = np.random.default_rng(0)
    u = args.units
    q = rng.standard_normal((u, 128, 128)).astype(np.float16)
    k = rng.standard_normal((u, 64, 128)).astype(np.float16)
    v = rng.standard_normal((u, 64, 128)).astype(np.float16)
    p = rng.random((u, 128, 64)).astype(np.float16)
    o = rng.standard_normal((u, 128, 128)).astype(np.float32)
    cases = [
        ("S = Q K^T, f32", q, np.swapaxes(k, -1, -2), np.zeros((u, 128, 64), np.float32)),
        ("O += P V, f32", p, v, o),
        ("O += P V, f16", p, v, o.astype(np.float16)),
    ]
    try:
        import numba

        print(f"numba {numba.__version__}")
    except ImportError:
        print("numba not installed: the 'numba' rows run the generic routine")
    print(f"{'chain':16s} {'engine':22s} {'cpu ns/product':>15s} {'wall ns/product':>16s}")
    for name, a, b, c in cases:
        products = a.shape[0] * a.shape[1] * b.shape[-1] * a.shape[-1]
        rows, ref = [], None
        for threads in sorted({1, tc._threads()}):
            with _threads_env(threads):
                cpu, wall, d = _best(lambda: tc.mma_chain(a, b, c, args.arch), args.repeats)
            assert ref is None or np.array_equal(d.view(np.uint8), ref.view(np.uint8)), "threads differ"
            ref = d
            rows.append((f"numba, {threads} thread{'s' if threads > 1 else ''}", cpu, wall))
        if not args.no_generic:
            cpu, wall, d = _best(lambda: tc.mma_chain_generic(a, b, c, args.arch), 1)
            assert np.array_equal(d.view(np.uint8), ref.view(np.uint8)), "generic numpy differs"
            rows.append(("numpy generic", cpu, wall))
        if jax is not None:
            with enable_x64():
                fn = jax.jit(lambda a, b, c: tc.mma_chain(a, b, c, args.arch))
                ja, jb, jc = jnp.asarray(a), jnp.asarray(b), jnp.asarray(c)
                cpu, wall, d = _best(lambda: fn(ja, jb, jc).block_until_ready(), args.repeats)
            assert np.array_equal(np.asarray(d).view(np.uint8), ref.view(np.uint8)), "jax differs"
            rows.append(("jax generic (jit, CPU)", cpu, wall))
        for engine, cpu, wall in rows:
            print(f"{name:16s} {engine:22s} {cpu / products * 1e9:15.3f} {wall / products * 1e9:16.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, nargs="+", default=[2048, 8192])
    p.add_argument("--mmasim-mmas", type=int, default=24)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--engines", action="store_true", help="time the tensor-core engines on kernel-sized chains")
    p.add_argument("--units", type=int, default=64, help="--engines: CUDA blocks (batch) per chain")
    p.add_argument("--no-generic", action="store_true", help="--engines: skip the (slow) generic numpy run")
    p.add_argument("--no-jax", action="store_true", help="--engines: skip JAX")
    args = p.parse_args()
    if args.engines:
        engines(args)
        return
    mmasim_arch = {
        "sm_80": "Ampere",
        "sm_86": "Ampere",
        "sm_89": "Ada Lovelace",
        "sm_90": "Hopper",
        "sm_100": "Blackwell",
        "sm_120": "RTX Blackwell",
    }[args.arch]
    print(
        f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; numpy {np.__version__}; python "
        f"{platform.python_version()}; arch {args.arch}"
    )
    import torch

    print(f"torch {torch.__version__}, default intra-op threads {torch.get_num_threads()}")
    print(
        f"{'type':20s} {'batch':>6s} {'flashsim us/mma':>16s} {'mmasim us/mma':>14s} {'ratio':>8s} "
        f"{'mmasim 1 thread':>16s} {'ratio':>8s}"
    )
    rng = np.random.default_rng(0)
    for type_name, (adt, cdt) in TYPES.items():
        nmax = max(args.batch)
        a = rng.standard_normal((nmax, 16, 16)).astype(adt)
        b = rng.standard_normal((nmax, 16, 8)).astype(adt)
        c = rng.standard_normal((nmax, 16, 8)).astype(cdt)
        m = args.mmasim_mmas
        t_sim, d_sim = time_mmasim(type_name, a[:m], b[:m], c[:m], mmasim_arch)
        t_sim1, d_sim1 = time_mmasim(type_name, a[:m], b[:m], c[:m], mmasim_arch, threads=1)
        d_fs = flashsim.mma(a[:m], b[:m], c[:m], arch=args.arch)
        u = np.uint16 if cdt is np.float16 else np.uint32
        if not (np.array_equal(d_fs.view(u), d_sim.view(u)) and np.array_equal(d_fs.view(u), d_sim1.view(u))):
            raise SystemExit(f"{type_name}: flashsim.mma and mmasim disagree on the benchmark inputs")
        for n in args.batch:
            flashsim.mma(a[:n], b[:n], c[:n], arch=args.arch)  # warm-up
            best = float("inf")
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                flashsim.mma(a[:n], b[:n], c[:n], arch=args.arch)
                best = min(best, time.perf_counter() - t0)
            t_fs = best / n
            print(
                f"{type_name:20s} {n:6d} {t_fs * 1e6:16.2f} {t_sim * 1e6:14.0f} {t_sim / t_fs:7.0f}x "
                f"{t_sim1 * 1e6:16.0f} {t_sim1 / t_fs:7.0f}x"
            )


if __name__ == "__main__":
    main()
