"""flashsim.budget (flashsim.resources): occupancy rules, the symbolic model, the compiled kernel's resources, the
budget command."""

from __future__ import annotations

import functools
import itertools

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim.arch import ARCHS, get_arch
from flashsim.config import KernelConfig
from flashsim.resources import budget, occupancy, occupancy_expressions
from flashsim.resources import registers as R
from flashsim.resources import symbols as S
from flashsim.resources.occupancy import INT, limits
from flashsim.tuning import MAX_DEFAULT_SPILL_BYTES

KB = 1024


# ---- occupancy rules (cuda_occupancy.h) --------------------------------------------------------------------
@pytest.mark.parametrize(
    "arch, threads, regs, smem, blocks, limiter",
    [
        # 8 warps x 221 regs: 7168 regs/warp, 2 warps per sub-partition -> 8 warps/SM -> 1 block
        ("sm_120", 256, 221, 96 * KB, 1, "registers = shared memory"),
        # 168 regs: 5376/warp -> 3 per sub-partition -> 12 warps -> 1 block of 8 warps
        ("sm_90", 256, 168, 0, 1, "registers"),
        # 128 regs, 4 warps: 4096/warp -> 4 per sub-partition -> 16 warps -> 4 blocks; smem 40 KB + 1 -> 5 on 228 KB
        ("sm_90", 128, 128, 40 * KB, 4, "registers"),
        # 32 regs, 1 warp: block limit binds (sm_120: 24)
        ("sm_120", 32, 32, 0, 24, "block limit"),
        ("sm_86", 32, 32, 0, 16, "block limit"),
        # warps: 1024 threads on a 48-warp SM -> 1 block
        ("sm_89", 1024, 32, 0, 1, "warps"),
        # 50176 B dynamic + 1 KB reserved = 51200 -> exactly 2 on 100 KB; one byte more -> 1
        ("sm_120", 64, 32, 50176, 2, "shared memory"),
        ("sm_120", 64, 32, 50177, 1, "shared memory"),
        # over the opt-in cap: cannot launch
        ("sm_120", 256, 32, 99 * KB + 1, 0, "shared memory"),
        # 256 registers per thread is more than the 255 limit
        ("sm_90", 32, 256, 0, 0, "registers"),
    ],
)
def test_occupancy_known_cases(arch, threads, regs, smem, blocks, limiter):
    o = occupancy(arch, threads, regs, smem)
    assert o.blocks_per_sm == blocks
    assert o.limiter == limiter
    assert o.warps_per_sm == blocks * -(-threads // 32)
    assert 0 <= o.occupancy <= 1


def test_occupancy_rounding_units():
    o = occupancy("sm_120", 256, 221, 98304)
    assert o.smem_per_block == 98304 + 1024  # reserved KB, 128-byte units
    assert occupancy("sm_120", 256, 1, 1).smem_per_block == 1024 + 128
    assert o.regs_per_block == 7168 * 8  # roundup(221 * 32, 256) per warp


@pytest.mark.parametrize(
    "bad", [dict(threads=0), dict(threads=1025), dict(registers=-1), dict(smem_dynamic=1.5), dict(registers=True)]
)
def test_occupancy_bad_input(bad):
    args = dict(threads=128, registers=32, smem_dynamic=0) | bad
    with pytest.raises(ValueError, match=next(iter(bad))):
        occupancy("sm_90", **args)
    with pytest.raises(ValueError, match="unknown arch"):
        occupancy("sm_42", 128, 32, 0)


@settings(max_examples=60, deadline=None)
@given(
    arch=st.sampled_from(sorted(ARCHS)),
    threads=st.integers(1, 1024),
    regs=st.integers(0, 260),
    smem=st.integers(0, 240 * KB),
    static=st.integers(0, 8 * KB),
)
def test_sympy_rules_equal_integer_rules(arch, threads, regs, smem, static):
    fns = _lambdified(arch)
    want = limits(get_arch(arch), threads, regs, smem, static, INT)
    got = {k: int(f(threads, regs, smem, static)) for k, f in fns.items() if k != "blocks_per_sm"}
    assert got == want
    assert int(fns["blocks_per_sm"](threads, regs, smem, static)) == min(want.values())


@functools.cache
def _lambdified(arch):
    """The sympy rules as exact functions (sympy integers, no floats)."""
    e = occupancy_expressions(arch)
    fns = {k: sp.lambdify(e["symbols"], v, "sympy") for k, v in e["limits"].items()}
    fns["blocks_per_sm"] = sp.lambdify(e["symbols"], e["blocks_per_sm"], "sympy")
    return fns


def test_sm120_limits_confirmed():
    a = get_arch("sm_120")
    assert (a.max_blocks_per_sm, a.max_warps_per_sm, a.smem_per_sm, a.smem_per_block_optin) == (
        24,
        48,
        100 * KB,
        99 * KB,
    )


# ---- the symbolic model and the budget object ----------------------------------------------------------------
def test_smem_comes_from_config_smem_buffers():
    exprs = S.smem_expressions()
    assert set(exprs) == {"Q tile", "K ring", "V ring", "ring barriers"}
    assert all(isinstance(v, sp.Expr) and v.free_symbols for v in exprs.values())
    for cfg in (
        KernelConfig(),
        KernelConfig(head_dim=64, warps=4, kv_tile=32, stages=3),
        KernelConfig(quant="int8", kv_tile=32, stages=3),
    ):
        assert sum(S.evaluate(exprs, cfg).values()) == cfg.smem_bytes


def test_ring_barriers_only_with_the_mbarrier_ring():
    """A full and an empty 8-byte mbarrier per slot when the ring runs on mbarriers (every build but the quantized
    ones, KernelConfig.ring_mbarrier); none with the block-barrier ring."""
    for cfg, want in (
        (KernelConfig(stages=3), 48),
        (KernelConfig(stages=2, dtype="bf16"), 32),
        (KernelConfig(quant="int8"), 0),
        (KernelConfig(quant="int8-fp8", kv_tile=32), 0),
    ):
        assert S.evaluate(S.smem_expressions(), cfg)["ring barriers"] == want
        assert cfg.defines()["FS_MBAR"] == int(want > 0)


def test_default_budget_on_sm120_fits_99_kb():
    b = flashsim.budget(registers="estimate")
    assert b.config == KernelConfig.default("sm_120")
    # the predicted sm_120 tiling at d = 128 (config.DEFAULT_TILES): 8 warps x 2 m16 tiles, kv_tile 32, 2 stages
    assert b.smem_bytes == 96 * KB + 32 and b.cap_bytes == 99 * KB and b.fits
    assert b.breakdown == {"Q tile": 64 * KB, "K ring": 16 * KB, "V ring": 16 * KB, "ring barriers": 32}
    assert b.free_bytes == 3 * KB - 32
    assert b.blocks_per_sm == 1 and b.occupancy == pytest.approx(8 / 48)
    assert "estimate" in b.registers_source
    text = str(b)
    for needle in ("Q tile", "64.0", "total", "cap", "free", "blocks/SM", "occupancy", "16.7%", "16*d*e_qk*m_t*w"):
        assert needle in text
    assert set(b.expressions) >= {"smem", "smem_total", "fragment_registers", "occupancy"}


def test_budget_does_not_fit_and_reports_it():
    b = budget(KernelConfig(stages=3), "sm_120", registers=200)
    assert not b.fits and b.blocks_per_sm == 0 and b.free_bytes < 0
    assert "NO" in b.table()
    assert budget(KernelConfig(stages=3), "sm_90", registers=200).fits


def test_budget_bad_arguments():
    with pytest.raises(ValueError, match="config"):
        budget({"head_dim": 128})
    with pytest.raises(ValueError, match="registers"):
        budget(None, "sm_120", registers="guess")
    with pytest.raises(ValueError, match="registers"):
        budget(None, "sm_120", registers=300)
    with pytest.raises(ValueError, match="unknown arch"):
        budget(None, "sm_70")


def test_register_estimate_is_labelled_and_bounded():
    for cfg in (KernelConfig(), KernelConfig(pv_accum="f16"), KernelConfig(head_dim=64, kv_tile=256)):
        rc = R.registers(cfg, "sm_120", "estimate")
        floor = sum(S.evaluate(S.fragment_register_expressions(), cfg).values())
        assert floor < rc.registers <= 255 and "estimate" in rc.source and not rc.compiled


def test_what_ifs():
    from flashsim.resources.whatif import WHAT_IFS, what_if

    w3 = what_if("3-stage", registers="estimate")
    assert w3.budgets[0].config.stages == 3 and not w3.budgets[0].fits and "128.0 KB" in w3.answer
    wsp = what_if("f16-sp", registers="estimate")
    assert wsp.budgets[0].breakdown["S/P buffer (f16)"] == 128 * 64 * 2 and not wsp.budgets[0].fits
    w2 = what_if("two-blocks", registers="estimate")
    assert "<= 128 registers" in w2.answer and any(b.blocks_per_sm >= 2 for b in w2.budgets[1:])
    assert what_if("3-stage", KernelConfig(kv_tile=32), registers="estimate").budgets[0].fits
    with pytest.raises(ValueError, match="what-if"):
        what_if("4-stage")
    assert WHAT_IFS == ("3-stage", "f16-sp", "two-blocks")


def test_budget_command(capsys, tmp_path):
    from flashsim.cli import main

    assert main(["budget", "--arch", "sm_120", "--registers", "estimate"]) == 0
    out = capsys.readouterr().out
    assert "fits: yes" in out and "96.0" in out and "99.0" in out
    assert main(["budget", "--stages", "3", "--registers", "estimate"]) == 1  # does not fit sm_120
    assert (
        main(
            [
                "budget",
                "--head-dim",
                "64",
                "--warps",
                "4",
                "--kv-tile",
                "32",
                "--stages",
                "3",
                "--arch",
                "sm_90",
                "--registers",
                "estimate",
                "--what-if",
                "all",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.count("what-if") == 3 and "head_dim=64, warps=4, m_tiles=2, kv_tile=32, stages=3" in out
    assert main(["budget", "--kv-tile", "40", "--registers", "estimate"]) == 2  # bad configuration
    assert "kv_tile" in capsys.readouterr().err


@pytest.mark.needs("matplotlib")
def test_budget_plot(tmp_path):
    from flashsim.cli import main

    path = tmp_path / "b.png"
    assert main(["budget", "--registers", "estimate", "--what-if", "3-stage", "--plot", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- the compiled kernel (NVRTC, no GPU): symbolic smem == the kernel's, registers, spills ----------------------
def _configs():
    """Every supported head_dim x pv_accum x causal x stages with two (warps, m_tiles, kv_tile) shapes alternating,
    plus every per-arch default (the sm_90 defaults are the 4-warp x 2-m16-tile shapes)."""
    shapes = ((8, 1, 64), (4, 1, 32))
    grid = [
        KernelConfig(
            head_dim=d,
            pv_accum=pv,
            causal=c,
            stages=s,
            warps=shapes[i % 2][0],
            m_tiles=shapes[i % 2][1],
            kv_tile=shapes[i % 2][2],
        )
        for i, (d, pv, c, s) in enumerate(itertools.product((64, 128), ("f32", "f16"), (False, True), (2, 3)))
    ]
    defaults = [
        KernelConfig.default(arch, head_dim=d, pv_accum=pv, causal=c)
        for arch in ("sm_90", "sm_120")
        for d, pv, c in itertools.product((64, 128), ("f32", "f16"), (False, True))
    ]
    return list(dict.fromkeys(grid + defaults))


def _defaults():
    return {
        KernelConfig.default(arch, head_dim=d, pv_accum=pv, causal=c)
        for arch in ("sm_90", "sm_120")
        for d, pv, c in itertools.product((64, 128), ("f32", "f16"), (False, True))
    }


@functools.cache
def _build(config, arch):
    return R.compile_kernel(config, arch)


def _quant_defaults():
    """The quantized defaults at d 64 / 128 on both arch classes, every P@V accumulation each quant runs."""
    from flashsim.config import pv_accums

    return [
        (KernelConfig.default(arch, head_dim=d, pv_accum=pv, quant=q), arch)
        for arch in ("sm_90", "sm_120")
        for d in (64, 128)
        for q in ("int8", "int8-fp8")
        for pv in pv_accums("f16", q)
    ]


@pytest.mark.parametrize(
    "config, arch",
    _quant_defaults(),
    ids=lambda x: x if isinstance(x, str) else f"d{x.head_dim}-{x.quant}-{x.pv_accum}",
)
@pytest.mark.nvrtc
def test_quantized_defaults_do_not_spill_past_the_limit(config, arch):
    """A kernel edit can make a tuned quantized tiling spill (it happened: the generic load_tile once cost the
    int8-fp8 d = 64 default 140 spill bytes); the defaults stay within MAX_DEFAULT_SPILL_BYTES, as the f16 ones."""
    build = _build(config, arch)
    assert build.spill_stores + build.spill_loads <= MAX_DEFAULT_SPILL_BYTES, str(build)


@pytest.mark.nvrtc
def test_stage_o_only_where_the_staging_does_not_add_spill():
    """KernelConfig.stage_o (O staged through the Q tile for 16-byte stores) is chosen by head dim and P@V
    accumulation; at the defaults it stages that had spill or most registers to lose (d=128 with an f32 O, d=192 f16,
    d=224 f16x2), ptxas must not spill more with it than without it on either arch; the build it excludes for spill
    (sm_90 d=256 f16x2: 8 -> 584 B) really is one the staging hurts; f16 P@V at d <= 128 and INT8 never stage."""
    from flashsim.gpu.launch import build_kernel

    def spill(config, arch, on):
        b = build_kernel(config, arch, extra_defines={"FS_OSTAGE": on})
        return b.spill_stores + b.spill_loads

    for arch in ("sm_90", "sm_120"):
        for d, pv in ((128, "f32"), (128, "f16x2"), (192, "f16"), (224, "f16x2")):
            c = KernelConfig.default(arch, head_dim=d, pv_accum=pv)
            assert c.stage_o and c.defines()["FS_OSTAGE"] == 1
            assert spill(c, arch, 1) <= spill(c, arch, 0), (arch, c)
    excluded = KernelConfig.default("sm_90", head_dim=256, pv_accum="f16x2")
    assert not excluded.stage_o and spill(excluded, "sm_90", 1) > spill(excluded, "sm_90", 0)
    assert not any(
        KernelConfig.default("sm_90", head_dim=d, pv_accum="f16", quant=q).stage_o
        for d in (64, 128)
        for q in ("none", "int8")
    )
    assert not KernelConfig.default("sm_90", head_dim=192, pv_accum="f16x2").stage_o


@pytest.mark.parametrize("arch", ["sm_120", "sm_90"])
@pytest.mark.parametrize(
    "config",
    _configs(),
    ids=lambda c: (
        f"d{c.head_dim}-{c.pv_accum}-{'causal' if c.causal else 'full'}"
        f"-s{c.stages}-w{c.warps}-m{c.m_tiles}-bc{c.kv_tile}"
    ),
)
@pytest.mark.nvrtc
def test_kernel_builds_match_the_budget(config, arch):
    build = _build(config, arch)  # compiles iff the kernel's smem layout == config.smem_buffers (static_assert)
    if config in _defaults():  # a measured exception (config.DEFAULT_TILES) may spill a few bytes, no more
        assert build.spill_stores + build.spill_loads <= MAX_DEFAULT_SPILL_BYTES, str(build)
    else:
        assert build.spill_stores == 0 and build.spill_loads == 0, str(build)
    assert 0 < build.registers <= 255
    assert build.static_smem_bytes == 0  # everything is dynamic: the budget's smem is the whole story
    b = budget(config, arch, registers=build.registers)
    assert b.smem_bytes == config.smem_bytes
    assert b.fits == (config.smem_bytes <= get_arch(arch).smem_per_block_optin)
    if arch == "sm_120" and b.fits:
        assert b.smem_bytes <= 99 * KB
    floor = sum(S.evaluate(S.fragment_register_expressions(), config).values())
    assert build.registers >= floor  # ptxas cannot hold the live fragments in fewer registers


@pytest.mark.nvrtc
def test_wrong_expected_smem_fails_to_compile():
    from flashsim.errors import CompileError

    cfg = KernelConfig()
    with pytest.raises(CompileError, match="smem_buffers|static assertion|static_assert"):
        R.compile_kernel(cfg, "sm_120", cfg.smem_bytes + 128)


@pytest.mark.nvrtc
def test_budget_auto_uses_the_compiled_count():
    b = budget(KernelConfig(), "sm_120")
    assert b.reg.compiled and b.registers == _build(KernelConfig(), "sm_120").registers
    assert b.registers_source == "ptxas (NVRTC, sm_120)"


# ---- on the H200: the model equals the driver's occupancy -------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize(
    "config",
    [
        KernelConfig(),
        KernelConfig(stages=3),
        KernelConfig(pv_accum="f16"),
        KernelConfig(warps=4, kv_tile=32),
        KernelConfig(head_dim=64, warps=4, kv_tile=64),
        KernelConfig(head_dim=64, warps=2, kv_tile=32, stages=3),
    ],
    ids=lambda c: f"d{c.head_dim}-w{c.warps}-bc{c.kv_tile}-s{c.stages}-{c.pv_accum}",
)
def test_occupancy_equals_the_driver(gpu, config):
    from flashsim.gpu import runtime as rt

    arch = rt.current_arch()
    build = R.compile_kernel(config, arch)
    kern = rt.load(build, R.KERNEL_ENTRY)
    rt._set_dynamic_smem(kern, config.smem_bytes)  # the opt-in attribute, as a launch sets it
    driver_blocks = kern.kernel.occupancy.max_active_blocks_per_multiprocessor(config.threads, config.smem_bytes)
    num_regs = kern.kernel.attributes.num_regs  # a property in cuda.core 1.2.2, a method before
    assert (num_regs() if callable(num_regs) else num_regs) == build.registers
    b = budget(config, arch, registers=build.registers)
    assert b.blocks_per_sm == driver_blocks, f"{b.table()}\ndriver: {driver_blocks}"


@pytest.mark.nvrtc
def test_budget_command_serving_warp_split(capsys):
    """`flashsim budget --serving --warp-split W`: the decode whose W warps split the keys, its rings in the budget,
    no flash_combine, --stages deep (the paged form's 3); a W whose rings fit no kv tile is a one-line error (exit
    2)."""
    from flashsim.cli import main

    assert main(["budget", "--serving", "--arch", "sm_90", "--warp-split", "6"]) == 0
    out = capsys.readouterr().out
    assert "warp_split=6" in out and "kv_tile=32" in out and "flash_combine" not in out and "W_s" in out
    assert main(["budget", "--serving", "--arch", "sm_120", "--warp-split", "6"]) == 2
    assert "no kv tile fits 6 K / V rings" in capsys.readouterr().err
    paged = ["budget", "--serving", "--arch", "sm_90", "--paged", "--warp-split", "8", "--stages", "3"]
    assert main(paged) == 0  # the paged decode's default form (flashsim.tuning.WARP_SPLIT_PAGED_*): 3-stage rings
    out = capsys.readouterr().out
    assert "warp_split=8" in out and "stages=3" in out and "kv_tile=16" in out and "paged=True" in out
