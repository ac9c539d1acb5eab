"""What ptxas makes of the kernels, read from their SASS (NVRTC builds, no GPU; tools/sass_ops.py, the disassembler of
the test extra's nvidia-cuda-nvdisasm): Hopper lowers mma.sync with FP8 inputs to two f16 HMMA.16816 (flashsim's
sm_90 FP8 model is that lowering on the m16n8k16 one), the ceiling probe keeps every mma in its timed loop, and
flash_fwd issues exactly the mma's its tiling calls for per KV tile."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.nvrtc


FP8_KERNELS = (
    "mma_k32_f32_e4m3_e4m3_f32",
    "mma_k32_f32_e5m2_e5m2_f32",
    "mma_k32_f32_e4m3_e5m2_f32",
    "mma_k32_f16_e4m3_e4m3_f16",
    "mma_k32_f16_e5m2_e5m2_f16",
)


def test_hopper_runs_an_fp8_mma_sync_as_two_f16_hmma(sass_ops):
    """sm_90: the e4m3 / e5m2 bytes unpacked to f16 (F2FP ... UNPACK_B, two per 8-bit register), two HMMA.16816
    (the first from zero, the second on its result) and c added last (FADD per f32 element, HADD2 per f16 pair);
    sm_89 and sm_120 run one QMMA.16832. The capture kernels hold one mma each."""
    from flashsim.arch import get_arch
    from flashsim.gpu.build import compile_file

    assert get_arch("sm_90").mma8_on_f16_mma and not get_arch("sm_89").mma8_on_f16_mma
    assert not get_arch("sm_120").mma8_on_f16_mma
    funcs = sass_ops.sass_by_function(compile_file("capture/mma_k32.cu", arch="sm_90").cubin)
    for name in FP8_KERNELS:
        ops = funcs[name]
        f32 = "_f32_" in name[:12]
        assert ops[f"HMMA.16816.{'F32' if f32 else 'F16'}"] == 2, (name, ops)
        assert not [o for o in ops if "QMMA" in o], (name, ops)
        assert ops["F2FP"] == 12, (name, ops)  # 4 A and 2 B registers, two halves each
        assert (ops["FADD"], ops["HADD2"]) == ((4, 0) if f32 else (0, 2)), (name, ops)
    for arch in ("sm_89", "sm_120"):
        funcs = sass_ops.sass_by_function(compile_file("capture/mma_k32.cu", arch=arch).cubin)
        for name in FP8_KERNELS:
            mma = {o: n for o, n in funcs[name].items() if "MMA" in o}
            assert len(mma) == 1 and next(iter(mma)).startswith("QMMA.16832.") and sum(mma.values()) == 1, mma


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_the_ceiling_probe_keeps_every_mma_in_its_loop(sass_ops, arch):
    """Each of the probe's CHAINS chains runs its own mma every step: the count of mma instructions is a multiple
    of CHAINS (two HMMA per FP8 mma on sm_90, with its adds); ptxas may neither hoist the products out of the loop
    nor share them, which it did with loop-invariant operands (2 HMMA for the whole FP8 loop)."""
    from flashsim.arch import get_arch
    from flashsim.gpu import peak

    chains = 8
    for kind, (name, _) in peak.KINDS.items():
        ops = sass_ops.sass_opcodes_full(peak.build(kind, arch, chains=chains, iters=4096).cubin)
        mma = sum(n for o, n in ops.items() if "MMA" in o)
        emulated = get_arch(arch).mma8_on_f16_mma and "e4m3" in name
        per_mma = 2 if emulated else 1
        assert mma > 0 and mma % (per_mma * chains) == 0, (name, ops)
        if emulated:
            f32 = name.startswith("m16n8k32 f32")
            assert (ops["FADD"], ops["HADD2"]) == ((2 * mma, 0) if f32 else (0, mma)), (name, ops)


# (arch, overrides of KernelConfig.default)
FLASH_CONFIGS = [
    ("sm_90", dict(head_dim=128, pv_accum="f16")),
    ("sm_90", dict(head_dim=128, pv_accum="f32")),
    ("sm_90", dict(head_dim=64, pv_accum="f16x2", causal=True)),
    ("sm_90", dict(head_dim=96, pv_accum="f16")),
    ("sm_90", dict(head_dim=128, pv_accum="f16", quant="int8")),
    ("sm_90", dict(head_dim=128, pv_accum="f16x2", quant="int8-fp8")),
    ("sm_120", dict(head_dim=128, pv_accum="f32", quant="int8-fp8")),
    ("sm_120", dict(head_dim=256, pv_accum="f32", dtype="bf16")),
]


@pytest.mark.parametrize(
    "arch, over", FLASH_CONFIGS, ids=lambda x: x if isinstance(x, str) else ",".join(f"{k}={v}" for k, v in x.items())
)
def test_flash_fwd_issues_the_mma_its_tiling_calls_for(sass_ops, arch, over):
    """A warp's KV tile is (16 m_tiles) x kv_tile scores over d (Q K^T: m16n8k16, or m16n8k32 with INT8) and
    (16 m_tiles) x d outputs over kv_tile keys (P V: m16n8k16, or m16n8k32 with FP8 P); the tile loop is not
    unrolled, so the SASS holds each of those mma's once (a Hopper FP8 one as two HMMA.16816)."""
    from flashsim.arch import get_arch
    from flashsim.config import KernelConfig

    cfg = KernelConfig.default(arch, **over)
    ops = sass_ops.opcode_counts(cfg, arch)
    mt, bc, d = cfg.m_tiles, cfg.kv_tile, cfg.head_dim
    qk = mt * (bc // 8) * (d // (32 if cfg.int8 else 16))
    pv = mt * (d // 8) * (bc // (32 if cfg.fp8_pv else 16))
    hmma = sum(n for o, n in ops.items() if o.startswith("HMMA"))
    imma = sum(n for o, n in ops.items() if o.startswith("IMMA"))
    qmma = sum(n for o, n in ops.items() if o.startswith("QMMA"))
    on_f16 = get_arch(arch).mma8_on_f16_mma  # sm_90: an FP8 mma is two HMMA.16816
    want_hmma = (0 if cfg.int8 else qk) + (0 if cfg.fp8_pv else pv) + (2 * pv if cfg.fp8_pv and on_f16 else 0)
    assert (hmma, imma, qmma) == (want_hmma, qk if cfg.int8 else 0, pv if cfg.fp8_pv and not on_f16 else 0), ops
