"""flashsim bench kernel's repetition count, logic only (no GPU, nothing timed): short launches get rounds of at least
--min-round-ms, so that a 0.4 ms launch is not timed in 8 ms rounds (commit 90e797d has the measurement: 2-7% between
two timings of the same launches at 16,16,1024); longer launches keep --reps. How fast anything runs is the
benchmarks' business (benchmarks/, flashsim bench), never a test's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flashsim.commands import bench


@given(
    ms=st.floats(min_value=1e-3, max_value=1e3, allow_nan=False),
    reps=st.integers(min_value=1, max_value=200),
    min_round=st.floats(min_value=0.0, max_value=1e3, allow_nan=False),
)
def test_reps_for_is_the_fewest_calls_that_fill_a_round(ms, reps, min_round):
    """At least ``reps`` calls; more only while a round of them is shorter than ``min_round`` ms, and then the fewest
    that reach it (one call fewer would not)."""
    n = bench.reps_for(ms, reps, min_round)
    assert isinstance(n, int) and n >= reps
    assert n == reps or n * ms >= min_round * (1 - 1e-12)
    assert n == reps or (n - 1) * ms < min_round


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
