"""The tensor-core model's engines, bit for bit (flashsim.numerics.tensorcore):

* the generic routine on numpy (``mma_chain_generic``), the same routine under jax.jit, and the numpy engine's fast
  path (``mma_chain`` on numpy arrays: the compiled numba kernel) agree with each other on raw bit patterns
  (hypothesis), for every arch preset and every type, and with the Fraction oracle (numerics.reference) on sampled
  outputs; the same for the kernel's transposed layout (narrow outputs, N < 16) against the generic routine;
* the same on fixed batches by category (normal, wide exponents, large c, exact cancellation, one product,
  subnormals, near overflow, tiny c against big products, inf / NaN, random bits); and the kernel's own edges:
  a fraction width that needs int64 sums, exponent gaps past the shift width, subnormal and zero c, all-zero
  rows and blocks, specials in B or c alone, threads, broadcasts, transposed views, block sizes it leaves to the
  generic routine, and the generic routine standing in (with one warning) when numba cannot be imported;
* ``mma_chain`` is the kernel's loop of single ``mma`` calls (k16 steps in order, every (m16, n8) tile);
* the public ``flashsim.mma(..., backend="jax")`` and its errors; ``mma_chain``'s argument checks; JAX without 64-bit
  types is refused.

Everything compares .view(uint) bit patterns. Shapes are few and fixed so that XLA compiles each (type, arch
family) once.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tensorcore import numpy_operand_bits  # tests/ is on sys.path under pytest

import flashsim
from flashsim.arch import ARCHS, get_arch
from flashsim.numerics import tensorcore as tc
from flashsim.numerics.formats import BF16, F16, F32
from flashsim.numerics.reference import mma_ref_element
from flashsim.numerics.xp import enable_x64

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # the numpy engines are still checked against each other and the oracle
    jax = None

bf16 = np.dtype(ml_dtypes.bfloat16)
TYPES = {
    "f32.f16.f16.f32": (np.dtype(np.float16), np.dtype(np.float32)),
    "f16.f16.f16.f16": (np.dtype(np.float16), np.dtype(np.float16)),
    "f32.bf16.bf16.f32": (bf16, np.dtype(np.float32)),
}
ARCH_NAMES = list(ARCHS)
HYP = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
needs_jax = pytest.mark.skipif(jax is None, reason="backend='jax' needs jax: pip install 'flashsim[jax]'")


def ubits(x):
    x = np.asarray(x)
    return x.view({2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


def same_bits(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype, want.dtype)
    bad = ubits(got) != ubits(want)
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        pytest.fail(
            f"{what}: {int(bad.sum())} of {bad.size} differ; first at {at}: "
            f"{int(ubits(got)[at]):#x} vs {int(ubits(want)[at]):#x}"
        )


def jax_chain(a, b, c, arch):
    """mma_chain on JAX arrays under jax.jit (one compilation per tensor-core parameter set and shapes)."""
    with enable_x64():
        d = tc.api._jitted_chain(get_arch(arch))(jnp.asarray(a), jnp.asarray(b), jnp.asarray(c))
        return np.asarray(d)


def all_engines(a, b, c, arch, use_jax=True):
    """The numpy fast path, checked against the generic routine on numpy and (if available) under jax.jit."""
    fast = tc.mma_chain(a, b, c, arch)
    same_bits(tc.mma_chain_generic(a, b, c, arch), fast, f"generic numpy vs fast path, {arch}")
    if use_jax and jax is not None:
        same_bits(jax_chain(a, b, c, arch), fast, f"generic under jax.jit vs fast path, {arch}")
    return fast


def oracle_chain_element(a, b, c, i, j, arch):
    """d[i, j] of the chain by the Fraction oracle, one k16 step after another (a (M, K), b (K, N), c (M, N))."""
    fin = BF16 if a.dtype == bf16 else F16
    fc = F16 if c.dtype == np.float16 else F32
    acc = int(ubits(c)[i, j])
    for k0 in range(0, a.shape[-1], 16):
        acc = mma_ref_element(ubits(a)[i, k0 : k0 + 16], ubits(b)[k0 : k0 + 16, j], acc, fin, fc, arch)
    return acc


def check_oracle(a, b, c, d, arch, rng, count):
    """``count`` sampled outputs of d (batch broadcast) against the oracle."""
    batch = d.shape[:-2]
    for _ in range(count):
        t = tuple(int(rng.integers(0, s)) for s in batch)
        i, j = int(rng.integers(0, d.shape[-2])), int(rng.integers(0, d.shape[-1]))

        def pick(x):
            idx = tuple(0 if s == 1 else ti for s, ti in zip(x.shape[:-2], t[len(t) - (x.ndim - 2) :]))
            return x[idx]

        want = oracle_chain_element(pick(a), pick(b), pick(c), i, j, arch)
        assert int(ubits(d)[t + (i, j)]) == want, (arch, t, i, j, hex(int(ubits(d)[t + (i, j)])), hex(want))


# ------------------------------------------------------------------------------------------------- raw bits


def operand_bits(rng, fmt, shape, kind, center, width, p_zero, p_special):
    """test_tensorcore.numpy_operand_bits as values of fmt's dtype."""
    return numpy_operand_bits(rng, fmt, shape, kind, center, width, p_zero, p_special).astype(fmt.uint).view(fmt.dtype)


@st.composite
def chain_operands(draw, type_name):
    """a (2, 16, 32), b (1, 32, 16) (broadcast over a's batch), c (2, 16, 16): two k16 steps, two n8 tiles."""
    adt, cdt = TYPES[type_name]
    fin = BF16 if adt == bf16 else F16
    fc = F16 if cdt == np.float16 else F32
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "cluster", "cluster", "tiny", "zero_exponent"]))
    center = draw(st.integers(1, fin.exp_field_max - 1))
    if kind == "zero_exponent":  # products straddling the zero exponent (f32: -133 / -132, f16: -21 / -20)
        e_zero = -133 if fc is F32 else -21
        center = max(1, e_zero // 2 + fin.bias + draw(st.integers(-3, 3)))
        kind = "cluster"
    width = draw(st.integers(0, 8))
    p_zero = draw(st.sampled_from([0.0, 0.1, 0.5]))
    p_special = draw(st.sampled_from([0.0, 0.0, 0.01, 0.1]))
    a = operand_bits(rng, fin, (2, 16, 32), kind, center, width, p_zero, p_special)
    b = operand_bits(rng, fin, (1, 32, 16), kind, center, width, p_zero, p_special)
    c_kind = draw(st.sampled_from(["random", "cluster", "zero"]))
    c = operand_bits(
        rng,
        fc,
        (2, 16, 16),
        "random" if c_kind == "random" else "cluster",
        draw(st.integers(1, fc.exp_field_max - 1)),
        4,
        1.0 if c_kind == "zero" else p_zero,
        p_special,
    )
    if draw(st.booleans()):  # exact cancellation in every k16 step
        a[..., 1::2] = (ubits(a[..., 0::2]) ^ fin.sign_mask).view(adt)
        b[..., 1::2, :] = b[..., 0::2, :]
    return a, b, c, rng


@pytest.mark.parametrize("arch", ARCH_NAMES)
@pytest.mark.parametrize("type_name", list(TYPES))
@HYP
@given(data=st.data())
def test_engines_and_oracle_agree_on_raw_bits(type_name, arch, data):
    a, b, c, rng = data.draw(chain_operands(type_name))
    d = all_engines(a, b, c, arch)
    check_oracle(a, b, c, d, arch, rng, 6)


# ----------------------------------------------------------------------------------------------- categories


def category_inputs(rng, a_dt, c_dt, per=6, k=32):
    """Batches (per each) by category: normal, wide exponent spread, large c, exact cancellation, one product,
    subnormals, near overflow, tiny c against big products (zero exponents), inf/NaN, random bits.
    Shapes a (n, 16, k), b (n, k, 8), c (n, 16, 8)."""
    bf = a_dt == bf16
    emax = 127 if bf else 15
    A, B, C = (per, 16, k), (per, k, 8), (per, 16, 8)

    def vals(shape, scale=1.0):
        return rng.standard_normal(shape) * scale

    def spread(shape, lo, hi):
        return rng.choice([-1, 1], shape) * rng.uniform(1, 2, shape) * 2.0 ** rng.integers(lo, hi, shape)

    cats = [
        (vals(A), vals(B), vals(C)),
        (spread(A, -14, 8), spread(B, -14, 8), spread(C, -20, 10)),
        (vals(A), vals(B), vals(C, 2.0 ** (60 if bf else 20))),
    ]
    a, b = vals(A), vals(B)
    b[:, 8:16] = b[:, :8]
    a[:, :, 8:16] = -a[:, :, :8]  # products cancel exactly in the first step
    cats.append((a, b, vals(C, 2.0**-30)))
    a = np.zeros(A)
    a[:, :, 3] = vals((per, 16))
    cats.append((a, vals(B), vals(C, 1e-3)))
    sub = 2.0 ** (-133 if bf else -24)
    cats.append((rng.integers(-4, 5, A) * sub * rng.integers(1, 300, A), vals(B), vals(C, 1e-30)))
    cats.append((spread(A, emax - 3, emax), spread(B, emax - 3, emax), vals(C)))
    cats.append((vals(A, 2.0**-6), vals(B, 2.0**-6), spread(C, -140, -120)))
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
    fin = BF16 if bf else F16
    fc = F16 if c_dt == np.float16 else F32
    ra = operand_bits(rng, fin, A, "random", 0, 0, 0.0, 0.0)
    rb = operand_bits(rng, fin, B, "random", 0, 0, 0.0, 0.0)
    rc = operand_bits(rng, fc, C, "random", 0, 0, 0.0, 0.0)
    return np.concatenate([a, ra]), np.concatenate([b, rb]), np.concatenate([c, rc])


@pytest.mark.parametrize("arch", ARCH_NAMES)
@pytest.mark.parametrize("type_name", list(TYPES))
def test_engines_agree_by_category(type_name, arch):
    a_dt, c_dt = TYPES[type_name]
    rng = np.random.default_rng(7)
    a, b, c = category_inputs(rng, a_dt, c_dt)
    d = all_engines(a, b, c, arch)
    check_oracle(a, b, c, d, arch, rng, 12)


def test_threads_broadcast_and_views_match(monkeypatch):
    """Batches split over threads (here 3, at any size), b broadcast over a's batch (an index, decoded once per run
    of equal indices), operands given as transposed views (passed to the kernel untransposed, with a flag), bf16
    exponents far apart: every split agrees with the generic routine."""
    monkeypatch.setattr(tc.fast, "_THREAD_MIN", 1)
    monkeypatch.setenv("FLASHSIM_MMA_THREADS", "3")  # the default of EngineOptions.mma_threads
    rng = np.random.default_rng(11)
    n = 40
    a = (rng.standard_normal((n, 16, 32)) * 2.0 ** rng.integers(-20, 20, (n, 16, 32))).astype(bf16)
    b = rng.standard_normal((n, 32, 8)).astype(bf16)
    c = rng.standard_normal((n, 16, 8)).astype(np.float32)
    a[9, 3, 3] = ml_dtypes.bfloat16(2.0**-120)
    b[30, 2, 2] = ml_dtypes.bfloat16(2.0**90)
    a[17, 5, 20] = np.inf
    at = np.swapaxes(np.ascontiguousarray(np.swapaxes(a, 1, 2)), 1, 2)  # A as a view of A^T
    bt = np.swapaxes(np.ascontiguousarray(np.swapaxes(b, 1, 2)), 1, 2)
    assert not at.flags.c_contiguous and not bt.flags.c_contiguous
    for arch in ("sm_90", "sm_80"):
        d = all_engines(a, b, c, arch, use_jax=False)
        check_oracle(a, b, c, d, arch, rng, 8)
        same_bits(tc.mma_chain(at, bt, c, arch), d, "transposed views")
        d = all_engines(a, b[:1], c, arch, use_jax=False)  # b broadcast over a's batch
        check_oracle(a, b[:1], c, d, arch, rng, 4)
        same_bits(tc.mma_chain(at, bt[:1], c, arch), d, "transposed views, broadcast")
    # read-only inputs and np.broadcast_to views (copied once into the one array type the kernel is compiled for)
    ar, br, cr = a.copy(), b[:1].copy(), c[:1].copy()
    for x in (ar, br, cr):
        x.flags.writeable = False
    same_bits(
        tc.mma_chain(ar, np.broadcast_to(br, (n, 32, 8)), np.broadcast_to(cr, (n, 16, 8)), "sm_90"),
        tc.mma_chain_generic(a, b[:1], c[:1], "sm_90"),
        "read-only and broadcast_to inputs",
    )
    # wide outputs (not the transposed layout), a batch of 4 x 3 with a broadcast over the first axis
    a4 = rng.standard_normal((4, 3, 32, 32)).astype(np.float16)
    b4 = rng.standard_normal((1, 3, 32, 48)).astype(np.float16)
    c4 = rng.standard_normal((4, 1, 32, 48)).astype(np.float16)
    all_engines(a4, b4, c4, "sm_90", use_jax=False)
    all_engines(a4, np.swapaxes(np.ascontiguousarray(np.swapaxes(b4, -1, -2)), -1, -2), c4, "sm_80", use_jax=False)


@pytest.mark.parametrize("type_name", list(TYPES))
def test_wider_fraction_needs_int64_sums(type_name):
    """A hypothetical F = 27 (and blocks of 16): the truncated products no longer fit an int32 sum. All engines
    switch to int64 and still agree with the oracle on products at the largest significands."""
    arch = dataclasses.replace(get_arch("sm_90"), mma_fraction_bits=27)
    a_dt, c_dt = TYPES[type_name]
    assert tc.generic.acc_int_dtype(np, arch, False) == np.int64
    top = -2047.0 / 1024 if a_dt != bf16 else -255.0 / 128
    a = np.full((2, 16, 16), top).astype(a_dt)  # every product (2047 * 2^-10)^2 (bf16: 255 * 2^-7), same sign
    b = np.full((1, 16, 8), top).astype(a_dt)
    c = np.full((2, 16, 8), 4.0).astype(c_dt)
    d = all_engines(a, b, c, arch)
    check_oracle(a, b, c, d, arch, np.random.default_rng(0), 4)
    rng = np.random.default_rng(3)
    a2, b2, c2 = category_inputs(rng, a_dt, c_dt, per=2, k=16)
    check_oracle(a2, b2, c2, all_engines(a2, b2, c2, arch), arch, rng, 8)


def _vals(x, dt):
    with np.errstate(all="ignore"):
        return np.asarray(x, dtype=np.float64).astype(dt)


@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_kernel_edges(type_name, arch):
    """The compiled kernel's own edges against the generic routine and the oracle: exponent gaps past the 32-bit
    shift (products far below E, c far above or below them), subnormal c, c zero with products at the zero
    exponent, all-zero rows / columns / blocks with +-0 c, an inf or NaN only in B or only in c."""
    a_dt, c_dt = TYPES[type_name]
    fc = F16 if c_dt == np.float16 else F32
    rng = np.random.default_rng(21)
    n, k = 12, 32
    big, small = (2.0**120, 2.0**-120) if a_dt == bf16 else (2.0**15, 2.0**-14)
    a = rng.standard_normal((n, 16, k))
    b = rng.standard_normal((n, k, 16))
    c = rng.standard_normal((n, 16, 16))
    a[0, :, ::2] *= big  # gaps of 2 * log2(big) between products of one block
    a[0, :, 1::2] *= small
    c[1] *= 2.0 ** (127 if fc is F32 else 15)  # c far above every product
    a[2] *= small  # products far below c
    c[3] = rng.integers(-(1 << 10), 1 << 10, (16, 16)) * (2.0**-149 if fc is F32 else 2.0**-24)  # subnormal c
    a[3] *= small
    c[4] = 0.0  # zero c: products near the zero exponent
    a[4] *= 2.0**-66 if a_dt == bf16 else 2.0**-7
    b[4] *= 2.0**-66 if a_dt == bf16 else 2.0**-7
    a[5, 3:7] = 0.0  # zero rows of A, zero columns of B, a zero block
    b[5, :, 2:5] = 0.0
    a[5, :, 16:24] = 0.0
    c[5, 3:5] = -0.0
    c[5, 5, 2:5] = -0.0
    a[6] = 0.0  # everything zero, c of both signs
    c[6] = np.where(rng.random((16, 16)) < 0.5, -0.0, 0.0)
    b[7, 3, 5] = np.inf  # specials in B only (row 3 meets a zero in some rows)
    b[7, 20, 1] = np.nan
    a[7, 2, 3] = 0.0
    c[8, 4, 6] = -np.inf  # specials in c only
    c[8, 9, 9] = np.nan
    b[9, 5, :] = -np.inf  # +inf and -inf together
    a[9, 1, 6] = np.inf
    a[10, :, 0] = 1.0  # sums that cancel to exactly zero, c = 0
    a[10, :, 1] = -1.0
    b[10, 0:2] = 1.0
    a[10, :, 2:] = 0.0
    c[10] = 0.0
    a, b, c = _vals(a, a_dt), _vals(b, a_dt), _vals(c, c_dt)
    d = all_engines(a, b, c, arch, use_jax=False)
    check_oracle(a, b, c, d, arch, rng, 24)
    for t in (0, 1, 2, 3, 4, 7, 8, 9):
        for i, j in ((0, 0), (3, 5), (9, 9), (15, 15), (4, 6), (1, 6)):
            want = oracle_chain_element(a[t], b[t], c[t], i, j, arch)
            assert int(ubits(d)[t, i, j]) == want, (t, i, j)


@pytest.mark.parametrize("type_name", list(TYPES))
@HYP
@given(data=st.data())
def test_transposed_layout_matches_generic(type_name, data):
    """Narrow outputs (N < 16 < M, as single mmas) run the kernel on d^T = B^T A^T + c^T; wider N does not. Both
    against the generic routine on raw bits, shapes (M, N) = (32, 8), (16, 24), (16, 8)."""
    a, b, c, rng = data.draw(chain_operands(type_name))
    arch = data.draw(st.sampled_from(["sm_90", "sm_80"]))
    for m, n in ((32, 8), (16, 24), (16, 8)):
        aa = np.concatenate([a, a[:, ::-1]], axis=1)[:, :m]
        bb = np.concatenate([b, b[..., ::-1]], axis=2)[..., :n]
        cc = np.concatenate([c, c[..., ::-1]], axis=2)
        cc = np.concatenate([cc, cc[:, ::-1]], axis=1)[:, :m, :n]
        all_engines(aa, bb, cc, arch, use_jax=False)


def test_block_sizes_the_kernel_leaves_to_the_generic_routine():
    """The kernel fuses products four at a time: mma_block_k 4 runs it, a hypothetical 2 runs the generic routine;
    both agree with the oracle."""
    rng = np.random.default_rng(4)
    a, b, c = category_inputs(rng, np.dtype(np.float16), np.dtype(np.float16), per=1, k=16)
    for kb in (4, 2):
        arch = dataclasses.replace(get_arch("sm_80"), mma_block_k=kb)
        d = all_engines(a, b, c, arch, use_jax=False)
        check_oracle(a, b, c, d, arch, rng, 12)


def test_without_numba_the_generic_routine_runs(monkeypatch):
    """numba missing: mma_chain on numpy arrays warns once and runs the generic routine (the same bits)."""
    import sys
    import warnings

    rng = np.random.default_rng(2)
    a, b, c = category_inputs(rng, np.dtype(np.float16), np.dtype(np.float32), per=1, k=16)
    want = tc.mma_chain(a, b, c)
    monkeypatch.setattr(tc.fast, "_KERNEL", None)
    monkeypatch.setitem(sys.modules, "numba", None)  # import numba -> ImportError
    monkeypatch.delitem(sys.modules, "flashsim.numerics.tensorcore._numba_chain", raising=False)
    monkeypatch.delattr(sys.modules["flashsim.numerics.tensorcore"], "_numba_chain", raising=False)
    with pytest.warns(RuntimeWarning, match="numba cannot be imported"):
        got = tc.mma_chain(a, b, c)
    same_bits(got, want, "generic stand-in")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        same_bits(
            flashsim.mma(a[:, :, :16], b[:, :16], c), tc.mma_chain_generic(a[:, :, :16], b[:, :16], c), "second call"
        )


def test_overflow_and_specials_mid_chain():
    """Step 1 overflows to inf (f32: |sum| >= 2^128; f16: RNE past 65504); step 2 then sees inf as c, meets a
    -inf product (NaN) or finite terms (inf stays)."""
    for adt, cdt, big in ((bf16, np.float32, 2.0**120), (np.dtype(np.float16), np.dtype(np.float16), 2.0**15)):
        a = np.zeros((3, 16, 32), adt)
        b = np.zeros((1, 32, 8), adt)
        a[:, :, :8] = big
        b[:, :8, :] = 32.0
        a[1, :, 16] = -np.inf
        b[:, 16, :] = 1.0
        a[2, :, 17] = 1.0
        b[:, 17, :] = 1.0
        c = np.zeros((3, 16, 8), cdt)
        d = all_engines(a, b, c, "sm_90")
        assert np.isinf(d[0]).all() and np.isnan(d[1]).all() and np.isinf(d[2]).all()
        check_oracle(a, b, c, d, "sm_90", np.random.default_rng(1), 4)


# ------------------------------------------------------------------------------------- chain vs single mma


@pytest.mark.parametrize("type_name", list(TYPES))
@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_chain_is_the_loop_of_single_mmas(type_name, arch):
    """mma_chain(a (2, 32, 48), b (2, 48, 16), c) == for each k16 step in order, every (m16, n8) tile:
    d_tile = flashsim.mma(a_tile, b_tile, d_tile)."""
    a_dt, c_dt = TYPES[type_name]
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((2, 32, 48)) * 2.0 ** rng.integers(-10, 6, (2, 32, 48))).astype(a_dt)
    b = rng.standard_normal((2, 48, 16)).astype(a_dt)
    c = rng.standard_normal((2, 32, 16)).astype(c_dt)
    a[0, 3, 20] = np.inf
    want = c.copy()
    for s in range(3):
        for mt in range(2):
            for nt in range(2):
                rows, cols = slice(16 * mt, 16 * mt + 16), slice(8 * nt, 8 * nt + 8)
                want[:, rows, cols] = flashsim.mma(
                    np.ascontiguousarray(a[:, rows, 16 * s : 16 * s + 16]),
                    np.ascontiguousarray(b[:, 16 * s : 16 * s + 16, cols]),
                    np.ascontiguousarray(want[:, rows, cols]),
                    arch=arch,
                )
    same_bits(all_engines(a, b, c, arch), want, "chain vs single mma calls")


def test_chain_accepts_views_and_broadcast_batches():
    """The emulator's calls: b = K^T as a transposed view, c of zeros; batch axes broadcast among a, b and c."""
    rng = np.random.default_rng(9)
    q = rng.standard_normal((3, 2, 32, 32)).astype(np.float16)
    k = rng.standard_normal((3, 1, 16, 32)).astype(np.float16)
    c = np.zeros((1, 1, 32, 16), np.float32)
    d = tc.mma_chain(q, np.swapaxes(k, -1, -2), c)
    assert d.shape == (3, 2, 32, 16) and d.dtype == np.float32
    kt = np.ascontiguousarray(np.broadcast_to(np.swapaxes(k, -1, -2), (3, 2, 32, 16)))
    same_bits(d, tc.mma_chain(q, kt, np.zeros((3, 2, 32, 16), np.float32)), "views and broadcasting")
    same_bits(tc.mma_chain_generic(q, np.swapaxes(k, -1, -2), c), d, "generic numpy")
    if jax is not None:
        with enable_x64():
            fn = jax.jit(lambda q, k, c: tc.mma_chain(q, jnp.swapaxes(k, -1, -2), c))
            same_bits(np.asarray(fn(jnp.asarray(q), jnp.asarray(k), jnp.asarray(c))), d, "jax, view inside jit")


# ------------------------------------------------------------------------------------------- the contract


@needs_jax
@pytest.mark.parametrize("type_name", list(TYPES))
def test_public_mma_jax_backend_is_bit_identical(type_name):
    """flashsim.mma(..., backend="jax") against the numpy backend, broadcasting batch dims included."""
    a_dt, c_dt = TYPES[type_name]
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 5, 16, 16)) * 2.0 ** rng.integers(-12, 12, (3, 5, 16, 16))).astype(a_dt)
    b = (rng.standard_normal((1, 5, 16, 8)) * 4).astype(a_dt)
    c = rng.standard_normal((3, 5, 16, 8)).astype(c_dt)
    ref = flashsim.mma(a, b, c, arch="sm_90")
    got = flashsim.mma(a, b, c, arch="sm_90", backend="jax")
    assert isinstance(got, np.ndarray)
    same_bits(got, ref, "backend='jax'")
    with pytest.raises(ValueError, match="b's batch dimensions"):
        flashsim.mma(a, np.zeros((2, 16, 8), a_dt), c, backend="jax")


@needs_jax
def test_jax_without_x64_is_refused():
    a = jnp.zeros((16, 16), jnp.float16)
    b = jnp.zeros((16, 8), jnp.float16)
    c = jnp.zeros((16, 8), jnp.float32)
    with pytest.raises(RuntimeError, match="enable_x64"):
        tc.mma_chain(a, b, c)


@pytest.mark.parametrize(
    "args, match",
    [
        (dict(a=np.zeros((16, 16), np.float32)), "a must have dtype"),
        (dict(b=np.zeros((16, 8), bf16)), "b must have a's dtype"),
        (dict(c=np.zeros((16, 8), np.float64)), "c must have dtype"),
        (
            dict(a=np.zeros((16, 16), bf16), b=np.zeros((16, 8), bf16), c=np.zeros((16, 8), np.float16)),
            "no mma.sync m16n8k16 for inputs bfloat16 with accumulator float16",
        ),
        (dict(a=np.zeros((8, 16), np.float16), c=np.zeros((8, 8), np.float32)), "a must have shape"),
        (dict(a=np.zeros((16, 24), np.float16)), "a must have shape"),
        (dict(b=np.zeros((32, 8), np.float16)), r"b must have shape \(\.\.\., 16, N\)"),
        (dict(b=np.zeros((16, 12), np.float16), c=np.zeros((16, 12), np.float32)), "N a multiple of 8"),
        (dict(c=np.zeros((16, 16), np.float32)), r"c must have shape \(\.\.\., 16, 8\)"),
        (dict(a=np.zeros((3, 16, 16), np.float16), c=np.zeros((2, 16, 8), np.float32)), "do not broadcast"),
        (dict(a=[[0.0] * 16] * 16), "a must be an array"),
        (dict(arch="sm_75"), "unknown arch"),
    ],
)
def test_mma_chain_rejects_bad_input(args, match):
    kw = dict(
        a=np.zeros((16, 16), np.float16), b=np.zeros((16, 8), np.float16), c=np.zeros((16, 8), np.float32), arch="sm_90"
    )
    kw.update(args)
    for fn in (tc.mma_chain, tc.mma_chain_generic):
        with pytest.raises(ValueError, match=match):
            fn(kw["a"], kw["b"], kw["c"], kw["arch"])


def test_empty_and_zero_k():
    a = np.zeros((0, 16, 32), np.float16)
    b = np.zeros((0, 32, 8), np.float16)
    c = np.zeros((0, 16, 8), np.float32)
    assert tc.mma_chain(a, b, c).shape == (0, 16, 8)
    c1 = np.full((2, 16, 8), -0.0, np.float32)  # no k16 step: d is c, bits included
    d = tc.mma_chain(np.zeros((2, 16, 0), np.float16), np.zeros((1, 0, 8), np.float16), c1)
    same_bits(d, c1, "K = 0")
    same_bits(
        tc.mma_chain_generic(np.zeros((2, 16, 0), np.float16), np.zeros((1, 0, 8), np.float16), c1),
        c1,
        "K = 0, generic",
    )
