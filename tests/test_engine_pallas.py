"""The JAX engine's fused Pallas kernel (flashsim.emulator.engine_pallas): bit for bit the numpy engine.

* Pallas's interpreter runs the fused kernel's body on the CPU: kernel_program traced under
  a fused flashsim.numerics.target.Target (split pieces, table loads, mma chains reading their operands back from the
  program's scratch memory one k at a time), on small problems with trouble heads, GQA, masks, soft-capping and
  every P@V accumulation; every bit of O, LSE, l and the overflow flag against the numpy engine;
* the body lowers for CUDA through Pallas's Triton lowering on this CPU machine (jax's cross-platform lowering), for
  every head dim the fused kernel takes: an operation that lowering lacks fails here, in CI;
* what the fused kernel refuses, and that engine_jax runs it only when asked;
* the shims it needs (bit_length's float form on raw bit patterns, pieces, lookup, staged chains on raw bits);
* on a GPU (skipped elsewhere): the compiled kernel against the numpy engine.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax", reason="the fused kernel needs jax: pip install 'flashsim[jax]'")

from flashsim.commands.verify import trouble_heads  # noqa: E402
from flashsim.emulator import engine_jax, engine_numpy, engine_pallas  # noqa: E402
from flashsim.numerics import xp as X  # noqa: E402
from flashsim.numerics.target import Target  # noqa: E402
from flashsim.problem import prepare  # noqa: E402
from flashsim.settings import EngineOptions  # noqa: E402

FUSED = Target(fused=True)  # the fused kernel's form of the shims

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def assert_same_run(a, b):
    """Two engines' (o, lse, Rows) equal in every bit."""
    (o0, l0, r0), (o1, l1, r1) = a, b
    for x, y in ((o0, o1), (l0, l1), (r0.l, r1.l)):
        u = {2: np.uint16, 4: np.uint32}[x.dtype.itemsize]
        bad = x.view(u) != y.view(u)
        assert x.shape == y.shape and not bad.any(), f"{bad.sum()} of {bad.size} differ"
    np.testing.assert_array_equal(r0.flag, r1.flag)


def problem(case, seed=1):
    """(q, k, v, Problem) of a case: shape (B, Hq, Hkv, Nq, Nk, d), dtype, trouble heads or normal values."""
    B, H, Hkv, nq, nk, d = case["shape"]
    rng = np.random.default_rng(seed)
    if case.get("trouble"):
        q, k, v = trouble_heads(rng, B, H, nq, nk, d)
        k, v = k[:, :: H // Hkv], v[:, :: H // Hkv]
    else:
        dt = ml_dtypes.bfloat16 if case.get("dtype") == "bf16" else np.float16
        q = rng.standard_normal((B, H, nq, d)).astype(dt)
        k, v = (rng.standard_normal((B, Hkv, nk, d)).astype(dt) for _ in range(2))
    return q, k, v, prepare(q, k, v, **case.get("options", {}))


CASES = {  # each costs a few seconds of interpretation: one per kind of option
    "trouble-gqa-causal-f16": dict(
        shape=(2, 4, 2, 64, 64, 64), trouble=True, options=dict(causal=True, pv_accum="f16")
    ),
    "softcap-f16x2-ragged": dict(shape=(1, 2, 2, 100, 130, 32), options=dict(pv_accum="f16x2", softcap=30.0)),
    "bf16-window": dict(shape=(1, 1, 1, 70, 200, 128), dtype="bf16", options=dict(window_size=(40, 10))),
}


@pytest.mark.slow
@pytest.mark.parametrize("name,ptx", [(name, False) for name in CASES] + [("trouble-gqa-causal-f16", True)])
def test_interpreted_fused_kernel_equals_the_numpy_engine(name, ptx):
    """ptx: the inline-PTX layout's packed staging (its inline PTX runs only when compiled for the GPU)."""
    options = EngineOptions(pallas_inline_ptx=ptx)
    q, k, v, prob = problem(CASES[name])
    assert engine_pallas.unsupported(prob, engine_pallas.Layout.of(options)) is None
    got = engine_pallas.run(q, k, v, prob, interpret=True, options=options)
    assert_same_run(got, engine_numpy.run(q, k, v, prob))


@pytest.mark.parametrize("d,ptx", [(32, False), (64, False), (128, False), (256, False), (128, True)])
def test_fused_kernel_lowers_for_cuda_through_triton(d, ptx):
    """Every head dim through Triton's lowering; with inline PTX the chains' casts are inline cvt.rzi."""
    pytest.importorskip("jax._src.pallas.triton.lowering", reason="this jaxlib has no Triton lowering")
    q, k, v, prob = problem(dict(shape=(1, 2, 1, 96, 80, d), options=dict(causal=True)))
    text = engine_pallas.lower_for_gpu(q, k, v, prob, engine_pallas.Layout(inline_ptx=ptx))
    assert "xla.gpu.triton" in text and "flashsim_fused" in text
    for asm in ("cvt.rzi.s32.f32", "cvt.rz.f32.f64", "fma.rn.f32", "add.rn.f32"):  # chain terms and rounding,
        assert (asm in text) == ptx, asm  # the softmax's f32 ops


def test_the_sfu_tables_go_to_the_device_once_and_the_epilogue_runs_there(monkeypatch):
    """engine_pallas._on_device copies each SFU table to a device once per process; the epilogue is jitted on the
    device (engine_pallas._epilogue, one compiled program per output dtype and scale) and its outputs equal the
    numpy engine's."""
    monkeypatch.setattr(engine_pallas, "_DEVICE_TABLES", {})
    q, k, v, prob = problem(dict(shape=(1, 1, 1, 32, 48, 32), options=dict(softcap=20.0)))  # ex2 and rcp
    want = engine_numpy.run(q, k, v, prob)
    for _ in range(2):
        assert_same_run(engine_pallas.run(q, k, v, prob, interpret=True), want)
        assert len(engine_pallas._DEVICE_TABLES) == 3  # ex2's two tables and rcp's one
    from flashsim.emulator.jax_target import native_conversions

    native = native_conversions([jax.devices()[0]], EngineOptions())  # the device run() takes: True on a GPU
    assert ("epilogue", float(prob.lse_scale), "float16", native) in engine_pallas._COMPILED


def test_what_the_fused_kernel_refuses():
    for case, why in (
        (dict(shape=(1, 1, 1, 32, 32, 96)), "power of two"),
        (dict(shape=(1, 1, 1, 32, 32, 64), options=dict(quant="int8")), "quant"),
    ):
        q, k, v, prob = problem(case)
        assert why in engine_pallas.unsupported(prob)
        with pytest.raises(ValueError, match=why):
            engine_pallas.run(q, k, v, prob, interpret=True)


def test_engine_jax_takes_the_fused_kernel_on_one_gpu_unless_told_not_to(monkeypatch):
    q, k, v, prob = problem(dict(shape=(1, 1, 1, 32, 32, 64)))
    monkeypatch.delenv("FLASHSIM_JAX_FUSED", raising=False)
    fused, why = engine_jax.fused_choice(prob, options=EngineOptions())
    assert fused == (jax.devices()[0].platform == "gpu"), why
    fused, why = engine_jax.fused_choice(prob, devices=jax.devices("cpu"))
    assert not fused and "one GPU" in why
    fused, why = engine_jax.fused_choice(prob, options=EngineOptions(jax_fused=False))
    assert not fused and "jax_fused off" in why
    monkeypatch.setenv("FLASHSIM_JAX_FUSED", "0")  # the environment sets the default, in one place
    fused, why = engine_jax.fused_choice(prob)
    assert not fused and "jax_fused off" in why


# ----------------------------------------------------------------------------------------------------------------
# the shims


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=64))
def test_bit_length_float_form_on_raw_uint64_patterns(values):
    x = np.array(values, np.uint64)
    want = np.array([v.bit_length() for v in values], np.int32)
    np.testing.assert_array_equal(X.bit_length(x), want)
    with X.enable_x64():
        np.testing.assert_array_equal(np.asarray(X.bit_length(jax.numpy.asarray(x), FUSED)), want)
    small = x >> np.uint64(32)
    with X.enable_x64():
        got = np.asarray(X.bit_length(jax.numpy.asarray(small.astype(np.uint32)), FUSED))
    np.testing.assert_array_equal(got, [int(v).bit_length() for v in small])


def _stage_in_arrays(a_arrays, b_arrays):
    """A stand-in for engine_pallas's staging memory: the arrays themselves, read by a traced index."""
    from jax import lax

    def reader(arrays, axis):
        return lambda k: tuple(lax.dynamic_slice_in_dim(x, k, 1, axis=x.ndim + axis) for x in arrays)

    return reader(a_arrays, -1), reader(b_arrays, -2)


@pytest.mark.parametrize("types", [("f16", "f32"), ("f16", "f16"), ("bf16", "f32")])
def test_a_staged_chain_equals_the_numpy_engine_on_raw_bits(types):
    """The fused form of tensorcore's chain (columns of A and rows of B read back by k, exponents widened) on raw bit
    patterns, every class of value included, jitted by XLA: the numpy engine's bits, and without the engine's
    memory a RuntimeError."""
    from flashsim.numerics import tensorcore

    dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}
    a_dt, c_dt = (np.dtype(dt[t]) for t in types)
    rng = np.random.default_rng(7)
    a = rng.integers(0, 2**16, (2, 32, 48), dtype=np.uint16).view(a_dt)
    b = rng.integers(0, 2**16, (2, 48, 16), dtype=np.uint16).view(a_dt)
    c = (
        rng.integers(0, 2 ** (8 * c_dt.itemsize), (2, 32, 16), dtype=np.uint64)
        .astype(np.uint16 if c_dt.itemsize == 2 else np.uint32)
        .view(c_dt)
    )
    want = tensorcore.mma_chain(a, b, c)

    def fused(a, b, c):
        return tensorcore.mma_chain(a, b, c, target=Target(fused=True, stage=_stage_in_arrays))

    with X.enable_x64():
        got = np.asarray(jax.jit(fused)(*(jax.numpy.asarray(x) for x in (a, b, c))))
        np.testing.assert_array_equal(
            got.view(np.uint16 if c_dt.itemsize == 2 else np.uint32),
            want.view(np.uint16 if c_dt.itemsize == 2 else np.uint32),
        )
        with pytest.raises(RuntimeError, match="staging memory"):
            tensorcore.mma_chain(*(jax.numpy.asarray(x) for x in (a, b, c)), target=FUSED)


def test_pieces_and_lookup_agree_inside_and_outside_a_fused_kernel():
    x = np.arange(4 * 64, dtype=np.int32).reshape(4, 64)
    table = np.arange(1000, 1100, dtype=np.uint32)
    idx = np.array([[3, 99], [0, 50]], np.int32)
    plain = X.pieces(x, 16, -1)
    assert [p.shape for p in plain] == [(4, 16)] * 4
    np.testing.assert_array_equal(np.concatenate(plain, axis=-1), x)
    split = X.pieces(jax.numpy.asarray(x), 16, -1, FUSED)
    rows = X.pieces(jax.numpy.asarray(x), 2, 0, FUSED)
    looked = X.lookup(jax.numpy.asarray(table), jax.numpy.asarray(idx), FUSED)
    with pytest.raises(ValueError, match="power-of-two"):
        X.pieces(jax.numpy.asarray(x[:, :48]), 16, -1, FUSED)
    for a, b in zip(plain, split):
        np.testing.assert_array_equal(a, np.asarray(b))
    np.testing.assert_array_equal(np.asarray(rows[1]), x[2:])
    np.testing.assert_array_equal(np.asarray(looked), X.lookup(table, idx))
    with pytest.raises(ValueError, match="multiple"):
        X.pieces(x, 24, -1)


# ----------------------------------------------------------------------------------------------------------------
# the GPU


# Compiled with inline PTX, each case takes Triton 5-7 s on the H200 (about 200 s in the portable form), so a GPU
# round runs them all, and a head dim of 256, which the interpreter would take long over (its static SASS spills
# 904 B at 16 x 16: tools/fused_sass.py)
GPU_CASES = {**CASES, "d256-gqa-causal-ragged": dict(shape=(1, 2, 1, 100, 150, 256), options=dict(causal=True))}


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(GPU_CASES))
def test_compiled_fused_kernel_equals_the_numpy_engine_on_the_gpu(case):
    """Compiled by Triton, on the GPU: the staged chains' barriers and scratch memory matter here (the interpreter
    runs a program as one thread)."""
    if jax.default_backend() != "gpu":
        pytest.skip(f"jax runs on {jax.default_backend()!r}, not a GPU: install jax[cuda]")
    q, k, v, prob = problem(GPU_CASES[case])
    assert_same_run(engine_pallas.run(q, k, v, prob), engine_numpy.run(q, k, v, prob))


def _raw_f32(rng, n):
    """float32 raw bit patterns, every class of value: uniform bits, and near 0, 1 and the overflow edge."""
    u = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    edges = np.array([0x00000001, 0x007FFFFF, 0x00800000, 0x3F800000, 0x7F7FFFFF, 0x7F800000, 0x7FC00000], np.uint32)
    u[: len(edges)] = edges
    u[len(edges) : 2 * len(edges)] = edges | 0x80000000
    return u.view(np.float32)


@pytest.mark.gpu
def test_ptx_shims_equal_the_generic_routines_on_the_gpu():
    """The fused kernel's inline instructions (Target.inline_ptx) against the portable routines on raw bits, compiled
    by Triton on the GPU: ieee32's add, sub, mul, div and fma (numpy's IEEE float32), the tensor cores' rounding
    toward zero of an exact value (tensorcore.generic.round_rz_ptx against rounding.round_scaled) and the cast of a
    chain term (xp.trunc_to_int)."""
    if jax.default_backend() != "gpu":
        pytest.skip(f"jax runs on {jax.default_backend()!r}, not a GPU: install jax[cuda]")
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pltriton

    from flashsim.numerics import formats, ieee32, rounding, tensorcore

    n = 1 << 16
    rng = np.random.default_rng(11)
    x, y, z = (_raw_f32(rng, n) for _ in range(3))
    total = rng.integers(-(2**33), 2**33, n, dtype=np.int64) >> rng.integers(0, 33, n, dtype=np.int64)
    e = rng.integers(-158, 110, n, dtype=np.int64).astype(np.int32)  # up to and past the f32 overflow edge
    t = (rng.standard_normal(n) * np.exp2(rng.integers(0, 27, n))).astype(np.float32)  # |t| < 2^31

    def body(x_ref, y_ref, z_ref, tot_ref, e_ref, t_ref, *outs):
        t = Target(fused=True, inline_ptx=True)
        a, b, c = x_ref[...], y_ref[...], z_ref[...]
        results = (
            ieee32.add(a, b, target=t),
            ieee32.sub(a, b, target=t),
            ieee32.mul(a, b, target=t),
            ieee32.div(a, b, target=t),
            ieee32.fma(a, b, c, target=t),
            tensorcore.generic.round_rz_ptx(jax.numpy, tot_ref[...], e_ref[...], t),
            X.trunc_to_int(t_ref[...], np.int32, t),
        )
        for ref, r in zip(outs, results):
            ref[...] = r

    block = 1024
    spec = pl.BlockSpec((block,), lambda i: (i,))
    shapes = [jax.ShapeDtypeStruct((n,), np.float32)] * 5 + [
        jax.ShapeDtypeStruct((n,), np.uint32),
        jax.ShapeDtypeStruct((n,), np.int32),
    ]
    with X.enable_x64():
        got = jax.jit(
            pl.pallas_call(
                body,
                grid=(n // block,),
                in_specs=[spec] * 6,
                out_specs=[spec] * 7,
                out_shape=shapes,
                compiler_params=pltriton.CompilerParams(num_warps=4),
            )
        )(x, y, z, total, e, t)
        got = [np.asarray(g) for g in got]
    want = [ieee32.add(x, y), ieee32.sub(x, y), ieee32.mul(x, y), ieee32.div(x, y), ieee32.fma(x, y, z)]
    for name, g, w in zip(("add", "sub", "mul", "div", "fma"), got, want):
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32), err_msg=name)
    f32 = formats.get_format("f32")
    rz = rounding.round_scaled(total, e, f32, "rz", overflow="inf", signed_zero=False).view(np.uint32)
    np.testing.assert_array_equal(got[5], rz, err_msg="tensor-core rounding")
    np.testing.assert_array_equal(got[6], t.astype(np.int32), err_msg="trunc_to_int")
