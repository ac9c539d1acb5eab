"""The serving kernel's own PTX (flash_fwd of a paged, split, GQA-packed decode build, then flash_combine) run by
flashsim.ptx on the CPU, bit for bit against the emulator's serving call, under racecheck: the page translation (a
warp's lanes hold a KV tile's page-table entries, read one tile ahead and passed by shuffles), rows of different
lengths ending inside a page, a table with pages in a shuffled order, and the split parts merged by the combine."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim import provenance
from flashsim.commands.verify_serving import emulator_outputs, problem_of, serving_cases
from flashsim.constants import COMBINE_WARPS
from flashsim.emulator import serving as emulated
from flashsim.gpu import serving as gs
from flashsim.gpu.build import kernel_dir
from flashsim.gpu.launch import NO_OVERFLOW
from flashsim.serving.problem import prepare_kvcache, prepare_varlen, serving_options

pytestmark = [pytest.mark.nvrtc, pytest.mark.sass]

OPTS = serving_options(None, None, None, None, None, None, None, None)


def _case(page_size, seqlens, splits, d=64, h=8, hk=2, seed=3):
    """q (B, 1, h, d) and a paged cache whose pages are shuffled, with two pages no row uses."""
    rng = np.random.default_rng(seed)
    b, per = len(seqlens), -(-max(seqlens) // page_size)
    pages = b * per + 2
    table = rng.permutation(pages)[: b * per].reshape(b, per).astype(np.int32)
    q = rng.standard_normal((b, 1, h, d)).astype(np.float16)
    kp = rng.standard_normal((pages, page_size, hk, d)).astype(np.float16)
    vp = rng.standard_normal((pages, page_size, hk, d)).astype(np.float16)
    return q, kp, vp, np.asarray(seqlens, np.int32), table, splits


def _decode_ptx(prob, q, k, v, seqlens, table, flag=None):
    """A KV-cache ``prob``'s flash_fwd through flashsim.ptx under racecheck, then with splits flash_combine over its
    parts (the launches flashsim.gpu.serving makes): (o, lse). ``flag``: the overflow flag's u64, where the build has
    one."""
    cfg = prob.config
    src = (kernel_dir() / "flash_fwd.cu").read_text()
    module = P.compile(src, arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg))
    o, lse = np.zeros(prob.o_shape, q.dtype), np.zeros(prob.lse_shape, np.float32)
    null = np.uint64(0)
    rows, d = prob.part_rows, prob.head_dim
    o_part = np.zeros((prob.parts, rows, d), np.float32) if cfg.split else null
    lse_part = np.zeros((prob.parts, rows), np.float32) if cfg.split else null
    head, totals, pages, lse_strides = gs.kernel_scalars(prob)
    args = [q, k, v, o, lse, null if flag is None else flag, *head, null, null, seqlens, *totals]
    args += [null if table is None else table, *pages, o_part, lse_part, *lse_strides]
    P.launch(module.kernel("flash_fwd"), prob.grid, cfg.threads, args, shared_mem=cfg.smem_bytes, check="racecheck")
    if cfg.split:
        comb = [o_part, lse_part, o, lse, *gs.combine_scalars(prob)]
        P.launch(module.kernel("flash_combine"), -(-rows // COMBINE_WARPS), 32 * COMBINE_WARPS, comb, check="racecheck")
    return o, lse


def _run_ptx(q, kp, vp, seqlens, table, splits):
    prob = prepare_kvcache(q, kp, vp, seqlens, table, splits, opts=OPTS, arch="sm_90", sm_count=132)
    cfg = prob.config
    assert cfg.paged and cfg.split and cfg.pack_gqa, cfg.describe()
    return _decode_ptx(prob, q, kp, vp, seqlens, table)


PAGED_CASES = [
    (16, [300, 37, 1], 3),  # many pages per KV tile; a row ending inside its first page; a one-key row
    (64, [256, 129], 2),  # a tile inside one page, a row one key into its third page
]


@pytest.mark.parametrize("page_size, seqlens, splits", PAGED_CASES)
def test_paged_split_decode_kernel_equals_the_emulator(page_size, seqlens, splits):
    q, kp, vp, sl, table, splits = _case(page_size, seqlens, splits)
    o, lse = _run_ptx(q, kp, vp, sl, table, splits)
    o_ref, lse_ref = emulated.attention_with_kvcache(
        q, kp, vp, cache_seqlens=sl, block_table=table, num_splits=splits, arch="sm_90"
    )
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_ref).view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), np.asarray(lse_ref, np.float32).view(np.uint32))


def test_varlen_blocks_past_a_sequences_end_equal_the_emulator():
    """A causal varlen batch whose sequences end early in their last q block (whole warps of rows past the end, an
    empty sequence, a block of 3 rows after a full one), GQA: under racecheck every valid row's O and LSE equal the
    emulator's bit for bit."""
    rng = np.random.default_rng(8)
    lens = [3, 0, 70, 131]  # a block of 3 rows, one of 70, one of 3 after a full one
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total, d = int(cu[-1]), 64
    q = rng.standard_normal((total, 2, d)).astype(np.float16)
    k = rng.standard_normal((total, 1, d)).astype(np.float16)
    v = rng.standard_normal((total, 1, d)).astype(np.float16)
    opts = serving_options(True, None, None, None, None, None, None, None)
    top = max(lens)
    prob = prepare_varlen(q, k, v, cu, cu, top, top, opts=opts, arch="sm_90")
    cfg = prob.config
    past = [n % cfg.block_m for n in lens if 0 < n % cfg.block_m <= cfg.block_m - cfg.warp_m]
    assert cfg.warps > 1 and past, cfg.describe()  # blocks with whole warps of rows past the end
    module = P.compile(
        (kernel_dir() / "flash_fwd.cu").read_text(), arch="sm_90", defines=provenance.build_defines("flash_fwd", cfg)
    )
    o = np.zeros_like(q)
    lse = np.zeros((2, total), np.float32)
    head, totals, pages, lse_strides = gs.kernel_scalars(prob)
    null = np.uint64(0)
    args = [q, k, v, o, lse, null, *head, cu, cu, null, *totals, null, *pages, null, null, *lse_strides]
    P.launch(module.kernel("flash_fwd"), prob.grid, cfg.threads, args, shared_mem=cfg.smem_bytes, check="racecheck")
    o_ref, lse_ref = emulated.attention_varlen(q, k, v, cu, cu, top, top, causal=True, arch="sm_90")
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_ref).view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), np.asarray(lse_ref, np.float32).view(np.uint32))


@pytest.mark.parametrize("w, page_size, splits", [(3, 0, 1), (4, 16, 1), (3, 16, 2)])
def test_warp_split_decode_kernel_equals_the_emulator(w, page_size, splits):
    """A warp_split build (each warp of a block on its own part of the keys through its own ring, the parts merged in
    shared memory; with splits across blocks too, each warp's part written out and flash_combine merging the S x W
    parts), under racecheck, gives the emulator's bits, which are the (S x W)-split call's."""
    from flashsim import KernelConfig

    seqlens = [300, 37, 0, 1]  # parts empty for the short rows; an empty row
    if page_size:
        q, k, v, sl, table, _ = _case(page_size, seqlens, 1)
    else:
        rng = np.random.default_rng(6)
        q = rng.standard_normal((4, 1, 8, 64)).astype(np.float16)
        k, v = (rng.standard_normal((4, 320, 2, 64)).astype(np.float16) for _ in range(2))
        sl, table = np.asarray(seqlens, np.int32), None
    cfg = KernelConfig(
        head_dim=64, warps=w, warp_split=w, kv_tile=16, stages=2, layout="bnhd", seqlens=True, pack_gqa=True,
        paged=bool(page_size),
    )  # fmt: skip
    opts = serving_options(None, None, cfg, None, None, None, None, None)
    prob = prepare_kvcache(q, k, v, sl, table, splits, opts=opts, arch="sm_90", sm_count=132)
    assert prob.config == cfg.with_(split=splits > 1) and prob.num_splits == splits and prob.parts == w * splits
    cfg = prob.config
    o, lse = _decode_ptx(prob, q, k, v, sl, table)
    o_ref, lse_ref = emulated.attention_with_kvcache(
        q, k, v, cache_seqlens=sl, block_table=table, config=cfg, num_splits=splits
    )
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_ref).view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), np.asarray(lse_ref, np.float32).view(np.uint32))
    one = cfg.with_(warps=1, warp_split=1)  # the (S x W)-split call's bits
    o_one, _ = emulated.attention_with_kvcache(
        q, k, v, cache_seqlens=sl, block_table=table, config=one, num_splits=w * splits
    )
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_one).view(np.uint16))


WARP_SPLIT_VERIFY_CASES = [  # verify --serving's cases, with the warps of a block splitting the keys; overflows?
    ("kvcache B2 Nq4 N256 pages64 len[256, 100] splits=auto H8 d128 kv2 causal f16x2 adversarial s0", 4, True),
    (
        "kvcache B2 Nq4 N400  len[400, 150] splits=auto warp_split=2 H8 d128 kv2 causal win[40, 0] f32 normal s0",
        2,
        False,
    ),
]


@pytest.mark.parametrize("name, warps, overflows", WARP_SPLIT_VERIFY_CASES)
def test_warp_split_verify_cases_equal_the_emulator_with_the_overflow_flag(name, warps, overflows):
    """Two of verify --serving's cases as warp_split calls (f16x2 P@V on adversarial inputs in pages, where some
    warps' parts overflow: the flag is the smallest row any warp flags, as the split call's; a causal window that
    leaves most warps' parts empty) through flashsim.ptx under racecheck: O, LSE and the overflow flag equal the
    emulator's."""

    case = dataclasses.replace(next(c for c in serving_cases() if c.name() == name), warp_split=warps)
    arrays = case.arrays()
    prob, index = problem_of(case, arrays, "sm_90", 132)
    cfg = prob.config
    assert cfg.warp_split > 1 and not cfg.split, cfg.describe()
    o_ref, lse_ref, flag_ref = emulator_outputs(case, arrays, prob, index)
    flag = np.array([NO_OVERFLOW], np.uint64)
    o, lse = _decode_ptx(
        prob, arrays["q"], arrays["k_cache"], arrays["v_cache"], arrays["cache_seqlens"], arrays.get("block_table"),
        flag if cfg.pv_mma_f16 else None,
    )  # fmt: skip
    np.testing.assert_array_equal(o.view(np.uint16), o_ref.view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), np.asarray(lse_ref, np.float32).view(np.uint32))
    assert (None if int(flag[0]) == NO_OVERFLOW else int(flag[0])) == flag_ref
    assert (flag_ref is not None) == overflows


def test_the_paged_rule_form_equals_the_emulator():
    """The default decode on a paged cache (flashsim.tuning's paged form: WARP_SPLIT_PAGED_WARPS warps of
    WARP_SPLIT_PAGED_STAGES-stage rings), with rows long enough that each warp's ring wraps, under racecheck: the
    emulator's call of that form bit for bit, which is the one-warp call with that many splits. The batch's 8 row
    groups take the form on a GPU of 16 SMs (WARP_SPLIT_PAGED_MIN_FILL; 132 would want 60 row groups, too many
    blocks for flashsim.ptx in a test)."""
    from flashsim import tuning

    q, kp, vp, sl, table, _ = _case(16, [1000, 37, 0, 300], None)
    prob = prepare_kvcache(q, kp, vp, sl, table, None, opts=OPTS, arch="sm_90", sm_count=16)
    cfg = prob.config
    w = tuning.WARP_SPLIT_PAGED_WARPS
    assert (cfg.warp_split, cfg.stages, prob.num_splits, cfg.paged) == (w, tuning.WARP_SPLIT_PAGED_STAGES, 1, True)
    assert -(-1000 // cfg.kv_tile) > w * cfg.stages, cfg.describe()  # the longest row's warps wrap their rings
    o, lse = _decode_ptx(prob, q, kp, vp, sl, table)
    o_ref, lse_ref = emulated.attention_with_kvcache(
        q, kp, vp, cache_seqlens=sl, block_table=table, config=cfg, num_splits=1, arch="sm_90"
    )
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_ref).view(np.uint16))
    np.testing.assert_array_equal(lse.view(np.uint32), np.asarray(lse_ref, np.float32).view(np.uint32))
    one = cfg.with_(warps=1, warp_split=1)
    o_one, _ = emulated.attention_with_kvcache(
        q, kp, vp, cache_seqlens=sl, block_table=table, config=one, num_splits=w, arch="sm_90"
    )
    np.testing.assert_array_equal(o.view(np.uint16), np.asarray(o_one).view(np.uint16))
