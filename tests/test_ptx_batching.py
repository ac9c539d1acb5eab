"""flashsim.ptx's two execution shortcuts change no bit: deferred mma.sync (flashsim.ptx.batching: a block's mma's as
a few batched tensor-core calls) and stacked lane-wise ops (flashsim.ptx.vectorize). Each kernel runs three times
on the same inputs, from three Modules of one PTX: as the machine runs it, without the mma batching, and without
either, one instruction at a time; every output bit must agree."""

from __future__ import annotations

import numpy as np
import pytest

import flashsim
from flashsim import ptx as P
from flashsim.emulator import engine_ptx
from flashsim.gpu import launch as gl
from flashsim.gpu.build import kernel_dir
from flashsim.problem import prepare

pytestmark = pytest.mark.nvrtc


def _three_ways(source: str, name: str, defines: dict, make_args, grid, block, shared_mem=0):
    ptx = P.compile(source, arch="sm_90", defines=defines).ptx
    outs = []
    for batch, stack in ((True, True), (False, True), (False, False)):
        kernel = P.load(ptx, arch="sm_90").kernel(name)
        prog = kernel.program
        if not batch:
            prog.batch_plan = None
        if not stack:
            prog.schedule = None
        args = make_args()
        P.launch(kernel, grid, block, args, shared_mem=shared_mem)
        outs.append([a.copy() for a in args if isinstance(a, np.ndarray)])
    return outs


def _same(outs):
    first = outs[0]
    for other in outs[1:]:
        for x, y in zip(first, other):
            assert np.array_equal(x.view(np.uint8), y.view(np.uint8))


def test_the_gemm_batched_and_one_mma_at_a_time():
    """kernel/bench/ptx_gemm.cu: its mma blocks end in a bar.sync, where the deferred mma's must still land."""
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((256, 256)).astype(np.float16) for _ in range(2))

    def args():
        return [np.zeros((256, 256), np.float32), a.view(np.uint16), np.ascontiguousarray(b.T).view(np.uint16)]

    outs = _three_ways((kernel_dir() / "bench/ptx_gemm.cu").read_text(), "ptx_gemm", {}, args, (4, 4), 128)
    _same(outs)
    assert np.abs(outs[0][0]).max() > 0  # it computed something


@pytest.mark.parametrize("options", [{}, {"quant": "int8"}, {"pv_accum": "f16", "causal": True}])
def test_flash_fwd_batched_stacked_and_one_at_a_time(options):
    """kernel/flash_fwd.cu's chains along K and N (f16), the m16n8k32 s8 products that cannot chain (INT8), an
    f16 accumulator; the quantization pass's kernels first where there is one."""
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((1, 2, 80, 64)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, arch="sm_90", **options)
    outs = []
    for batch, stack in ((True, True), (False, True), (False, False)):
        kernels = {
            name: P.load(k.module.ptx, arch="sm_90").kernel(name) for name, k in engine_ptx.modules(prob).items()
        }
        for kern in kernels.values():  # fresh programs: the switches apply to these alone
            if not batch:
                kern.program.batch_plan = None
            if not stack:
                kern.program.schedule = None
        lse, o = np.zeros((1, 2, 80), np.float32), np.zeros_like(q)
        flag, scratch = np.full(1, gl.NO_OVERFLOW, np.uint64), np.zeros(max(gl.scratch_bytes(prob), 1), np.uint8)
        ptrs = [P.address(x) for x in (q, k, v, o, lse)]
        for name, grid, block, smem, args in gl.launch_list(prob, *ptrs, P.address(flag), P.address(scratch)):
            P.launch(kernels[name], grid, block, list(args), shared_mem=smem)
        outs.append([o, lse])
    _same(outs)
    o_ref, lse_ref = flashsim.attention(q, k, v, **options, check_overflow=False)
    assert np.array_equal(outs[0][0].view(np.uint16), o_ref.view(np.uint16))


ALIASED = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry aliased(.param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    add.u32 %r2, %r1, 7;
    add.u32 %r3, %r1, %r1;
    add.u32 %r4, %r1, %r2;
    add.u32 %r5, %r2, %r2;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {%r3, %r4};
    st.global.u32 [%rd3+8], %r5;
    ret;
}
"""


@pytest.mark.parametrize("stack", [True, False])
def test_stacked_ops_keep_their_register_aliasing(stack):
    """add %r3, %r1, %r1 and add %r4, %r1, %r2 are not congruent (one register read twice against two): they run
    apart, while add %r5, %r2, %r2 stacks with the first; the results are the same stacked or not."""
    kernel = P.load(ALIASED).kernel("aliased")
    prog = kernel.program
    if not stack:
        prog.schedule = None
    else:
        groups = [i for items in prog.schedule.items.values() for i in items if isinstance(i, tuple)]
        names = [[prog.ops[pc] for pc in g] for g in groups]
        assert any(len(g) == 2 and {op.line for op in g} == {11, 13} for g in names)
    out = np.zeros((32, 4), np.uint32)
    P.launch(kernel, 1, 32, [out])
    t = np.arange(32, dtype=np.uint32)
    assert np.array_equal(out[:, :3], np.stack([2 * t, 2 * t + 7, 2 * (t + 7)], axis=1))
