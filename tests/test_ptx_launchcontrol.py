"""sm_100 / sm_120 pieces of flashsim.ptx that CUTLASS's sm120 GEMMs need, in hand-written kernels: .b128 registers
(ld / st / mov, moved whole), cluster launch control (clusterlaunchcontrol.try_cancel / query_cancel: the simulator
cancels no cluster, so every response says "failed", completes 16 bytes on the mbarrier and the CTA goes on with its
own work; asking again after a failure is refused), TMA through a packed 4-bit tensor map (16U4_ALIGN8B), which
must move exactly the bytes of the UINT8 map over the same memory (that path held to the H100 in tests/test_ptx_tma.py),
and through a padded 6-bit one (16U6_ALIGN16B, cuda.h's rules and layout).
"""

from __future__ import annotations

import numpy as np
import pytest

import flashsim.ptx as fp
from flashsim.ptx import UnsupportedInstruction
from flashsim.ptx.errors import SimulationError
from flashsim.ptx.probes import tma as T
from flashsim.ptx.trace import Trace

HEADER = ".version 8.8\n.target sm_120a\n.address_size 64\n"

B128 = (
    HEADER
    + """
.visible .entry b128(.param .u64 src, .param .u64 dst)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .b128 %q<3>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [dst];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 16;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.b128 %q1, [%rd4];
    mov.b128 {%rd6, %rd7}, %q1;
    mov.b128 %q2, {%rd7, %rd6};
    mov.b128 %q1, %q2;
    st.global.b128 [%rd5], %q1;
    ret;
}
"""
)


def test_b128_registers_load_store_and_move_whole():
    """Each thread loads 16 bytes into one .b128 register, unpacks it into two .b64 (the first the low 8 bytes),
    packs them swapped, copies the register and stores it: its two halves swapped."""
    src = np.random.default_rng(0).integers(0, 2**63, (64, 2), dtype=np.uint64)
    dst = np.zeros_like(src)
    kernel = fp.load(B128, arch="sm_120").kernel("b128")
    store = next(op.line for op in kernel.program.ops if op.name.startswith("st.global"))
    trace = Trace(["%q1"], lines=[store], threads=[3])
    fp.launch(kernel, 1, 64, [src, dst], check="initcheck", trace=trace)
    assert np.array_equal(dst, src[:, ::-1])
    want = int(src[3, 1]) | int(src[3, 0]) << 64  # the swapped halves, the first (now src[3, 1]) the low 8 bytes
    assert f"0x{want:032x}" in trace.table()


CLC = (
    (
        HEADER
        + """
.visible .entry clc(.param .u64 out, .param .u32 again)
{
    .reg .pred %p<5>;
    .reg .b32 %r<14>;
    .reg .b64 %rd<6>;
    .reg .b128 %q1;
    .shared .align 16 .b8 response[16];
    .shared .align 8 .b64 bar;
    mov.u32 %r1, %tid.x;
    mov.u32 %r9, response;
    mov.u32 %r10, bar;
    mov.u32 %r12, %cluster_ctarank;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra READY;
    mbarrier.init.shared::cta.b64 [%r10], 1;
    st.shared.v4.u32 [%r9], {-1, -1, -1, -1};
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r10], 16;
READY:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    setp.ne.u32 %p4, %r12, 0;
    or.pred %p4, %p4, %p1;
    @%p4 bra WAIT;
    CANCEL_ALL [%r9], [%r10];
    ld.param.u32 %r11, [again];
    setp.ne.u32 %p3, %r11, 0;
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r10], 0;
    @!%p2 bra WAIT;
    @%p3 CANCEL_ONE [%r9], [%r10];
    ld.shared.b128 %q1, [%r9];
    clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 %p2, %q1;
    selp.u32 %r2, 1, 0, %p2;
    mov.u32 %r3, 7;
    mov.u32 %r4, 7;
    mov.u32 %r5, 7;
    @%p2 clusterlaunchcontrol.query_cancel.get_first_ctaid.v4.b32.b128 {%r3, %r4, %r5, _}, %q1;
    clusterlaunchcontrol.query_cancel.get_first_ctaid::y.b32.b128 %r6, %q1;
    ld.param.u64 %rd1, [out];
    mov.u32 %r7, %ctaid.x;
    mad.lo.u32 %r8, %r7, 32, %r1;
    mul.wide.u32 %rd2, %r8, 16;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v4.u32 [%rd3], {%r2, %r3, %r4, %r6};
    ret;
}
"""
    )
    .replace(
        "CANCEL_ALL",
        "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
        + ".multicast::cluster::all.b128",
    )
    .replace("CANCEL_ONE", "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128")
)


def test_try_cancel_fails_and_completes_on_the_mbarrier():
    """Every request fails (nothing is cancelled): rank 0's multicast request writes its response over the 0xFF
    bytes of both CTAs of its cluster, which read "not cancelled"; its 16 bytes complete each CTA's mbarrier
    transaction (the waiters go on, ordered after the write: racecheck agrees); each CTA of the grid (two clusters of
    two) runs its own work; get_first_ctaid of a failed response reads zeros (the ISA leaves it undefined)."""
    out = np.full((4, 32, 4), 0xAB, np.uint32)
    kernel = fp.load(CLC, arch="sm_120").kernel("clc")
    fp.launch(kernel, 4, 32, [out, np.uint32(0)], cluster=(2, 1, 1), check="racecheck")
    assert (out[..., 0] == 0).all() and (out[..., 1:3] == 7).all() and (out[..., 3] == 0).all()


def test_asking_again_after_a_failure_is_refused():
    with pytest.raises(SimulationError, match="after this CTA saw a request fail"):
        fp.launch(fp.load(CLC, arch="sm_120").kernel("clc"), 1, 32, [np.zeros((32, 4), np.uint32), np.uint32(1)])


@pytest.mark.parametrize("arch", ["sm_90"])
def test_launch_control_is_refused_before_sm_100(arch):
    text = CLC.replace(".target sm_120a", ".target sm_90a")
    with pytest.raises(UnsupportedInstruction, match="sm_100"):
        fp.launch(fp.load(text, arch=arch).kernel("clc"), 1, 32, [np.zeros((32, 4), np.uint32), np.uint32(0)])


def _packed_case(swizzle: str):
    """A 2-D UINT8 load whose bytes a packed 4-bit map reads too: 40 rows of 64 bytes (128 codes), a box of 64 x 16
    bytes (128 x 16 codes) at byte 0 (code 0) of row 8."""
    return T.Case(f"packed_{swizzle}", "load", "u1", "UINT8", (40, 64), (64, 16), (0, 8), swizzle=swizzle)


@pytest.mark.parametrize("swizzle", ["NONE", "64B"])
def test_packed_4bit_map_moves_the_bytes_of_its_uint8_twin(swizzle):
    case = _packed_case(swizzle)
    a = T.arrays(case)
    gd, gs = T.dims(case)
    box = case.box if swizzle == "NONE" else (64, 16)
    twin = fp.tensor_map_tiled(
        a["tensor"], data_type="UINT8", global_dim=gd, global_strides=gs, box_dim=box, swizzle=swizzle
    )
    packed = fp.tensor_map_tiled(
        a["tensor"],
        data_type="16U4_ALIGN8B",
        global_dim=(gd[0] * 2, gd[1]),
        global_strides=gs,
        box_dim=(box[0] * 2, box[1]),
        swizzle=swizzle,
    )
    assert packed.bytewise() == twin and packed.type_name == "b4x16"
    kernel = fp.load(T.load_ptx(case, map_param=True), arch="sm_120").kernel("tma_load")
    outs = []
    for tm, c0 in ((twin, 0), (packed, 0), (twin, 16), (packed, 32)):
        out = np.zeros(T.load_out_bytes(case), np.uint8)
        fp.launch(kernel, 1, 128, [tm, out, np.uint32(c0), np.uint32(8)], check="initcheck")
        outs.append(out)
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[2], outs[3])
    assert not np.array_equal(outs[0], outs[2])


def test_packed_4bit_map_rules():
    x = np.zeros((8, 64), np.uint8)
    with pytest.raises(ValueError, match="whole bytes"):
        fp.tensor_map_tiled(x, data_type="16U4_ALIGN8B", global_dim=(127, 8), global_strides=(64,), box_dim=(32, 8))
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        fp.tensor_map_tiled(x, data_type="16U4_ALIGN8B", global_dim=(128, 8), global_strides=(64,), box_dim=(16, 8))
    with pytest.raises(ValueError, match="must be 32-byte aligned|multiple of 32|must be 128"):
        fp.tensor_map_tiled(x, data_type=14, global_dim=(128, 8), global_strides=(64,), box_dim=(32, 8))


def test_packed_4bit_map_refused_on_sm_90_and_mid_byte():
    case = _packed_case("NONE")
    a = T.arrays(case)
    gd, gs = T.dims(case)
    packed = fp.tensor_map_tiled(
        a["tensor"], data_type="16U4_ALIGN8B", global_dim=(gd[0] * 2, gd[1]), global_strides=gs, box_dim=(128, 16)
    )
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    with pytest.raises(SimulationError, match="sm_100's"):
        fp.launch(
            fp.load(T.load_ptx(case, True), arch="sm_90").kernel("tma_load"),
            1,
            128,
            [packed, out, np.uint32(0), np.uint32(0)],
        )
    with pytest.raises(SimulationError, match="odd"):
        fp.launch(
            fp.load(T.load_ptx(case, True), arch="sm_120").kernel("tma_load"),
            1,
            128,
            [packed, out, np.uint32(1), np.uint32(0)],
        )


@pytest.mark.parametrize("swizzle", ["NONE", "128B"])
def test_padded_6bit_map_pads_each_group_and_counts_packed_bytes(swizzle):
    """16U6_ALIGN16B (cuda.h: "16 x U6" values, 12 bytes each group in global memory, 16-byte aligned in shared with
    a 4-byte gap): a box of 128 codes x 8 rows lands as 8 rows of 128 bytes, each group's 12 bytes then 4 zero bytes
    (the gap, flashsim's fill), swizzled as a byte map; the mbarrier completes the packed 96 bytes per row (the probe
    kernel expects exactly the box's global bytes, 768: any other count would leave it waiting or underflow)."""
    case = T.Case("padded", "load", "u1", "UINT8", (16, 96), (96, 8), (0, 4))  # the kernel's expect_tx: 768
    tensor = np.random.default_rng(5).integers(0, 256, (16, 96)).astype(np.uint8)
    tm = fp.tensor_map_tiled(
        tensor,
        data_type="16U6_ALIGN16B",
        global_dim=(128, 16),
        global_strides=(96,),
        box_dim=(128, 8),
        swizzle=swizzle,
    )
    assert tm.bytewise().element_size == 16 and tm.bytewise().global_element_size == 12
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    kernel = fp.load(T.load_ptx(case, map_param=True), arch="sm_120").kernel("tma_load")
    fp.launch(kernel, 1, 128, [tm, out, np.uint32(0), np.uint32(4)])
    rows = tensor[4:12].reshape(8, 8, 12)
    logical = np.concatenate([rows, np.zeros((8, 8, 4), np.uint8)], axis=2).reshape(8, 128)
    if swizzle == "128B":  # 16-byte chunk c of 128-byte line L goes to chunk c ^ (L mod 8) (PTX ISA)
        chunks = logical.reshape(8, 8, 16)
        logical = chunks[np.arange(8)[:, None], np.arange(8)[None, :] ^ np.arange(8)[:, None]].reshape(8, 128)
    assert np.array_equal(out[:1024].reshape(8, 128), logical) and out[1024] == 1


def test_padded_map_rules():
    x = np.zeros((16, 96), np.uint8)
    good = dict(data_type="16U6_ALIGN16B", global_dim=(128, 16), global_strides=(96,), box_dim=(128, 8))
    fp.tensor_map_tiled(x, **good)
    for change, match in (
        (dict(global_dim=(64, 16)), "multiple of 128"),
        (dict(box_dim=(64, 8)), "must be 128"),
        (dict(swizzle="64B"), "NONE or 128B"),
    ):
        with pytest.raises(ValueError, match=match):
            fp.tensor_map_tiled(x, **{**good, **change})
