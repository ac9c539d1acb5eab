"""The emulator's speed on the CPU, against a plain float64 numpy attention in the same process.

    python3 benchmarks/bench_emulator.py [--n 2048] [--jax-n 4096] [--json out.json]

1. numpy engine: flashsim.attention (sm_90 default configuration, one head, d=128, standard-normal f16 inputs,
   non-causal) for f32 and f16 P@V, against softmax(q k^T / sqrt(d)) v in float64 numpy on the same inputs;
   each the best of ``--reps`` runs. One-time set-up (loading the SFU tables, loading or compiling the numba
   kernels) is done before either is timed and charged to neither.
2. JAX engine on the CPU, the way a user meets it: a fresh process runs flashsim.attention(..., backend="jax")
   once, timed from the call (tracing, compilation or its persistent-cache load, and the run). Two such processes
   share a new persistent compilation cache: the first compiles, the second is the "second run". The numpy engine
   runs in the same process for comparison and every bit of both outputs is compared.

Prints a table and writes the figures as JSON (``--json``); benchmarks/RESULTS.md quotes them with the command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

from flashsim.commands.bench import plain_attention  # the baseline `flashsim bench emulator` uses too

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def inputs(n, d=128, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((1, 1, n, d)).astype(np.float16) for _ in range(3))


def best_of(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def numpy_engine(n, reps):
    import flashsim
    from flashsim.numerics import sfu

    t0 = time.perf_counter()
    sfu.load_tables("sm_90")
    q, k, v = inputs(n)
    for acc in ("f32", "f16"):  # one-time set-up (compiled tensor-core kernels) on a one-row problem
        flashsim.attention(q[:, :, :1], k[:, :, :1], v[:, :, :1], pv_accum=acc, progress=False)
    setup = time.perf_counter() - t0
    t_ref = best_of(lambda: plain_attention(q, k, v), reps)
    out = {"n": n, "d": 128, "float64_s": t_ref, "sfu_setup_s": setup}
    for acc in ("f32", "f16"):
        t = best_of(lambda: flashsim.attention(q, k, v, pv_accum=acc, progress=False), reps)
        out[f"emulator_{acc}_s"] = t
        out[f"ratio_{acc}"] = t / t_ref
    return out


_JAX_CHILD = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    sys.path.insert(0, sys.argv[2])
    from bench_emulator import inputs
    import numpy as np
    t0 = time.perf_counter()
    import flashsim
    from flashsim.numerics import sfu
    sfu.load_tables("sm_90")
    setup = time.perf_counter() - t0
    q, k, v = inputs(int(sys.argv[1]))
    t0 = time.perf_counter()
    o, lse = flashsim.attention(q, k, v, backend="jax", progress=False)
    t_jax = time.perf_counter() - t0
    t0 = time.perf_counter()
    o2, lse2 = flashsim.attention(q, k, v, progress=False)
    t_np = time.perf_counter() - t0
    same = bool((o.view(np.uint16) == o2.view(np.uint16)).all() and (lse.view(np.uint32) == lse2.view(np.uint32)).all())
    print(json.dumps({"jax_first_call_s": t_jax, "numpy_s": t_np, "bits_equal": same, "setup_s": setup}))
""")


def jax_engine(n):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(
            os.environ,
            JAX_COMPILATION_CACHE_DIR=cache,
            JAX_PLATFORMS="cpu",
            PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )
        runs = []
        for _ in range(2):
            res = subprocess.run(
                [sys.executable, "-c", _JAX_CHILD, str(n), os.path.dirname(__file__)],
                env=env,
                capture_output=True,
                text=True,
                timeout=3600,
            )
            if res.returncode != 0:
                raise SystemExit(f"bench_emulator: the JAX child failed:\n{res.stderr[-3000:]}")
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    first, second = runs
    return {
        "n": n,
        "d": 128,
        "cold_process": first,
        "second_process": second,
        "speedup_second_run_incl_compile": second["numpy_s"] / second["jax_first_call_s"],
        "speedup_cold_incl_compile": first["numpy_s"] / first["jax_first_call_s"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=2048, help="sequence length of the numpy-engine comparison")
    p.add_argument("--jax-n", type=int, default=4096, help="sequence length of the JAX comparison (0: skip)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", help="write the figures here")
    a = p.parse_args(argv)
    import numpy

    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "processor": platform.processor() or platform.machine(),
        },
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    r = numpy_engine(a.n, a.reps)
    report["numpy_engine"] = r
    print(
        f"numpy engine, one head, N={a.n}, d=128 (best of {a.reps}): float64 numpy {r['float64_s']:.3f} s; "
        f"emulator f32 P@V {r['emulator_f32_s']:.2f} s ({r['ratio_f32']:.1f}x), "
        f"f16 P@V {r['emulator_f16_s']:.2f} s ({r['ratio_f16']:.1f}x); set-up (SFU tables, compiled kernels) "
        f"{r['sfu_setup_s']:.2f} s (not charged)",
        flush=True,
    )
    if a.jax_n:
        import jax

        report["jax"] = jax.__version__
        j = jax_engine(a.jax_n)
        report["jax_engine"] = j
        c, s = j["cold_process"], j["second_process"]
        print(
            f"JAX engine (CPU), N={a.jax_n}: cold process {c['jax_first_call_s']:.2f} s "
            f"(numpy {c['numpy_s']:.2f} s, {j['speedup_cold_incl_compile']:.2f}x); second process with the "
            f"persistent compilation cache {s['jax_first_call_s']:.2f} s (numpy {s['numpy_s']:.2f} s, "
            f"{j['speedup_second_run_incl_compile']:.2f}x); bits equal: {c['bits_equal'] and s['bits_equal']}",
            flush=True,
        )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
