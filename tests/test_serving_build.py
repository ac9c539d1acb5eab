"""The serving kernels built with NVRTC for sm_90 and sm_120 (no GPU): every default decode configuration builds
without a spill (flash_fwd and flash_combine, and the builds with the index check fused), the split build holds both
entries, and the budget reports the decode and combine kernels' registers, shared memory and occupancy from ptxas.
"""

from __future__ import annotations

import pytest

from flashsim import KernelConfig
from flashsim.constants import COMBINE_WARPS, MAX_SPLITS
from flashsim.resources.serving import decode_config, serving_budget

pytestmark = pytest.mark.nvrtc

# (head dim, packed rows per K / V head, paged, causal): decode (Nq = 1, group 4), speculative (Nq = 16, group 4:
# 64 rows, four warps), MQA-like 32 rows, paged, every head dim class
DECODE = [
    (128, 4, False, False),
    (128, 4, True, False),
    (64, 4, False, False),
    (256, 4, True, False),
    (128, 64, False, True),
    (128, 32, True, True),
]


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
@pytest.mark.parametrize("d, rows, paged, causal", DECODE, ids=lambda x: str(x))
def test_decode_kernels_build_without_spills(arch, d, rows, paged, causal):
    from flashsim.gpu.launch import build_kernel

    cfg = decode_config(arch, d, rows, paged=paged, causal=causal)
    build = build_kernel(cfg, arch)
    for name in ("flash_fwd", "flash_combine"):
        e = build.entry(name)
        assert e.spill_stores == 0 and e.spill_loads == 0, f"{arch} {cfg.describe()}: {e}"
    assert cfg.warps == (1 if rows <= 16 else 2 if rows <= 32 else 4)


def test_a_build_without_splits_has_no_combine_entry():
    from flashsim.gpu.launch import build_kernel

    cfg = KernelConfig(head_dim=64, warps=1, kv_tile=64, stages=2, layout="bnhd", seqlens=True, pack_gqa=True)
    build = build_kernel(cfg, "sm_90")
    assert set(build.entry_points) == {"flash_fwd"}


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_the_budget_of_the_decode_and_combine_kernels(arch):
    """flash_fwd's budget (ptxas registers, shared memory from the same formula as the kernel, blocks per SM) and
    flash_combine's (128 threads; a batch of 16 parts' outputs held in registers per lane, so its loads are in flight
    together), for the decode configuration of the speed table (d = 128)."""
    cfg = decode_config(arch, 128, 4)
    main, combine = serving_budget(cfg, arch)
    assert main.registers_source.startswith("ptxas") and main.reg.spill_stores == 0
    assert main.smem_bytes == cfg.smem_bytes and main.fits
    assert main.blocks_per_sm == min(main.occ.limits.values()) >= 2
    assert combine.registers <= 128 and combine.spill_bytes == 0 and combine.threads == 128
    assert combine.blocks_per_sm >= 4  # 16 warps per SM, each with a batch of loads in flight
    assert "flash_combine" in combine.table() and "blocks/SM" in main.table()
    # its static shared memory, as ptxas counts it: each warp's parts' LSEs and weights (f32, MAX_SPLITS of each)
    assert combine.smem_bytes == COMBINE_WARPS * MAX_SPLITS * 2 * 4
    assert f"{combine.smem_bytes} B shared memory" in combine.table()


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
@pytest.mark.parametrize("d, paged", [(64, False), (128, True), (256, True)])
def test_the_fused_check_decode_kernels_build_without_spills_and_keep_their_occupancy(arch, d, paged):
    """KernelConfig.fused (the index check inside flash_fwd): no spill, the same shared memory and blocks per SM as
    the separate launches' decode kernel, and the same flash_combine after it."""
    cfg = decode_config(arch, d, 4, paged=paged)
    plain, plain_combine = serving_budget(cfg, arch)
    main, combine = serving_budget(cfg.with_(fused=True), arch)
    assert main.reg.spill_stores == 0 and main.reg.spill_loads == 0
    assert main.smem_bytes == plain.smem_bytes and main.blocks_per_sm == plain.blocks_per_sm
    assert combine == plain_combine
    assert "index check fused" in main.table()


@pytest.mark.parametrize(
    "arch, d, w, paged",
    [("sm_90", 128, 6, False), ("sm_90", 64, 6, False), ("sm_90", 256, 6, False), ("sm_120", 128, 4, False),
     ("sm_120", 64, 6, False), ("sm_90", 128, 8, True), ("sm_90", 64, 8, True)],
)  # fmt: skip
def test_the_warp_split_decode_forms_build_without_spills_and_budget_their_rings(arch, d, w, paged):
    """The decode whose W warps split the keys (warp_split_form, the default decode's form where flashsim.tuning's
    rule applies; on pages, WARP_SPLIT_PAGED_WARPS warps of WARP_SPLIT_PAGED_STAGES-stage rings): no spill on either
    arch, no flash_combine entry, and the budget's symbolic shared memory (a ring and its barriers per warp, the 16
    shared rows once) equals the kernel's launch size."""
    from flashsim import tuning
    from flashsim.serving.problem import paged_warp_split_form, warp_split_form

    one_warp = decode_config(arch, d, 4, paged=paged).with_(split=False)
    if paged:
        assert w == tuning.WARP_SPLIT_PAGED_WARPS
        wide = paged_warp_split_form(one_warp, arch)
        assert wide.stages == tuning.WARP_SPLIT_PAGED_STAGES
    else:
        wide = warp_split_form(one_warp, arch, w)
    main, combine = serving_budget(wide, arch)
    assert combine is None and main.fits
    assert main.reg.spill_stores == 0 and main.reg.spill_loads == 0, wide.describe()
    assert main.smem_bytes == wide.smem_bytes
    one = wide.with_(warps=1, warp_split=1)  # one ring, the same rows: W rings cost W times its ring
    ring = one.smem_bytes - d * 16 * one.qk_bytes
    assert wide.smem_bytes == d * 16 * one.qk_bytes + w * ring
    assert "W_s" in main.table()
