"""One launch over several processes (flashsim.ptx.distributed) on a Dask LocalCluster of two worker processes
started inside the session: bit-equal to the same launch in this process for kernel/flash_fwd.cu, a third-party
kernel and kernels whose blocks meet in global memory through atomics (merged reductions; a ticket counter that
runs on one worker); an inter-block race, a worker's sanitizer error, a worker killed mid-launch (run again, or
one clear error), an unreachable engine, a worker with another flashsim, arrays too large: each reported, nothing
merged from a failed launch."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.ptx import distributed, executor

distributed_pkg = pytest.importorskip("distributed", reason="needs Dask.distributed: pip install 'flashsim[cluster]'")

pytestmark = pytest.mark.nvrtc

SOURCE = r"""
extern "C" __global__ void histogram(const unsigned* x, unsigned* bins, unsigned* top, unsigned* bits, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&bins[x[i] % 16], 1u);
        atomicMax(&top[x[i] % 4], x[i]);
        atomicXor(&bits[x[i] % 8], x[i]);
    }
}
extern "C" __global__ void tickets(unsigned* counter, unsigned* order) {
    if (threadIdx.x == 0) order[blockIdx.x] = atomicAdd(counter, 1u);
}
extern "C" __global__ void fsum(const float* x, float* total) {
    atomicAdd(total, x[blockIdx.x * blockDim.x + threadIdx.x]);
}
extern "C" __global__ void racy(unsigned* out) { out[threadIdx.x] = blockIdx.x; }
extern "C" __global__ void racy_apart(unsigned* out) { out[threadIdx.x + 32 * (blockIdx.x % 2)] = blockIdx.x; }
extern "C" __global__ void hello(unsigned* out) {
    if (threadIdx.x == 0) printf("block %d of %d\n", blockIdx.x, gridDim.x);
    out[blockIdx.x * blockDim.x + threadIdx.x] = blockIdx.x * 1000u + threadIdx.x;
}
extern "C" __global__ void stray(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i + (blockIdx.x == 5 ? n : 0)] = 1.0f;
}
"""


@pytest.fixture(scope="session")
def client():
    """A LocalCluster of 2 worker processes (1 thread each) for the session; a task that kills its workers twice is
    given up (the default 3 would restart workers four times in the test of a fault that follows every retry)."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        cluster = distributed_pkg.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
        )
        c = distributed_pkg.Client(cluster, set_as_default=False)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def module():
    return P.compile(SOURCE, arch="sm_90")


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


def test_reductions_whose_results_are_unused_merge_exactly(module, client):
    x = np.random.default_rng(1).integers(0, 2**32, 4096, dtype=np.uint64).astype(np.uint32)
    outs = []
    for ex in (None, client):
        bins, top, bits = np.full(16, 7, np.uint32), np.full(4, 5, np.uint32), np.full(8, 0xF0F0, np.uint32)
        report = P.launch(module.kernel("histogram"), 32, 128, [x, bins, top, bits, np.int32(x.size)], executor=ex)
        outs.append((bins, top, bits, report))
    (b0, t0, x0, r0), (b1, t1, x1, r1) = outs
    # NVRTC writes atom with a destination nothing reads: a reduction all the same, merged from both workers
    assert {"atom.global.add.u32", "atom.global.max.u32", "atom.global.xor.b32"} <= set(r0.counts)
    assert np.array_equal(b0, b1) and np.array_equal(t0, t1) and np.array_equal(x0, x1)
    assert b0.sum() == 16 * 7 + x.size  # and the launch did count every element
    assert r1.workers == 2 and r1.counts == r0.counts


def test_blocks_that_take_tickets_run_on_one_worker_in_block_order(module, client):
    results = []
    for ex in (None, client):
        counter, order = np.zeros(1, np.uint32), np.zeros(64, np.uint32)
        report = P.launch(module.kernel("tickets"), 64, 32, [counter, order], executor=ex)
        results.append((counter, order, report))
    assert np.array_equal(results[0][1], results[1][1]) and results[1][0][0] == 64
    note = " ".join(results[1][2].notes)
    assert "one worker" in note and "atom.global.add.u32" in note and results[1][2].workers == 1


def test_an_order_dependent_float_sum_runs_on_one_worker(module, client):
    x = np.random.default_rng(2).standard_normal(2048).astype(np.float32)
    sums = []
    for ex in (None, client):
        total = np.zeros(1, np.float32)
        report = P.launch(module.kernel("fsum"), 16, 128, [x, total], executor=ex)
        sums.append(total)
    assert _bits(sums[0]).tobytes() == _bits(sums[1]).tobytes()
    assert "order-dependent" in " ".join(report.notes)


def test_printf_and_trace_merge_in_block_order(module, client):
    trace_local = P.Trace(["%r1"], pcs=[5], threads=[0, 130, 640])
    trace_dist = P.Trace(["%r1"], pcs=[5], threads=[0, 130, 640])
    outs = []
    for ex, trace in ((None, trace_local), (client, trace_dist)):
        out = np.zeros(8 * 128, np.uint32)
        report = P.launch(module.kernel("hello"), 8, 128, [out], executor=ex, trace=trace, max_threads=256)
        outs.append((out, report))
    assert np.array_equal(outs[0][0], outs[1][0])
    assert outs[1][1].printf == outs[0][1].printf == [f"block {b} of 8\n" for b in range(8)]
    assert np.array_equal(trace_local.records, trace_dist.records) and len(trace_dist) == 3


def test_two_blocks_storing_one_byte_is_a_race_naming_both(module, client):
    out = np.zeros(32, np.uint32)
    with pytest.raises(P.BlockRace, match=r"blocks \(0, 0, 0\) and \(1, 0, 0\) both store byte 0 of argument 0"):
        P.launch(module.kernel("racy"), 4, 32, [out], executor=client, max_threads=128)  # one store, four blocks
    with pytest.raises(P.BlockRace, match=r"blocks \(\d, 0, 0\) and \(\d, 0, 0\) both store byte \d+ of argument 0"):
        P.launch(module.kernel("racy"), 4, 32, [out], executor=client)
    assert not out.any()  # nothing merged
    P.launch(module.kernel("racy"), 4, 32, [out], executor=client, communicating=True)
    assert (out == 3).all()  # on one worker, in block order: the last block's values, as in one process


def test_a_race_between_blocks_of_two_workers_is_found_when_merging(module, client):
    client.wait_for_workers(2, timeout=60)
    out = np.zeros(64, np.uint32)
    with pytest.raises(P.BlockRace, match=r"blocks \(0, 0, 0\) and \(2, 0, 0\) both store byte 0 of argument 0"):
        P.launch(module.kernel("racy_apart"), 4, 32, [out], executor=client)  # shares: blocks 0-1, 2-3
    assert not out.any()


def test_a_worker_fault_is_raised_on_the_driver_naming_its_block(module, client):
    out = np.zeros(8 * 64, np.float32)
    with pytest.raises(P.MemcheckError, match=r"stray, block \(5, 0, 0\), thread \(0, 0, 0\).*argument 0"):
        P.launch(module.kernel("stray"), 8, 64, [out, np.int32(out.size)], executor=client, check="memcheck")
    assert not out.any()


def test_blocks_spread_over_shares_return_what_they_stored(module):
    out = np.zeros(8 * 128, np.uint32)
    report = P.launch(module.kernel("hello"), 8, 128, [out], blocks=range(2, 5))
    (w,) = report.writes
    assert w.name == "argument 0" and np.array_equal(np.flatnonzero(w.mask), np.arange(2 * 512, 5 * 512))
    assert np.array_equal(w.bytes[w.mask], _bits(out)[w.mask]) and set(np.unique(w.writer)) == {-1, 2, 3, 4}


def test_a_killed_worker_is_replaced_or_the_launch_fails_clearly(module, client, monkeypatch, tmp_path):
    kernel = module.kernel("hello")
    want = np.zeros(8 * 128, np.uint32)
    P.launch(kernel, 8, 128, [want])
    out = np.zeros_like(want)
    monkeypatch.setattr(distributed, "_TEST_FAULT", (6, str(tmp_path / "died-once")))
    P.launch(kernel, 8, 128, [out], executor=client, max_threads=512)  # printf: shares of whole waves of 4 blocks
    assert (tmp_path / "died-once").exists() and np.array_equal(out, want)  # its share ran again elsewhere
    out[:] = 0
    client.wait_for_workers(2, timeout=60)  # the one that died is back (else one worker: one share)
    monkeypatch.setattr(distributed, "_TEST_FAULT", (6, None))  # every worker that runs block 6 dies
    with pytest.raises(P.WorkerError, match="running blocks 4..7 died.*nothing was merged"):
        P.launch(kernel, 8, 128, [out], executor=client, max_threads=512)
    assert not out.any()
    client.wait_for_workers(2, timeout=60)


def test_flash_fwd_distributed_is_bit_equal(client):
    from flashsim import provenance
    from flashsim.gpu import launch as gpu_launch
    from flashsim.gpu.build import kernel_dir
    from flashsim.problem import prepare

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 256, 128)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, arch="sm_90")
    cfg = prob.config
    source = (kernel_dir() / "flash_fwd.cu").read_text()
    kernel = P.compile(source, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)).kernel("flash_fwd")
    outs = []
    for ex in (None, client):
        o, lse, flag = np.zeros_like(q), np.zeros((1, 2, 256), np.float32), np.full(1, 2**64 - 1, np.uint64)
        args = [q, k, v, o, lse, flag, *gpu_launch.kernel_scalars(prob), *[np.uint64(0)] * 4, np.int32(0)]
        grid = (prob.q_blocks, prob.heads, prob.batch)
        report = P.launch(kernel, grid, cfg.threads, args, shared_mem=cfg.smem_bytes, executor=ex)
        outs.append((o, lse, report))
    (o0, l0, r0), (o1, l1, r1) = outs
    assert np.array_equal(o0.view(np.uint16), o1.view(np.uint16)) and np.array_equal(
        l0.view(np.uint32), l1.view(np.uint32)
    )
    assert o0.any() and r1.instructions == r0.instructions and r1.workers == 2


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit's compiler) on PATH")
@pytest.mark.parametrize("name", ["llama_mmf_bf16", "llama_mmq_q8_0"])
def test_a_third_party_kernel_distributed_is_bit_equal(name, client):
    from thirdparty import build, capture, kernels
    from thirdparty.packages import cache_folder

    kernel = kernels.KERNELS[name]
    package = __import__("thirdparty.packages", fromlist=["PACKAGES"]).PACKAGES[kernel.package]
    if not (cache_folder() / "archives" / package.filename).is_file() and not package.build_isolation:
        pytest.skip(f"{package.filename} is not in the cache (tests/test_ptx_thirdparty.py fetches it)")
    ptx = build.build_ptx(kernel, arch="sm_90")
    module = P.load(ptx, arch="sm_90")
    grid, block, shared = kernel.launch(module.ir)
    entry = module.kernel(capture.single_entry(module.ir))
    outs = []
    for ex in (None, client):
        arrays = kernel.arrays()
        params = kernel.parameters(module.ir, arrays, lambda n, arrays=arrays: P.address(arrays[n]))
        P.launch(entry, grid, block, params, shared_mem=shared, executor=ex)
        outs.append(arrays)
    for out in kernel.outputs:
        assert outs[0][out].any() and _bits(outs[0][out]).tobytes() == _bits(outs[1][out]).tobytes()


def test_bad_executors_each_get_one_clear_error(module, client, monkeypatch):
    out = np.zeros(32, np.uint32)
    kernel = module.kernel("racy")
    with pytest.raises(P.LaunchError, match="executor must be None, 'local:N'"):
        P.launch(kernel, 1, 32, [out], executor=3)
    with pytest.raises(P.LaunchError, match="expected 'local:N'"):
        P.launch(kernel, 1, 32, [out], executor="local")
    monkeypatch.setattr(executor, "CONNECT_TIMEOUT", 1)
    with pytest.raises(P.WorkerError, match="cannot reach a Dask scheduler at 'tcp://127.0.0.1:9'"):
        P.launch(kernel, 1, 32, [out], executor="tcp://127.0.0.1:9")
    monkeypatch.setattr(executor.DaskExecutor, "memory_limits", lambda self: {w: 1000 for w in self.workers()})
    with pytest.raises(P.WorkerError, match=r"global buffers hold .* past the .* memory limit of worker"):
        P.launch(kernel, 1, 32, [np.zeros(1 << 16, np.uint32)], executor=client)
    monkeypatch.undo()

    def other_version():
        import flashsim.ptx.distributed as d

        d.__version__, d.__dict__["_saved"] = "9.9.9", d.__version__

    def restore():
        import flashsim.ptx.distributed as d

        d.__version__ = d.__dict__.pop("_saved", d.__version__)

    client.run(other_version)
    try:
        with pytest.raises(P.WorkerError, match=r"runs flashsim 9\.9\.9 .* every worker must run the same flashsim"):
            P.launch(kernel, 1, 32, [out], executor=client)
    finally:
        client.run(restore)

    def hide_flashsim():
        import sys

        sys.modules["flashsim.ptx.distributed"] = None

    def show_flashsim():
        import sys

        del sys.modules["flashsim.ptx.distributed"]
        import flashsim.ptx.distributed  # noqa: F401

    client.run(hide_flashsim)
    try:
        with pytest.raises(P.WorkerError, match="flashsim is not importable there"):
            P.launch(kernel, 1, 32, [out], executor=client)
    finally:
        client.run(show_flashsim)
    assert not out.any()


def test_progress_shows_blocks_rate_and_eta_when_asked(module, client, capsys):
    out = np.zeros(8 * 128, np.uint32)
    P.launch(module.kernel("hello"), 8, 128, [out], progress=True, max_threads=256)
    err = capsys.readouterr().err
    assert "8/8" in err and "warp instructions/s" in err and "ETA" in err
    P.launch(module.kernel("hello"), 8, 128, [out], progress=True, max_threads=256, executor=client)
    err = capsys.readouterr().err
    assert "simulating blocks on 2 workers" in err and "8/8" in err and "warp instructions/s" in err
    P.launch(module.kernel("hello"), 8, 128, [out], max_threads=256)
    assert capsys.readouterr().err == ""  # not a terminal: nothing unless asked


def test_the_cli_runs_a_launch_on_an_executor(client, tmp_path, capsys):
    from flashsim.cli import main

    source = tmp_path / "k.cu"
    source.write_text(SOURCE)
    common = ["ptx", "run", str(source), "--kernel", "hello", "--grid", "8", "--block", "128", "--max-threads", "512"]
    common += ["--arg", "out:u32:1024"]  # printf: shares of whole waves, 4 blocks each
    assert main([*common, "--out", str(tmp_path / "here")]) == 0
    assert main([*common, "--out", str(tmp_path / "there"), "--executor", client.scheduler.address]) == 0
    out = capsys.readouterr().out
    assert "on 2 of 2 worker(s)" in out and out.count("block 7 of 8") == 2
    here, there = (np.load(tmp_path / d / "arg0.npy") for d in ("here", "there"))
    assert here.any() and np.array_equal(here, there)


def test_a_triton_kernel_distributed_is_bit_equal(client, tmp_path, capsys):
    pytest.importorskip("triton", reason="needs Triton: pip install 'flashsim[triton]'")
    import flashsim.triton as ft

    try:
        ft.support.import_triton()
    except Exception as exc:  # noqa: BLE001 - Triton present but not the pinned release: its own reason
        pytest.skip(str(exc))
    import triton_kernels as K

    rng = np.random.default_rng(5)
    M, N, K_ = 96, 64, 64
    a, b = rng.standard_normal((M, K_)).astype(np.float16), rng.standard_normal((K_, N)).astype(np.float16)
    outs = []
    for ex in (None, client):
        c = np.zeros((M, N), np.float16)
        report = ft.launch(
            K.matmul,
            (6,),
            a,
            b,
            c,
            M,
            N,
            K_,
            K_,
            1,
            N,
            1,
            N,
            1,
            BM=32,
            BN=32,
            BK=32,
            GROUP=2,
            target="sm_80",
            executor=ex,
        )
        outs.append((c, report))
    assert outs[0][0].any() and np.array_equal(outs[0][0].view(np.uint16), outs[1][0].view(np.uint16))
    assert outs[1][1].workers == 2
    from flashsim.cli import main

    args = ["--arg", "randn:f32:512", "--arg", "randn:f32:512", "--arg", "out:f32:512", "--arg", "512"]
    args += ["--meta", "BLOCK=128", "--target", "sm_80", "--executor", client.scheduler.address, "--out", str(tmp_path)]
    assert main(["triton", "run", f"{K.__file__}:add", "--grid", "4", *args]) == 0
    x, y, out = (np.load(tmp_path / f"{n}.npy") for n in ("x_ptr", "y_ptr", "out_ptr"))
    assert np.array_equal(out, x + y) and "on 2 of 2 worker(s)" in capsys.readouterr().out


def test_the_ptx_backend_spreads_its_launch_over_an_executor(client, monkeypatch):
    import flashsim
    from flashsim.settings import EngineOptions

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 128, 64)).astype(np.float16) for _ in range(3))
    here = flashsim.attention(q, k, v, backend="ptx")
    reports = []
    run = distributed.launch_distributed
    monkeypatch.setattr(
        distributed, "launch_distributed", lambda *a, **kw: reports.append(run(*a, **kw)) or reports[-1]
    )
    there = flashsim.attention(q, k, v, backend="ptx", engine=EngineOptions(ptx_executor=client.scheduler.address))
    assert here[0].any() and all(_bits(a).tobytes() == _bits(b).tobytes() for a, b in zip(here, there))
    assert [r.kernel for r in reports] == ["flash_fwd"] and reports[0].workers == 2
    assert EngineOptions.from_environment({"FLASHSIM_PTX_EXECUTOR": "local:3"}).ptx_executor == "local:3"
