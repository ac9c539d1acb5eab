"""Dependent chains of add.rn.f32 / max.f32 (a softmax's row sums and row maxima) run as one call of their numerics
(flashsim.ptx.vectorize.Chain over numerics.ieee32.add_chain / fmax_chain): the bits are those of the instructions
run one at a time, for every input class (subnormal partial sums under .ftz, NaNs of either kind, signed zeros,
infinities), with some threads returned first (the running threads compacted) or all of them running."""

from __future__ import annotations

import numpy as np
import pytest

from flashsim.ptx import launch, load, vectorize

N = 12  # values per row; two rows per thread, so the chains run two at a time


def _kernel(op: str, first: int) -> str:
    """Threads from ``first`` on reduce two rows of N values with ``op`` (an add or max form), left to right, and
    store every partial result (so every link's destination is observed); the others return at once."""
    body = [f"  ld.global.f32 %f{i}, [%rd3+{4 * i}];" for i in range(2 * N)]
    for r in range(2):
        acc = f"%f{r * N}"
        for i in range(1, N):
            dst = f"%f{100 + r * N + i}"
            body.append(f"  {op} {dst}, {acc}, %f{r * N + i};")  # the accumulator first, then the next value
            acc = dst
    for r in range(2):
        for i in range(1, N):
            body.append(f"  st.global.f32 [%rd4+{4 * (r * N + i)}], %f{100 + r * N + i};")
    return "\n".join(
        [
            ".version 8.0",
            ".target sm_90",
            ".address_size 64",
            ".visible .entry chains(.param .u64 px, .param .u64 py)",
            "{",
            "  .reg .b32 %r<4>; .reg .b64 %rd<8>; .reg .f32 %f<160>; .reg .pred %p<2>;",
            "  ld.param.u64 %rd1, [px]; ld.param.u64 %rd2, [py];",
            "  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;",
            "  mov.u32 %r1, %tid.x;",
            f"  setp.lt.u32 %p1, %r1, {first}; @%p1 ret;",
            f"  mul.wide.u32 %rd5, %r1, {8 * N}; add.s64 %rd3, %rd1, %rd5; add.s64 %rd4, %rd2, %rd5;",
            *body,
            "  ret;",
            "}",
        ]
    )


def _inputs(threads: int, seed: int) -> np.ndarray:
    """Rows mixing normal values with every class the chains must get right."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((threads, 2 * N)).astype(np.float32).view(np.uint32)
    specials = np.array(
        [0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x01000000, 0x81200000, 0x00C00000]
        + [0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0xFFA9E94D],
        np.uint32,
    )
    pick = rng.random(x.shape) < 0.3
    x[pick] = rng.choice(specials, int(pick.sum()))
    x[::7, :N] = 0x7FC00000  # whole rows of NaN (a max chain's all-NaN prefixes)
    x[3, :4] = [0x01000000, 0x81200000, 0x00C00000, 0x3F800000]  # a subnormal partial sum
    return x.view(np.float32)


@pytest.mark.parametrize("op", ["add.f32", "add.rn.ftz.f32", "max.f32", "max.ftz.f32"])
@pytest.mark.parametrize("first", [0, 96])
def test_a_chain_gives_the_bits_of_its_steps(op, first):
    threads = 128
    kernel = load(_kernel(op, first), arch="sm_90", contraction="none").kernel("chains")
    prog = kernel.program
    chains = [i for items in prog.schedule.items.values() for i in items if type(i) is vectorize.Chain]
    assert [(len(c.groups), len(c.groups[0])) for c in chains] == [(N - 1, 2)]
    x = _inputs(threads, 5)
    outs = []
    for schedule in (prog.schedule, None):
        prog.schedule = schedule
        y = np.zeros_like(x)
        launch(kernel, 1, threads, [x, y])
        outs.append(y.view(np.uint32))
    assert np.array_equal(outs[0], outs[1])
    assert not outs[0][:first].any()


def test_a_link_reading_a_value_the_chain_wrote_ends_the_chain():
    """A next op whose other operand is an earlier link's result is not part of the chain (it depends on the chain
    inside, not only at its start): the schedule stops the chain there, and the bits are the steps'."""
    ptx = _kernel("add.f32", 0).replace("add.f32 %f104, %f103, %f4;", "add.f32 %f104, %f103, %f102;")
    kernel = load(ptx, arch="sm_90", contraction="none").kernel("chains")
    prog = kernel.program
    chains = [i for items in prog.schedule.items.values() for i in items if type(i) is vectorize.Chain]
    lengths = sorted(len(c.groups) for c in chains)
    assert lengths and max(lengths) < N - 1
    x = _inputs(64, 8)
    outs = []
    for schedule in (prog.schedule, None):
        prog.schedule = schedule
        y = np.zeros_like(x)
        launch(kernel, 1, 64, [x, y])
        outs.append(y.view(np.uint32))
    assert np.array_equal(outs[0], outs[1])
