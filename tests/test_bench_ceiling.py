"""flashsim bench kernel's percentages of the mma.sync ceiling (no GPU): the ceiling of a build is that of its
instruction mix, Q K^T on the f32-accumulating mma and P V on its accumulator's, half the FLOPs each."""

from __future__ import annotations

import math

import pytest

from flashsim.commands import bench
from flashsim.gpu import peak


def test_kernel_ceiling_is_the_harmonic_mean_of_the_two_halves():
    ceilings = {"f32": 600.0, "f16": 400.0}
    # f32 P@V: both halves on the f32 mma
    assert bench.kernel_ceiling("f32", ceilings) == pytest.approx(600.0)
    # f16 / f16x2 P@V: 2 units of work at 600 and 400 take 1/600 + 1/400 = 1/240 s: 480, not the mean 500
    assert bench.kernel_ceiling("f16", ceilings) == pytest.approx(480.0)
    assert bench.kernel_ceiling("f16x2", ceilings) == pytest.approx(480.0)
    with pytest.raises(KeyError):
        bench.kernel_ceiling("f8", ceilings)


def test_percentages_against_the_ninth_rounds_ceilings():
    """2026-12-01g: f16 P@V 397.2 TFLOP/s with ceilings f32 632.0 and f16 631.6 is 62.9% of its mix (631.8)."""
    ceilings = {"f32": 632.0, "f16": 631.6}
    assert bench._pct(397.2, "f16", ceilings) == pytest.approx(62.87, abs=0.01)
    assert bench._pct(367.5, "f32", ceilings) == pytest.approx(58.15, abs=0.01)
    assert math.isnan(bench._pct(397.2, "f16", None))
    assert bench._pct_text(float("nan")).strip() == "-" and len(bench._pct_text(float("nan"))) == 6
    assert bench._pct_text(62.87) == " 62.9%"


def test_measure_ceilings_asks_only_for_the_two_m16n8k16_probes(monkeypatch):
    asked = {}

    def fake_measure(*, kinds):
        asked["kinds"] = kinds
        return {peak.KINDS[k][0]: {"tflops": 100.0 + k} for k in kinds}

    monkeypatch.setattr(peak, "measure", fake_measure)
    assert bench.measure_ceilings() == {"f32": 100.0, "f16": 101.0}
    assert sorted(asked["kinds"]) == [0, 1]
    assert "f32.f16.f16.f32" in peak.KINDS[0][0] and "f16.f16.f16.f16" in peak.KINDS[1][0]


def test_the_ceiling_can_be_skipped_on_the_command_line():
    import argparse

    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    assert p.parse_args(["kernel"]).ceiling is True
    assert p.parse_args(["kernel", "--no-ceiling"]).ceiling is False


def test_a_row_lines_up_with_the_header():
    cells = {
        "f32": (367.5, 368.6, 1.003, 58.1),
        "f16": (397.2, 395.8, 0.997, 62.9),
        "f16x2": (344.7, 341.3, 0.990, float("nan")),
    }
    line = bench._row_line(
        (4, 16, 4096, 128, False), cells, {"FA2": 334.8, "cuDNN": 570.8}, ["40/8"] * 3, ["f32: warps=4"]
    )
    header = bench._table_header()
    assert header.startswith(
        "B,H,N,d          causal | f32 kernel      %    call  ratio | f16 kernel      %    call  "
        "ratio | f16x2 kern      %    call  ratio |    FA2  cuDNN |"
    )
    assert line.startswith(
        "4,16,4096,128    False  |      367.5  58.1%   368.6  1.003 |      397.2  62.9%   395.8  "
        "0.997 |      344.7      -   341.3  0.990 |  334.8  570.8 |"
    )
    assert [i for i, c in enumerate(line) if c == "|"] == [i for i, c in enumerate(header) if c == "|"]


def test_clock_table_gives_the_share_at_equal_clocks():
    """The clocks after the main table: a kernel at 62.0% of its ceiling, at 1809 MHz against the probe's 1980, is at
    62.0 * 1980 / 1809 = 67.9% per clock (experiments/power_clock/2026-12-01: 0.620 and 0.678); a cell without
    samples prints dashes; without a sampler one line says why."""
    ceiling = dict(sm_clock_mhz=1980.0, power_capped=False)
    rows = [
        dict(
            shape=[4, 16, 4096, 128],
            causal=False,
            pv_accum="f16",
            kernel_pct_of_ceiling=62.0,
            sm_clock_mhz=1809.0,
            power_capped=True,
        ),
        dict(
            shape=[4, 16, 4096, 128],
            causal=False,
            pv_accum="f32",
            kernel_pct_of_ceiling=56.3,
            sm_clock_mhz=1870.0,
            power_capped=False,
        ),
        dict(shape=[4, 16, 4096, 128], causal=False, sdpa_tflops={}),
    ]
    report = dict(rows=rows, clocks=dict(available=True, why="", period_s=0.05, ceiling=ceiling))
    lines = bench._clock_table(report)
    assert "the ceiling probe ran at 1980 MHz)" in lines[0]
    assert lines[2].split(" | ")[1:] == ["      1870  no  59.6%", "      1809 yes  67.9%", "         -   -      -"]
    assert abs(bench.per_clock_pct(rows[0], 1980.0) - 62.0 * 1980 / 1809) < 1e-9
    assert bench._clock_table(dict(rows=[], clocks=dict(available=False, why="no clock samples: no NVML"))) == [
        "SM clocks: not sampled (no clock samples: no NVML)"
    ]


def test_the_clock_sampler_averages_its_window_and_is_inert_without_nvml():
    from flashsim.gpu import clocks

    w = clocks.summarize([(1.0, 1800.0, 600.0, 4), (1.1, 1900.0, 650.0, 0), (2.0, 1000.0, 1.0, 0)], 0.9, 1.2)
    assert (w.mhz, w.mhz_min, w.mhz_max, w.watts, w.samples, w.power_capped) == (1850.0, 1800.0, 1900.0, 625.0, 2, True)
    assert clocks.summarize([(5.0, 1.0, 1.0, 0)], 0.0, 1.0) is None
    import time

    with clocks.Sampler(period_s=0.01) as s:
        t0 = time.time()
        time.sleep(0.1)
        t1 = time.time()
    if s.available:  # a GPU with NVML: samples in the window
        w = s.window(t0, t1)
        assert w is not None and w.samples >= 3 and w.mhz > 0
    else:  # no NVML here: inert, and says why
        assert s.why.startswith("no clock samples") and s.window(0.0, 1e12) is None
