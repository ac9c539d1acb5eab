"""The JAX backend: bit for bit the numpy backend.

* flashsim.attention(..., backend="jax") against backend="numpy" on problems whose heads each hold one kind of
  trouble (partial tiles, Nq != Nk, rows with no visible key, exp overflow without the max subtraction, NaN and
  inf, tiny values), causal and not, f32 and f16 P@V, several slots per call and several calls;
* a problem spread over 8 CPU devices, batch x heads x q blocks (a subprocess with XLA_FLAGS, so the rest of the
  suite keeps its single device);
* the jnp numerics one by one against the numpy ones on raw bit patterns (random, adversarial, hypothesis):
  flashsim.mma for every type and both arch families, the float32 operators and ieee32.fma, the f16 conversions,
  sfu.ex2 with tables (synthetic ones for every model variant, and the shipped one) and without (the correctly
  rounded fallback, hard cases included);
* the work plan (every tile of every unit exactly once, in order) and the device mesh.

Everything compares .view(uint) bit patterns. The attention problems are few and reused, because every new
configuration costs an XLA compilation (seconds).
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="backend='jax' needs jax: pip install 'flashsim[jax]'")

import jax.numpy as jnp  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import flashsim  # noqa: E402
from flashsim import KernelConfig  # noqa: E402
from flashsim.commands.verify import trouble_heads  # noqa: E402
from flashsim.emulator import jax_backend as JB  # noqa: E402
from flashsim.numerics import ieee32, sfu  # noqa: E402
from flashsim.numerics import jax_ops as J  # noqa: E402
from flashsim.numerics.tensorcore import mma as np_mma  # noqa: E402
from flashsim.problem import prepare  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
BF16 = np.dtype(ml_dtypes.bfloat16)
X86 = platform.machine().lower() in ("x86_64", "amd64")     # numpy's NaN payload rules are the SSE ones there
HYP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    u = {2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
    assert a.shape == b.shape and a.dtype == b.dtype
    bad = a.view(u) != b.view(u)
    assert not bad.any(), f"{bad.sum()} of {bad.size} differ; first at {np.argwhere(bad)[0]}: " \
                          f"{a.view(u)[bad][0]:#x} vs {b.view(u)[bad][0]:#x}"


def jnp_call(fn, *args):
    with J.enable_x64():
        return np.asarray(jax.jit(fn)(*[jnp.asarray(a) for a in args]))


# ----------------------------------------------------------------------------------------------------------------
# attention: one problem per configuration, one kind of trouble per head


def both_backends(q, k, v, **kw):
    o0, l0 = flashsim.attention(q, k, v, **kw)
    o1, l1 = flashsim.attention(q, k, v, backend="jax", **kw)
    same_bits(o1, o0)
    same_bits(l1, l0)
    return o0, l0


@pytest.fixture(scope="module")
def problem_a():
    """Non-causal, f32 P@V, d=64, Nq=150 < Nk=200 (partial tiles on both sides), 8 heads of trouble."""
    q, k, v = trouble_heads(np.random.default_rng(1), 2, 4, 150, 200, 64)
    o, lse = flashsim.attention(q, k, v)
    return (q, k, v), (o, lse)


def test_attention_noncausal_f32_trouble_heads(problem_a):
    (q, k, v), (o0, l0) = problem_a
    o1, l1 = flashsim.attention(q, k, v, backend="jax")
    same_bits(o1, o0)
    same_bits(l1, l0)
    assert np.isnan(o0).any()                                   # the NaN head really produced NaNs
    assert JB.LAST_PLAN["slots"] == 2 and JB.LAST_PLAN["calls"] == 1


def test_attention_causal_f16_small_budget():
    """Causal, f16 P@V, d=128, Nq=200 > Nk=130 (the first rows see no key: O = 0, lse = +inf), 4 warps, with a
    memory budget so small that units share slots and heads run in several calls."""
    q, k, v = trouble_heads(np.random.default_rng(2), 1, 3, 200, 130, 128)
    cfg = KernelConfig(head_dim=128, warps=4, kv_tile=32, causal=True, pv_accum="f16")
    o0, l0 = flashsim.attention(q, k, v, config=cfg)
    o1, l1 = JB.run(q, k, v, prepare(q, k, v, config=cfg), max_tile_elems=2 * 64 * 32)
    same_bits(o1, o0)
    same_bits(l1, l0)
    assert np.isinf(l0).any()
    plan = JB.LAST_PLAN        # tiles per q block: 0, 2, 4, 5 (causal, bottom-right aligned)
    assert plan["calls"] > 1 and plan["slots"] * plan["steps"] <= 12 < 4 * 5


@pytest.mark.slow
def test_attention_one_row_one_key():
    q, k, v = trouble_heads(np.random.default_rng(3), 1, 1, 1, 1, 64)
    both_backends(q, k, v, causal=True, softmax_scale=0.3)


def test_attention_sharded_over_8_cpu_devices(tmp_path):
    """A causal f16 problem on a mesh of 8 CPU devices: 2 along batch, 2 along heads, and 2 splitting each head's
    q blocks (3 of them: 2 + 1): bit-identical to the numpy backend."""
    q, k, v = trouble_heads(np.random.default_rng(4), 2, 2, 300, 260, 64)
    o0, l0 = flashsim.attention(q, k, v, causal=True, pv_accum="f16")
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v)
    script = textwrap.dedent(f"""
        import json, numpy as np, jax, warnings
        warnings.simplefilter("ignore")
        import flashsim
        from flashsim.emulator import jax_backend as JB
        assert jax.device_count() == 8, jax.devices()
        z = np.load({str(tmp_path / "in.npz")!r})
        o, lse = flashsim.attention(z["q"], z["k"], z["v"], causal=True, pv_accum="f16", backend="jax")
        np.savez({str(tmp_path / "out.npz")!r}, o=o, lse=lse)
        print(json.dumps(JB.LAST_PLAN))
    """)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    import json
    plan = json.loads(res.stdout.strip().splitlines()[-1])
    assert plan["devices"] == 8 and tuple(plan["mesh"]) == (2, 2, 2)
    out = np.load(tmp_path / "out.npz")
    same_bits(out["o"], o0)
    same_bits(out["lse"], l0)


@pytest.mark.slow
def test_attention_two_processes_jax_distributed(tmp_path):
    """Multi-host through jax.distributed, on this machine: 2 processes x 2 CPU devices (gloo collectives) form one
    global (2 x 2) mesh; both processes call flashsim.attention on the same inputs and both get the full result,
    bit-identical to the numpy backend."""
    import socket
    q, k, v = trouble_heads(np.random.default_rng(4), 2, 2, 300, 260, 64)
    o0, l0 = flashsim.attention(q, k, v, causal=True, pv_accum="f16")
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script = textwrap.dedent(f"""
        import sys, json, warnings
        warnings.simplefilter("ignore")
        import jax
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address="127.0.0.1:{port}", num_processes=2,
                                   process_id=int(sys.argv[1]))
        import numpy as np, flashsim
        from flashsim.emulator import jax_backend as JB
        z = np.load({str(tmp_path / "in.npz")!r})
        o, lse = flashsim.attention(z["q"], z["k"], z["v"], causal=True, pv_accum="f16", backend="jax")
        np.savez({str(tmp_path)!r} + f"/out{{sys.argv[1]}}.npz", o=o, lse=lse)
        print(json.dumps(dict(JB.LAST_PLAN, processes=jax.process_count())))
    """)
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    import json
    plan = json.loads(outs[0][0].strip().splitlines()[-1])
    assert plan["processes"] == 2 and plan["devices"] == 4
    for i in range(2):
        out = np.load(tmp_path / f"out{i}.npz")
        same_bits(out["o"], o0)
        same_bits(out["lse"], l0)


def test_backend_errors(problem_a):
    (q, k, v), _ = problem_a
    with pytest.raises(ValueError, match="backend"):
        flashsim.attention(q, k, v, backend="torch")
    with pytest.raises(ValueError, match="max_tile_elems"):
        JB.run(q, k, v, prepare(q, k, v), max_tile_elems=-1)


def test_numpy_backend_works_and_jax_backend_explains_without_jax():
    script = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("ignore")
        sys.modules["jax"] = None            # import jax now raises ImportError
        import numpy as np, flashsim
        q = np.zeros((1, 1, 16, 64), np.float16)
        o, lse = flashsim.attention(q, q, q)
        assert o.shape == q.shape
        try:
            flashsim.attention(q, q, q, backend="jax")
        except ImportError as e:
            print(e)
    """)
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "backend='jax' needs jax: pip install 'flashsim[jax]'" in res.stdout


# ----------------------------------------------------------------------------------------------------------------
# the plan and the mesh

@pytest.mark.parametrize("tiles", [[4] * 7, [2, 4, 6, 8, 10, 12], [0, 0, 3, 1, 5], [1]])
@pytest.mark.parametrize("slots", [1, 2, 3, 8])
def test_plan_runs_every_tile_once_in_order(tiles, slots):
    tiles = np.array(tiles)
    unit, tile, first = JB.plan(tiles, slots)
    assert unit.shape == tile.shape == first.shape and unit.shape[1] == slots
    n = len(tiles)
    for s in range(slots):
        seen = [(int(u), int(t), bool(f)) for u, t, f in zip(unit[:, s], tile[:, s], first[:, s]) if u != n]
        for j in set(u for u, _, _ in seen):
            mine = [(t, f) for u, t, f in seen if u == j]
            assert [t for t, _ in mine] == list(range(tiles[j]))           # in order
            assert [f for _, f in mine] == [True] + [False] * (tiles[j] - 1)
        # a unit's tiles are consecutive in its slot
        us = [u for u, _, _ in seen]
        assert all(us[i] == us[i + 1] or us[i + 1] not in us[:i + 1] for i in range(len(us) - 1))
    done = {(int(u), int(t)) for u, t in zip(unit.ravel(), tile.ravel()) if u != n}
    assert done == {(j, t) for j in range(n) for t in range(tiles[j])}
    assert sum(1 for u in unit.ravel() if u != n) == tiles.sum()


def test_choose_slots_balances_causal_work():
    tiles = 2 * np.arange(1, 33)                       # causal N=4096: 128-row blocks, 64-key tiles
    s = JB.choose_slots(tiles, 64)
    assert s * JB.plan_steps(tiles, s) == tiles.sum()  # no idle slot-steps at all
    assert JB.choose_slots(np.full(32, 64), 64) == 32  # non-causal: every unit its own slot


@pytest.mark.parametrize("b,h,n,units", [(1, 1, 8, 32), (2, 4, 8, 2), (1, 3, 8, 4), (3, 5, 4, 1),
                                         (16, 16, 8, 8), (1, 1, 2, 8)])
def test_mesh_shape(b, h, n, units):
    db, dh, dq = JB.mesh_shape(b, h, n, units)
    assert db * dh * dq == n

    def work(x, y, z):
        return -(-b // x) * -(-h // y) * -(-units // z)
    best = min(work(x, y, n // (x * y)) for x in range(1, n + 1) for y in range(1, n + 1) if n % (x * y) == 0)
    assert work(db, dh, dq) == best
    if b * h >= n and n % (b * h) == 0 or (b, h, n) == (2, 4, 8):
        assert dq == 1                       # heads fill the devices: q blocks are not split


@pytest.mark.parametrize("tiles,parts", [([3, 0, 5, 2, 0, 7], 2), ([1] * 5, 3), ([0, 0], 2)])
def test_split_units(tiles, parts):
    groups = JB.split_units(np.array(tiles), parts)
    assert sorted(j for g in groups for j in g) == list(range(len(tiles)))


# ----------------------------------------------------------------------------------------------------------------
# the tensor-core model

def mma_inputs(rng, a_dt, c_dt, per=48):
    """Batches of mma inputs by category: normal, wide exponent spread, large c, exact cancellation, one product,
    subnormals, near overflow, tiny c against big products (zero exponents), inf/NaN, random bits."""
    bf = a_dt == BF16
    emax = 127 if bf else 15

    def vals(shape, scale=1.0):
        return rng.standard_normal(shape) * scale

    def spread(shape, lo, hi):
        return rng.choice([-1, 1], shape) * rng.uniform(1, 2, shape) * 2.0 ** rng.integers(lo, hi, shape)
    cats = []
    A, B, C = (per, 16, 16), (per, 16, 8), (per, 16, 8)
    cats.append((vals(A), vals(B), vals(C)))
    cats.append((spread(A, -14, 8), spread(B, -14, 8), spread(C, -20, 10)))
    cats.append((vals(A), vals(B), vals(C, 2.0 ** (20 if not bf else 60))))
    a = vals(A)
    b = vals(B)
    b[:, 8:] = b[:, :8]
    a[:, :, 8:] = -a[:, :, :8]                                   # products cancel exactly
    cats.append((a, b, np.zeros(C)))
    a = np.zeros(A)
    a[:, :, 3] = vals((per, 16))
    cats.append((a, vals(B), vals(C, 1e-3)))
    sub = 2.0 ** (-24 if not bf else -133)
    cats.append((rng.integers(-4, 5, A) * sub * rng.integers(1, 300, A), vals(B), vals(C, 1e-30)))
    big = 2.0 ** (emax - 1)
    cats.append((spread(A, emax - 3, emax), spread(B, emax - 3, emax), vals(C)))
    cats.append((vals(A, 2.0 ** -6), vals(B, 2.0 ** -6), spread(C, -140, -120)))
    a, b, c = vals(A), vals(B), vals(C)
    a[rng.random(A) < 0.02] = np.inf
    b[rng.random(B) < 0.02] = -np.inf
    a[rng.random(A) < 0.01] = np.nan
    c[rng.random(C) < 0.05] = np.inf
    a[rng.random(A) < 0.05] = 0
    cats.append((a, b, c))
    a, b, c = (np.concatenate(x) for x in zip(*cats))
    with np.errstate(all="ignore"):
        a, b, c = a.astype(a_dt), b.astype(a_dt), c.astype(c_dt)
    del big
    # random bit patterns
    ra = rng.integers(0, 1 << 16, A, dtype=np.uint16).view(a_dt)
    rb = rng.integers(0, 1 << 16, B, dtype=np.uint16).view(a_dt)
    rc = (rng.integers(0, 1 << 32, C, dtype=np.uint32).view(np.float32) if c_dt == np.float32
          else rng.integers(0, 1 << 16, C, dtype=np.uint16).view(np.float16))
    return np.concatenate([a, ra]), np.concatenate([b, rb]), np.concatenate([c, rc])


TYPES = [(np.dtype(np.float16), np.dtype(np.float32)), (np.dtype(np.float16), np.dtype(np.float16)),
         (BF16, np.dtype(np.float32))]


MMA_CASES = [(t, "sm_90") for t in TYPES] + [(TYPES[0], "sm_80"), (TYPES[1], "sm_80")]   # sm_80: chained blocks


@pytest.mark.parametrize("types,arch", MMA_CASES, ids=lambda x: str(x))
def test_mma_matches_numpy_model(types, arch):
    a_dt, c_dt = types
    a, b, c = mma_inputs(np.random.default_rng(7), a_dt, c_dt)
    with np.errstate(all="ignore"):
        want = np_mma(a, b, c, arch=arch)
    got = np.asarray(J.mma(a, b, c, arch=arch))
    same_bits(got, want)


@HYP
@given(a=hnp.arrays(np.uint16, (2, 16, 16)), b=hnp.arrays(np.uint16, (2, 16, 8)),
       c=hnp.arrays(np.uint32, (2, 16, 8)), ab_exp=st.integers(-20, 20))
def test_mma_raw_bits_hypothesis(a, b, c, ab_exp):
    """f32.f16.f16.f32 on raw bit patterns, half of them moved into a narrow exponent band (no inf/NaN)."""
    a2 = a.copy()
    a2[0] = (a2[0] & 0x83FF) | np.uint16(((ab_exp + 15) % 30 + 1) << 10)
    a, b, c = a2.view(np.float16), b.view(np.float16), c.view(np.float32)
    with np.errstate(all="ignore"):
        want = np_mma(a, b, c)
    same_bits(np.asarray(J.mma(a, b, c)), want)


def test_mma_rejects_bad_input():
    a = np.zeros((16, 16), np.float16)
    with pytest.raises(ValueError):
        J.mma(a, np.zeros((16, 8), np.float32), np.zeros((16, 8), np.float32))
    with pytest.raises(ValueError):
        J.mma(a, np.zeros((8, 16), np.float16), np.zeros((16, 8), np.float32))
    with pytest.raises(ValueError):
        J.mma(a.astype(BF16), np.zeros((16, 8), BF16), np.zeros((16, 8), np.float16))


# ----------------------------------------------------------------------------------------------------------------
# float32 arithmetic, conversions

def raw_f32(rng, n):
    """Random float32 bit patterns, weighted toward subnormals, zeros, inf/NaN and near-equal pairs."""
    b = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    sel = rng.random(n)
    b[sel < 0.25] &= np.uint32(0x807FFFFF)                                  # subnormal / zero
    b[(sel > 0.25) & (sel < 0.3)] |= np.uint32(0x7F800000)                   # inf / NaN
    b[(sel > 0.3) & (sel < 0.5)] = (b[(sel > 0.3) & (sel < 0.5)] & np.uint32(0x81FFFFFF)) | np.uint32(0x3E000000)
    b[(sel > 0.5) & (sel < 0.55)] &= np.uint32(0x80000000)                   # signed zeros
    b[(sel > 0.55) & (sel < 0.6)] = (b[(sel > 0.55) & (sel < 0.6)] & np.uint32(0x80FFFFFF)) | np.uint32(0x00800000)
    return b.view(np.float32)


def nan_agnostic(got, want):
    """Where numpy's NaN payloads follow other rules than x86's, compare NaN-ness only."""
    if X86:
        return got, want
    both = np.isnan(got) & np.isnan(want)
    got, want = got.copy(), want.copy()
    got[both] = want[both] = np.nan
    return got, want


OPS = {"add": (J.add32, np.add), "sub": (J.sub32, np.subtract), "mul": (J.mul32, np.multiply),
       "div": (J.div32, np.divide)}


@pytest.mark.parametrize("name", list(OPS))
def test_f32_ops_match_numpy(name):
    rng = np.random.default_rng(11)
    x, y = raw_f32(rng, 60000), raw_f32(rng, 60000)
    y[::7] = x[::7] * np.float32(1 + 2 ** -20)                             # near-equal pairs: cancellation
    jf, nf = OPS[name]
    with np.errstate(all="ignore"):
        want = nf(x, y)
    same_bits(*nan_agnostic(jnp_call(jf, x, y), want))


def test_fma_matches_ieee32():
    rng = np.random.default_rng(12)
    x, y, z = raw_f32(rng, 60000), raw_f32(rng, 60000), raw_f32(rng, 60000)
    with np.errstate(all="ignore"):
        z[::3] = -(x[::3].astype(np.float64) * y[::3]).astype(np.float32)    # a*b + c cancels to the low bits
    same_bits(jnp_call(J.fma32, x, y, z), ieee32.fma(x, y, z))


@HYP
@given(hnp.arrays(np.uint32, 64), hnp.arrays(np.uint32, 64), hnp.arrays(np.uint32, 64))
def test_fma_hypothesis(x, y, z):
    x, y, z = x.view(np.float32), y.view(np.float32), z.view(np.float32)
    same_bits(jnp_call(J.fma32, x, y, z), ieee32.fma(x, y, z))


def test_conversions_match_numpy():
    rng = np.random.default_rng(13)
    x = raw_f32(rng, 60000)
    x[:20000] = (rng.standard_normal(20000) * 2.0 ** rng.integers(-30, 18, 20000)).astype(np.float32)
    with np.errstate(all="ignore"):
        same_bits(jnp_call(J.f32_to_f16, x), x.astype(np.float16))
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    same_bits(jnp_call(J.f16_to_f32, h), h.astype(np.float32))
    h2 = rng.permutation(h)
    with np.errstate(all="ignore"):
        want = h * h2
    same_bits(*nan_agnostic(jnp_call(J.mul16, h, h2), want))


def test_fmax_reduce_and_keys():
    rng = np.random.default_rng(14)
    x = raw_f32(rng, 300 * 64).reshape(300, 64)
    x = np.where(np.isnan(x) & (rng.random(x.shape) < 0.9), np.float32(1), x)   # mostly-NaN rows are rare
    x[5] = np.nan
    x[6] = -np.inf
    x = np.where(x == 0, np.float32(0), x)                                       # no -0 in scores (mma gives +0)
    want = np.fmax.reduce(x, axis=-1, initial=-np.inf).astype(np.float32)
    same_bits(jnp_call(lambda a: J.fmax_reduce(a, -1), x), want)


# ----------------------------------------------------------------------------------------------------------------
# ex2

def synthetic_model(rng, params):
    """An Ex2Model with made-up tables (the lookup is under test, not the values)."""
    base = (np.uint32(0x3F800000) + (np.arange(sfu.TABLE_SIZE, dtype=np.uint32) >> 1)).astype(np.int64)
    pos = (base + rng.integers(-2, 3, sfu.TABLE_SIZE)).astype(np.uint32)
    neg = (base - (np.arange(sfu.TABLE_SIZE) >> 1) // 2 + rng.integers(-2, 3, sfu.TABLE_SIZE)).astype(np.uint32)
    return sfu.Ex2Model(pos, neg if params.get("neg_mode") == "signmag" else None, params)


def ex2_inputs(rng, n):
    x = raw_f32(rng, n)
    x[: n // 3] = -rng.exponential(20, n // 3).astype(np.float32)
    x[n // 3: n // 2] = rng.uniform(-300, 300, n // 2 - n // 3).astype(np.float32)
    special = np.float32([np.nan, -np.nan, np.inf, -np.inf, 0, -0.0, 255, -255, 128, -126, -127, 127.99])
    x[-len(special):] = special
    return x


@pytest.mark.parametrize("neg_mode,rounding,nan_mode", [("twos", "rz", "const"), ("twos", "rd", "quiet"),
                                                       ("signmag", "ru", "const"), ("signmag", "rn", "quiet")])
def test_ex2_table_lookup_every_model_variant(neg_mode, rounding, nan_mode):
    rng = np.random.default_rng(16)
    model = synthetic_model(rng, {"neg_mode": neg_mode, "rounding": rounding, "nan_mode": nan_mode,
                                  "underflow_bits": 5, "overflow_bits": 0x7F7FFFFF, "ninf_bits": 3})
    x = ex2_inputs(rng, 30000)
    ex = J.Ex2("sm_90", model=model)
    same_bits(np.asarray(ex(x)), model(x))


def test_ex2_shipped_tables():
    if sfu.load_tables("sm_90") is None:
        pytest.skip("no sm_90 SFU tables shipped or cached")
    rng = np.random.default_rng(17)
    x = ex2_inputs(rng, 100000)
    same_bits(np.asarray(J.Ex2("sm_90")(x)), sfu.ex2(x))


@pytest.fixture
def no_tables(monkeypatch):
    monkeypatch.setattr(sfu, "load_tables", lambda arch="sm_90": None)


@pytest.mark.parametrize("hard_ulps,n", [(J.HARD_ULPS, 200000), (1 << 27, 150), (1 << 27, 1000)],
                         ids=["natural", "few-hard", "all-hard"])
def test_ex2_fallback_matches_numpy(no_tables, monkeypatch, hard_ulps, n):
    """The correctly rounded fallback: jnp float64 exp2 plus the host for the cases near a rounding midpoint
    (forcing every case 'hard' takes the compacted path (150 < HARD_SLOTS) and the whole-array path)."""
    monkeypatch.setattr(J, "HARD_ULPS", hard_ulps)
    rng = np.random.default_rng(18)
    x = ex2_inputs(rng, n)
    ex = J.Ex2("sm_90")
    assert ex.static[0] == "fallback"
    same_bits(np.asarray(ex(x)), sfu.ex2(x))


@pytest.mark.parametrize("a_dt, c_dt", [(np.float16, np.float32), (np.float16, np.float16),
                                        (ml_dtypes.bfloat16, np.float32)])
def test_public_mma_jax_backend_is_bit_identical(a_dt, c_dt):
    """flashsim.mma(..., backend="jax") against the numpy backend, broadcasting batch dims included."""
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 5, 16, 16)) * 2.0 ** rng.integers(-12, 12, (3, 5, 16, 16))).astype(a_dt)
    b = (rng.standard_normal((1, 5, 16, 8)) * 4).astype(a_dt)
    c = rng.standard_normal((3, 5, 16, 8)).astype(c_dt)
    ref = flashsim.mma(a, b, c, arch="sm_90")
    got = flashsim.mma(a, b, c, arch="sm_90", backend="jax")
    assert got.dtype == ref.dtype and got.shape == ref.shape
    u = np.uint16 if c_dt == np.float16 else np.uint32
    assert np.array_equal(got.view(u), ref.view(u))
