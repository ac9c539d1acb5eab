"""wgmma in flashsim.ptx: hand-written PTX GEMM tiles (flashsim.gpu.capture.wgmma_ptx's cases: every swizzle mode,
K- and MN-major, base offsets, A from registers, chained wgmmas, two groups in flight, scale-d, negation, every type
family) against an independent oracle: the operands read out of the kernel's inputs through the PTX ISA's canonical
layouts and CuTe's GMMA TV layouts stated here as flashsim.layout.cute Layouts, multiplied by
flashsim.numerics.tensorcore.wgmma_unchecked (the numerics under test elsewhere), bit for bit. Then the racecheck
hazards, the errors, Triton's sm_90a PTX, and the silicon capture."""

from __future__ import annotations

import hashlib
import json
import re

import ml_dtypes
import numpy as np
import pytest

import flashsim.numerics.tensorcore as tensorcore
from flashsim.gpu.capture import wgmma_ptx as W
from flashsim.layout.cute import Layout
from flashsim.ptx import load
from flashsim.ptx.errors import MemoryFault, RaceError, SimulationError, UnsupportedInstruction
from flashsim.ptx.launch import launch


def _reference(a, b, c, arch, scale_d=True, scale_a=1, scale_b=1, satfinite=False):
    """A float64 / int64 stand-in for wgmma_unchecked where the numerics are not merged yet: exact on the small
    integer inputs of the layout cases (so the layouts are what these tests check)."""
    sd = np.broadcast_to(np.asarray(scale_d, bool), (a.shape[0],))[:, None, None]
    if a.dtype.kind in "iu":
        s = a.astype(np.int64) @ b.astype(np.int64) + np.where(sd, c.astype(np.int64), 0)
        return np.clip(s, -(2**31), 2**31 - 1).astype(np.int32) if satfinite else s.astype(np.uint32).view(np.int32)

    def wide(x):
        if x.dtype == np.float32:  # tf32: the low 13 bits ignored
            x = (x.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return x.astype(np.float64)

    p = (scale_a * wide(a)) @ (scale_b * wide(b))
    return (p + np.where(sd, c.astype(np.float64), 0)).astype(c.dtype)


@pytest.fixture(autouse=True)
def numerics(monkeypatch):
    if not hasattr(tensorcore, "wgmma_unchecked"):
        monkeypatch.setattr(tensorcore, "wgmma_unchecked", _reference, raising=False)
    return tensorcore.wgmma_unchecked


# -- the oracle: the ISA's canonical layouts and CuTe's TV layouts -------------------------------------------------

_W = {"none": 1, "32B": 2, "64B": 4, "128B": 8}
_SWZ_BITS = {"none": 0, "32B": 1, "64B": 2, "128B": 3}


def canonical(mn: int, bits: int, mn_major: bool, mode: str, lbo: int, sbo: int) -> Layout:
    """The ISA's "Canonical Layouts" table (in elements, T = 128 / bits) for one wgmma's operand: coordinate (MN
    index, K index)."""
    T, eb, W_ = 128 // bits, bits // 8, _W[mode]
    L, S = lbo // eb, sbo // eb
    if not mn_major:
        m = mn // 8
        if mode == "none":
            return Layout(((8, m), (T, 2)), ((T, S), (1, L)))
        return Layout(((8, m), (T, 2)), ((W_ * T, S), (1, T)))
    if mode == "none":
        return Layout(((T, 1, max(mn // T, 1)), (8, 2)), ((1, T, S), (T, L)))
    return Layout(((T, W_, -(-mn // (T * W_))), (8, 2)), ((1, T, L), (W_ * T, S)))


def cute_swizzle(addr, mode: str, base: int):
    """CuTe's Swizzle<b,4,3> on the byte address, its row phase counted from the pattern start (base offset)."""
    b = _SWZ_BITS[mode]
    if b == 0:
        return addr
    a = addr - 128 * base
    return (a ^ ((a & (((1 << b) - 1) << 7)) >> 3)) + 128 * base


def operand(img, lay: dict, start: int, mn: int, k: int, dtype) -> np.ndarray:
    """(blocks, mn, k) elements an operand descriptor selects from the shared-memory images (blocks, bytes)."""
    eb = np.dtype(dtype).itemsize
    layout = canonical(mn, eb * 8, lay["mn_major"], lay["swizzle"], lay["lbo"], lay["sbo"])
    i, j = np.meshgrid(np.arange(mn), np.arange(k), indexing="ij")
    elems = np.vectorize(lambda x, y: layout((x, y)))(i, j)
    addr = cute_swizzle(start + eb * elems, lay["swizzle"], lay["base"])
    raw = img[:, addr[..., None] + np.arange(eb)]  # (blocks, mn, k, eb)
    return np.ascontiguousarray(raw).reshape(img.shape[0], mn, k * eb).view(dtype)


def clayout(n: int) -> Layout:  # cute GMMA::CLayout_64xN: (thread, value) -> m + 64 n
    return Layout(((4, 8, 4), (2, 2, n // 8)), ((128, 1, 16), (64, 8, 512)))


A_LAYOUT = {  # cute GMMA::ALayout_64x8 / 64x16 / 64x32: (thread, value) -> m + 64 k
    8: Layout(((4, 8, 4), (2, 2)), ((64, 1, 16), (8, 256))),
    16: clayout(16),
    32: Layout(((4, 8, 4), (4, 2, 2)), ((256, 1, 16), (64, 8, 1024))),
}


def tv_tile(words, layout: Layout, cols: int, dtype) -> np.ndarray:
    """Thread registers (blocks * 128, regs) uint32 -> tiles (blocks, 64, cols) through a CuTe TV layout."""
    vals = np.ascontiguousarray(words).view(dtype).reshape(-1, 128, layout.size // 128)
    idx = layout.table().reshape(-1, 128).T  # [thread, value]
    tile = np.zeros((vals.shape[0], 64 * cols), vals.dtype)
    tile[:, idx] = vals
    return tile.reshape(-1, cols, 64).transpose(0, 2, 1)


def tv_words(tile, layout: Layout) -> np.ndarray:
    """The inverse: tiles (blocks, 64, cols) -> registers (blocks * 128, regs) uint32."""
    flat = np.ascontiguousarray(tile.transpose(0, 2, 1)).reshape(tile.shape[0], -1)
    idx = layout.table().reshape(-1, 128).T
    return np.ascontiguousarray(flat[:, idx]).view(np.uint32).reshape(tile.shape[0] * 128, -1)


def expected(case: W.Case, arrays: dict, model) -> np.ndarray:
    lay = W.descriptors(case)
    adt, bdt, ddt = (np.dtype(W._DTYPE[t]) for t in (case.atype, case.btype, case.dtype))
    k, n, nd = case.k, case.n, W._n_acc(case)
    blocks = case.blocks
    if case.scale_d == "pred":
        scale_d = np.arange(blocks) != 0
    else:
        scale_d = np.full(blocks, bool(case.scale_d))
    out = arrays["c"].copy()  # accumulator sets no wgmma writes (one_acc) are stored as loaded
    for g in range(case.groups):
        s = 0 if case.one_acc else g
        if g == 0 or not case.one_acc:
            c = tv_tile(arrays["c"][:, s * nd : (s + 1) * nd], clayout(n), n, ddt)
        for j in range(case.chain):
            w = g * case.chain + j
            if case.a_regs:
                a = tv_tile(arrays["afrag"][:, 4 * w : 4 * w + 4], A_LAYOUT[k], k, adt)
            else:
                a = operand(arrays["img"], lay["a"], lay["a"]["starts"][g][j], 64, k, adt)
            bt = operand(arrays["img"], lay["b"], lay["b"]["starts"][g][j], n, k, bdt)  # (blocks, N, K)
            c = model(
                a,
                np.ascontiguousarray(bt.transpose(0, 2, 1)),
                c,
                "sm_90",
                scale_d=scale_d,
                scale_a=case.scale_a,
                scale_b=case.scale_b,
                satfinite=case.satfinite,
            )
        out[:, s * nd : (s + 1) * nd] = tv_words(np.asarray(c, ddt), clayout(n))
    return out


@pytest.mark.parametrize("case", W.CASES, ids=lambda c: c.name)
def test_case_against_the_layout_oracle(case, numerics):
    arrays = W.inputs(case)
    got = W.simulate(case, arrays)
    np.testing.assert_array_equal(got, expected(case, arrays, numerics))


def test_cases_cover_the_brief():
    names = {c.name for c in W.CASES}
    kinds = {(c.atype, c.a_regs) for c in W.CASES}
    for t in ("f16", "bf16", "tf32", "e4m3", "s8"):
        assert (t, False) in kinds and (t, True) in kinds
    assert {c.n for c in W.CASES} >= {8, 64, 256}
    assert {(c.swizzle_a, c.trans_a) for c in W.CASES} >= {(s, t) for s in _W for t in (0, 1)}
    assert any(c.groups == 2 for c in W.CASES) and any(c.chain > 1 for c in W.CASES) and "f16_scaled0" in names


@pytest.mark.parametrize("name", ["f16_f16acc_groups2", "f16_one_acc_groups3", "bf16_normal_cpasync", "s8_regs_n48"])
def test_racecheck_finds_nothing_in_correct_kernels(name, numerics):
    case = next(c for c in W.CASES if c.name == name)
    arrays = W.inputs(case)
    np.testing.assert_array_equal(W.simulate(case, arrays, check="racecheck"), expected(case, arrays, numerics))


# -- asynchrony and hazards ---------------------------------------------------------------------------------------

CASE = next(c for c in W.CASES if c.name == "f16_k_128B_n64")
GROUPS2 = next(c for c in W.CASES if c.name == "f16_f16acc_groups2")


def _run(ptx: str, case: W.Case, arrays=None, check=None, block=128, grid=None):
    arrays = W.inputs(case) if arrays is None else arrays
    kernel = load(ptx, arch="sm_90").kernel("wgmma_probe")
    d = np.zeros_like(arrays["c"])
    launch(
        kernel,
        (grid or case.blocks, 1, 1),
        (block, 1, 1),
        [arrays["img"], arrays["afrag"], arrays["c"], d],
        check=check,
    )
    return d


def _early_read(case: W.Case) -> str:
    """The case's kernel reading accumulator register %acc0 before its wait (into %r11, stored over d[:, 0])."""
    ptx = W.ptx_of(case)
    ptx = ptx.replace(
        "  wgmma.wait_group.sync.aligned 0;", "  mov.b32 %r11, %acc0;\n  wgmma.wait_group.sync.aligned 0;"
    )
    return ptx.replace("  ret;", "  st.global.b32 [%rd10], %r11;\n  ret;")


def test_reading_an_accumulator_before_the_wait_is_a_racecheck_hazard():
    ptx = _early_read(CASE)
    with pytest.raises(RaceError) as err:
        _run(ptx, CASE, check="racecheck")
    msg = str(err.value)
    assert "%acc0" in msg and "read" in msg and "accumulator" in msg
    lines = ptx.splitlines()
    issue = next(i for i, s in enumerate(lines, 1) if "wgmma.mma_async" in s)
    read = next(i for i, s in enumerate(lines, 1) if "mov.b32 %r11, %acc0" in s)
    assert err.value.line == read and err.value.other_line == issue and f"PTX line {issue}" in msg
    assert err.value.thread == (0, 0, 0)


def test_without_racecheck_an_early_read_waits_as_ptxas_makes_it(numerics):
    """ptxas injects a warpgroup wait before an instruction that uses a register a wgmma defines (C7517): the early
    read sees the wgmma's result, never the old accumulator."""
    arrays = W.inputs(CASE)
    np.testing.assert_array_equal(_run(_early_read(CASE), CASE, arrays), expected(CASE, arrays, numerics))


def test_wait_group_1_leaves_the_second_group_in_flight(numerics):
    arrays = W.inputs(GROUPS2)
    nd = W._n_acc(GROUPS2)
    ptx = W.ptx_of(GROUPS2)
    # reading the second group's accumulators between wait_group 1 and wait_group 0 is a hazard ...
    early = ptx.replace(
        "  wgmma.wait_group.sync.aligned 0;", f"  mov.b32 %r11, %acc{nd};\n  wgmma.wait_group.sync.aligned 0;"
    )
    with pytest.raises(RaceError, match=f"%acc{nd}"):
        _run(early, GROUPS2, arrays, check="racecheck")
    # ... the first group's, not (the kernel itself stores them there)
    np.testing.assert_array_equal(_run(ptx, GROUPS2, arrays, check="racecheck"), expected(GROUPS2, arrays, numerics))


def test_writing_an_accumulator_in_flight_is_a_hazard():
    ptx = W.ptx_of(CASE).replace(
        "  wgmma.wait_group.sync.aligned 0;", "  mov.f32 %acc3, 0f00000000;\n  wgmma.wait_group.sync.aligned 0;"
    )
    with pytest.raises(RaceError, match=r"write of %acc3"):
        _run(ptx, CASE, check="racecheck")


def test_chained_wgmmas_in_flight_take_each_others_results(numerics):
    """Four wgmmas on one accumulator in one group: each uses the previous one's result as c (never the registers'
    stale value), under racecheck too."""
    case = next(c for c in W.CASES if c.name == "f16_chain4_128B")
    arrays = W.inputs(case)
    np.testing.assert_array_equal(W.simulate(case, arrays, check="racecheck"), expected(case, arrays, numerics))


def test_smem_written_without_a_barrier_is_a_race():
    """The image is copied by all 128 threads: without bar.sync the wgmma's reads race with other threads' stores."""
    ptx = W.ptx_of(CASE).replace("  bar.sync 0;\n", "")
    with pytest.raises(RaceError, match="read-after-write"):
        _run(ptx, CASE, check="racecheck")


@pytest.mark.parametrize("barrier", [False, True])
def test_a_store_to_an_operand_before_the_wait_is_a_race(barrier):
    """The async unit may read its shared-memory operands until the wait: a store into them in between races with
    the wgmma (at the store; or, where a barrier orders the store after the issue, at the wait)."""
    ptx = W.ptx_of(CASE)
    commit = "  wgmma.commit_group.sync.aligned;\n"
    store = "  setp.eq.u32 %p2, %r0, 64;\n  @%p2 st.shared.u32 [%r2+4], %r0;\n"
    ptx = ptx.replace(commit, commit + ("  bar.sync 0;\n" if barrier else "") + store)
    lines = ptx.splitlines()
    issue, stored, wait = (
        next(i for i, s in enumerate(lines, 1) if key in s)
        for key in ("wgmma.mma_async", "st.shared.u32", "wait_group")
    )
    with pytest.raises(RaceError, match="hazard at shared offset 0x4") as err:
        _run(ptx, CASE, check="racecheck")
    if barrier:
        assert err.value.kind == "read-after-write" and err.value.line == wait and err.value.other_line == stored
        assert err.value.other_thread == (64, 0, 0)
    else:
        assert err.value.kind == "write-after-read" and err.value.line == stored and err.value.other_line == issue
        assert err.value.thread == (64, 0, 0)


def test_diverged_warpgroup_deadlock_names_the_rule():
    from flashsim.ptx.errors import Deadlock

    fence = "  wgmma.fence.sync.aligned;"
    ptx = W.ptx_of(CASE).replace(
        fence,
        "  setp.lt.u32 %p2, %r0, 64;\n  @%p2 bra OTHER;\n"
        + fence
        + "\n  bra.uni AFTER;\nOTHER:\n"
        + fence
        + "\nAFTER:",
    )
    with pytest.raises(Deadlock, match="other threads of its warpgroup at a .sync.aligned wgmma"):
        _run(ptx, CASE)


def test_missing_wgmma_fence_is_a_racecheck_error(numerics):
    fence = "  wgmma.fence.sync.aligned;\n"
    unfenced = W.ptx_of(CASE).replace(fence, "")
    with pytest.raises(RaceError, match="no wgmma.fence before the warpgroup's first wgmma.mma_async"):
        _run(unfenced, CASE, check="racecheck")
    late = W.ptx_of(CASE).replace(fence, fence + "  mov.f32 %acc3, 0f3F800000;\n")
    with pytest.raises(RaceError, match=r"%acc3, a register of this wgmma.mma_async, was accessed at PTX line") as err:
        _run(late, CASE, check="racecheck")
    assert err.value.other_line == next(i for i, s in enumerate(late.splitlines(), 1) if "mov.f32 %acc3" in s)
    # without racecheck the wgmma reads the registers as they are (the write included)
    arrays = W.inputs(CASE)
    patched = dict(arrays, c=arrays["c"].copy())
    patched["c"][:, 3] = np.float32(1).view(np.uint32)
    np.testing.assert_array_equal(_run(late, CASE, arrays), expected(CASE, patched, numerics))


def test_generic_store_without_fence_proxy_async():
    from flashsim.ptx.sanitize import RaceCheck

    if not hasattr(RaceCheck, "async_proxy_access"):
        pytest.skip("racecheck does not track the async proxy yet (RaceCheck.async_proxy_access)")
    ptx = W.ptx_of(CASE).replace("  fence.proxy.async;\n", "")
    with pytest.raises(RaceError, match="proxy"):
        _run(ptx, CASE, check="racecheck")


# -- errors -------------------------------------------------------------------------------------------------------


def _desc_line(ptx: str, reg: str, new_high: int) -> str:
    return re.sub(rf"(  or\.b64 {reg}, {reg}, )\d+;", rf"\g<1>{new_high};", ptx, count=1)


def test_descriptor_past_shared_memory():
    lay = W.descriptors(CASE)
    ptx = W.ptx_of(CASE).replace(
        f"  add.u64 %db0, %rd8, {lay['b']['starts'][0][0]};", f"  add.u64 %db0, %rd8, {lay['smem'] - 1024};"
    )
    with pytest.raises(MemoryFault) as err:
        _run(ptx, CASE)
    msg = str(err.value)
    assert "B descriptor" in msg and "past the block's" in msg and err.value.line is not None
    assert "wgmma_probe" in msg and "block (0, 0, 0)" in msg


def test_descriptor_misaligned_for_its_swizzle():
    ptx = W.ptx_of(CASE)
    lay = W.descriptors(CASE)["a"]
    bad = W._desc_high(lay["lbo"], lay["sbo"], 2, "128B")  # base offset 2 on a pattern that starts at 0
    with pytest.raises(SimulationError, match="misaligned for its swizzle.*row 6"):
        _run(_desc_line(ptx, "%da0", bad), CASE)


def test_descriptor_differs_across_the_warpgroup():
    ptx = W.ptx_of(CASE).replace("  shr.u64 %db0, %db0, 4;", "  add.u64 %db0, %db0, %rd2;\n  shr.u64 %db0, %db0, 4;")
    with pytest.raises(SimulationError, match="B descriptor differs between the threads of a warpgroup"):
        _run(ptx, CASE)


def test_wrong_register_count_is_refused():
    ptx = W.ptx_of(CASE).replace("%acc0, %acc1, ", "%acc0, ", 1)
    kernel = load(ptx, arch="sm_90").kernel("wgmma_probe")
    (err,) = kernel.program.unsupported
    assert "32 registers expected for this shape, got 31" in err.reason and err.line is not None


@pytest.mark.parametrize(
    "old, new, why",
    [
        (".m64n64k16.f32", ".m64n64k16.sp.f32", "sparse wgmma"),
        ("1, 1, 0, 0;", "1, 1, 1;", "takes 8 operands"),
        ("1, 1, 0, 0;", "1, 1, 2, 0;", "imm-trans-a"),
        (".m64n64k16.f32.f16.f16", ".m64n64k16.f32.f16.bf16", "not a type combination"),
        (".m64n64k16.f32.f16.f16", ".m64n64k16.satfinite.f32.f16.f16", ".satfinite is for the integer"),
    ],
)
def test_forms_refused_clearly(old, new, why):
    ptx = W.ptx_of(CASE)
    assert old in ptx
    kernel = load(ptx.replace(old, new), arch="sm_90").kernel("wgmma_probe")
    (err,) = kernel.program.unsupported
    assert why in err.reason
    with pytest.raises(UnsupportedInstruction):
        _run(ptx.replace(old, new), CASE)


def test_an_exited_thread_breaks_the_warpgroup():
    ptx = W.ptx_of(CASE).replace(
        "  wgmma.fence.sync.aligned;", "  setp.eq.u32 %p2, %r0, 77;\n  @%p2 exit;\n  wgmma.fence.sync.aligned;"
    )
    with pytest.raises(SimulationError, match="exited before it") as err:
        _run(ptx, CASE)
    assert err.value.thread is not None


def test_an_incomplete_warpgroup_is_refused():
    with pytest.raises(SimulationError, match="incomplete warpgroup"):
        _run(W.ptx_of(CASE).replace("mad.lo.u32 %r9, %r1, 128", "mad.lo.u32 %r9, %r1, 96"), CASE, block=96)


def test_warps_arriving_apart_wait_for_each_other(numerics):
    """Warps 2 and 3 take a detour before the wgmma: warps 0 and 1 wait at it (.sync), then all four run it."""
    ptx = W.ptx_of(CASE).replace(
        "  wgmma.fence.sync.aligned;",
        "  setp.lt.u32 %p2, %r0, 64;\n  @%p2 bra JOIN;\n  mov.u32 %r12, 0;\nSPIN:\n  add.u32 %r12, %r12, 1;\n"
        "  setp.lt.u32 %p3, %r12, 5;\n  @%p3 bra SPIN;\nJOIN:\n  wgmma.fence.sync.aligned;",
    )
    arrays = W.inputs(CASE)
    np.testing.assert_array_equal(_run(ptx, CASE, arrays), expected(CASE, arrays, numerics))


def test_two_warpgroups_of_a_block_run_apart(numerics):
    """A block of 256 threads: each warpgroup runs its own wgmma on the same shared memory."""
    case = W.Case("two_wg", n=32)
    arrays = W.inputs(case)
    ptx = W.ptx_of(case).replace("mad.lo.u32 %r9, %r1, 128", "mad.lo.u32 %r9, %r1, 256")
    arrays2 = dict(arrays, c=np.concatenate([arrays["c"], arrays["c"][::-1]]), afrag=np.repeat(arrays["afrag"], 2, 0))
    got = _run(ptx, case, arrays2, block=256)
    want = expected(case, arrays, numerics)
    flipped = dict(arrays, c=arrays["c"][::-1].copy())
    np.testing.assert_array_equal(got[:128], want)
    np.testing.assert_array_equal(got[128:], expected(case, flipped, numerics))


# -- Triton's sm_90a PTX and the silicon capture ------------------------------------------------------------------


def _triton_matmul():
    """Triton's own sm_90a build of a tl.dot matmul (its compiler, no GPU): (PTX, dynamic shared bytes)."""
    triton = pytest.importorskip("triton", reason="triton is not installed (not a dependency of flashsim)")
    import triton_wgmma_kernels as K
    from triton.backends.compiler import GPUTarget

    src = triton.compiler.ASTSource(
        K.matmul,
        signature={"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32"},
        constexprs={"BM": 128, "BN": 128, "BK": 64},
    )
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    return compiled.asm["ptx"], compiled.metadata.shared


def test_triton_matmul_wgmma_decodes_and_runs(monkeypatch):
    """Triton's descriptors, swizzles and wgmma pipeline (another compiler's reading of the same layouts): every
    wgmma-family instruction decodes, and the kernel multiplies exactly (small integers: any correct arithmetic
    gives the same bits), with racecheck finding nothing."""
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    ptx, shared = _triton_matmul()
    assert "wgmma.mma_async" in ptx and "wgmma.wait_group" in ptx
    entry = re.findall(r"\.entry (\w+)", ptx)[0]
    kernel = load(ptx, arch="sm_90").kernel(entry)
    assert not kernel.program.unsupported, kernel.program.unsupported
    rng = np.random.default_rng(5)
    for (M, N, K), check in (((128, 128, 128), "racecheck"), ((256, 256, 192), None)):
        a = rng.integers(-3, 4, (M, K)).astype(np.float16)
        b = rng.integers(-3, 4, (K, N)).astype(np.float16)
        c = np.zeros((M, N), np.float32)
        scratch = np.zeros(256, np.uint8)
        args = [a, b, c, np.uint32(M), np.uint32(N), np.uint32(K), scratch, scratch]
        launch(kernel, (M // 128, N // 128, 1), (128, 1, 1), args, shared_mem=shared, check=check)
        np.testing.assert_array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32))


def test_silicon_capture():
    if not W.CAPTURE.exists():
        pytest.skip(
            f"no silicon capture at {W.CAPTURE} (run python3 -m flashsim.gpu.capture.wgmma_ptx --out DIR on an H100 "
            "/ H200 and commit DIR/wgmma_ptx_sm90.npz as tests/data/ptx_isa/wgmma_ptx_sm90.npz)"
        )
    data = np.load(W.CAPTURE)
    meta = json.loads(str(data["meta"]))
    assert not meta.get("failed"), meta.get("failed")
    bad = []
    for case in W.CASES:
        if case.name not in meta["cases"]:
            bad.append(f"{case.name}: not in the capture")
            continue
        stored = meta["cases"][case.name]["ptx_sha256"]
        if stored != hashlib.sha256(W.ptx_of(case).encode()).hexdigest():
            bad.append(f"{case.name}: the case's PTX changed since the capture (capture it again)")
            continue
        arrays = {k: data[f"{case.name}/{k}"] for k in ("img", "afrag", "c")}
        got = W.simulate(case, arrays)
        want = data[f"{case.name}/d"]
        if not np.array_equal(got, want):
            t, r = (int(x[0]) for x in np.nonzero(got != want))
            bad.append(f"{case.name}: thread {t} register {r}: simulator {got[t, r]:#010x}, H200 {want[t, r]:#010x}")
    assert not bad, "\n".join(bad)


def test_inputs_are_deterministic():
    a, b = W.inputs(CASE), W.inputs(CASE)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    img = W.inputs(next(c for c in W.CASES if c.name == "bf16_normal_cpasync"))["img"]
    assert np.isfinite(img.view(ml_dtypes.bfloat16).astype(np.float32)).all()  # every slot holds a value of its type
