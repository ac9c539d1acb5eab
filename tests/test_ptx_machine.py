"""flashsim.ptx's SIMT machine: divergence and reconvergence, warp-synchronous instructions under divergence,
named barriers and bar.red, a warp-specialised mbarrier ring, blocks that wait on each other through global memory,
deadlocks and endless spins reported with each warp's PC and what it waits for, special registers and printf.

The kernels are tests/data/ptx/machine.cu (CUDA through NVRTC) and PTX text written here. Every expected value is
computed in plain Python integers from what the kernel's C++ says (the oracle never calls the simulator), and
compared bit for bit.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.ptx.launch import SMS

SOURCE = pathlib.Path(__file__).parent / "data" / "ptx" / "machine.cu"
M32 = 0xFFFFFFFF


@pytest.fixture(scope="module")
def machine_cu():
    return P.compile(SOURCE.read_text(), arch="sm_90")


def launch(module, name, grid, block, args, **kw):
    return P.launch(module.kernel(name), grid, block, args, **kw)


# -- divergence and reconvergence ---------------------------------------------------------------------------


def _diverge_oracle(n_threads: int):
    out, trips = [0] * n_threads, [0] * n_threads
    accs = []
    for t in range(n_threads):
        if t % 3 == 0:
            v = t * 7
        elif t % 3 == 1:
            v = t + 100
        else:
            v = -t
        acc, n, k = v & M32, (t * 13) % 37, 0
        while k < n:
            acc = (acc * 3 + k) & M32
            if acc % 11 == 0:
                break
            k += 1
        accs.append(acc)
        trips[t] = k
    for t in range(n_threads):
        if t % 5 == 0:
            continue
        base = t - t % 32
        left = sum(1 << (u - base) for u in range(base, base + 32) if u % 5 != 0)
        out[t] = accs[t] ^ left
    return out, trips


@pytest.mark.nvrtc
def test_if_else_nested_loops_and_early_exit_reconverge(machine_cu):
    n = 256
    out, mask, trips = (np.zeros(n, np.uint32) for _ in range(3))
    launch(machine_cu, "diverge", 2, 128, [out, mask, trips])
    want_out, want_trips = _diverge_oracle(n)
    assert trips.tolist() == want_trips
    assert len(set(want_trips)) > 10  # the trip counts do differ from lane to lane
    assert mask.tolist() == [M32] * n  # every lane is back together after the if / else and the loop
    assert out.tolist() == want_out


@pytest.mark.nvrtc
def test_shfl_and_ballot_with_a_partial_member_mask(machine_cu):
    n = 256
    out, ballot = np.zeros(n, np.uint32), np.zeros(n, np.uint32)
    launch(machine_cu, "partial_shfl", 2, 128, [out, ballot])
    x = [((t * 2654435761) + sum(range((t % 32) % 4))) & M32 for t in range(n)]
    want, want_ballot = [], []
    for t in range(n):
        lane, base = t % 32, t - t % 32
        if lane < 16:
            want.append(x[base + (lane + 1) % 16])
            want_ballot.append(sum(1 << i for i in range(16) if x[base + i] & 1))
        else:
            want.append(x[base + 16 + (lane + 3) % 16])
            want_ballot.append(sum(1 << i for i in range(16, 32) if x[base + i] & 2))
    assert out.tolist() == want
    assert ballot.tolist() == want_ballot


# -- barriers ---------------------------------------------------------------------------------------------


@pytest.mark.nvrtc
def test_bar_red_popc_and_or(machine_cu):
    rng = np.random.default_rng(5)
    for pred in (
        (np.arange(384) % 7 == 0),
        np.ones(384, bool),
        np.zeros(384, bool),
        rng.random(384) < 0.5,
    ):
        pred = pred.astype(np.uint32)
        pred[128:256] = 1  # block 1: every thread's predicate holds
        out = np.zeros(3 * 384, np.uint32)
        launch(machine_cu, "block_reductions", 3, 128, [out, pred])
        for b in range(3):
            p = pred[128 * b : 128 * (b + 1)].tolist()
            want = [sum(p), int(all(p)), int(any(p))] * 128
            assert out[384 * b : 384 * (b + 1)].tolist() == want, b


@pytest.mark.nvrtc
@pytest.mark.parametrize("rounds", [1, 2, 7])
def test_named_barriers_producer_consumer_with_bar_arrive(machine_cu, rounds):
    out = np.zeros(2 * 64, np.uint32)
    launch(machine_cu, "named_barriers", 2, 128, [out, np.uint32(rounds)])
    want = []
    for c in range(64):
        acc = 0
        for r in range(rounds):
            acc = (acc * 31 + r * 1000 + (c + r) % 64) & M32
        want.append(acc)
    assert out.tolist() == want * 2


# -- a warp-specialised mbarrier pipeline -----------------------------------------------------------------


@pytest.mark.nvrtc
@pytest.mark.parametrize("items", [1, 3, 11])
def test_mbarrier_ring_one_producer_two_consumers(machine_cu, items):
    data = (np.arange(32 * items, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    out = np.zeros(64, np.uint32)
    launch(machine_cu, "mbarrier_ring", 1, 96, [out, data, np.uint32(items)])
    want = []
    for warp in (1, 2):
        for lane in range(32):
            acc = 0
            for i in range(items):
                acc = (acc * 7 + int(data[i * 32 + (lane + warp) % 32])) & M32
            want.append(acc)
    assert out.tolist() == want


# -- blocks that wait on each other through global memory -------------------------------------------------


@pytest.mark.nvrtc
@pytest.mark.parametrize("writer", [0, 3])
def test_blocks_wait_on_a_volatile_flag_another_block_writes(machine_cu, writer):
    blocks, threads = 4, 64
    data, flag, out = np.zeros(threads, np.uint32), np.zeros(1, np.uint32), np.zeros(blocks * threads, np.uint32)
    launch(machine_cu, "flag_wait", blocks, threads, [data, flag, out, np.uint32(writer)])
    want = [0 if b == writer else t * 3 + 1 for b in range(blocks) for t in range(threads)]
    assert out.tolist() == want and flag[0] == 1


@pytest.mark.nvrtc
def test_a_spin_no_one_ends_is_reported(machine_cu):
    """One block per wave (max_threads): block 0 spins on a flag block 3 would write in a later wave."""
    data, flag, out = np.zeros(64, np.uint32), np.zeros(1, np.uint32), np.zeros(4 * 64, np.uint32)
    with pytest.raises(P.Deadlock, match="a spin loop no one ends") as info:
        launch(machine_cu, "flag_wait", 4, 64, [data, flag, out, np.uint32(3)], max_threads=64, spin_limit=50)
    text = str(info.value)
    kernel = machine_cu.kernel("flag_wait")
    spin = [op.line for op in kernel.program.ops if op.name.startswith("ld.volatile.global")]
    found = re.search(r"block 0 warp 0: PC [\d, ]+ \(PTX line ([\d, ]+)\): .*runs without ending", text)
    assert found and set(spin) & {int(x) for x in found.group(1).split(", ")}, text  # the spinning load's line
    assert "block 0 warp 1: " in text and "waits at barrier 0" in text  # the rest of the block waits for it
    assert info.value.block == (0, 0, 0)


TWO_BARRIERS = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry stuck(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 32;
    @%p1 bra FIRST;
    bar.sync 2, 64;
    bra END;
FIRST:
    bar.sync 1, 64;
END:
    ret;
}
"""


def _pc_of_line(kernel, line: int) -> int:
    return next(pc for pc, op in enumerate(kernel.program.ops) if op.line == line)


def test_a_deadlock_names_each_warps_pc_and_barrier():
    """Warp 0 waits at barrier 1 and warp 1 at barrier 2, each for 64 threads: every warp waits forever."""
    kernel = P.load(TWO_BARRIERS).kernel("stuck")
    lines = TWO_BARRIERS.split("\n")
    line1 = next(i for i, s in enumerate(lines, 1) if "bar.sync 1" in s)
    line2 = next(i for i, s in enumerate(lines, 1) if "bar.sync 2" in s)
    with pytest.raises(P.Deadlock) as info:
        P.launch(kernel, 1, 64, [np.zeros(1, np.uint32)])
    text = str(info.value)
    assert "every thread that has not exited waits" in text
    # the machine has taken the waiting lanes past the barrier: their PC is the barrier's own plus one
    assert f"block 0 warp 0: PC {_pc_of_line(kernel, line1) + 1} " in text and "waits at barrier 1" in text
    assert f"block 0 warp 1: PC {_pc_of_line(kernel, line2) + 1} " in text and "waits at barrier 2" in text


MBARRIER_NEVER = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry never(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .shared .align 8 .b64 bar;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra WAIT;
    mbarrier.init.shared.b64 [bar], 64;
WAIT:
    bar.sync 0;
SPIN:
    mbarrier.try_wait.parity.shared.b64 %p1, [bar], 0;
    @!%p1 bra SPIN;
    ret;
}
"""


def test_an_mbarrier_no_one_arrives_at_is_reported_with_its_parity():
    kernel = P.load(MBARRIER_NEVER).kernel("never")
    with pytest.raises(P.Deadlock) as info:
        P.launch(kernel, 1, 64, [np.zeros(1, np.uint32)], spin_limit=50)
    text = str(info.value)
    assert "polls an mbarrier at shared offset 0x0 for phase parity 0" in text, text
    assert "block 0 warp 0" in text and "block 0 warp 1" in text


# -- special registers and printf -------------------------------------------------------------------------


@pytest.mark.nvrtc
def test_special_registers_have_their_documented_values(machine_cu):
    grid, block = (2, 3, 1), (8, 4, 2)
    bt, n = 64, 6 * 64
    out, clocks = np.zeros(12 * n, np.uint32), np.zeros(2 * n, np.uint64)
    launch(machine_cu, "specials", grid, block, [out, clocks])
    got = out.reshape(n, 12)
    for t in range(n):
        b, local = divmod(t, bt)
        tid = (local % 8, (local // 8) % 4, local // 32)
        ctaid = (b % 2, b // 2, 0)
        lane, warp = local % 32, local // 32
        spin = 0
        for k in range(lane + 1):
            spin = (spin * 5 + k) & M32
        want = [*tid, *ctaid, lane, warp, 2, b % SMS["sm_90"], SMS["sm_90"], spin]
        assert got[t].tolist() == want, t
    c0, c1 = clocks[0::2], clocks[1::2]
    assert (c1 > c0).all()  # %clock64 counts up across the loop between the reads


@pytest.mark.nvrtc
def test_printf_formats_like_c(machine_cu):
    p = np.zeros(4, np.uint32)
    report = launch(machine_cu, "prints", 1, 32, [p])
    want = []
    for t in range(2):
        want.append(
            "t=%d u=%u x=%x f=%f s=%s p=%s c=%c ll=%d\n"  # noqa: UP031 - C printf semantics are the oracle
            % (
                -t - 1,
                4000000000 + t,
                0xBEEF0 + t,
                0.25 + t,
                "one" if t else "zero",
                hex(P.address(p)),
                "ab"[t],
                -(1 << 40) - t,
            )
        )
    assert report.printf == want
