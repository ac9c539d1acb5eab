"""The NVFP4 attention (quant "nvfp4": Q K^T on sm_120a's block-scaled mma.sync.kind::mxf4nvf4, P V in FP8): its
configuration and refusals, its budget on sm_120, its quantization against the format's own decoding, the emulator
against float64 within a proven bound, and the kernel's own PTX (flashsim.ptx, arch="sm_120") bit for bit against
the numpy engine. No GPU of that arch is here: nothing is measured on silicon."""

from __future__ import annotations

import numpy as np
import pytest

import flashsim
from flashsim import KernelConfig, calibration, emulator
from flashsim.config import NVFP4_HEAD_DIMS
from flashsim.constants import E4M3_MAX, FP4_BLOCK, NVFP4_ROW_DIV
from flashsim.emulator import quantize as Q
from flashsim.numerics import formats
from flashsim.numerics.tensorcore import mma_chain_block_scale
from flashsim.numerics.tensorcore.blockscale import decode_codes

ARCH = "sm_120"


def config(d=64, **kw):
    """A small NVFP4 tiling (4 warps of one m16 tile, kv_tile 32, unless ``kw`` says otherwise): quick in
    flashsim.ptx."""
    return KernelConfig(**(dict(head_dim=d, warps=4, m_tiles=1, kv_tile=32, stages=2, quant="nvfp4") | kw))


def inputs(seed, b, hq, hk, nq, nk, d, scale=1.0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((b, hq, nq, d)) * scale).astype(np.float16)
    k = rng.standard_normal((b, hk, nk, d)).astype(np.float16)
    v = rng.standard_normal((b, hk, nk, d)).astype(np.float16)
    return q, k, v


def decode(codes, fmt):
    """Codes of ``fmt`` -> their exact float64 values (the tensor-core model's own decoding)."""
    return decode_codes(np, np.asarray(codes, np.uint8), formats.code_format(fmt))[0]


# ---- configuration and refusals ------------------------------------------------------------------------------


def test_sm90_is_refused_clearly_everywhere_before_anything_compiles():
    from flashsim.gpu import launch

    rule = "no FP4 mma.sync before sm_120a"
    with pytest.raises(ValueError, match=rule):
        KernelConfig.default("sm_90", head_dim=128, quant="nvfp4")
    cfg = config()
    for arch in ("sm_90", "sm_100", "sm_80"):
        with pytest.raises(ValueError, match=rule):
            cfg.check_arch(arch)
    with pytest.raises(ValueError, match=rule):  # the GPU runner's builds: before NVRTC is even imported
        launch.build_kernel(cfg, "sm_90")
    with pytest.raises(ValueError, match=rule):
        launch.build_quantize(cfg, "sm_90")
    q, k, v = inputs(0, 1, 1, 1, 16, 16, 64)
    with pytest.raises(ValueError, match=rule):  # the emulator's problem (and so flashsim.gpu.attention's)
        emulator.attention(q, k, v, arch="sm_90", quant="nvfp4")
    with pytest.raises(ValueError, match=rule):
        emulator.attention(q, k, v, arch="sm_90", config=cfg)
    assert cfg.build_arch(ARCH) == "sm_120a"
    assert KernelConfig().build_arch("sm_90") == "sm_90"


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(head_dim=96), "head_dim in"),
        (dict(head_dim=256), "head_dim in"),
        (dict(causal=True), "causal"),
        (dict(local=True), "local"),
        (dict(layout="bnhd"), "layout"),
        (dict(dtype="bf16", pv_accum="f32"), "f16 inputs"),
        (dict(pv_accum="f16"), "pv_accum in"),
        (dict(kv_tile=48), "multiple of 32"),
    ],
)
def test_the_variant_refuses_what_it_was_not_built_for(kw, match):
    args = dict(head_dim=64, warps=4, kv_tile=32, quant="nvfp4") | kw
    with pytest.raises(ValueError, match=match):
        KernelConfig(**args)


def test_the_config_describes_the_fp4_operands():
    cfg = KernelConfig.default(ARCH, head_dim=128, quant="nvfp4")
    assert cfg.nvfp4 and cfg.quantized and cfg.fp8_pv and not cfg.int8
    assert cfg.qk_ksteps == 2  # two k64 steps over d = 128
    d = cfg.defines()
    assert (d["FS_QUANT_NVFP4"], d["FS_QUANT_INT8"], d["FS_QUANT_FP8"], d["FS_FP4_BLOCK"]) == (1, 0, 1, FP4_BLOCK)
    assert KernelConfig().defines()["FS_QUANT_NVFP4"] == 0


# ---- budget on sm_120 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", NVFP4_HEAD_DIMS)
def test_shared_memory_is_half_a_byte_per_q_k_element_plus_k_block_scales(d):
    from flashsim.resources import symbols as S

    cfg = KernelConfig.default(ARCH, head_dim=d, quant="nvfp4")
    bm, bc, st = cfg.block_m, cfg.kv_tile, cfg.stages
    want = bm * d // 2 + st * bc * (d // 2 + d // FP4_BLOCK) + st * bc * d  # Q, K (+ scales), V^T in e4m3
    assert cfg.smem_bytes == want
    assert sum(S.evaluate(S.smem_expressions(), cfg).values()) == want
    assert cfg.fits(ARCH) and want <= 99 * 1024


@pytest.mark.nvrtc
@pytest.mark.parametrize("d", NVFP4_HEAD_DIMS)
def test_the_default_builds_for_sm120a_fit_the_budget(d):
    """ptxas (sm_120a) on the defaults: the kernel's shared-memory layout is config.smem_buffers (its static_assert),
    no spill, registers for at least one block, within the 99 KB cap; the quantization pass builds too."""
    from flashsim.gpu import launch
    from flashsim.resources import budget

    cfg = KernelConfig.default(ARCH, head_dim=d, quant="nvfp4")
    build = launch.build_kernel(cfg, ARCH)
    assert build.arch == "sm_120a"
    assert build.spill_stores == 0 and build.spill_loads == 0, str(build)
    assert build.static_smem_bytes == 0 and 0 < build.registers <= 255
    b = budget(cfg, ARCH, registers=build.registers)
    assert b.fits and b.smem_bytes == cfg.smem_bytes <= 99 * 1024 and b.blocks_per_sm >= 1
    quant = launch.build_quantize(cfg, ARCH)
    assert {"quantize_k_fp4", "quantize_q_fp4"} <= set(quant.entry_points)


# ---- the quantization --------------------------------------------------------------------------------------


def test_a_block_is_its_codes_times_its_scales_within_half_an_e2m1_step():
    """quantize_fp4_blocks against the formats' own decoding: each value is code * sf * scale with |x - that| at
    most half the e2m1 spacing at x's magnitude (0.25 below 2, 0.5 below 4, 1 up to 6) times the block's scale, plus
    the block scale's own e4m3 rounding (the codes saturate at 6); the largest block's scale code is 448's."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 37, 64)) * np.exp(rng.standard_normal((3, 37, 1)) * 2)).astype(np.float32)
    codes, sf, scale = Q.quantize_fp4_blocks(x)
    assert codes.shape == x.shape and sf.shape == (3, 48, 4) and scale.shape == (3, 3)
    assert codes.max() < 16 and sf.max() <= 0x7E  # ue4m3: bit 7 clear, never the NaN code
    assert not sf[:, 37:].any()  # rows past N: zero scales
    sfv = decode(sf, "ue4m3")[:, :37]
    unit = np.repeat(sfv, FP4_BLOCK, axis=-1) * np.repeat(scale, 16, axis=-1)[:, :37, None]
    deq = decode(codes, "e2m1") * unit
    y = np.abs(x) / np.where(unit > 0, unit, 1)
    half_step = np.where(y < 2, 0.25, np.where(y < 4, 0.5, 1.0))
    err = np.abs(x - deq)
    assert (err <= half_step * unit * (1 + 2**-4) + np.maximum(np.abs(x) - 6 * unit, 0) + 1e-30).all()
    for b in range(3):  # the row block's amax maps to ue4m3's top (448 up to its rounding)
        blk = np.abs(x[b, :16]).reshape(16, 4, 16).max(-1)
        i = np.unravel_index(blk.argmax(), blk.shape)
        assert sf[b, i[0], i[1]] == 0x7E
        assert scale[b, 0] == np.float32(np.abs(x[b, :16]).max()) / np.float32(NVFP4_ROW_DIV)
    assert E4M3_MAX == decode(np.uint8(0x7E), "ue4m3")


def test_a_zero_block_and_a_zero_row_block_quantize_to_zeros():
    x = np.zeros((20, 64), np.float32)
    x[17, 3] = 2.0
    codes, sf, scale = Q.quantize_fp4_blocks(x)
    assert scale[0] == 0 and not codes[:16].any() and not sf[:16].any()
    assert scale[1] == np.float32(2.0) / np.float32(NVFP4_ROW_DIV) and codes[17, 3] == 7  # +6
    assert sf[17, 0] == 0x7E and not sf[17, 1:].any()


def test_the_chain_is_the_matrix_api_tile_by_tile_and_checks_its_shapes():
    rng = np.random.default_rng(2)
    M, K, N = 32, 128, 16
    a, b = (rng.integers(0, 16, s).astype(np.uint8) for s in ((M, K), (K, N)))
    sa = rng.integers(0x30, 0x48, (M, K // 16)).astype(np.uint8)
    sb = rng.integers(0x30, 0x48, (K // 16, N)).astype(np.uint8)
    c = rng.standard_normal((M, N)).astype(np.float32)
    got = mma_chain_block_scale(a, b, c, sa, sb, **Q.NVFP4_FORM)
    want = c.copy()
    for i in range(0, M, 16):
        for j in range(0, N, 8):
            for s in range(0, K, 64):
                want[i : i + 16, j : j + 8] = flashsim.mma_block_scale(
                    a[i : i + 16, s : s + 64],
                    b[s : s + 64, j : j + 8],
                    want[i : i + 16, j : j + 8],
                    sa[i : i + 16, s // 16 : s // 16 + 4],
                    sb[s // 16 : s // 16 + 4, j : j + 8],
                    **Q.NVFP4_FORM,
                )
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="scale_a"):
        mma_chain_block_scale(a, b, c, sa[:, :4], sb, **Q.NVFP4_FORM)
    with pytest.raises(ValueError, match="K % 64"):
        mma_chain_block_scale(a[:, :96], b[:96], c, sa[:, :6], sb[:6], **Q.NVFP4_FORM)


# ---- the emulator against float64 ----------------------------------------------------------------------------


def quantized_reference(q, k, v, cfg):
    """float64 attention of the kernel's own operands: Q and K (smoothed) from their codes and scales, V from its
    e4m3 codes times v_deq's factor, exact softmax; what is left between it and the kernel is P's e4m3 rounding and
    f32 arithmetic."""
    quant = Q.quantize(q, k, 1, v, cfg.fp8_v_range, fp4=True)
    d = q.shape[-1]

    def values(codes, sf, scale, n):
        unit = np.repeat(decode(sf, "ue4m3")[..., :n, :], FP4_BLOCK, -1) * np.repeat(scale, 16, -1)[..., :n, None]
        return decode(codes, "e2m1") * unit

    qd = values(quant.q8, quant.q_sf, quant.q_scale, q.shape[-2])
    kd = values(quant.k8, quant.k_sf, quant.k_scale, k.shape[-2])
    vd = decode(quant.v8.view(np.uint8), "e4m3")[..., : k.shape[-2], :] * (quant.v_deq[..., None, :] * E4M3_MAX)
    s = qd @ np.swapaxes(kd, -1, -2) / np.sqrt(d)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p @ vd) / p.sum(-1, keepdims=True), np.abs(vd).max()


@pytest.mark.parametrize("d, nq, nk", [(64, 100, 256), (128, 64, 130)])
def test_the_emulator_is_within_the_p_rounding_bound_of_its_own_operands(d, nq, nk):
    """Bound: P * 448 rounded to e4m3 is within 2^-4 relative (normal) or 2^-10 absolute (subnormal) of itself, and l
    (a sum of unrounded p, the row max's p = 1) is >= 1, so |O - O_exact| <= max|V| (2^-4 + Nk 2^-10 / 448), plus
    1e-3 max|V| for the f32 arithmetic, the SFU's ex2 and O's f16 rounding."""
    cfg = config(d)
    q, k, v = inputs(3, 1, 1, 1, nq, nk, d)
    o = emulator.attention(q, k, v, arch=ARCH, config=cfg)[0].astype(np.float64)
    ref, vmax = quantized_reference(q, k, v, cfg)
    bound = vmax * (2**-4 + nk * 2**-10 / E4M3_MAX + 1e-3)
    err = np.abs(o - ref).max()
    assert err <= bound, (err, bound)
    assert err <= bound / 4  # typical P roundings cancel: far inside the worst case


def test_the_emulator_is_close_to_float64_attention_of_the_f16_inputs():
    """Against plain float64 attention (FP4's own error included), normal inputs: cosine >= 0.985 and relative L1
    <= 0.2 (0.990 and 0.135 measured: benchmarks/experiments/nvfp4_attention/); the LSE is the unsmoothed one."""
    q, k, v = inputs(4, 1, 2, 2, 256, 256, 128)
    o, lse = emulator.attention(q, k, v, arch=ARCH, quant="nvfp4")[:2]
    q64, k64, v64 = (x.astype(np.float64) for x in (q, k, v))
    s = q64 @ np.swapaxes(k64, -1, -2) / np.sqrt(128)
    m = s.max(-1, keepdims=True)
    p = np.exp(s - m)
    ref = p @ v64 / p.sum(-1, keepdims=True)
    o = o.astype(np.float64)
    cos = (o * ref).sum() / np.linalg.norm(o) / np.linalg.norm(ref)
    rel_l1 = np.abs(o - ref).sum() / np.abs(ref).sum()
    assert cos >= 0.985 and rel_l1 <= 0.2, (cos, rel_l1)
    ref_lse = (m[..., 0] + np.log(p.sum(-1))).astype(np.float64)
    assert np.abs(lse - ref_lse).max() < 0.5


# ---- the kernel's own PTX --------------------------------------------------------------------------------------


@pytest.fixture
def sm120_sfu(tmp_path, monkeypatch):
    """No sm_120 GPU calibrated the SFU here: the sm_90 tables are installed as sm_120's in a private cache, so
    both engines read one ex2 model (the numpy engine would borrow them anyway; flashsim.ptx refuses to borrow).
    What the PTX test checks is the kernel's own arithmetic, the same either way."""
    monkeypatch.setenv("FLASHSIM_CACHE", str(tmp_path / "cache"))
    calibration.install(calibration.shipped_path("sfu", "sm_90"), "sfu", ARCH)


@pytest.mark.nvrtc
@pytest.mark.sass
@pytest.mark.parametrize(
    "d, shape, kw",
    [
        (64, (1, 2, 1, 40, 70), {}),  # GQA (two query heads on one K / V head), ragged Nq and Nk
        (128, (1, 1, 1, 128, 128), {}),
        (64, (2, 1, 1, 33, 96), dict(pv_accum="f16x2")),  # two batches; P V by the f16 mma per 32 keys, then f32
        (128, (1, 1, 1, 100, 90), dict(warps=2, m_tiles=2, kv_tile=64)),  # Q re-read from shared memory per k64 step
    ],
)
def test_the_kernels_ptx_is_bit_equal_to_the_numpy_engine(sm120_sfu, d, shape, kw):
    b, hq, hk, nq, nk = shape
    cfg = config(d, **kw)
    q, k, v = inputs(5 + d, b, hq, hk, nq, nk, d)
    want = emulator.attention(q, k, v, arch=ARCH, config=cfg)
    got = emulator.attention(q, k, v, arch=ARCH, config=cfg, backend="ptx")
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))
    np.testing.assert_array_equal(got[1].view(np.uint32), want[1].view(np.uint32))


@pytest.mark.nvrtc
def test_the_ptx_engine_refuses_sm90_before_compiling():
    q, k, v = inputs(0, 1, 1, 1, 16, 16, 64)
    with pytest.raises(ValueError, match="no FP4 mma.sync before sm_120a"):
        emulator.attention(q, k, v, arch="sm_90", config=config(), backend="ptx")


def test_the_gpu_runner_and_the_jax_engine_refuse_it_off_sm120_or_unsupported():
    import dataclasses

    from flashsim.emulator import engine_jax
    from flashsim.gpu import launch
    from flashsim.problem import prepare

    q, k, v = inputs(0, 1, 1, 1, 16, 16, 64)
    prob = prepare(q, k, v, arch=ARCH, config=config())
    with pytest.raises(ValueError, match="no FP4 mma.sync before sm_120a"):  # before cuda.core is imported
        launch.plan_for(dataclasses.replace(prob, arch="sm_90"))
    with pytest.raises(ValueError, match="JAX engine does not run quant='nvfp4'"):
        engine_jax.run(q, k, v, prob)


def test_the_emulate_command_runs_it_beside_the_f16_kernel(capsys):
    from flashsim.cli import main

    args = ["emulate", "--quant", "nvfp4", "--nq", "48", "--nk", "80", "--head-dim", "64", "--pv-accum", "f32"]
    assert main([*args, "--arch", ARCH]) == 0
    out = capsys.readouterr().out
    assert "nvfp4 P@V f32" in out and "O cosine similarity" in out
    assert main([*args, "--arch", "sm_90"]) == 2
    assert "no FP4 mma.sync before sm_120a" in capsys.readouterr().err


@pytest.mark.nvrtc
@pytest.mark.sass
def test_the_quantization_passs_ptx_writes_the_programs_codes_and_scales(sm120_sfu):
    """kernel/quantize.cu's NVFP4 pass alone in flashsim.ptx: every scratch array equals quantize's, the codes two a
    byte with the lower-indexed element in the low nibble, the block scales of every row of a 16-row block."""
    from flashsim.emulator import engine_ptx
    from flashsim.gpu import launch as plan
    from flashsim.problem import prepare
    from flashsim.ptx import address
    from flashsim.ptx import launch as run_kernel

    q, k, v = inputs(9, 2, 2, 1, 37, 50, 128)
    cfg = config(128)
    prob = prepare(q, k, v, arch=ARCH, config=cfg)
    kernels = engine_ptx.modules(prob)
    scratch = np.zeros(plan.scratch_bytes(prob), np.uint8)
    o, lse = np.zeros_like(q), np.zeros(q.shape[:3], np.float32)
    for name, grid, block, smem, args in plan.launch_list(prob, *map(address, (q, k, v, o, lse)), 0, address(scratch)):
        if name != plan.KERNEL_NAME:
            run_kernel(kernels[name], grid, block, list(args), shared_mem=smem)

    def array(name):
        off, shape, dt = plan.scratch_layout(prob)[name]
        return scratch[off : off + int(np.prod(shape)) * dt.itemsize].view(dt).reshape(shape)

    want = Q.quantize(q, k, prob.group, v, cfg.fp8_v_range, fp4=True)
    for name, codes in (("q4", want.q8), ("k4", want.k8)):
        np.testing.assert_array_equal(array(name), codes[..., 0::2] | (codes[..., 1::2] << 4), err_msg=name)
    np.testing.assert_array_equal(array("q_sf"), want.q_sf)
    np.testing.assert_array_equal(array("k_sf"), want.k_sf)
    for name, x in (("q_scale", want.q_scale), ("k_scale", want.k_scale), ("corr", want.corr), ("mean", want.k_mean)):
        np.testing.assert_array_equal(array(name).view(np.uint32), np.asarray(x, np.float32).view(np.uint32), name)


@pytest.mark.nvrtc
@pytest.mark.sass
def test_nan_and_inf_inputs_run_the_same_in_the_ptx_and_the_program(sm120_sfu):
    """A NaN in q or k becomes e2m1's +6 times its block scale (cvt.rn.satfinite.e2m1x2 has no NaN); an inf makes its
    16-row block's f32 scale inf and every score of those rows NaN; a NaN in v poisons its column (FP8 P V). The
    kernel's PTX and the numpy engine agree bit for bit on all of it."""
    cfg = config(64)
    q, k, v = inputs(11, 1, 1, 1, 40, 70, 64)
    q[0, 0, 3, 5], q[0, 0, 20, 7], k[0, 0, 50, 9], v[0, 0, 10, 3] = np.nan, np.inf, np.nan, np.nan
    want = emulator.attention(q, k, v, arch=ARCH, config=cfg)
    got = emulator.attention(q, k, v, arch=ARCH, config=cfg, backend="ptx")
    np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))
    np.testing.assert_array_equal(got[1].view(np.uint32), want[1].view(np.uint32))
    o = want[0][0, 0]
    assert np.isnan(o[16:32]).all() and np.isnan(o[:, 3]).all()  # the inf's row block; v's NaN column
    others = np.delete(np.delete(o, np.s_[16:32], axis=0), 3, axis=1)
    assert np.isfinite(others).all()  # q's and k's NaN are finite codes
