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
    cells = {"f32": (367.5, 368.6, 1.003, 58.1), "f16": (397.2, 395.8, 0.997, 62.9),
             "f16x2": (344.7, 341.3, 0.990, float("nan"))}
    line = bench._row_line((4, 16, 4096, 128, False), cells, {"FA2": 334.8, "cuDNN": 570.8}, ["40/8"] * 3,
                           ["f32: warps=4"])
    header = bench._table_header()
    assert header.startswith("B,H,N,d          causal | f32 kernel      %    call  ratio | f16 kernel      %    call  "
                             "ratio | f16x2 kern      %    call  ratio |    FA2  cuDNN |")
    assert line.startswith("4,16,4096,128    False  |      367.5  58.1%   368.6  1.003 |      397.2  62.9%   395.8  "
                           "0.997 |      344.7      -   341.3  0.990 |  334.8  570.8 |")
    assert [i for i, c in enumerate(line) if c == "|"] == [i for i, c in enumerate(header) if c == "|"]
