"""flashsim bench kernel's repetition count (no GPU): short launches get rounds of at least --min-round-ms, so that
a 0.4 ms launch is not timed in 8 ms rounds (benchmarks/RESULTS.md, eighth round: 2-7% between two timings of the
same launches at 16,16,1024); longer launches keep --reps."""

from __future__ import annotations

import pytest

from flashsim.commands import bench


@pytest.mark.parametrize(
    "ms, want", [(0.38, 66), (0.68, 37), (1.25, 20), (1.36, 20), (3.6, 20), (25.0, 20), (100.0, 20)]
)
def test_reps_for_makes_every_round_at_least_min_round_ms(ms, want):
    n = bench.reps_for(ms, 20, 25.0)
    assert n == want
    assert n * ms >= 25.0 or n == 20  # long enough, or the floor
    assert n == 20 or (n - 1) * ms < 25.0  # and no longer than needed


@pytest.mark.parametrize("ms", [0.0, -1.0, float("nan")])
def test_reps_for_keeps_reps_on_a_timing_it_cannot_use(ms):
    assert bench.reps_for(ms, 20, 25.0) == 20


def test_calibrated_reps_follows_the_fastest_function(monkeypatch):
    times = {"slow": 2.0, "fast": 0.5}
    seen = []

    def fake_cuda_time(fn, reps, rounds, warmup=3):
        seen.append((fn(), reps, rounds))
        return times[fn()], 0.0

    monkeypatch.setattr(bench, "cuda_time", fake_cuda_time)
    assert bench.calibrated_reps((lambda: "slow", lambda: "fast"), 20, 25.0) == 50
    assert seen == [("slow", 20, 1), ("fast", 20, 1)]


def test_calibrated_reps_times_nothing_without_a_minimum(monkeypatch):
    """sdpa_ms's other callers (bench_variants, bench_quant) keep their fixed count and pay no calibration run."""
    monkeypatch.setattr(bench, "cuda_time", lambda *a, **k: pytest.fail("timed without a minimum round"))
    assert bench.calibrated_reps((lambda: None,), 20, 0.0) == 20
