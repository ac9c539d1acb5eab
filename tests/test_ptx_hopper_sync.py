"""Hopper's synchronisation in flashsim.ptx: every fence form (fence.mbarrier_init.release.cluster was refused),
racecheck's async-proxy rule (a generic store read by the async proxy needs a fence.proxy.async ordered between
them), elect.sync, setmaxnreg's register pool, and the .sem / .scope forms of mbarrier."""

from __future__ import annotations

import pathlib
import subprocess
import tempfile

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.gpu.build import cuda_tool, parse_ptxas_log
from flashsim.ptx import isa
from flashsim.ptx.semantics.registers import initial_count

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _load(body: str, name: str = "k"):
    return P.load(HEAD + body, arch="sm_90", contraction="none").kernel(name)


# -- fences --------------------------------------------------------------------------------------------------------

FENCES = [
    "fence.mbarrier_init.release.cluster",
    "fence.proxy.async",
    "fence.proxy.async.global",
    "fence.proxy.async.shared::cta",
    "fence.proxy.async.shared::cluster",
    "fence.proxy.alias",
    "fence.proxy.tensormap::generic.release.gpu",
    "fence.acq_rel.cta",
    "fence.acq_rel.cluster",
    "fence.acq_rel.gpu",
    "fence.acq_rel.sys",
    "fence.sc.cta",
    "fence.sc.cluster",
    "fence.sc.gpu",
    "fence.sc.sys",
    "fence.cluster",
    "fence.acquire.cta",
    "fence.acquire.cluster",
    "fence.release.gpu",
    "fence.release.sys",
    "fence.acquire.sync_restrict::shared::cluster.cluster",
    "fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster",
    "fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster",
    "fence.release.sync_restrict::shared::cta.cluster",
    "membar.cta",
    "membar.gl",
    "membar.sys",
    "membar.proxy.alias",
]

FENCE_KERNEL = """
.visible .entry k(.param .u64 out)
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {fence};
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}}
"""


@pytest.mark.parametrize("fence", FENCES)
def test_every_fence_form_runs(fence):
    out = np.zeros(64, np.uint32)
    report = P.launch(_load(FENCE_KERNEL.format(fence=fence)), 1, 64, [out], check="racecheck")
    assert out.tolist() == list(range(64))
    assert report.counts[fence] == 2


@pytest.mark.parametrize(
    "fence",
    [
        "fence.mbarrier_init.release.gpu",
        "fence.mbarrier_init.acquire.cluster",
        "fence.acq_rel",
        "fence.proxy.async.local",
        "fence.proxy.tensormap::generic.release",
        "fence.acquire.sync_restrict::shared::cta.cluster",
        "fence.sc.sync_restrict::shared::cluster.cluster",
        "fence.proxy.async::generic.release.sync_restrict::shared::cluster.cluster",
        "fence.relaxed.cluster",
        "membar.cluster",
        "membar.proxy.async",
    ],
)
def test_fence_forms_the_isa_lacks_are_refused(fence):
    """Each is refused by ptxas 13.0 too (as each form of FENCES assembles for sm_90a with .version 8.6)."""
    with pytest.raises(P.UnsupportedInstruction):
        P.launch(_load(FENCE_KERNEL.format(fence=fence)), 1, 32, [np.zeros(32, np.uint32)])


def test_fence_proxy_tensormap_acquire_takes_its_operands():
    body = FENCE_KERNEL.format(fence="fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128")
    out = np.zeros(32, np.uint32)
    P.launch(_load(body), 1, 32, [out])
    assert out.tolist() == list(range(32))


# -- racecheck's async-proxy rule, through a tiny async reader of the test's own --------------------------------


def _async_access(d):
    """``discard{.write} [addr], 16``, redefined for the test: 16 bytes of shared memory at each lane's address
    read (or written) through the async proxy, as wgmma's operand reads and bulk copies do."""
    write = ".write" in d.mods.left
    d.mods.left.clear()
    _space, base, offset = d.addr(0)

    def run(g):
        lanes = g.lanes()
        offsets = g.lane_values(base).astype(np.uint64) + np.uint64(offset)
        if g.m.sanitizer is not None:
            g.m.sanitizer.async_proxy_access(g.m.block_of[lanes], offsets, 16, write, lanes, g.pc)

    return d.op(run)


@pytest.fixture
def async_reader(monkeypatch):
    monkeypatch.setitem(isa._BUILDERS, "discard", {isa.ANY: _async_access})


ASYNC_KERNEL = """
.visible .entry k()
{{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .shared .align 16 .b8 buf[1024];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 4;
    add.u32 %r4, %r2, %r3;
    {before}
    {store} [%r4]{data};
    {writer_fence}
    bar.sync 0;
    {reader_fence}
    add.u32 %r5, %r1, 1;
    and.b32 %r5, %r5, 63;
    shl.b32 %r5, %r5, 4;
    add.u32 %r6, %r2, %r5;
    discard [%r6], 16;
    ret;
}}
"""


def _async_kernel(before="", writer_fence="", reader_fence="", async_store=False):
    store, data = ("discard.write", ", 16") if async_store else ("st.shared.v4.u32", ", {%r1, %r1, %r1, %r1}")
    body = ASYNC_KERNEL.format(
        before=before, store=store, data=data, writer_fence=writer_fence, reader_fence=reader_fence
    )
    return _load(body)


@pytest.mark.parametrize(
    "fences",
    [
        dict(writer_fence="fence.proxy.async.shared::cta;"),
        dict(writer_fence="fence.proxy.async;"),
        dict(writer_fence="fence.proxy.async.shared::cluster;"),
        dict(writer_fence="fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster;"),
        dict(reader_fence="fence.proxy.async.shared::cta;"),  # the reader is ordered after the write by the barrier
        dict(async_store=True),  # the async proxy wrote it: no fence needed between two async accesses
    ],
)
def test_async_read_after_a_fenced_generic_write(async_reader, fences):
    P.launch(_async_kernel(**fences), 1, 64, [], check="racecheck")


@pytest.mark.parametrize(
    "fences",
    [
        dict(),
        dict(before="fence.proxy.async.shared::cta;"),  # a fence before the store covers nothing
        dict(writer_fence="fence.proxy.async.global;"),  # not shared memory
    ],
)
def test_async_read_of_an_unfenced_generic_write_is_a_hazard(async_reader, fences):
    kernel = _async_kernel(**fences)
    with pytest.raises(P.RaceError, match="async-proxy hazard") as info:
        P.launch(kernel, 1, 64, [], check="racecheck")
    err = info.value
    assert err.kind == "async-proxy" and "no fence.proxy.async ordered between them" in str(err)
    lines = (HEAD + ASYNC_KERNEL).split("\n")
    store_line = next(i for i, t in enumerate(lines, 1) if "{store}" in t)
    read_line = next(i for i, t in enumerate(lines, 1) if "discard [" in t)
    assert err.other_line == store_line and err.line == read_line
    assert err.thread == (0, 0, 0) and err.other_thread == (1, 0, 0) and err.address == 16
    P.launch(kernel, 1, 64, [])  # without racecheck nothing is checked


def test_a_third_threads_fence_counts_only_when_ordered_before_the_read(async_reader):
    """Thread 0 alone fences after the barrier that ordered every store before it: the reads after a second
    barrier are covered; without the second barrier the other threads' reads are not ordered after the fence."""
    ordered = _async_kernel(reader_fence="setp.eq.u32 %p1, %r1, 0;\n    @%p1 fence.proxy.async;\n    bar.sync 1;")
    P.launch(ordered, 1, 64, [], check="racecheck")
    unordered = _async_kernel(reader_fence="setp.eq.u32 %p1, %r1, 0;\n    @%p1 fence.proxy.async;")
    with pytest.raises(P.RaceError, match="async-proxy hazard"):
        P.launch(unordered, 1, 64, [], check="racecheck")
    writer_late = _async_kernel(reader_fence="setp.ne.u32 %p1, %r1, 0;\n    @%p1 fence.proxy.async;")
    with pytest.raises(P.RaceError, match=r"thread \(1, 0, 0\) writes it.*thread \(0, 0, 0\) reads it"):
        P.launch(writer_late, 1, 64, [], check="racecheck")  # thread 1 fences its write after thread 0 read it


# -- elect.sync ----------------------------------------------------------------------------------------------------

ELECT = """
.visible .entry k(.param .u64 masks, .param .u64 out, .param .u64 outp)
{
    .reg .pred %p<4>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [masks];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd3, [outp];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 5;
    mul.wide.u32 %rd4, %r2, 4;
    add.s64 %rd4, %rd1, %rd4;
    ld.global.u32 %r3, [%rd4];
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd6, %rd2, %rd5;
    add.s64 %rd7, %rd3, %rd5;
    mov.u32 %r4, %laneid;
    shr.u32 %r5, %r3, %r4;
    and.b32 %r5, %r5, 1;
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra DONE;
    elect.sync %r6|%p2, %r3;
    selp.u32 %r7, 1, 0, %p2;
    elect.sync _|%p3, %r3;
    selp.u32 %r8, 2, 0, %p3;
    or.b32 %r7, %r7, %r8;
    st.global.u32 [%rd6], %r6;
    st.global.u32 [%rd7], %r7;
DONE:
    ret;
}
"""


def test_elect_sync_elects_the_lowest_lane_of_the_mask():
    masks = np.array([0xFFFFFFFF, 0xF0F0F0F0, 0x80000000, 0x00010001, 0x0000FF00, 0x7FFFFFFE], np.uint32)
    n = masks.size * 32
    out = np.full(n, 0xDEAD, np.uint32)
    outp = np.full(n, 0xDEAD, np.uint32)
    P.launch(_load(ELECT), 1, n, [masks, out, outp], check="racecheck")
    lane = np.arange(n) % 32
    mask = np.repeat(masks, 32)
    member = ((mask >> lane) & 1).astype(bool)
    leader = np.array([(int(m) & -int(m)).bit_length() - 1 for m in mask])
    assert out[member].tolist() == leader[member].tolist()
    assert outp[member].tolist() == np.where(lane == leader, 3, 0)[member].tolist()
    assert (out[~member] == 0xDEAD).all() and (outp[~member] == 0xDEAD).all()


# -- setmaxnreg ------------------------------------------------------------------------------------------------------

SETMAXNREG = """
.visible .entry k(.param .u64 out){directives}
{{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    shr.u32 %r2, %r1, 7;
    setp.eq.u32 %p1, %r2, 0;
    @%p1 bra PRODUCER;
    setmaxnreg.inc.sync.aligned.u32 {consumer};
    bra.uni STORE;
PRODUCER:
    setmaxnreg.dec.sync.aligned.u32 {producer};
STORE:
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}}
"""
BOUNDS = " .maxntid 384, 1, 1 .minnctapersm 1"


def _setmaxnreg(consumer: int, producer: int, directives: str = BOUNDS):
    return _load(SETMAXNREG.format(directives=directives, consumer=consumer, producer=producer))


# (directives, the per-thread registers ptxas 13.0 -v reports for the kernel on sm_90a)
PTXAS_COUNTS = [
    (BOUNDS, 168),
    (" .reqntid 384, 1, 1 .minnctapersm 1", 168),
    (" .maxntid 128, 1, 1 .minnctapersm 1", 240),
    (" .maxntid 128, 1, 1 .minnctapersm 3", 168),
    (" .maxntid 256, 1, 1 .minnctapersm 2", 128),
    (" .maxntid 640, 1, 1 .minnctapersm 1", 96),
    (" .maxntid 384, 1, 1 .minnctapersm 2", 80),
    (" .maxntid 1024, 1, 1 .minnctapersm 1", 64),
    (" .maxnreg 200", 200),
    (" .maxnreg 100", 100),
    (" .maxnreg 256", 240),
    (" .maxnreg 20", 24),
    (" .maxntid 384, 1, 1 .maxnreg 232 .minnctapersm 1", 168),
]


@pytest.mark.parametrize("directives, registers", PTXAS_COUNTS)
def test_initial_register_count_is_what_ptxas_allocates(directives, registers):
    assert initial_count(_setmaxnreg(240, 24, directives).fn, "sm_90") == registers


def test_initial_register_count_against_ptxas():
    """The table above, from ptxas itself where it is installed."""
    try:
        ptxas = cuda_tool("ptxas")
    except FileNotFoundError as exc:
        pytest.skip(f"no ptxas: {exc}")
    for directives, registers in PTXAS_COUNTS:
        text = HEAD + SETMAXNREG.format(directives=directives, consumer=240, producer=24)
        with tempfile.TemporaryDirectory() as tmp:
            src = pathlib.Path(tmp, "k.ptx")
            src.write_text(text)
            done = subprocess.run(
                [ptxas, "-arch=sm_90a", "-v", str(src), "-o", str(pathlib.Path(tmp, "k.cubin"))],
                capture_output=True,
                text=True,
                check=True,
            )
        assert parse_ptxas_log(done.stdout + done.stderr)["k"]["registers"] == registers, directives


def test_no_register_limit_keeps_no_pool():
    """Without a declared limit ptxas allocates what the code needs and setmaxnreg may have no effect: only the
    count's range and the warpgroup rule are checked."""
    assert initial_count(_setmaxnreg(240, 24, " .maxntid 384, 1, 1").fn, "sm_90") is None
    out = np.zeros(384, np.uint32)
    P.launch(_setmaxnreg(256, 24, ""), 1, 384, [out])
    assert out.tolist() == (np.arange(384) // 128).tolist()
    with pytest.raises(P.SimulationError, match="setmaxnreg count 252"):
        P.launch(_setmaxnreg(252, 24, ""), 1, 384, [out])


@pytest.mark.parametrize("consumer, producer", [(240, 24), (232, 40), (168, 168)])
def test_warp_specialised_register_split(consumer, producer):
    """FlashAttention-3's split: the producer warpgroup gives registers back, the two consumer warpgroups take them
    (the consumers reach their .inc first and wait for the producer's .dec)."""
    out = np.zeros(384, np.uint32)
    report = P.launch(_setmaxnreg(consumer, producer), 2, 384, [out])
    assert out.tolist() == (np.arange(384) // 128).tolist()
    assert report.counts["setmaxnreg.inc.sync.aligned.u32"] > 0


def test_increase_past_the_pool_waits_forever():
    # the producer frees (168 - 40) * 128 = 16384 registers; the consumers want 2 * (240 - 168) * 128 = 18432
    with pytest.raises(P.Deadlock, match=r"waits at setmaxnreg.inc for 240 registers per thread \(it has 168"):
        P.launch(_setmaxnreg(240, 40), 1, 384, [np.zeros(384, np.uint32)])


def test_increase_no_decrease_can_cover_is_an_error():
    body = SETMAXNREG.format(directives=" .maxnreg 128", consumer=240, producer=128).replace(
        "setp.eq.u32 %p1, %r2, 0;", "setp.eq.u32 %p1, %r2, 9;"
    )
    with pytest.raises(P.SimulationError, match="other warpgroups decreased to 24 it would hold 0"):
        P.launch(_load(body), 1, 128, [np.zeros(128, np.uint32)])


@pytest.mark.parametrize(
    "consumer, producer, match",
    [
        (240, 20, "setmaxnreg count 20: must be in 24..256 and a multiple of 8"),
        (244, 24, "setmaxnreg count 244"),
        (264, 24, "setmaxnreg count 264"),
        (240, 200, r"setmaxnreg.dec to 200 registers per thread while the warp has 168"),
        (160, 24, r"setmaxnreg.inc to 160 registers per thread while the warp has 168"),
    ],
)
def test_setmaxnreg_bad_counts(consumer, producer, match):
    with pytest.raises(P.SimulationError, match=match):
        P.launch(_setmaxnreg(consumer, producer), 1, 384, [np.zeros(384, np.uint32)])


def test_warps_of_a_warpgroup_must_run_the_same_setmaxnreg():
    body = (
        SETMAXNREG.format(directives=BOUNDS, consumer=152, producer=160)
        .replace("shr.u32 %r2, %r1, 7;", "shr.u32 %r2, %r1, 6;")  # warps 0-1 take one branch, warps 2-3 the other
        .replace("setmaxnreg.inc.sync.aligned.u32 152", "setmaxnreg.dec.sync.aligned.u32 152")
    )
    with pytest.raises(P.SimulationError, match="every warp of a warpgroup must execute the same one"):
        P.launch(_load(body), 1, 128, [np.zeros(128, np.uint32)])


# -- mbarrier .sem / .scope forms ----------------------------------------------------------------------------------

MBARRIER = """
.visible .entry k(.param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    .shared .align 4 .b32 data[32];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u64 %rd5, bar;
    cvta.shared.u64 %rd6, %rd5;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.b64 [%rd6], 32;
INIT_DONE:
    bar.sync 0;
    shr.u32 %r2, %r1, 5;
    and.b32 %r3, %r1, 31;
    shl.b32 %r4, %r3, 2;
    mov.u32 %r5, data;
    add.u32 %r5, %r5, %r4;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra CONSUMER;
    mul.lo.u32 %r6, %r3, 7;
    st.shared.u32 [%r5], %r6;
    {arrive}
    bra.uni DONE;
CONSUMER:
    {wait}
    @!%p2 bra CONSUMER;
    mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 %p3, [bar], 0;
    @!%p3 trap;
    ld.shared.u32 %r6, [%r5];
    mul.wide.u32 %rd2, %r3, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
DONE:
    ret;
}}
"""


@pytest.mark.parametrize(
    "arrive",
    [
        "mbarrier.arrive.release.cta.shared::cta.b64 %rd7, [bar];",
        "mbarrier.arrive.release.cluster.shared::cta.b64 %rd7, [bar];",
        "mbarrier.arrive.shared.b64 %rd7, [bar];",
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [bar];",
        "mbarrier.arrive.b64 %rd7, [%rd6];",
    ],
)
@pytest.mark.parametrize(
    "wait",
    [
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [bar], 0;",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [bar], 0, 10000000;",
        "mbarrier.test_wait.parity.shared.b64 %p2, [bar], 0;",
        "mbarrier.try_wait.parity.b64 %p2, [%rd6], 0;",
    ],
)
def test_mbarrier_sem_scope_forms(arrive, wait):
    out = np.zeros(32, np.uint32)
    P.launch(_load(MBARRIER.format(arrive=arrive, wait=wait)), 1, 64, [out], check="racecheck")
    assert out.tolist() == (np.arange(32) * 7).tolist()


@pytest.mark.parametrize(
    "arrive, wait, match",
    [
        ("mbarrier.arrive.acquire.cta.shared::cta.b64 %rd7, [bar];", None, "release / .relaxed"),
        (None, "mbarrier.try_wait.parity.release.cta.shared::cta.b64 %p2, [bar], 0;", "acquire / .relaxed"),
        (None, "mbarrier.try_wait.parity.shared::cluster.b64 %p2, [bar], 0;", "only the arrive forms"),
        ("mbarrier.arrive.shared::cluster.b64 %rd7, [bar];", None, "its destination is _"),
    ],
)
def test_mbarrier_forms_refused(arrive, wait, match):
    body = MBARRIER.format(
        arrive=arrive or "mbarrier.arrive.shared.b64 %rd7, [bar];",
        wait=wait or "mbarrier.try_wait.parity.shared.b64 %p2, [bar], 0;",
    )
    with pytest.raises(P.UnsupportedInstruction, match=match):
        P.launch(_load(body), 1, 64, [np.zeros(32, np.uint32)])
