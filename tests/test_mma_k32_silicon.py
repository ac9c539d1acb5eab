"""The H200's mma.sync.m16n8k32 with 8-bit inputs (tests/data/mma_k32_sm90.npz, python3 -m
flashsim.gpu.capture.mma_k32):
the stored capture is intact, and s32.s8.s8.s32 is the exact integer dot product plus c wrapped to 32 bits on every
output, which also confirms the m16n8k32 fragment formulas the capture kernel loads with; and flashsim.mma's sm_90
FP8 model (ptxas's lowering onto the f16 m16n8k16 model: the low halves of the 8-bit registers, then the high
halves, then c; flashsim.arch) reproduces every FP8 output of every type and category (a held-out capture with
another seed agrees too: benchmarks/logs/2026-11-30c/mma_k32_heldout_seed777.txt), and the other order of the
halves does not."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from flashsim.gpu.capture import mma_k32 as M

PATH = pathlib.Path(__file__).parent / "data" / "mma_k32_sm90.npz"
pytestmark = pytest.mark.skipif(not PATH.is_file(), reason="no H200 m16n8k32 capture in tests/data yet")


def test_the_capture_is_intact_and_covers_every_type_and_category():
    data, meta = M.load(PATH)  # raises if the arrays do not hash as recorded
    assert meta["arch"] == "sm_90"
    assert set(data) == {f"{t}|{c}" for t in M.TYPES for c in M.CATEGORIES} | {M.REGISTERS}


def test_s8_is_the_exact_wrapped_integer_dot_product_on_every_output():
    data, _ = M.load(PATH)
    for key, (a, b, c, d) in data.items():
        if key.startswith("s32.s8.s8.s32|"):
            assert np.array_equal(M.int8_reference(a, b, c), d), key


def test_the_int8_reference_wraps_like_the_ptx_isa():
    a = np.full((1, 16, 32), 0x80, np.uint8)  # -128
    b = np.full((1, 32, 8), 0x80, np.uint8)
    c = np.full((1, 16, 8), 2**31 - 1, np.int64).astype(np.int32).view(np.uint32)
    d = M.int8_reference(a, b, c).view(np.int32)
    assert d[0, 0, 0] == np.int32(np.int64(32 * 128 * 128 + 2**31 - 1) - 2**32)


def test_flashsim_mma_reproduces_every_s8_output_of_the_h200():
    import flashsim

    data, _ = M.load(PATH)
    for key, (a, b, c, d) in data.items():
        if key.startswith("s32.s8.s8.s32|"):
            out = flashsim.mma(a.view(np.int8), b.view(np.int8), c.view(np.int32), arch="sm_90")
            assert np.array_equal(out.view(np.uint32), d), key


def test_flashsim_layout_m16n8k32_maps_are_the_h200s():
    """The register-level probe: the H200 ran mma.sync on registers packed by flashsim.layout's A8 / B8 maps from
    these tiles; reading D back through its C map gives the exact wrapped product of the tiles on every element,
    so the maps are the hardware's (a wrong map would scramble rows or k)."""
    data, _ = M.load(PATH)
    a, b, c, rd = data[M.REGISTERS]
    assert rd.shape == (a.shape[0], 32, 4)
    assert np.array_equal(M.registers_to_tile(rd), M.int8_reference(a, b, c))


def _fp8_mismatches() -> dict:
    """Per FP8 type, how many of the capture's outputs flashsim.mma(arch="sm_90") gets wrong."""
    import flashsim

    data, _ = M.load(PATH)
    bad = {}
    for key, (a, b, c, d) in data.items():
        name = key.split("|")[0]
        if name not in M.TYPES or M.TYPES[name][1] == np.int8:
            continue
        _, adt, bdt, cdt = M.TYPES[name]
        with np.errstate(all="ignore"):
            out = flashsim.mma(a.view(adt), b.view(bdt), c.view(cdt), arch="sm_90")
        bad[name] = bad.get(name, 0) + int(np.count_nonzero(out.view(d.dtype) != d))
    return bad


def test_flashsim_mma_reproduces_every_fp8_output_of_the_h200():
    bad = _fp8_mismatches()
    assert len(bad) == 5 and not any(bad.values()), bad


def test_the_h200_refutes_the_other_order_of_the_halves(monkeypatch):
    """The lowering's column order is not free: with the high halves of the registers (k % 4 in {2, 3}) in the first
    HMMA the model misses outputs of every FP8 type."""
    from flashsim.numerics import tensorcore as T

    order = T.k32._F16_MMA_K_ORDER
    monkeypatch.setattr(T.k32, "_F16_MMA_K_ORDER", order[16:] + order[:16])
    bad = _fp8_mismatches()
    assert len(bad) == 5 and all(bad.values()), bad
