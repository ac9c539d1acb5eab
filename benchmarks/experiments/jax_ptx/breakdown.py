"""GPU: where the JAX engine's default run (the fused Pallas kernel) spends its wall clock at N = 16384, d = 128.

Phases of engine_pallas.run, each timed with the device synchronised (median of --reps, after one warm-up call):
host-side inputs (engine_pallas.inputs), device_put (q, k, v and the tile ranges; the SFU tables once per process),
the fused kernel, the epilogue jitted on the device, the copy of its outputs to the host; the numpy epilogue on the
host (the thirteenth round's form) on the same state; and flashsim.attention(backend="jax") end to end.

Usage (GPU machine, repo root; on a CPU Pallas's interpreter runs the kernel, for a smoke test at a small --n):
    PYTHONPATH=. python3 benchmarks/experiments/jax_ptx/breakdown.py [--n 16384] [--reps 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    import jax

    import flashsim
    from flashsim.emulator import engine_pallas as EP
    from flashsim.emulator import kernel_program as K
    from flashsim.numerics.xp import enable_x64, native_conversions
    from flashsim.problem import prepare

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, args.n, args.d)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v)
    dev = jax.devices()[0]
    times: dict = {}

    def clock(name, fn):
        t0 = time.perf_counter()
        out = fn()
        jax.block_until_ready(out)
        times.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    for rep in range(args.reps + 1):
        with enable_x64():
            static, shapes, arrays = clock("inputs (host)", lambda: EP.inputs(q, k, v, prob))
            fn = EP._program(static, shapes, dev.platform != "gpu")  # (Pallas's interpreter on a CPU)
            dev_arrays = clock(
                "device_put",
                lambda: (
                    [jax.device_put(a, dev) for a in arrays[: EP.CALL_ARRAYS]]
                    + EP._on_device(arrays[EP.CALL_ARRAYS :], dev)
                ),
            )
            m, l, o = clock("fused kernel", lambda: fn(*dev_arrays)[:3])
            epi = EP._epilogue(prob.lse_scale, v.dtype, native_conversions([dev]))
            outs = clock("epilogue (device)", lambda: epi(l, o, m))
            clock("outputs to host", lambda: [np.asarray(x) for x in outs])
            lh, oh, mh = (np.asarray(x) for x in (l, o, m))
            host = clock("epilogue (numpy, host)", lambda: K.epilogue(lh, oh, mh, prob.lse_scale, v.dtype))
            same = all(
                np.array_equal(np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8)) for a, b in zip(outs, host)
            )
        if dev.platform == "gpu":
            clock("flashsim.attention end to end", lambda: flashsim.attention(q, k, v, backend="jax", progress=False))
        if rep == 0:
            times.clear()  # the first round compiles
    report = {name: float(np.median(ts)) for name, ts in times.items()}
    for name, t in report.items():
        print(f"{name:32s} {t * 1e3:9.2f} ms (median of {len(times[name])})")
    print(f"device and host epilogues agree in every bit: {same}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(n=args.n, d=args.d, median_s=report, epilogues_agree=same), f, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
