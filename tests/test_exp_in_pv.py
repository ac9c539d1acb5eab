"""KernelConfig.exp_in_pv, read from the compiler's side (NVRTC builds, their PTX and SASS, no GPU): with it the
softmax's exponentials sit among the P V mma's in the machine code (the point of the change; without it not one
does); the builds the rule leaves out for spill are ones where ptxas does spill more with it; the paths it leaves
alone are those where the switch changes nothing (f16x2 and FP8 P V: the same PTX) or where ptxas already
interleaves without it (below d = 128, no rescale vote). That it pays is the H200's word (benchmarks/RESULTS.md, tenth
round; benchmarks/experiments/exp_in_pv/README.md); that it keeps every bit, the GPU tests' and the captures'.

ptxas's spill depends on its release: the facts below hold under the NVRTC that CI pins (.ci/constraints.txt) and
the newer one the exp_in_pv study used. Under the pin, sm_90 d = 128 with f32 P@V does not spill with the switch
(the study's ptxas spilled 8-88 B): that exclusion rests on its H200 timings (0.945 / 0.969x) alone."""

from __future__ import annotations

import pytest

from flashsim import provenance
from flashsim.config import KernelConfig
from flashsim.gpu import build


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


@pytest.mark.nvrtc
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


@pytest.mark.nvrtc
def test_the_builds_left_out_for_spill_would_spill_more():
    """sm_90 d=192 with f16 P@V and INT8 d=128 with f16 P@V: off in the rule, and ptxas spills more with the switch
    on, as benchmarks/experiments/exp_in_pv/regs_sweep.txt records (32 / 240 B there)."""

    def spill(config, on):
        b = _build(config, on)
        return b.spill_stores + b.spill_loads

    for kw in (dict(head_dim=192, pv_accum="f16"), dict(head_dim=128, pv_accum="f16", quant="int8")):
        config = KernelConfig.default("sm_90", **kw)
        assert not config.exp_in_pv and config.defines()["FS_EXP_IN_PV"] == 0
        assert spill(config, True) > spill(config, False), kw


@pytest.mark.nvrtc
@pytest.mark.parametrize(
    "kw",
    [
        dict(head_dim=128, pv_accum="f16x2"),
        dict(head_dim=256, pv_accum="f16x2"),
        dict(head_dim=256, pv_accum="f32", quant="int8-fp8"),
        dict(head_dim=128, pv_accum="f16x2", quant="int8-fp8"),
    ],
)
def test_the_switch_changes_nothing_where_p_is_packed_first(kw):
    """f16x2 and FP8 P V pack all of P before their mma's: the kernel ignores FS_EXP_IN_PV there (the same PTX
    either way), so the rule's "off" costs nothing."""
    config = KernelConfig.default("sm_90", **kw)
    assert not config.exp_in_pv
    source = (provenance._kernel_root() / "flash_fwd.cu").read_text()
    defines = provenance.build_defines("flash_fwd", config)
    on, off = (
        provenance.ptx_code(
            build.compile_ptx(source, name="flashsim.cu", defines={**defines, "FS_EXP_IN_PV": v}, arch="sm_90")
        )
        for v in (1, 0)
    )
    assert on == off


@pytest.mark.nvrtc
@pytest.mark.parametrize("kw", [dict(head_dim=64, pv_accum="f16"), dict(head_dim=96, pv_accum="f32")])
def test_below_d128_ptxas_interleaves_without_the_switch(sass_ops, kw):
    """No rescale vote below d=128: without the switch at least a quarter of the EX2 already lie between HMMA's
    (at d=128, without it, none do: test_the_exponentials_issue_among_the_p_v_mma), so the rule leaves them off."""
    config = KernelConfig.default("sm_90", **kw)
    assert not config.exp_in_pv
    near, total = ex2_among_mma(sass_ops.sass_sequence(_build(config, False).cubin))
    assert total > 0 and 4 * near >= total, (near, total)
