"""The JAX engine: bit for bit the numpy engine (both run flashsim/emulator/kernel_program.py).

* flashsim.attention(..., backend="jax") against backend="numpy" on problems whose heads each hold one kind of
  trouble (partial tiles, Nq != Nk, rows with no visible key, exp overflow without the max subtraction, NaN and
  inf, tiny values), causal and not, f32 and f16 P@V, several slots per call and several calls;
* a problem spread over 8 CPU devices, batch x heads x q blocks (a subprocess with XLA_FLAGS, so the rest of the
  suite keeps its single device);
* (the numerics themselves, one routine per engine, are tested in test_numerics_engines.py and
  test_tensorcore_engines.py);
* the work plan (every tile of every unit exactly once, in order) and the device mesh.

Everything compares .view(uint) bit patterns. The attention problems are few and reused, because every new
configuration costs an XLA compilation (seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="backend='jax' needs jax: pip install 'flashsim[jax]'")


import flashsim  # noqa: E402
from flashsim import KernelConfig  # noqa: E402
from flashsim.commands.verify import trouble_heads  # noqa: E402
from flashsim.emulator import engine_jax as JB  # noqa: E402
from flashsim.problem import prepare  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    u = {2: np.uint16, 4: np.uint32}[a.dtype.itemsize]
    assert a.shape == b.shape and a.dtype == b.dtype
    bad = a.view(u) != b.view(u)
    assert not bad.any(), (
        f"{bad.sum()} of {bad.size} differ; first at {np.argwhere(bad)[0]}: "
        f"{a.view(u)[bad][0]:#x} vs {b.view(u)[bad][0]:#x}"
    )


# ----------------------------------------------------------------------------------------------------------------
# attention: one problem per configuration, one kind of trouble per head


def both_backends(q, k, v, **kw):
    o0, l0 = flashsim.attention(q, k, v, check_overflow=False, **kw)  # trouble heads: inf / NaN in v
    o1, l1 = flashsim.attention(q, k, v, backend="jax", check_overflow=False, **kw)
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
    assert np.isnan(o0).any()  # the NaN head really produced NaNs
    plan = JB.LAST_PLAN  # on one GPU the fused kernel (engine_jax.fused_choice), else the scan
    if jax.devices()[0].platform == "gpu":
        assert plan["fused"] and plan["engine"] == "fused Pallas kernel", plan
    else:
        assert not plan["fused"] and plan["slots"] == 2 and plan["calls"] == 1, plan


def test_attention_causal_f16_small_budget(monkeypatch):
    """Causal, f16 P@V, d=128, Nq=200 > Nk=130 (the first rows see no key: O = 0, lse = +inf), 4 warps, with a
    memory budget so small that units share slots and heads run in several calls (the scan engine's plan: on a GPU
    too, where the fused kernel would otherwise run)."""
    monkeypatch.setenv("FLASHSIM_JAX_FUSED", "0")
    q, k, v = trouble_heads(np.random.default_rng(2), 1, 3, 200, 130, 128)
    cfg = KernelConfig(head_dim=128, warps=4, kv_tile=32, causal=True, pv_accum="f16")
    o0, l0 = flashsim.attention(q, k, v, config=cfg, check_overflow=False)
    o1, l1, _ = JB.run(q, k, v, prepare(q, k, v, config=cfg), max_tile_elems=2 * 64 * 32)
    same_bits(o1, o0)
    same_bits(l1, l0)
    assert np.isinf(l0).any()
    plan = JB.LAST_PLAN  # tiles per q block: 0, 2, 4, 5 (causal, bottom-right aligned)
    assert plan["calls"] > 1 and plan["slots"] * plan["steps"] <= 12 < 4 * 5


@pytest.mark.slow
def test_attention_one_row_one_key():
    q, k, v = trouble_heads(np.random.default_rng(3), 1, 1, 1, 1, 64)
    both_backends(q, k, v, causal=True, softmax_scale=0.3)


def test_attention_sharded_over_8_cpu_devices(tmp_path):
    """A causal f16 problem on a mesh of 8 CPU devices: 2 along batch, 2 along heads, and 2 splitting each head's
    q blocks (3 of them: 2 + 1): bit-identical to the numpy backend."""
    q, k, v = trouble_heads(np.random.default_rng(4), 2, 2, 300, 260, 64)
    o0, l0 = flashsim.attention(q, k, v, causal=True, pv_accum="f16", check_overflow=False)
    np.savez(tmp_path / "in.npz", q=q, k=k, v=v)
    script = textwrap.dedent(f"""
        import json, numpy as np, jax, warnings
        warnings.simplefilter("ignore")
        import flashsim
        from flashsim.emulator import engine_jax as JB
        assert jax.device_count() == 8, jax.devices()
        z = np.load({str(tmp_path / "in.npz")!r})
        o, lse = flashsim.attention(z["q"], z["k"], z["v"], causal=True, pv_accum="f16", backend="jax",
                                    check_overflow=False)
        np.savez({str(tmp_path / "out.npz")!r}, o=o, lse=lse)
        print(json.dumps(JB.LAST_PLAN))
    """)
    env = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=8",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
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
    o0, l0 = flashsim.attention(q, k, v, causal=True, pv_accum="f16", check_overflow=False)
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
        from flashsim.emulator import engine_jax as JB
        z = np.load({str(tmp_path / "in.npz")!r})
        o, lse = flashsim.attention(z["q"], z["k"], z["v"], causal=True, pv_accum="f16", backend="jax",
                                    check_overflow=False)
        np.savez({str(tmp_path)!r} + f"/out{{sys.argv[1]}}.npz", o=o, lse=lse)
        print(json.dumps(dict(JB.LAST_PLAN, processes=jax.process_count())))
    """)
    env = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(i)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs):
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
            assert [t for t, _ in mine] == list(range(tiles[j]))  # in order
            assert [f for _, f in mine] == [True] + [False] * (tiles[j] - 1)
        # a unit's tiles are consecutive in its slot
        us = [u for u, _, _ in seen]
        assert all(us[i] == us[i + 1] or us[i + 1] not in us[: i + 1] for i in range(len(us) - 1))
    done = {(int(u), int(t)) for u, t in zip(unit.ravel(), tile.ravel()) if u != n}
    assert done == {(j, t) for j in range(n) for t in range(tiles[j])}
    assert sum(1 for u in unit.ravel() if u != n) == tiles.sum()


def test_choose_slots_balances_causal_work():
    tiles = 2 * np.arange(1, 33)  # causal N=4096: 128-row blocks, 64-key tiles
    s = JB.choose_slots(tiles, 64)
    assert s * JB.plan_steps(tiles, s) == tiles.sum()  # no idle slot-steps at all
    assert JB.choose_slots(np.full(32, 64), 64) == 32  # non-causal: every unit its own slot


@pytest.mark.parametrize(
    "b,h,n,units", [(1, 1, 8, 32), (2, 4, 8, 2), (1, 3, 8, 4), (3, 5, 4, 1), (16, 16, 8, 8), (1, 1, 2, 8)]
)
def test_mesh_shape(b, h, n, units):
    db, dh, dq = JB.mesh_shape(b, h, n, units)
    assert db * dh * dq == n

    def work(x, y, z):
        return -(-b // x) * -(-h // y) * -(-units // z)

    best = min(work(x, y, n // (x * y)) for x in range(1, n + 1) for y in range(1, n + 1) if n % (x * y) == 0)
    assert work(db, dh, dq) == best
    if b * h >= n and n % (b * h) == 0 or (b, h, n) == (2, 4, 8):
        assert dq == 1  # heads fill the devices: q blocks are not split


@pytest.mark.parametrize("tiles,parts", [([3, 0, 5, 2, 0, 7], 2), ([1] * 5, 3), ([0, 0], 2)])
def test_split_units(tiles, parts):
    groups = JB.split_units(np.array(tiles), parts)
    assert sorted(j for g in groups for j in g) == list(range(len(tiles)))
