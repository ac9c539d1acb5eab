"""GPU: where the JAX engine's time goes, and which loop structure pays.

    PYTHONPATH=. python3 tools/jax_gpu_variants.py [--n 16384] [--json FILE]

Times flashsim.attention(backend="jax") (one head, d=128, f32 P@V, the sm_90 default configuration) for loop
structures that change no arithmetic (every variant's O and LSE are compared bit for bit with the first):
  base      k16 steps of a chain in lax.fori_loop, KV steps in lax.scan (STEPS_PER_CALL per dispatch)
  unrolled  k16 steps unrolled in Python (straight-line fusions, no device loop per chain)
  unroll+2  unrolled, and lax.scan(unroll=2)
  calls64   base with 64 KV steps per dispatch
Then the three parts of one KV step (scores, probabilities, accumulate), each jitted alone at the run's shapes
(and the two tensor-core chains alone, the part a fused kernel would replace),
with a K / V tile per slot (as the engine runs them) and with one tile broadcast over all slots (what a
non-causal step could do: measured on the H200 with a whole engine path built on it, which did not pay:
benchmarks/experiments/jax_uniform_plan/).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402


def timed_run(q, k, v):
    import flashsim

    t0 = time.perf_counter()
    o, lse = flashsim.attention(q, k, v, backend="jax", progress=False)
    t1 = time.perf_counter()
    o, lse = flashsim.attention(q, k, v, backend="jax", progress=False)
    return o, lse, t1 - t0, time.perf_counter() - t1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--json")
    ap.add_argument("--only", help="comma-separated variant names")
    ap.add_argument("--no-parts", action="store_true")
    a = ap.parse_args(argv)
    import jax

    from flashsim.emulator import engine_jax
    from flashsim.numerics import tensorcore

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, a.n, 128)).astype(np.float16) for _ in range(3))
    base_fori = tensorcore._fori

    def unrolled(xp, n, body, init):
        x = init
        for i in range(n):
            x = body(i, x)
        return x

    variants = [
        ("base", base_fori, 1, 16),
        ("unrolled", unrolled, 1, 16),
        ("unroll+2", unrolled, 2, 16),
        ("calls64", base_fori, 1, 64),
        ("unroll+8", unrolled, 8, 16),
        ("base+4", base_fori, 4, 16),
    ]
    if a.only:
        variants = [x for x in variants if x[0] in a.only.split(",")]
    report, ref = {"n": a.n, "jax": jax.__version__, "variants": {}}, None
    for name, fori, unroll, spc in variants:
        tensorcore._fori, engine_jax.SCAN_UNROLL, engine_jax.STEPS_PER_CALL = fori, unroll, spc
        engine_jax._COMPILED.clear()
        o, lse, first, second = timed_run(q, k, v)
        same = ref is None or (
            np.array_equal(o.view(np.uint16), ref[0].view(np.uint16))
            and np.array_equal(lse.view(np.uint32), ref[1].view(np.uint32))
        )
        ref = ref or (o, lse)
        report["variants"][name] = dict(first_s=first, second_s=second, bits_equal=bool(same))
        print(f"{name:10s} first {first:6.2f} s  second {second:6.3f} s  bits equal {same}", flush=True)
    tensorcore._fori, engine_jax.SCAN_UNROLL, engine_jax.STEPS_PER_CALL = base_fori, 1, 16
    if not a.no_parts:
        parts(report, q, k, v)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(report, fh, indent=1)
    return 0


def parts(report, q, k, v):
    """Steps 1-3, 4, 5-7 of one KV step at the run's shapes (128 slots x 128 rows x 32 keys), each jitted alone."""
    import jax
    import jax.numpy as jnp

    from flashsim.emulator import kernel_program as K
    from flashsim.numerics import sfu
    from flashsim.numerics.target import Target
    from flashsim.numerics.xp import enable_x64
    from flashsim.problem import prepare

    prob = prepare(q, k, v, arch="sm_90")
    cfg = prob.config
    S, BM, BC, d = 128, cfg.block_m, cfg.kv_tile, 128
    rng = np.random.default_rng(1)
    with enable_x64():
        tables = tuple(jnp.asarray(t) for t in sfu.table_arrays("sm_90"))
        qs = jnp.asarray(rng.standard_normal((1, 1, S, BM, d)).astype(np.float16))
        kt = jnp.asarray(rng.standard_normal((1, 1, S, BC, d)).astype(np.float16))
        vt = jnp.asarray(rng.standard_normal((1, 1, S, BC, d)).astype(np.float16))
        m = jnp.full((1, 1, S, BM), -np.inf, jnp.float32)
        l = jnp.zeros((1, 1, S, BM, 4), jnp.float32)
        o = jnp.zeros((1, 1, S, BM, d), jnp.float32)
        rows = jnp.arange(BM)[None, :] + jnp.zeros((S, 1), jnp.int32)
        cols = jnp.arange(BC)[None, :] + jnp.zeros((S, 1), jnp.int32)
        sl2 = jnp.float32(prob.scale_log2)

        def target(tb):
            return Target().with_tables("sm_90", "ex2", tb)

        def f_scores(tb, qs, kt, m, rows, cols):
            return K.scores(qs, kt, m, rows, cols, 16384, 16384, sl2, causal=False, arch="sm_90", target=target(tb))

        def f_probs(tb, s, nm):
            return K.probabilities(s, nm, sl2, arch="sm_90", target=target(tb))

        def f_acc(tb, l, o, p, alpha, vt):
            return K.accumulate(l, o, p, alpha, vt, arch="sm_90", target=target(tb))

        out = {}
        jf = jax.jit(f_scores)
        s, m_new, alpha, nm = jax.block_until_ready(jf(tables, qs, kt, m, rows, cols))
        out["scores (1-3)"] = bench(jf, (tables, qs, kt, m, rows, cols))
        out["scores (1-3), one K tile"] = bench(jf, (tables, qs, kt[:, :, :1], m, rows, cols[:1]))
        jf = jax.jit(f_probs)
        p = jax.block_until_ready(jf(tables, s, nm))
        out["probabilities (4)"] = bench(jf, (tables, s, nm))
        jf = jax.jit(f_acc)
        jax.block_until_ready(jf(tables, l, o, p, alpha, vt))
        out["accumulate (5-7)"] = bench(jf, (tables, l, o, p, alpha, vt))
        out["accumulate (5-7), one V tile"] = bench(jf, (tables, l, o, p, alpha, vt[:, :, :1]))
        # the two tensor-core chains alone (flashsim.numerics.tensorcore.mma_chain, the generic routine under jit)
        from flashsim.numerics.tensorcore import mma_chain

        jf = jax.jit(
            lambda a, b: mma_chain(
                a, jnp.swapaxes(b, -1, -2), jnp.zeros(a.shape[:-1] + (b.shape[-2],), jnp.float32), "sm_90"
            )
        )
        out["S = Q K^T chain alone"] = bench(jf, (qs, kt))
        pv = p.astype(jnp.float16)
        jf = jax.jit(lambda a, b, c: mma_chain(a, b, c, "sm_90"))
        out["O += P V chain alone"] = bench(jf, (pv, vt, o))
    for k_, ms in out.items():
        print(f"one KV step, {k_:29s}: {ms:7.3f} ms", flush=True)
    report["parts_ms"] = out


def bench(fn, args, reps=20):
    import jax

    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(reps):
        r = fn(*args)
    jax.block_until_ready(r)
    return (time.perf_counter() - t0) / reps * 1e3


if __name__ == "__main__":
    sys.exit(main())
