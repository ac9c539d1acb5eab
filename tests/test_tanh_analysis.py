"""The tanh interpolator analysis (benchmarks/experiments/tanh_interpolator/analyse.py) and the capture's file format
(flashsim.gpu.capture.tanh), on synthetic units: a known member of the fixed-point quadratic family
(flashsim.numerics.sfu_interp.synthetic_tanh) must be recovered exactly (index width, format, every coefficient),
units outside the family (a cubic per segment, a table of jittered tanh values) must be reported as not fitted.
Reduced mantissa grids (M = 10..12 bits) keep it to seconds; the device capture uses M = 23."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from tool_modules import ROOT, load_tool

from flashsim.gpu.capture import tanh as T
from flashsim.numerics import sfu_interp as S

A = load_tool("analyse", ROOT / "benchmarks" / "experiments" / "tanh_interpolator")


def _quiet(*_):
    pass


def test_binade_encoding_round_trip_keeps_every_bit():
    rng = np.random.default_rng(3)
    pos = np.cumsum(rng.integers(0, 3, 1 << 12)).astype(np.uint32) + np.uint32(0x3E000000)
    pos[[7, 900]] = [0x3F800000, 0x00000005]  # steps far outside int8: escapes
    neg = pos ^ S.SIGN
    neg[[1, 2000]] = [0x7FFFFFFF, 0x12345678]  # where -x is not the mirror image
    E, M, p2, n2 = T.decode_binade(T.encode_binade(126, 12, pos, neg))
    assert (E, M) == (126, 12)
    assert np.array_equal(p2, pos) and np.array_equal(n2, neg)


CASES = [  # (generator, whether its format is the only one the results admit at E = 126 / 128)
    (dict(index_bits=4, mant_bits=12, guard_bits=2, c1_bits=14, c2_bits=8, sq_shift=3, rounding="rn"), True),
    (dict(index_bits=5, mant_bits=12, guard_bits=1, c1_bits=12, c2_bits=7, sq_shift=0, rounding="rz"), True),
    (dict(index_bits=3, mant_bits=11, guard_bits=3, c1_bits=15, c2_bits=11, sq_shift=2, rounding="rn"), False),
]


@pytest.mark.parametrize(
    "case,unique", CASES, ids=lambda c: f"k{c['index_bits']}-{c['rounding']}" if isinstance(c, dict) else ""
)
def test_recovers_a_known_interpolator_exactly(case, unique):
    """Every binade: the reported model reproduces every result. Near 1 (E = 126, 128): under the generator's own
    format the search returns tables that reproduce every result (the generator's, where one set fits only); the
    reported index width, guard bits, rounding and accumulator lsb are the generator's, and where the results admit
    one format only, the whole format and every coefficient. At E = 121 (tanh nearly x) the X^2 term is a few
    accumulator units and several formats reproduce every result: the first in the search order is reported."""
    exps = [121, 126, 128]
    unit = S.synthetic_tanh(exps, **case)
    for E in exps:
        x = T.inputs(E, case["mant_bits"])
        y = unit.bits(x)
        r = A.analyse_binade(E, case["mant_bits"], y, unit.bits(x | S.SIGN), log=_quiet)
        assert r["verdict"] == "exact", (E, r.get("exact_search"))
        want, q = unit.binades[E], r["tables"]
        assert np.array_equal(q.bits(np.arange(x.size)), y)
        if E == 121:
            continue
        fit = A.ExactFit(A.Binade(E, case["mant_bits"], y, 0, x.size), case["index_bits"], guards=[case["guard_bits"]])
        (own, ambiguous), _ = fit.confirm(
            A.Hypothesis(case["rounding"], case["guard_bits"], case["sq_shift"], want.fmt.t2)
        )
        assert own.fmt == want.fmt and np.array_equal(own.bits(np.arange(x.size)), y)
        if ambiguous == 0:
            assert np.array_equal(own.c0, want.c0) and np.array_equal(own.c1, want.c1)
            assert np.array_equal(own.c2, want.c2)
        assert (r["k"], r["guard_bits"]) == (case["index_bits"], case["guard_bits"])
        assert (q.fmt.lsb_exp, q.fmt.rounding) == (want.fmt.lsb_exp, case["rounding"])
        if unique:
            assert q.fmt == want.fmt, (q.fmt, want.fmt)
            assert np.array_equal(q.c0, want.c0) and np.array_equal(q.c1, want.c1) and np.array_equal(q.c2, want.c2)
            assert r["ambiguous_segments"] == 0


def _cubic_unit_bits(E, M, k):
    e, n = E - 127, M - k
    co = np.array([S.chebyshev_fit(np.tanh, 2.0**e * (1 + i * 2.0**-k), 2.0**e * 2.0**-M, n, 3) for i in range(1 << k)])
    m = np.arange(1 << M)
    X, i = (m & ((1 << n) - 1)).astype(np.float64), m >> n
    return S.round_to_f32(sum(co[i, j] * X**j for j in range(4)), "rn")


def _jittered_table_bits(E, M):
    ref = S.tanh_reference_bits(T.inputs(E, M)).astype(np.int64)
    return (ref + np.random.default_rng(E).integers(-1, 2, ref.size)).astype(np.uint32)


@pytest.mark.parametrize("kind", ["cubic", "table"])
def test_reports_no_fit_outside_the_family(kind):
    E, M = 126, 12
    y = _cubic_unit_bits(E, M, 2) if kind == "cubic" else _jittered_table_bits(E, M)
    r = A.analyse_binade(E, M, y, y ^ S.SIGN, log=_quiet)
    assert r["verdict"].startswith("no exact fit")
    assert "tables" not in r
    assert r["exact_search"] and all(x["best_mismatches"] != 0 for x in r["exact_search"])
    # the width scan still sees a smooth function: some k fits a quadratic within rounding noise
    assert r["k"] is not None


def test_reports_a_binade_without_interpolation():
    E, M = 118, 10
    x = T.inputs(E, M)
    r = A.analyse_binade(E, M, x, x ^ S.SIGN, log=_quiet)
    assert r["verdict"].startswith("no interpolated range")
    assert r["reduction"]["returns_x"] == x.size


def test_fake_capture_files_then_analysis(tmp_path: pathlib.Path):
    exps, M = [118, 123, 127, 130], 10
    dev = T.FakeDevice(exps, M)
    summary = T.capture(dev, exps, M, tmp_path, log=_quiet)
    assert summary["files"] and all(f.endswith(".tar") for f in summary["files"])
    assert (tmp_path / "summary_tanh_sm90.json").exists()
    data = T.read_capture(tmp_path)
    assert sorted(data) == exps
    for E, (m_bits, pos, neg) in data.items():
        x = T.inputs(E, m_bits)
        assert np.array_equal(pos, dev.tanh(x)) and np.array_equal(neg, dev.tanh(x | S.SIGN))
    assert summary["binades"]["118"]["returns_x"]["count"] == 1 << M
    assert summary["binades"]["130"]["saturated_to_1"]["count"] == 1 << M
    for E in (123, 127):
        _, pos, neg = data[E]
        r = A.analyse_binade(E, M, pos, neg, log=_quiet)
        assert r["verdict"] == "exact"
        want = dev.unit.binades[E]
        assert r["tables"].fmt == want.fmt and np.array_equal(r["tables"].c1, want.c1)


def test_an_opening_identity_run_is_left_out_and_named():
    """The H200 returns x for 1,024 inputs of E = 119: such an opening run is left out of the fit, and the segment
    it cuts is named as not solved."""
    E, M = 126, 12
    unit = S.synthetic_tanh([E], index_bits=4, mant_bits=M, guard_bits=2, c1_bits=14, c2_bits=8, sq_shift=3)
    x = T.inputs(E, M)
    y = unit.bits(x)
    y[:100] = x[:100]
    r = A.analyse_binade(E, M, y, y ^ S.SIGN, log=_quiet)
    assert r["reduction"]["fitted"] == [100, 1 << M]
    assert r["verdict"] == "exact on full segments; not solved: [0]"
    assert np.array_equal(r["tables"].c1[1:], unit.binades[E].c1[1:])


def test_a_unit_that_reads_fewer_input_bits_is_recovered():
    """The H100 reads only the top 17 .. 21 mantissa bits: a synthetic unit reading 10 of a 12-bit grid gives
    results constant over groups of 4 inputs; the analysis names the 2 ignored bits and fits the 10 read."""
    E, M, read = 126, 12, 10
    unit = S.synthetic_tanh([E], index_bits=3, mant_bits=read, guard_bits=2, c1_bits=14, c2_bits=8, sq_shift=2)
    x = T.inputs(E, M)
    y = unit.bits(x)
    r = A.analyse_binade(E, M, y, unit.bits(x | S.SIGN), log=_quiet)
    assert r["ignored_low_bits"] == M - read and r["verdict"] == "exact"
    q = r["tables"]
    assert q.fmt.mant_bits == read and q.fmt.index_bits == 3
    assert np.array_equal(q.bits(np.arange(1 << M) >> (M - read)), y)


def test_no_full_segment_is_reported_as_no_fit():
    """A binade whose only segment is cut by an opening run of x (the H100's E = 119 read as one segment) is
    'no exact fit at this k', not an error."""
    E, M = 126, 12
    y = S.synthetic_tanh([E], index_bits=0, mant_bits=M).bits(T.inputs(E, M))
    y[:5] = T.inputs(E, M)[:5]
    b = A.Binade(E, M, y, 5, 1 << M)
    assert A.ExactFit(b, 0).confirm(A.Hypothesis("rn", 2, 0, 0)) == (None, None)
    r = A._exact_at(b, 0, range(0, 3), 8, _quiet)
    assert r["result"] is None and r["best_mismatches"] is None
    # the whole analysis goes on to finer widths, whose later segments are full
    assert A.analyse_binade(E, M, y, y ^ S.SIGN, ks=[0], log=_quiet)["verdict"].startswith("exact on full segments")


def test_folded_square_drops_exactly_the_low_columns():
    """sfu_interp.folded_square against the partial products summed one by one."""
    X = np.arange(1 << 9, dtype=np.int64)
    for drop in (0, 1, 6, 9, 12, 18):
        want = np.zeros_like(X)
        for i in range(9):
            xi = (X >> i) & 1
            want += np.where(2 * i >= drop, xi << (2 * i), 0)
            for j in range(i + 1, 9):
                want += np.where(i + j + 1 >= drop, (xi & (X >> j) & 1) << (i + j + 1), 0)
        assert np.array_equal(S.folded_square(X, drop), want), drop


def test_squarer_scan_finds_the_dropped_columns():
    """A segment whose X^2 term comes from a folded squarer without its columns below 8: the least-squares residual
    is at rounding noise with that truncation and well above it with the exact square."""
    E, M, k, drop = 126, 12, 1, 8
    gen = S.synthetic_tanh([E], index_bits=k, mant_bits=M, guard_bits=2, c1_bits=14, c2_bits=9)
    want = gen.binades[E]
    fmt = S.QuadFormat(**{**want.fmt.__dict__, "sq_drop": drop, "sq_shift": drop, "t2": 0})
    y = S.QuadBinade(fmt, want.c0, want.c1, (want.c2 << drop) >> want.fmt.t2).bits(np.arange(1 << M))
    sq = A.squarer_scan(A.Binade(E, M, y, 0, 1 << M), k, [0, drop - 1, drop, drop + 1])
    assert sq[drop] <= 1.0 < sq[0] and min(sq, key=sq.get) == drop, sq
