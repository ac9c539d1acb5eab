"""The sanitizers of flashsim.ptx on planted bugs (tests/data/ptx/sanitize/, one kernel each, built with NVRTC
and -lineinfo so that reports name CUDA lines) and on kernel/flash_fwd.cu, which every check must pass clean."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import flashsim
import flashsim.ptx as P
from flashsim import provenance
from flashsim.gpu import launch as gpu_launch
from flashsim.gpu.build import kernel_dir
from flashsim.problem import prepare
from flashsim.ptx.errors import InitcheckError, MemcheckError, MemoryFault, RaceError, SimulationError

pytestmark = pytest.mark.nvrtc

DATA = pathlib.Path(__file__).parent / "data" / "ptx" / "sanitize"
_MODULES: dict = {}


def kernel(name: str):
    if name not in _MODULES:
        _MODULES[name] = P.compile((DATA / f"{name}.cu").read_text(), arch="sm_90", options=("-lineinfo",))
    return _MODULES[name].kernel(name)


def cuda_line(name: str, text: str) -> int:
    """The 1-based line of the planted kernel's source that contains ``text`` (once)."""
    lines = [i + 1 for i, line in enumerate((DATA / f"{name}.cu").read_text().splitlines()) if text in line]
    assert len(lines) == 1, (text, lines)
    return lines[0]


def short(source: str | None) -> str | None:
    """``file:line`` with the file's directory dropped (NVRTC names the source by the working directory)."""
    return None if source is None else pathlib.Path(source).name


def floats(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32)


# -- memcheck --------------------------------------------------------------------------------------------------


def test_out_of_bounds_read_names_the_argument_and_how_far_past_its_end():
    n = 256
    args = [floats(n), np.zeros(n, np.float32), np.int32(n)]
    with pytest.raises(MemcheckError) as info:
        P.launch(kernel("oob_read"), 2, 128, args, check="memcheck")
    e = info.value
    assert (e.kernel, e.block, e.thread) == ("oob_read", (1, 0, 0), (127, 0, 0))
    assert short(e.source) == f"flashsim.cu:{cuda_line('oob_read', 'in[i + 1]')}"
    assert e.address == P.address(args[0]) + 4 * n and e.space == ".global"
    assert "4-byte global load" in str(e) and "argument 0, 1024 bytes: the access starts at its end" in str(e)
    assert f"PTX line {e.line}" in str(e)


def test_out_of_bounds_write_without_memcheck_is_still_a_fault():
    n = 200
    out = np.zeros(n, np.float32)
    with pytest.raises(MemoryFault) as info:
        P.launch(kernel("oob_write"), 2, 128, [out, np.int32(n)])
    assert not isinstance(info.value, MemcheckError)
    with pytest.raises(MemcheckError) as info:
        P.launch(kernel("oob_write"), 2, 128, [out, np.int32(n)], check="memcheck")
    e = info.value
    assert (e.block, e.thread) == ((1, 0, 0), (n - 128, 0, 0))
    assert "4-byte global store" in str(e) and "argument 0, 800 bytes: the access starts at its end" in str(e)
    assert short(e.source) == f"flashsim.cu:{cuda_line('oob_write', 'out[i] = 1.0f')}"


def test_a_load_far_from_every_buffer_names_no_buffer():
    text = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  add.s64 %rd1, %rd1, 1048576;
  ld.global.u32 %r1, [%rd1];
  ret;
}
"""
    with pytest.raises(MemcheckError, match=r"outside every buffer at address 0x[0-9a-f]+ \(no buffer\)"):
        P.launch(P.load(text).kernel("k"), 1, 32, [np.zeros(4, np.uint32)], check="memcheck")


def test_misaligned_vector_load():
    with pytest.raises(MemcheckError) as info:
        P.launch(kernel("misaligned_load"), 1, 32, [floats(256), np.zeros(32, np.float32)], check="memcheck")
    e = info.value
    assert "misaligned 16-byte global access" in str(e) and e.thread == (0, 0, 0)
    assert short(e.source) == f"flashsim.cu:{cuda_line('misaligned_load', 'v[threadIdx.x]')}"


def test_shared_store_past_the_dynamic_size():
    with pytest.raises(MemcheckError) as info:
        P.launch(kernel("shared_out_of_range"), 1, 64, [np.zeros(64, np.float32)], shared_mem=256, check="memcheck")
    e = info.value
    assert e.thread == (63, 0, 0) and e.space == ".shared" and e.address == 256
    assert "4-byte shared store past its 256 bytes (0 static, 256 dynamic) at shared offset 0x100" in str(e)
    assert short(e.source) == f"flashsim.cu:{cuda_line('shared_out_of_range', 'tile[threadIdx.x + 1]')}"


def test_an_mbarrier_used_before_init():
    with pytest.raises(MemcheckError, match="used before mbarrier.init"):
        P.launch(kernel("uninitialised_mbarrier"), 1, 32, [np.zeros(32, np.float32)], check="memcheck")
    with pytest.raises(SimulationError, match="used before mbarrier.init") as info:
        P.launch(kernel("uninitialised_mbarrier"), 1, 32, [np.zeros(32, np.float32)])
    assert not isinstance(info.value, MemcheckError)


# -- racecheck -------------------------------------------------------------------------------------------------


def _race(name: str, block: int, args, **kw) -> RaceError | None:
    try:
        P.launch(kernel(name), 1, block, args, check="racecheck", **kw)
    except RaceError as e:
        return e
    return None


def test_a_missing_syncthreads_names_both_threads_and_lines():
    inp = floats(128)
    e = _race("missing_syncthreads", 128, [inp, np.zeros(128, np.float32), np.int32(0)])
    assert e is not None and e.kind == "read-after-write"
    write_line = cuda_line("missing_syncthreads", "tile[t] = in[t]")
    read_line = cuda_line("missing_syncthreads", "out[t] = tile[from]")
    assert short(e.other_source) == f"flashsim.cu:{write_line}" and short(e.source) == f"flashsim.cu:{read_line}"
    # thread t reads its right neighbour's slot: the writer is thread t + 1, of the same warp
    assert e.other_thread == (e.thread[0] + 1, 0, 0) and e.address == 4 * (e.thread[0] + 1)
    text = str(e)
    assert f"thread {e.other_thread} writes it at PTX line {e.other_line}" in text
    assert f"then thread {e.thread} reads it at PTX line {e.line}" in text
    for mode in (1, 2):  # __syncthreads, or __syncwarp with reads inside the warp
        out = np.zeros(128, np.float32)
        assert _race("missing_syncthreads", 128, [inp, out, np.int32(mode)]) is None
        t = np.arange(128)
        src = (t + 1) % 128 if mode == 1 else (t & ~31) | ((t + 1) & 31)
        np.testing.assert_array_equal(out, inp[src])


def test_a_write_after_read_hazard():
    e = _race("war_hazard", 128, [floats(128), np.zeros(128, np.float32), np.int32(0)])
    assert e is not None and e.kind == "write-after-read"
    assert short(e.other_source) == f"flashsim.cu:{cuda_line('war_hazard', 'float left =')}"
    assert short(e.source) == f"flashsim.cu:{cuda_line('war_hazard', 'tile[t] = 2.0f * left')}"
    assert e.other_thread == ((e.thread[0] - 1) % 128, 0, 0)
    assert _race("war_hazard", 128, [floats(128), np.zeros(128, np.float32), np.int32(1)]) is None


def test_a_named_barrier_orders_only_its_threads():
    out = np.zeros(128, np.float32)
    assert _race("named_barrier", 128, [floats(128), out, np.int32(0)]) is None
    np.testing.assert_array_equal(out[32:64], np.arange(32, dtype=np.float32))
    e = _race("named_barrier", 128, [floats(128), np.zeros(128, np.float32), np.int32(1)])
    assert e is not None and 64 <= e.thread[0] < 96 and e.other_thread[0] < 32
    assert short(e.source) == f"flashsim.cu:{cuda_line('named_barrier', 'x += tile[t - 64]')}"


def test_an_mbarrier_hands_a_tile_from_producer_to_consumer():
    out = np.zeros(32, np.float32)
    assert _race("mbarrier_handoff", 64, [floats(32), out, np.int32(1)]) is None
    np.testing.assert_array_equal(out, np.roll(floats(32), -1))
    e = _race("mbarrier_handoff", 64, [floats(32), np.zeros(32, np.float32), np.int32(0)])
    assert e is not None and e.kind in ("read-after-write", "write-after-read")
    lines = {short(e.source), short(e.other_source)}
    assert lines == {
        f"flashsim.cu:{cuda_line('mbarrier_handoff', 'tile[t] = in[t]')}",
        f"flashsim.cu:{cuda_line('mbarrier_handoff', 'out[t - 32] = tile')}",
    }


def test_cp_async_completion_orders_its_write():
    inp = floats(512)
    out = np.zeros(128, np.float32)
    assert _race("cp_async_wait", 128, [inp, out, np.int32(1)]) is None
    np.testing.assert_array_equal(out, inp[4 * ((np.arange(128) + 1) % 128)])
    e = _race("cp_async_wait", 128, [inp, np.zeros(128, np.float32), np.int32(0)])
    assert e is not None and e.kind == "read-after-write" and "(in flight)" in str(e)
    assert re.search(
        r"cp.async", (DATA / "cp_async_wait.cu").read_text().splitlines()[int(e.other_source.rsplit(":", 1)[1]) - 1]
    )


# -- initcheck -------------------------------------------------------------------------------------------------


def test_an_uninitialised_shared_read():
    with pytest.raises(InitcheckError) as info:
        P.launch(kernel("uninitialised_shared"), 1, 128, [np.zeros(128, np.float32)], check="initcheck")
    e = info.value
    assert e.thread == (0, 0, 0) and e.address == 4 * 127 and "no thread of the block wrote it" in str(e)
    assert short(e.source) == f"flashsim.cu:{cuda_line('uninitialised_shared', 'out[t] = tile[127 - t]')}"


def test_an_uninitialised_local_read():
    text = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .local .align 4 .b8 buf[16];
  mov.u32 %r1, %tid.x;
  st.local.u32 [buf], %r1;
  ld.local.u32 %r2, [buf+4];
  ret;
}
"""
    kern = P.load(text).kernel("k")
    with pytest.raises(InitcheckError, match="this thread never wrote it"):
        P.launch(kern, 1, 32, [np.zeros(1, np.uint32)], check="initcheck")
    P.launch(kern, 1, 32, [np.zeros(1, np.uint32)])  # unchecked: the bytes read as zero


# -- flash_fwd: clean under every check ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def flash():
    n, d = 128, 128
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, n, d)).astype(np.float16) for _ in range(3))
    prob = prepare(q, k, v, arch="sm_90")
    cfg = prob.config
    src = (kernel_dir() / "flash_fwd.cu").read_text()
    kern = P.compile(src, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)).kernel("flash_fwd")
    return kern, prob, (q, k, v), flashsim.attention(q, k, v)


@pytest.mark.parametrize("check", ("memcheck", "racecheck", "initcheck"))
def test_flash_fwd_is_clean_under(check, flash):
    kern, prob, (q, k, v), (o_ref, lse_ref) = flash
    cfg = prob.config
    o = np.zeros_like(q)
    lse = np.zeros(lse_ref.shape, np.float32)
    flag = np.full(1, 2**64 - 1, np.uint64)
    tail = (np.uint64(0), np.uint64(0), np.uint64(0), np.uint64(0), np.int32(0))
    args = [q, k, v, o, lse, flag, *gpu_launch.kernel_scalars(prob), *tail]
    grid = (prob.q_blocks, prob.heads, prob.batch)
    P.launch(kern, grid, cfg.threads, args, shared_mem=cfg.smem_bytes, check=check)
    np.testing.assert_array_equal(o.view(np.uint16), o_ref.view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), np.asarray(lse_ref, np.float32).view(np.uint32))
