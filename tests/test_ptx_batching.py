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
