"""KernelConfig.exp_in_pv, read from ptxas's side (NVRTC builds and their SASS, no GPU): with it the softmax's
exponentials sit among the P V mma's in the machine code (the point of the change; without it not one does), and the
builds the rule leaves out for spill are ones where ptxas does spill more with it. That it pays is the H200's word
(benchmarks/RESULTS.md, tenth round); that it keeps every bit, the GPU tests' and the captures'."""

from __future__ import annotations

import pytest

from flashsim.config import KernelConfig

pytest.importorskip("cuda.bindings", reason="NVRTC (pip install 'flashsim[gpu]') builds the kernels")


def _build(config, on):
    from flashsim.gpu.launch import build_kernel

    return build_kernel(config, "sm_90", extra_defines={"FS_EXP_IN_PV": int(on)})


def ex2_among_mma(ops: list[str], reach: int = 4) -> tuple[int, int]:
    """(MUFU.EX2 instructions with an HMMA among the ``reach`` instructions before it and among those after it, all
    MUFU.EX2 instructions) of a kernel's SASS in program order."""
    ex2 = [i for i, op in enumerate(ops) if op.startswith("MUFU.EX2")]
    near = sum(
        any(op.startswith("HMMA") for op in ops[max(0, i - reach) : i])
        and any(op.startswith("HMMA") for op in ops[i + 1 : i + 1 + reach])
        for i in ex2
    )
    return near, len(ex2)


def test_ex2_among_mma_counts_what_it_says():
    ops = [
        "HMMA.16816.F32",
        "MUFU.EX2",
        "FFMA",
        "HMMA.16816.F32",
        "MUFU.EX2",
        "FADD",
        "FADD",
        "FADD",
        "FADD",
        "FADD",
        "MUFU.EX2",
        "HMMA.16816.F32",
    ]
    assert ex2_among_mma(ops) == (1, 3)  # the second has no HMMA in the 4 after it, the third none before
    assert ex2_among_mma(ops, reach=8) == (3, 3)


@pytest.mark.parametrize("d, pv", [(128, "f16"), (160, "f32"), (256, "f16")])
def test_the_exponentials_issue_among_the_p_v_mma(sass_ops, d, pv):
    """sm_90 defaults the rule turns it on for: at least a quarter of the kernel's EX2 (the exponentials and the
    rescale factors) lie between HMMA's; with the switch off, none (the vote's branch keeps them apart)."""
    config = KernelConfig.default("sm_90", head_dim=d, pv_accum=pv)
    assert config.exp_in_pv and config.defines()["FS_EXP_IN_PV"] == 1
    near_on, total = ex2_among_mma(sass_ops.sass_sequence(_build(config, True).cubin))
    near_off, total_off = ex2_among_mma(sass_ops.sass_sequence(_build(config, False).cubin))
    assert total == total_off > 0
    assert near_off == 0 and 4 * near_on >= total, (near_on, near_off, total)


def test_the_builds_left_out_for_spill_would_spill_more():
    """sm_90 d=128 with f32 P@V (plain and causal), d=192 f16, INT8 d=128 f16: off in the rule, and ptxas spills
    more with the switch on, as benchmarks/experiments/exp_in_pv/regs_sweep.txt records."""

    def spill(config, on):
        b = _build(config, on)
        return b.spill_stores + b.spill_loads

    for kw in (
        dict(head_dim=128, pv_accum="f32"),
        dict(head_dim=128, pv_accum="f32", causal=True),
        dict(head_dim=192, pv_accum="f16"),
        dict(head_dim=128, pv_accum="f16", quant="int8"),
    ):
        config = KernelConfig.default("sm_90", **kw)
        assert not config.exp_in_pv and config.defines()["FS_EXP_IN_PV"] == 0
        assert spill(config, True) > spill(config, False), kw


def test_the_rule_leaves_the_other_paths_alone():
    """f16x2 and FP8 P V pack all of P before their mma's; below d=128 no vote splits the loop."""
    for kw in (
        dict(head_dim=128, pv_accum="f16x2"),
        dict(head_dim=256, pv_accum="f16x2"),
        dict(head_dim=256, pv_accum="f32", quant="int8-fp8"),
        dict(head_dim=64, pv_accum="f16"),
        dict(head_dim=96, pv_accum="f32"),
    ):
        assert not KernelConfig.default("sm_90", **kw).exp_in_pv, kw
    for kw in (
        dict(head_dim=128, pv_accum="f16", causal=True),
        dict(head_dim=128, pv_accum="f16", local=True),
        dict(head_dim=160, pv_accum="f16", causal=True),
    ):
        assert KernelConfig.default("sm_90", **kw).exp_in_pv, kw
    assert KernelConfig.default("sm_120", head_dim=256, pv_accum="f16", quant="int8").exp_in_pv
