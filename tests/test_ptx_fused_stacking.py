"""Products that ptxas fuses into their adds stay lane-wise, so an unrolled block of them stacks
(flashsim.ptx.vectorize), and the .ftz flush works in the format's own width.

A softmax's ``s * scale - max`` per score is a mul and a sub that ptxas contracts into one FMA: the mul keeps its
operands for the sub. Those products were barriers to stacking, so a block of 96 scores ran 96 x 3 single ops (the
sub and the ex2 after it too); now the products, the fused subs and what follows each run as one stacked call, and
every result is the one rounding of x * s - m (an oracle in exact rationals).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from flashsim.numerics import ieee
from flashsim.numerics.formats import BF16, E5M2, F16, F32, F64, TF32
from flashsim.ptx import launch, load, vectorize

N = 8  # unrolled pairs per thread


def _kernel(first: int = 0) -> str:
    """Threads from ``first`` on compute y = x * s - m for N values each (the others return at once)."""
    body = []
    for i in range(N):
        body.append(f"  ld.global.f32 %f{i}, [%rd3+{4 * i}];")
    for i in range(N):  # y_i = x_i * s - m: a mul and a sub ptxas fuses (no rounding modifier on either)
        body.append(f"  mul.f32 %f{20 + i}, %f{i}, %f16;")
        body.append(f"  sub.f32 %f{40 + i}, %f{20 + i}, %f17;")
    for i in range(N):
        body.append(f"  st.global.f32 [%rd4+{4 * i}], %f{40 + i};")
    return "\n".join(
        [
            ".version 8.0",
            ".target sm_90",
            ".address_size 64",
            ".visible .entry fused(.param .u64 px, .param .u64 py, .param .f32 s, .param .f32 m)",
            "{",
            "  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .f32 %f<64>;",
            "  ld.param.u64 %rd1, [px]; ld.param.u64 %rd2, [py];",
            "  ld.param.f32 %f16, [s]; ld.param.f32 %f17, [m];",
            "  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;",
            "  .reg .pred %p<2>;",
            "  mov.u32 %r1, %tid.x;",
            f"  setp.lt.u32 %p1, %r1, {first}; @%p1 ret;",
            f"  mul.wide.u32 %rd5, %r1, {4 * N}; add.s64 %rd3, %rd1, %rd5;",
            f"  mul.wide.u32 %rd6, %r1, {4 * N}; add.s64 %rd4, %rd2, %rd6;",
            *body,
            "  ret;",
            "}",
        ]
    )


def _round_f32(q: Fraction) -> np.float32:
    """The float32 nearest ``q`` (ties to even), found among the neighbours of a first guess by exact distance."""
    guess = np.float32(float(q))
    cands = [np.nextafter(guess, np.float32(-np.inf)), guess, np.nextafter(guess, np.float32(np.inf))]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - q), int(np.array(c).view(np.uint32)) & 1))
    return np.float32(best)


@pytest.mark.sass
def test_fused_products_and_their_adds_stack_and_round_once():
    module = load(_kernel(), arch="sm_90", contraction="sass")
    kernel = module.kernel("fused")
    prog = kernel.program
    assert len(prog.contraction) == N, "ptxas fuses every pair"
    groups = [item for items in prog.schedule.items.values() for item in items if type(item) is not int]
    names = [{prog.ops[pc].name for pc in item} | {len(item)} for item in groups]
    assert {"mul.f32", N} in names, f"the kept products stack: {names}"
    assert {"sub.f32", N} in names, f"the fused subs stack: {names}"
    rng = np.random.default_rng(5)
    threads = 64
    x = (rng.standard_normal((threads, N)) * 2.0 ** rng.integers(-20, 20, (threads, N))).astype(np.float32)
    s, m = np.float32(1.4426950408889634 / 11.3137), np.float32(0.7310585786)
    y = np.zeros((threads, N), np.float32)
    launch(kernel, 1, threads, [x, y, s, m])
    want = np.empty_like(y)
    for t in range(threads):
        for i in range(N):
            want[t, i] = _round_f32(Fraction(float(x[t, i])) * Fraction(float(s)) - Fraction(float(m)))
    assert np.array_equal(y.view(np.uint32), want.view(np.uint32))


@pytest.mark.sass
def test_a_group_of_few_running_threads_computes_on_them_alone(monkeypatch):
    """A quarter of the threads run the block (the rest returned, as a warp-specialised kernel's producer waits):
    the stacked groups compute on those threads' columns and scatter back; the bits are those of the whole-wave
    run, and the threads that returned keep their zeros."""
    threads, first = 128, 96
    kernel = load(_kernel(first), arch="sm_90", contraction="sass").kernel("fused")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((threads, N)).astype(np.float32)
    s, m = np.float32(0.125), np.float32(-1.5)
    outs = []
    for share in (0.0, vectorize.COMPACT_SHARE):
        monkeypatch.setattr(vectorize, "COMPACT_SHARE", share)
        y = np.zeros((threads, N), np.float32)
        launch(kernel, 1, threads, [x, y, s, m])
        outs.append(y)
    assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))
    assert not outs[1][:first].any()
    exact = lambda v: Fraction(float(v)) * Fraction(float(s)) - Fraction(float(m))  # noqa: E731
    want = [[_round_f32(exact(v)) for v in row] for row in x[first:]]
    assert np.array_equal(outs[1][first:].view(np.uint32), np.array(want, np.float32).view(np.uint32))


@pytest.mark.parametrize("f", [F16, BF16, F32, F64, TF32, E5M2], ids=lambda f: f.name)
def test_flush_subnormal_is_the_definition(f):
    """Every pattern whose exponent field is zero and fraction nonzero becomes the zero of its sign; the rest are
    unchanged; inputs of any unsigned or signed container (wider ones keep their low f.bits bits)."""
    rng = np.random.default_rng(7)
    if f.bits <= 16:
        bits = np.arange(1 << f.bits, dtype=np.uint64)
    else:
        bits = rng.integers(0, 1 << min(f.bits, 63), 1 << 16, dtype=np.uint64)
        bits[: 1 << 12] &= np.uint64((1 << (f.bits - 1)) | ((1 << f.frac_bits) - 1))  # subnormals, zeros
    field = (bits >> np.uint64(f.frac_bits)) & np.uint64((1 << f.exp_bits) - 1)
    frac = bits & np.uint64((1 << f.frac_bits) - 1)
    sign = bits & np.uint64(f.sign_mask)
    want = np.where((field == 0) & (frac != 0), sign, bits & np.uint64((1 << f.bits) - 1)).astype(f.uint)
    for container in (np.uint64, f.uint):
        got = ieee.flush_subnormal(bits.astype(container), f)
        assert got.dtype == np.dtype(f.uint) and np.array_equal(got, want)
    wide = bits | np.uint64(1 << 63) if f.bits < 64 else bits  # bits above the format: ignored
    assert np.array_equal(ieee.flush_subnormal(wide, f), want)
