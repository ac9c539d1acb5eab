"""Thread-block clusters in flashsim.ptx: the launch (cluster=, .reqnctapercluster, waves of whole clusters), the
cluster special registers against numpy, distributed shared memory through mapa and shared::cluster loads, stores
and atomics, barrier.cluster, a remote mbarrier arrive, and the launches and accesses the rules refuse."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.ptx import cluster as C
from flashsim.ptx import probes as PR

HEAD = ".version 8.0\n.target {target}\n.address_size 64\n"

# Each CTA stores thread t's value (ctaid.x * 1000 + t) into CTA (rank + 1) % n's buffer through mapa and
# st.shared::cluster, the cluster barrier orders it, then each thread reads its own buffer (out) and, through a
# generic mapa address, the next CTA's (out2), and adds 1 to the next CTA's counter with a shared::cluster atomic.
EXCHANGE = """
.visible .entry exchange(.param .u64 out, .param .u64 out2, .param .u64 cnt){directives}
{{
    .reg .pred %p<2>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<12>;
    .shared .align 16 .b32 buf[64];
    .shared .align 4 .b32 counter;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [out2];
    ld.param.u64 %rd10, [cnt];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %cluster_ctarank;
    mov.u32 %r4, %cluster_nctarank;
    mov.u32 %r5, %ntid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra SKIP;
    st.shared.u32 [counter], 0;
SKIP:
    barrier.cluster.arrive.release.aligned;
    barrier.cluster.wait.acquire.aligned;
    add.u32 %r6, %r3, 1;
    rem.u32 %r6, %r6, %r4;
    mov.u32 %r7, buf;
    shl.b32 %r8, %r1, 2;
    add.u32 %r7, %r7, %r8;
    mapa.shared::cluster.u32 %r9, %r7, %r6;
    mad.lo.u32 %r10, %r2, 1000, %r1;
    st.shared::cluster.u32 [%r9], %r10;
    mov.u32 %r11, counter;
    mapa.shared::cluster.u32 %r12, %r11, %r6;
    red.shared::cluster.add.u32 [%r12], 1;
    {sync}
    ld.shared::cta.u32 %r13, [%r7];
    mov.u64 %rd3, buf;
    cvta.shared.u64 %rd4, %rd3;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd4, %rd4, %rd5;
    mapa.u64 %rd6, %rd4, %r6;
    ld.u32 %r14, [%rd6];
    mad.lo.u32 %r15, %r2, %r5, %r1;
    mul.wide.u32 %rd7, %r15, 4;
    add.s64 %rd8, %rd1, %rd7;
    st.global.u32 [%rd8], %r13;
    add.s64 %rd9, %rd2, %rd7;
    st.global.u32 [%rd9], %r14;
    @%p1 bra DONE;
    ld.shared.u32 %r16, [counter];
    mul.wide.u32 %rd11, %r2, 4;
    add.s64 %rd11, %rd10, %rd11;
    st.global.u32 [%rd11], %r16;
DONE:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""
SYNC = "barrier.cluster.arrive.release.aligned;\n    barrier.cluster.wait.acquire.aligned;"


def _exchange(sync: bool = True, directives: str = "", target: str = "sm_90a"):
    text = HEAD.format(target=target) + EXCHANGE.format(directives=directives, sync=SYNC if sync else "")
    return P.load(text, arch="sm_90", contraction="none").kernel("exchange")


def _expected(grid_x: int, n: int, threads: int):
    b = np.arange(grid_x)
    rank = b % n
    src = b - rank + (rank - 1) % n  # the CTA that writes into b's buffer
    dst = b - rank + (rank + 1) % n
    t = np.arange(threads)
    return (src[:, None] * 1000 + t).reshape(-1), (b[:, None] * 1000 + t).reshape(-1), dst


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("check", [None, "racecheck", "memcheck"])
def test_cluster_exchange_through_distributed_shared_memory(n, check):
    grid, threads = 8, 64
    out = np.zeros(grid * threads, np.uint32)
    out2 = np.zeros_like(out)
    cnt = np.zeros(grid, np.uint32)
    report = P.launch(_exchange(), grid, threads, [out, out2, cnt], cluster=(n, 1, 1), check=check)
    want, want2, _ = _expected(grid, n, threads)
    assert np.array_equal(out, want.astype(np.uint32))
    assert np.array_equal(out2, want2.astype(np.uint32))
    assert cnt.tolist() == [threads] * grid  # every thread of the previous CTA added 1 to this CTA's counter
    assert report.counts["barrier.cluster.wait.acquire.aligned"] > 0


def test_waves_hold_whole_clusters():
    """A cluster whose threads pass max_threads is still one wave (its blocks wait for each other)."""
    out = np.zeros(8 * 64, np.uint32)
    out2, cnt = np.zeros_like(out), np.zeros(8, np.uint32)
    report = P.launch(_exchange(), 8, 64, [out, out2, cnt], cluster=(4, 1, 1), max_threads=64)
    assert report.waves == 2
    assert np.array_equal(out, _expected(8, 4, 64)[0].astype(np.uint32))


def test_reqnctapercluster_sets_the_cluster():
    kernel = _exchange(directives=" .reqnctapercluster 2, 1, 1")
    out = np.zeros(4 * 32, np.uint32)
    out2, cnt = np.zeros_like(out), np.zeros(4, np.uint32)
    P.launch(kernel, 4, 32, [out, out2, cnt])
    assert np.array_equal(out, _expected(4, 2, 32)[0].astype(np.uint32))
    with pytest.raises(P.LaunchError, match="reqnctapercluster 2, 1, 1; cluster is"):
        P.launch(kernel, 4, 32, [out, out2, cnt], cluster=(4, 1, 1))


def test_racecheck_names_the_missing_cluster_barrier():
    out = np.zeros(4 * 32, np.uint32)
    with pytest.raises(P.RaceError, match=r"CTA rank 1.*CTA rank 0|CTA rank 0.*CTA rank 1") as info:
        P.launch(
            _exchange(sync=False),
            4,
            32,
            [out, out.copy(), np.zeros(4, np.uint32)],
            cluster=(2, 1, 1),
            check="racecheck",
        )
    assert info.value.kind in ("read-after-write", "write-after-read", "write-after-write")


# -- special registers -------------------------------------------------------------------------------------------

SPECIALS = [
    "%ctaid.x",
    "%ctaid.y",
    "%ctaid.z",
    "%cluster_ctarank",
    "%cluster_nctarank",
    "%clusterid.x",
    "%clusterid.y",
    "%clusterid.z",
    "%nclusterid.x",
    "%nclusterid.y",
    "%nclusterid.z",
    "%cluster_ctaid.x",
    "%cluster_ctaid.y",
    "%cluster_ctaid.z",
    "%cluster_nctaid.x",
    "%cluster_nctaid.y",
    "%cluster_nctaid.z",
]


def _specials_kernel():
    body = [f"    mov.u32 %r{i + 10}, {name};" for i, name in enumerate(SPECIALS)]
    stores = [f"    st.global.u32 [%rd3+{4 * i}], %r{i + 10};" for i in range(len(SPECIALS))]
    n = len(SPECIALS) + 1
    text = (
        HEAD.format(target="sm_90")
        + f"""
.visible .entry specials(.param .u64 out)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<40>;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra DONE;
    mov.u32 %r2, %nctaid.x;
    mov.u32 %r3, %nctaid.y;
    mov.u32 %r4, %ctaid.z;
    mov.u32 %r5, %ctaid.y;
    mad.lo.u32 %r6, %r4, %r3, %r5;
    mov.u32 %r7, %ctaid.x;
    mad.lo.u32 %r8, %r6, %r2, %r7;
    mul.wide.u32 %rd2, %r8, {4 * n};
    add.s64 %rd3, %rd1, %rd2;
"""
        + "\n".join(body + stores)
        + f"""
    mov.pred %p1, %is_explicit_cluster;
    selp.u32 %r9, 1, 0, %p1;
    st.global.u32 [%rd3+{4 * len(SPECIALS)}], %r9;
DONE:
    ret;
}}
"""
    )
    return P.load(text, arch="sm_90", contraction="none").kernel("specials"), n


@pytest.mark.parametrize("cluster", [None, (2, 1, 1), (2, 2, 1), (1, 2, 2), (2, 1, 2)])
def test_cluster_special_registers(cluster):
    grid = (4, 2, 2)
    kernel, n = _specials_kernel()
    out = np.zeros((16, n), np.uint32)
    P.launch(kernel, grid, 32, [out], cluster=cluster)
    cd = np.array(cluster or (1, 1, 1))
    z, y, x = np.meshgrid(np.arange(2), np.arange(2), np.arange(4), indexing="ij")
    ctaid = np.stack([x.reshape(-1), y.reshape(-1), z.reshape(-1)], axis=1)  # linear order, x fastest
    local = ctaid % cd
    want = {
        "%ctaid": ctaid,
        "%cluster_ctaid": local,
        "%clusterid": ctaid // cd,
        "%nclusterid": np.broadcast_to(np.array(grid) // cd, ctaid.shape),
        "%cluster_nctaid": np.broadcast_to(cd, ctaid.shape),
    }
    got = {name: out[:, i] for i, name in enumerate(SPECIALS)}
    for stem, values in want.items():
        for k, axis in enumerate("xyz"):
            assert got[f"{stem}.{axis}"].tolist() == values[:, k].tolist(), f"{stem}.{axis}"
    rank = local[:, 0] + cd[0] * (local[:, 1] + cd[1] * local[:, 2])
    assert got["%cluster_ctarank"].tolist() == rank.tolist()
    assert got["%cluster_nctarank"].tolist() == [int(cd.prod())] * 16
    assert out[:, -1].tolist() == [int(cluster is not None)] * 16


def test_launch_order_is_cluster_by_cluster():
    order = C.launch_order((4, 2, 1), C.Cluster((2, 2, 1), True))
    assert order.tolist() == [0, 1, 4, 5, 2, 3, 6, 7]
    assert C.launch_order((8, 1, 1), C.Cluster((4, 1, 1), True)) is None


# -- the helper other instructions use for CTA masks ---------------------------------------------------------------


def test_cluster_blocks_of_a_cta_mask():
    class M:
        cluster_size, block_threads = 4, 32

        def error(self, message, t):
            return RuntimeError(f"{message} (thread {t})")

    m = M()
    assert C.cluster_blocks(m, 5, 0b1011).tolist() == [4, 5, 7]
    assert C.cluster_blocks(m, 2, 0).tolist() == []
    with pytest.raises(RuntimeError, match="names rank 4, past the cluster's 4 CTAs"):
        C.cluster_blocks(m, 1, 0x10)


# -- bad input -----------------------------------------------------------------------------------------------------


def _args(grid):
    n = int(np.prod(grid)) * 32
    return [np.zeros(n, np.uint32), np.zeros(n, np.uint32), np.zeros(int(np.prod(grid)), np.uint32)]


@pytest.mark.parametrize(
    "grid, cluster, match",
    [
        (6, (4, 1, 1), "does not divide grid"),
        ((4, 3), (2, 2, 1), r"grid.y = 3 is not a multiple of 2"),
        (32, (16, 1, 1), "past the portable limit of 8"),
        (64, (32, 1, 1), "past the limit 16"),
        ((4, 4), (3, 1, 1), "does not divide"),
    ],
)
def test_cluster_shapes_refused(grid, cluster, match):
    with pytest.raises(P.LaunchError, match=match):
        P.launch(_exchange(), grid, 32, _args(grid), cluster=cluster)


def test_nonportable_cluster_of_16():
    args = _args(16)
    P.launch(_exchange(), 16, 32, args, cluster=(16, 1, 1), nonportable_cluster=True)
    assert np.array_equal(args[0], _expected(16, 16, 32)[0].astype(np.uint32))
    kernel = P.load(HEAD.format(target="sm_90") + EXCHANGE.format(directives="", sync=SYNC), arch="sm_120")
    with pytest.raises(P.LaunchError, match="non-portable cluster sizes"):
        P.launch(kernel.kernel("exchange"), 16, 32, _args(16), cluster=(16, 1, 1), nonportable_cluster=True)


def test_clusters_need_sm_90():
    with pytest.raises(P.LaunchError, match=r"need sm_90 or later, and the PTX's .target sm_80"):
        P.launch(_exchange(target="sm_80"), 4, 32, _args(4), cluster=(2, 1, 1))
    old = P.load(HEAD.format(target="sm_80") + EXCHANGE.format(directives="", sync=SYNC), arch="sm_80")
    with pytest.raises(P.LaunchError, match="the module's arch sm_80"):
        P.launch(old.kernel("exchange"), 4, 32, _args(4), cluster=(2, 1, 1))


def test_cluster_directives_checked():
    with pytest.raises(P.LaunchError, match="declares .explicitcluster"):
        P.launch(_exchange(directives=" .explicitcluster"), 4, 32, _args(4))
    with pytest.raises(P.LaunchError, match="declares .maxclusterrank 2"):
        P.launch(_exchange(directives=" .maxclusterrank 2"), 4, 32, _args(4), cluster=(4, 1, 1))
    with pytest.raises(P.LaunchError, match="whole clusters of 2 blocks"):
        P.launch(_exchange(), 4, 32, _args(4), cluster=(2, 1, 1), blocks=range(1, 4))


def test_mapa_past_the_cluster_and_remote_access_past_shared_memory():
    """mapa of a rank the cluster lacks is an error naming it; a shared::cluster store past the CTA's shared bytes
    is a memory fault naming the CTA rank and offset."""
    kernel = _exchange()
    with pytest.raises(P.SimulationError, match="mapa names CTA rank 2, past the cluster's 2 CTAs"):
        text = HEAD.format(target="sm_90") + EXCHANGE.format(directives="", sync=SYNC).replace(
            "rem.u32 %r6, %r6, %r4;", "add.u32 %r6, %r6, 0;"
        )
        P.launch(P.load(text, contraction="none").kernel("exchange"), 4, 32, _args(4), cluster=(2, 1, 1))
    far = HEAD.format(target="sm_90") + EXCHANGE.format(directives="", sync=SYNC).replace(
        "add.u32 %r7, %r7, %r8;", "add.u32 %r7, %r7, %r8;\n    add.u32 %r7, %r7, 4096;"
    )
    with pytest.raises(P.MemcheckError, match=r"shared::cluster store past its .* of CTA rank 1 of the cluster") as e:
        P.launch(
            P.load(far, contraction="none").kernel("exchange"), 4, 32, _args(4), cluster=(2, 1, 1), check="memcheck"
        )
    assert e.value.target_rank == 1 and e.value.rank == 0 and e.value.address == 4096
    del kernel


# -- a remote mbarrier arrive (CUTLASS's ClusterBarrier) ----------------------------------------------------------

REMOTE_MBARRIER = """
.visible .entry remote(.param .u64 out)
{{
    .reg .pred %p<3>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    .shared .align 16 .b32 data[32];
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 bra INITED;
    mbarrier.init.shared::cta.b64 [bar], 1;
INITED:
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.relaxed.aligned;
    barrier.cluster.wait.aligned;
    add.u32 %r4, %r2, 1;
    rem.u32 %r4, %r4, %r3;
    mov.u32 %r5, data;
    shl.b32 %r6, %r1, 2;
    add.u32 %r5, %r5, %r6;
    mapa.shared::cluster.u32 %r7, %r5, %r4;
    mad.lo.u32 %r8, %r2, 100, %r1;
    st.shared::cluster.u32 [%r7], %r8;
    bar.sync 0;
    @!%p1 bra WAIT;
    mov.u32 %r9, bar;
    mapa.shared::cluster.u32 %r10, %r9, %r4;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r10];
WAIT:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [bar], 0, 1000;
    @!%p2 bra WAIT;
    ld.shared.u32 %r11, [%r5];
    mov.u32 %r12, %ctaid.x;
    mad.lo.u32 %r13, %r12, 32, %r1;
    mul.wide.u32 %rd2, %r13, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r11;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""


@pytest.mark.parametrize("check", [None, "racecheck"])
def test_remote_mbarrier_arrive(check):
    kernel = P.load(HEAD.format(target="sm_90a") + REMOTE_MBARRIER.format(), contraction="none").kernel("remote")
    out = np.zeros(4 * 32, np.uint32)
    P.launch(kernel, 4, 32, [out], cluster=(4, 1, 1), check=check)
    rank = np.arange(4)
    src = (rank - 1) % 4
    assert out.reshape(4, 32).tolist() == (src[:, None] * 100 + np.arange(32)).tolist()


def test_remote_arrive_without_the_barrier_ordering_the_data_is_a_race():
    """Without bar.sync, thread 0's remote arrive does not order the other threads' stores before the waiter's
    loads: racecheck names the hazard."""
    text = HEAD.format(target="sm_90a") + REMOTE_MBARRIER.format().replace("    bar.sync 0;\n", "")
    kernel = P.load(text, contraction="none").kernel("remote")
    with pytest.raises(P.RaceError, match="read-after-write"):
        P.launch(kernel, 2, 32, [np.zeros(64, np.uint32)], cluster=(2, 1, 1), check="racecheck")


# -- the silicon probes of clusters, in the simulator against numpy (their GPU capture: tests/test_ptx_silicon.py) ---


@pytest.mark.nvrtc
@pytest.mark.parametrize("name", [p.name for p in PR.probes("cluster")])
def test_cluster_probe_in_the_simulator(name):
    """Each cluster probe, run in the simulator, against what the PTX ISA says it computes (numpy)."""
    probe = next(p for p in PR.probes("cluster") if p.name == name)
    args, _ = PR.simulate(probe)
    if name.startswith("specials"):
        out = args[0]
        cd = np.array(probe.cluster or ((2, 2, 1) if "static" in name else (1, 1, 1)))
        gx, gy, gz = probe.grid
        z, y, x = np.meshgrid(np.arange(gz), np.arange(gy), np.arange(gx), indexing="ij")
        ctaid = np.stack([x.reshape(-1), y.reshape(-1), z.reshape(-1)], axis=1)
        local = ctaid % cd
        rank = local[:, 0] + cd[0] * (local[:, 1] + cd[1] * local[:, 2])
        want = np.concatenate(
            [
                rank[:, None],
                np.full((rank.size, 1), cd.prod()),
                ctaid // cd,
                np.broadcast_to(np.array(probe.grid) // cd, ctaid.shape),
                local,
                np.broadcast_to(cd, ctaid.shape),
                ctaid,
                np.full((rank.size, 1), int("implicit" not in name)),
            ],
            axis=1,
        )
        assert out.tolist() == want.tolist()
        return
    x = args[0]
    n = probe.cluster[0]
    threads = probe.block[0]
    blocks = probe.grid[0]
    b = np.arange(blocks)
    prev = b - b % n + (b % n - 1) % n
    nxt = b - b % n + (b % n + 1) % n
    if name.startswith("remote"):
        assert args[1].tolist() == x.reshape(blocks, threads)[prev].reshape(-1).tolist()
        return
    if name.startswith("st_red_async"):
        got = x.reshape(blocks, threads)[prev]
        assert args[1].reshape(blocks, threads, 2)[..., 0].tolist() == got.tolist()
        assert args[1].reshape(blocks, threads, 2)[..., 1].tolist() == (got ^ 0x5A5A5A5A).tolist()
        assert args[2].tolist() == (got.astype(np.uint64).sum(axis=1) % 2**32).tolist()
        return
    x2 = x.reshape(blocks, threads)
    assert args[1].tolist() == x2[prev].reshape(-1).tolist()  # what the previous CTA stored into this one
    assert args[2].tolist() == x2.reshape(-1).tolist()  # the next CTA's buffer holds this CTA's own values
    rank_next = np.repeat(nxt % n, threads)
    own = np.repeat(b % n, threads)
    assert args[3].tolist() == (rank_next | rank_next << 4 | own << 8 | 1 << 12).tolist()
    assert args[4].tolist() == (x2[prev] & 0xFF).sum(axis=1).tolist()


# -- trace and the command line ------------------------------------------------------------------------------------


def test_trace_of_a_cluster_launch_names_the_launch_blocks():
    """Blocks run cluster by cluster (launch order != linear order for a 2x2 cluster): the trace still names each
    record's block by its %ctaid."""
    from flashsim.ptx.trace import Trace

    kernel, n = _specials_kernel()
    trace = Trace(["%cluster_ctarank", "%clusterid.x"], lines=[kernel.program.ops[0].line], threads=[(5, 0), (2, 0)])
    P.launch(kernel, (4, 2, 2), 32, [np.zeros((16, n), np.uint32)], cluster=(2, 2, 1), trace=trace)
    rows = trace.records
    got = {tuple(b): (int(r), int(c)) for b, r, c in zip(rows["block"], rows["%cluster_ctarank"], rows["%clusterid.x"])}
    # linear block 5 = (1, 1, 0): rank 1 + 2 * 1 = 3 of cluster x 0; block 2 = (2, 0, 0): rank 0 of cluster x 1
    assert got == {(1, 1, 0): (3, 0), (2, 0, 0): (0, 1)}


def test_command_line_cluster(tmp_path, capsys):
    from flashsim.cli import main

    path = tmp_path / "exchange.ptx"
    path.write_text(HEAD.format(target="sm_90a") + EXCHANGE.format(directives="", sync=SYNC))
    argv = ["ptx", "run", str(path), "--grid", "4", "--block", "32", "--cluster", "2"]
    argv += ["--arg", "out:u32:128", "--arg", "out:u32:128", "--arg", "out:u32:4", "--out", str(tmp_path / "o")]
    assert main(argv) == 0
    out = np.load(tmp_path / "o" / "arg0.npy")
    assert np.array_equal(out, _expected(4, 2, 32)[0].astype(np.uint32))
    assert main(argv[:7] + ["--cluster", "3"] + argv[9:]) == 2
    assert "does not divide grid" in capsys.readouterr().err


# -- a cooperative-groups cluster kernel, as CUDA C++ writes one ---------------------------------------------------

CG_HISTOGRAM = r"""
#include <cooperative_groups.h>
#include <cuda/barrier>
namespace cg = cooperative_groups;
extern "C" __global__ void __cluster_dims__(4, 1, 1) histogram(const unsigned* in, unsigned* out, int n) {
    __shared__ unsigned bins[64];
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    if (threadIdx.x == 0) init(&bar, blockDim.x);
    for (int i = threadIdx.x; i < 64; i += blockDim.x) bins[i] = 0;
    cluster.sync();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned v = in[i] % 256;
        unsigned* remote = cluster.map_shared_rank(bins, v / 64);  // value v's bin lives in rank v / 64
        atomicAdd(&remote[v % 64], 1u);
    }
    bar.arrive_and_wait();
    cluster.sync();
    for (int j = threadIdx.x; j < 64; j += blockDim.x) atomicAdd(&out[rank * 64 + j], bins[j]);
}
"""


@pytest.mark.nvrtc
@pytest.mark.parametrize("check", [None, "racecheck"])
def test_cooperative_groups_cluster_histogram(check):
    """cg::this_cluster().sync() (barrier.cluster), map_shared_rank (generic mapa) and an atomicAdd on another
    block's shared memory, with a cuda::barrier (mbarrier) in the block."""
    from flashsim.gpu.build import cuda_include_dirs

    cccl = [str(pathlib.Path(d, "cccl")) for d in cuda_include_dirs() if pathlib.Path(d, "cccl").is_dir()]
    if not cccl:
        pytest.skip("the CUDA toolkit's CCCL headers (include/cccl) are not installed")
    module = P.compile(CG_HISTOGRAM, arch="sm_90", include_dirs=cccl)
    x = np.random.default_rng(7).integers(0, 1 << 20, 1024).astype(np.uint32)
    out = np.zeros(256, np.uint32)
    P.launch(module.kernel("histogram"), 1024 // 128, 128, [x, out, np.int32(1024)], check=check)
    assert np.array_equal(out, np.bincount(x % 256, minlength=256).astype(np.uint32))


def test_cluster_barrier_deadlock_names_the_missing_threads():
    text = (
        HEAD.format(target="sm_90")
        + """
.visible .entry stuck()
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    mov.u32 %r1, %cluster_ctarank;
    setp.eq.u32 %p1, %r1, 1;
    @%p1 bra SPIN;
    barrier.cluster.arrive;
    barrier.cluster.wait;
    ret;
SPIN:
    bra.uni SPIN;
}
"""
    )
    kernel = P.load(text, contraction="none").kernel("stuck")
    with pytest.raises(P.Deadlock, match=r"waits at barrier.cluster.wait for 32 thread\(s\) of its cluster to arrive"):
        P.launch(kernel, 2, 32, [], cluster=(2, 1, 1), spin_limit=20)
    with pytest.raises(P.SimulationError, match="barrier.cluster.wait without a barrier.cluster.arrive"):
        P.launch(
            P.load(text.replace("    barrier.cluster.arrive;\n", ""), contraction="none").kernel("stuck"), 2, 32, []
        )


# -- st.async / red.async: writes into another CTA that complete on its mbarrier -----------------------------------

ST_ASYNC = """
.visible .entry stasync(.param .u64 out, .param .u64 sums)
{{
    .reg .pred %p<3>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<8>;
    .shared .align 8 .b64 bar;
    .shared .align 16 .b32 data[64];
    .shared .align 4 .b32 total;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd4, [sums];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %cluster_ctarank;
    mov.u32 %r3, %cluster_nctarank;
    setp.eq.u32 %p1, %r1, 0;
    @!%p1 bra INITED;
    st.shared.u32 [total], 0;
    mbarrier.init.shared::cta.b64 [bar], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], {tx};
INITED:
    fence.mbarrier_init.release.cluster;
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    add.u32 %r4, %r2, 1;
    rem.u32 %r4, %r4, %r3;
    mov.u32 %r5, data;
    shl.b32 %r6, %r1, 3;
    add.u32 %r5, %r5, %r6;
    mapa.shared::cluster.u32 %r7, %r5, %r4;
    mov.u32 %r9, bar;
    mapa.shared::cluster.u32 %r10, %r9, %r4;
    mad.lo.u32 %r8, %r2, 100, %r1;
    add.u32 %r12, %r8, 7;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.u32 [%r7], {{%r8, %r12}}, [%r10];
    mov.u32 %r13, total;
    mapa.shared::cluster.u32 %r14, %r13, %r4;
    red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%r14], %r8, [%r10];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
    @!%p2 bra WAIT;
    mov.u32 %r5, data;
    add.u32 %r5, %r5, %r6;
    ld.shared.v2.u32 {{%r11, %r15}}, [%r5];
    mov.u32 %r16, %ctaid.x;
    mad.lo.u32 %r17, %r16, 32, %r1;
    mul.wide.u32 %rd2, %r17, 8;
    add.s64 %rd3, %rd1, %rd2;
    st.global.v2.u32 [%rd3], {{%r11, %r15}};
    @!%p1 bra DONE;
    ld.shared.u32 %r18, [total];
    mul.wide.u32 %rd5, %r16, 4;
    add.s64 %rd6, %rd4, %rd5;
    st.global.u32 [%rd6], %r18;
DONE:
    barrier.cluster.arrive.aligned;
    barrier.cluster.wait.aligned;
    ret;
}}
"""


@pytest.mark.parametrize("check", [None, "racecheck"])
def test_st_async_and_red_async_complete_on_the_remote_mbarrier(check):
    text = HEAD.replace("8.0", "8.6").format(target="sm_90a") + ST_ASYNC.format(tx=32 * 8 + 32 * 4)
    out = np.zeros((4, 32, 2), np.uint32)
    sums = np.zeros(4, np.uint32)
    P.launch(P.load(text, contraction="none").kernel("stasync"), 4, 32, [out, sums], cluster=(4, 1, 1), check=check)
    prev = (np.arange(4) - 1) % 4
    first = prev[:, None] * 100 + np.arange(32)
    assert out[..., 0].tolist() == first.tolist() and out[..., 1].tolist() == (first + 7).tolist()
    assert sums.tolist() == first.sum(axis=1).tolist()


def test_st_async_waits_for_every_byte():
    """An mbarrier expecting more bytes than arrive never completes: the waiters deadlock at their poll."""
    text = HEAD.replace("8.0", "8.6").format(target="sm_90a") + ST_ASYNC.format(tx=32 * 8 + 32 * 4 + 4)
    with pytest.raises(P.Deadlock, match="polls an mbarrier"):
        P.launch(
            P.load(text, contraction="none").kernel("stasync"),
            2,
            32,
            [np.zeros((2, 32, 2), np.uint32), np.zeros(2, np.uint32)],
            cluster=(2, 1, 1),
            spin_limit=50,
        )


def test_st_async_mbarrier_must_be_in_the_written_cta():
    text = HEAD.replace("8.0", "8.6").format(target="sm_90a") + ST_ASYNC.format(tx=384).replace(
        "[%r7], {%r8, %r12}, [%r10];", "[%r7], {%r8, %r12}, [%r9];"
    )
    with pytest.raises(P.SimulationError, match=r"the mbarrier is in CTA rank 0, the write in CTA rank 1"):
        P.launch(
            P.load(text, contraction="none").kernel("stasync"),
            2,
            32,
            [np.zeros((2, 32, 2), np.uint32), np.zeros(2, np.uint32)],
            cluster=(2, 1, 1),
        )
    good = HEAD.replace("8.0", "8.6").format(target="sm_90a") + ST_ASYNC.format(tx=384)
    bad = good.replace("complete_tx::bytes.add.u32 [%r14]", "complete_tx::bytes.add.f32 [%r14]")
    with pytest.raises(P.UnsupportedInstruction, match=r"red.async.add.f32"):
        P.launch(
            P.load(bad, contraction="none").kernel("stasync"),
            2,
            32,
            [np.zeros((2, 32, 2), np.uint32), np.zeros(2, np.uint32)],
            cluster=(2, 1, 1),
        )
