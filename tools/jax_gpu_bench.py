"""GPU: the JAX backend of the emulator on the GPU beside the real kernel, on the same input.

Usage (GPU machine with jax[cuda] and cuda-python, repo root):
    PYTHONPATH=. python3 tools/jax_gpu_bench.py [--n 16384] [--d 128] [--reps 20] [--json FILE] [--skip-check]
Without a GPU, the two emulator backends side by side on whatever device jax has (one head, d=128):
    PYTHONPATH=. python3 tools/jax_gpu_bench.py --vs-numpy 1024 4096

Phases, each reported on its own lines:
  1. check: flashsim.attention(backend="jax") on the GPU against backend="numpy" on the CPU, bit for bit, on small
     problems whose heads each carry one kind of trouble (NaN/inf, huge and tiny values, empty causal rows), f32
     and f16 P@V: XLA's GPU arithmetic must not change a bit of the emulation;
  2. kernel: kernel/flash_fwd.cu on (1, 1, N, d) standard-normal f16 input (non-causal, f32 P@V, the GPU's default
     configuration): median of CUDA-event timings (flashsim.gpu.runtime.timed) of the prepared launch;
  3. emulation: flashsim.attention(q, k, v, backend="jax") on the same input, wall clock of a first call
     (compilation included) and a second call (compiled), host arrays in and out;
  4. the ratio emulation / kernel, and the fraction of bit-equal elements of O and LSE (emulation vs kernel).
Exit status: 0 when every phase ran and all bits agree; 1 when some bits differ; 2 when a phase failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

# JAX must not grab most of the GPU memory up front: the kernel runs in the same process through cuda.core.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402

from flashsim.commands.verify import trouble_heads  # noqa: E402


def equal_fraction(a, b):
    u = {2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
    return float(np.mean(np.asarray(a).view(u) == np.asarray(b).view(u)))


def phase_check(report):
    import flashsim

    cases = [
        dict(shape=(1, 6, 300, 200, 128), causal=False, pv_accum="f32"),
        dict(shape=(1, 3, 200, 130, 128), causal=True, pv_accum="f16"),
    ]
    ok = True
    for i, case in enumerate(cases):
        b, h, nq, nk, d = case["shape"]
        q, k, v = trouble_heads(np.random.default_rng(100 + i), b, h, nq, nk, d)
        kw = dict(causal=case["causal"], pv_accum=case["pv_accum"])
        t0 = time.perf_counter()
        o0, l0 = flashsim.attention(q, k, v, check_overflow=False, **kw)  # trouble heads: inf / NaN in v
        t1 = time.perf_counter()
        o1, l1 = flashsim.attention(q, k, v, backend="jax", check_overflow=False, **kw)
        t2 = time.perf_counter()
        fo, fl = equal_fraction(o1, o0), equal_fraction(l1, l0)
        ok &= fo == 1.0 and fl == 1.0
        line = (
            f"check {b}x{h}x{nq}x{nk}x{d} causal={case['causal']} {case['pv_accum']}: bit-equal O {fo:.6f}, "
            f"LSE {fl:.6f} (numpy CPU {t1 - t0:.1f}s, jax GPU {t2 - t1:.1f}s incl. compile)"
        )
        print(line, flush=True)
        report.setdefault("check", []).append(
            dict(case, shape=list(case["shape"]), equal_o=fo, equal_lse=fl, numpy_s=t1 - t0, jax_s=t2 - t1)
        )
    return ok


def phase_kernel(q, k, v, reps, report):
    from flashsim.gpu import prepared_launch
    from flashsim.gpu import runtime as rt

    go, (do, dl), prob = prepared_launch(q, k, v)
    ms = rt.timed(lambda: go(sync=False), warmup=3, reps=reps)
    go()
    o, lse = do.to_numpy(), dl.to_numpy()
    cfg = prob.config
    print(f"kernel: {ms:.3f} ms (median of {reps}), config {cfg.describe()}", flush=True)
    report["kernel_ms"] = ms
    report["config"] = cfg.describe()
    return o, lse, ms


def phase_emulation(q, k, v, report):
    import flashsim
    from flashsim.emulator import engine_jax as jax_backend

    t0 = time.perf_counter()
    o, lse = flashsim.attention(q, k, v, backend="jax", progress=True)
    t1 = time.perf_counter()
    o2, lse2 = flashsim.attention(q, k, v, backend="jax", progress=True)
    t2 = time.perf_counter()
    same = equal_fraction(o2, o) == 1.0 and equal_fraction(lse2, lse) == 1.0
    print(
        f"emulation (jax, GPU): first call {t1 - t0:.2f} s (compilation included), second call {t2 - t1:.2f} s; "
        f"plan {jax_backend.LAST_PLAN}; the two calls agree: {same}",
        flush=True,
    )
    report.update(emulation_first_s=t1 - t0, emulation_s=t2 - t1, plan=dict(jax_backend.LAST_PLAN), runs_agree=same)
    return o2, lse2, t2 - t1


def vs_numpy(ns, d, report) -> int:
    """The numpy backend against the JAX backend on the same input: seconds, speedup, bit identity."""
    import warnings

    import jax

    import flashsim
    from flashsim.numerics import sfu

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    sfu.load_tables("sm_90")  # shared by both backends: loaded before either is timed
    print(
        f"jax {jax.__version__} on {jax.devices()}; SFU tables loaded in {time.perf_counter() - t0:.1f} s", flush=True
    )
    print(f"{'N':>6} {'numpy s':>9} {'jax 1st s':>10} {'jax s':>8} {'speedup':>8} {'1st':>6}  bits", flush=True)
    status = 0
    for n in ns:
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((1, 1, n, d)).astype(np.float16) for _ in range(3))
        times = []
        for backend in ("numpy", "jax", "jax"):
            t0 = time.perf_counter()
            out = flashsim.attention(q, k, v, backend=backend, progress=False)
            times.append(time.perf_counter() - t0)
            if backend == "numpy":
                ref = out
        same = equal_fraction(out[0], ref[0]) == 1.0 and equal_fraction(out[1], ref[1]) == 1.0
        status |= not same
        print(
            f"{n:6d} {times[0]:9.2f} {times[1]:10.2f} {times[2]:8.2f} {times[0] / times[2]:7.2f}x "
            f"{times[0] / times[1]:5.2f}x  {'equal' if same else 'DIFFER'}",
            flush=True,
        )
        report.setdefault("vs_numpy", []).append(
            dict(n=n, numpy_s=times[0], jax_first_s=times[1], jax_s=times[2], bits_equal=same)
        )
    return int(status)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16384, help="sequence length (Nq = Nk)")
    ap.add_argument("--d", type=int, default=128, choices=(64, 128))
    ap.add_argument("--reps", type=int, default=20, help="kernel timing repetitions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--skip-check", action="store_true", help="skip phase 1 (bit-identity with numpy)")
    ap.add_argument(
        "--vs-numpy",
        type=int,
        nargs="+",
        metavar="N",
        help="only compare the jax and numpy emulator backends at these N (no GPU needed)",
    )
    args = ap.parse_args(argv)
    report: dict = {"n": args.n, "d": args.d}
    if args.vs_numpy:
        return finish(report, args.json, vs_numpy(args.vs_numpy, args.d, report))
    status = 0
    try:
        import jax

        report["jax"] = jax.__version__
        if jax.default_backend() != "gpu":
            print(f"jax runs on {jax.default_backend()!r}, not on a GPU: install jax[cuda]", flush=True)
            return 2
        print(f"jax {jax.__version__} on {jax.devices()}", flush=True)
        from flashsim.gpu import runtime as rt

        rt.require_gpu()
        report["arch"] = rt.current_arch()
    except Exception:
        traceback.print_exc()
        return 2

    if not args.skip_check:
        try:
            if not phase_check(report):
                status = 1
        except Exception:
            traceback.print_exc()
            status = 2

    rng = np.random.default_rng(args.seed)
    q, k, v = (rng.standard_normal((1, 1, args.n, args.d)).astype(np.float16) for _ in range(3))
    kernel = emulation = None
    try:
        kernel = phase_kernel(q, k, v, args.reps, report)
    except Exception:
        traceback.print_exc()
        status = 2
    try:
        emulation = phase_emulation(q, k, v, report)
    except Exception:
        traceback.print_exc()
        status = 2
    if kernel and emulation:
        (ok_, lk, ms), (oe, le, secs) = kernel, emulation
        fo, fl = equal_fraction(oe, ok_), equal_fraction(le, lk)
        ratio = secs * 1e3 / ms
        print(
            f"N={args.n} d={args.d}: emulation {secs:.2f} s / kernel {ms:.3f} ms = {ratio:,.0f}x; "
            f"bit-equal O {fo:.6f}, LSE {fl:.6f}",
            flush=True,
        )
        report.update(ratio=ratio, equal_o=fo, equal_lse=fl)
        if (fo, fl) != (1.0, 1.0) and status == 0:
            status = 1
    return finish(report, args.json, status)


def finish(report: dict, path: str | None, status: int) -> int:
    """Write ``report`` as JSON to ``path`` (if given), print the closing status line, return ``status``."""
    if path:
        with open(path, "w") as fh:
            json.dump(report, fh, indent=1)
    print(f"status {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
