"""The mma.sync ceiling probe (flashsim.gpu.peak, kernel/bench/mma_peak.cu): every instruction builds for sm_90 and
sm_120 with NVRTC (no GPU needed), keeps its chains in registers (no spills, no local memory), and on a GPU the
probe reports a positive rate for each."""

from __future__ import annotations

import pytest

from flashsim.gpu import peak

pytestmark = pytest.mark.nvrtc


@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
@pytest.mark.parametrize("kind", sorted(peak.KINDS))
def test_every_instruction_builds_without_spills(arch, kind):
    b = peak.build(kind, arch, chains=8, iters=64)
    assert b.spill_loads == 0 and b.spill_stores == 0
    assert b.registers < 128  # 8 chains of accumulators plus the operands


@pytest.mark.gpu
def test_the_probe_measures_every_instruction():
    r = peak.measure(chains=8, iters=256, blocks_per_sm=2, reps=2, warm_s=0.1)
    for name, _ in peak.KINDS.values():
        assert r[name]["tflops"] > 0 and r[name]["ms"] > 0
