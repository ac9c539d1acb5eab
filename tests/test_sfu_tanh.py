"""``tanh.approx.f32`` of sm_90 (flashsim.numerics.sfu_tanh, the fitted interpolator) against the H100's whole-binade
capture (benchmarks/logs/2026-12-06-tanh: every input of biased exponents 117 .. 130, both signs, 2 x 14 x 2^23
results) and the exhaustive H200 sweep's specials and relations (benchmarks/logs/2026-12-01/sfu_approx); the H200's
random sample of every exponent is held out in tests/test_ptx_sfu.py. Bit patterns compared throughout."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

from flashsim.gpu.capture.tanh import inputs, iter_capture
from flashsim.numerics import sfu, sfu_approx, sfu_tanh
from flashsim.numerics.sfu_interp import SIGN

ROOT = pathlib.Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "benchmarks" / "logs" / "2026-12-06-tanh"
SWEEP = ROOT / "benchmarks" / "logs" / "2026-12-01" / "sfu_approx" / "summary_sm90.json"


def test_every_captured_result_is_reproduced():
    """All 2^24 results of each binade 117 .. 130: the unit reads only the top ``mant_bits`` bits (the capture is
    constant over each aligned group of the ignored bits, checked here), so the model's result on the first input
    of each group, through the whole unit (sign, range reduction, truncation of the input), covers every input; and
    inputs anywhere in a group (not only its first), since the unit drops the low bits itself. One binade at a time
    (iter_capture's buffers: the whole capture is 900 MB of results)."""
    if not any(CAPTURE.glob("tanh_sm90_*.tar")):
        pytest.skip(f"no tanh capture in {CAPTURE}")
    unit = sfu_tanh.tanh_unit()
    rng = np.random.default_rng(7)
    seen = []
    for E, M, pos, neg in iter_capture(CAPTURE):
        seen.append(E)
        assert M == 23
        read = unit.binades[E].fmt.mant_bits if E in unit.binades else 23
        if E >= unit.saturate_from:
            read = 0
        group = 1 << (23 - read)
        for got in (pos, neg):
            g = got.reshape(-1, group)
            assert (g == g[:, :1]).all(), E
        x = inputs(E, read)  # the first input of each group
        assert np.array_equal(sfu_tanh.tanh_f32_bits(x), pos[::group]), E
        assert np.array_equal(sfu_tanh.tanh_f32_bits(x | SIGN), neg[::group]), E
        m = rng.integers(0, 1 << 23, 4096)
        x = (np.uint32(E) << np.uint32(23)) | m.astype(np.uint32)
        assert np.array_equal(sfu_tanh.tanh_f32_bits(x), pos[m]), E
        assert np.array_equal(sfu_tanh.tanh_f32_bits(x | SIGN), neg[m]), E
    assert sorted(seen) == list(range(117, 131))


def test_the_exhaustive_sweeps_specials():
    """NaN, inf, zero, subnormals, huge and small inputs as the H200 returned them."""
    specials = json.loads(SWEEP.read_text())["forms"]["tanh.approx.f32"]["specials"]
    x = np.array([int(k, 16) for k in specials], np.uint32)
    want = np.array([int(v, 16) for v in specials.values()], np.uint32)
    assert np.array_equal(sfu_tanh.tanh_f32_bits(x), want)


def test_range_reduction_outside_the_interpolated_binades():
    """x itself below 2^-8 (subnormals and zero too), +-1 from 8 on (inf too), canonical NaN: the sweep's
    relations over all 2^32 inputs (identity and odd symmetry everywhere below E = 119, saturation from 130)."""
    rng = np.random.default_rng(1)
    small = rng.integers(0, 119 << 23, 4096, dtype=np.uint32)
    big = rng.integers(130 << 23, 0x7F800001, 4096, dtype=np.uint32)
    for sign in (np.uint32(0), SIGN):
        assert np.array_equal(sfu_tanh.tanh_f32_bits(small | sign), small | sign)
        assert np.array_equal(sfu_tanh.tanh_f32_bits(big | sign), np.full(big.size, 0x3F800000, np.uint32) | sign)
    nan = rng.integers(0x7F800001, 0x80000000, 64, dtype=np.uint32)
    assert (sfu_tanh.tanh_f32_bits(np.concatenate([nan, nan | SIGN])) == 0x7FFFFFFF).all()


def test_public_entry_points_agree():
    x = np.array([0.0, 1e-3, 0.5, -0.75, 1.5, 3.0, -7.9, 9.0, np.inf, np.nan], np.float32)
    want = sfu_tanh.tanh_f32_bits(x.view(np.uint32))
    assert np.array_equal(sfu.tanh(x).view(np.uint32), want)
    assert np.array_equal(sfu_approx.apply("tanh.approx.f32", x.view(np.uint32)), want)
    assert sfu.tanh(np.float32(0.5)).view(np.uint32) == want[2]
    with pytest.raises(sfu_approx.ModelUnavailable, match="sm_90"):
        sfu_approx.model_of("tanh.approx.f32", "sm_80")


def test_tables_are_small_and_exact_integers():
    t = sfu_tanh.TABLES
    assert t.stat().st_size < 16 << 10
    unit = sfu_tanh.tanh_unit()
    assert sorted(unit.binades) == list(range(119, 130))
    assert sum(1 << b.fmt.index_bits for b in unit.binades.values()) == 51
    for b in unit.binades.values():
        assert (b.fmt.sq_drop, b.fmt.sq_shift, b.fmt.rounding) == (19, 19, "rz")
        assert b.fmt.mant_bits - b.fmt.index_bits == sfu_tanh.LOW_BITS


def test_corrupt_tables_are_refused(tmp_path, monkeypatch):
    with np.load(sfu_tanh.TABLES) as z:
        entries = {k: z[k] for k in z.files}
    entries["c1"] = entries["c1"].copy()
    entries["c1"][7] += 1
    bad = tmp_path / "tanh.npz"
    np.savez(bad, **entries)
    monkeypatch.setattr(sfu_tanh, "TABLES", bad)
    sfu_tanh.tanh_unit.cache_clear()
    try:
        with pytest.raises(ValueError, match="sha256"):
            sfu_tanh.tanh_unit()
    finally:
        sfu_tanh.tanh_unit.cache_clear()


@pytest.mark.nvrtc
def test_the_gpu_sweeps_model_kernel_is_the_numpy_model():
    """kernel/capture/tanh_model.cu (the GPU sweep's model, flashsim.gpu.capture.tanh_sweep) run by flashsim.ptx on
    random inputs of every exponent and of the interpolated binades: the numpy model's bits."""
    from flashsim.gpu.capture.tanh_sweep import SOURCE, table_arrays
    from flashsim.ptx import compile, launch

    rng = np.random.default_rng(0)
    inner = rng.integers(117 << 23, 131 << 23, 3072, dtype=np.uint32) | (
        rng.integers(0, 2, 3072, dtype=np.uint32) << 31
    )
    x = np.concatenate([rng.integers(0, 1 << 32, 1024, dtype=np.uint64).astype(np.uint32), inner]).astype(np.uint32)
    out = np.zeros_like(x)
    module = compile(SOURCE.read_text(), arch="sm_90")
    launch(module.kernel("tanh_model_kernel"), (x.size // 256,), (256,), [x, out, np.uint32(x.size), *table_arrays()])
    assert np.array_equal(out, sfu_tanh.tanh_f32_bits(x))
