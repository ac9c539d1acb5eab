"""flashsim.wgmma against wgmma.mma_async captured on an H200 (tests/data/wgmma_sm90.npz, made by ``python3 -m
flashsim.gpu.capture.wgmma --out DIR``; its provenance is checked by tests/test_drift.py), the alternative models the
capture must refute, and the capture tool itself without a GPU: its kernel file, its layouts and fragment formulas
against independent statements of them, its NVRTC build for sm_90a, its storage."""

from __future__ import annotations

import hashlib
import json
import pathlib

import numpy as np
import pytest

from flashsim import provenance
from flashsim.gpu.build import kernel_path
from flashsim.gpu.capture import wgmma as cap
from flashsim.layout import c_coord
from flashsim.layout.cute import Layout
from flashsim.layout.fragments import a_coord

CAPTURE = pathlib.Path(__file__).parent / "data" / "wgmma_sm90.npz"


@pytest.fixture(scope="module")
def capture():
    if not CAPTURE.exists():
        pytest.skip(
            "no H200 wgmma capture in tests/data yet (python3 -m flashsim.gpu.capture.wgmma --out DIR on an sm_90 "
            "GPU, then copy DIR/wgmma_sm90.npz to tests/data)"
        )
    return cap.load_capture(CAPTURE)


def test_model_reproduces_every_captured_bit(capture):
    bad_total, report = 0, {}
    for key, (v, gen, d) in capture["variants"].items():
        bad = cap.model(v, gen) != d
        if bad.any():
            per_category = {name: int(bad[gen["category"] == i].sum()) for i, name in enumerate(gen["names"])}
            report[key] = {name: count for name, count in per_category.items() if count}
            bad_total += int(bad.sum())
    assert not bad_total, f"{bad_total} outputs differ from the H200: {report}"


def test_capture_is_a_real_sm90_capture_of_every_variant(capture):
    meta = capture["meta"]
    assert meta["arch"] == "sm_90" and "fake" not in str(meta["device"].get("name", ""))
    assert set(capture["variants"]) == {v.key for v in cap.VARIANTS}


@pytest.mark.parametrize("hypothesis", list(cap.HYPOTHESES))
def test_the_capture_refutes_the_alternative_models(capture, hypothesis):
    """Each neighbour of the fitted model (other F, other block lengths, other zero exponents, f32 results to
    nearest, FP8 results to 23 bits, tf32 inputs rounded, scale-d = 0 without a zero term) misses outputs of the
    H200 that the model gets: the fitted parameters are the only ones here that fit."""
    missed = 0
    for v, gen, d in capture["variants"].values():
        m = cap.hypothesis_mismatches(v, gen, d, hypothesis)
        missed += m or 0
    assert missed > 0, f"the capture cannot tell {hypothesis!r} from the model"


# ------------------------------------------------------------------------------------------ the tool, no GPU


def test_kernel_file_is_the_generators():
    """kernel/capture/wgmma.cu is written by kernel_source (one kernel per variant): the file and the generator
    cannot drift (regenerate with: python -c "from flashsim.gpu.capture import wgmma as w;
    open('kernel/capture/wgmma.cu', 'w').write(w.kernel_source())")."""
    assert kernel_path(cap.KERNEL).read_text() == cap.kernel_source()


@pytest.mark.nvrtc
def test_capture_kernels_compile_for_sm90a():
    from flashsim.gpu.build import compile_file

    build = compile_file(cap.KERNEL, arch=cap.BUILD_ARCH, defines=provenance.build_defines(cap.PROVENANCE_NAME))
    assert build.arch == "sm_90a"
    assert {v.key for v in cap.VARIANTS} <= set(build.entry_points)
    for entry in build.entry_points.values():
        assert entry.spill_stores == 0 and entry.spill_loads == 0, str(entry)


def test_fragment_formulas_are_flashsim_layouts_m16n8_maps_per_warp():
    """wgmma's D fragment (and the f16 A fragment) as the kernel loads them: warp w of the warpgroup holds rows
    16 w .. 16 w + 15 as mma.m16n8k16's C (A) fragment, its N / 8 column blocks one after the other."""
    for n in (8, 64, 256):
        (dr, dc), (ar, ac) = cap.fragment_maps(n)
        for t in range(128):
            w, g, q = t >> 5, (t & 31) >> 2, t & 3
            for i in range(n // 2):
                r, c = c_coord(g, q, i % 4)
                assert (dr[t, i], dc[t, i]) == (16 * w + r, 8 * (i // 4) + c)
            for j in range(8):
                r, c = a_coord(g, q, j)
                assert (ar[t, j], ac[t, j]) == (16 * w + r, c)
    text = kernel_path(cap.KERNEL).read_text()
    for formula in (
        "16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1)",
        "8 * (i >> 2) + 2 * (t & 3) + (i & 1)",
        "2 * (t & 3) + (j & 1) + 8 * (j >> 2)",
    ):
        assert formula in text


def test_shared_memory_layout_is_cutes_k_major_interleave():
    """The staging layout is CuTe's canonical K-major no-swizzle GMMA layout ((8, m), (T, 2)) : ((1T, SBO), (1, LBO))
    (cute/atom/mma_traits_sm90_gmma.hpp, in units of 16 bytes there; in bytes here, T = 16), with the LBO and SBO the
    kernel's descriptors carry."""
    rows = 256
    layout = Layout(((8, rows // 8), (16, 2)), ((16, cap.SBO), (1, cap.LBO)))
    r, kb = np.meshgrid(np.arange(rows), np.arange(32), indexing="ij")
    want = np.vectorize(lambda i, k: layout(((i % 8, i // 8), (k % 16, k // 16))))(r, kb)
    np.testing.assert_array_equal(cap.smem_offset(r, kb), want)
    assert "((u64)(128u >> 4) << 16) | ((u64)(256u >> 4) << 32)" in kernel_path(cap.KERNEL).read_text()
    assert (cap.LBO, cap.SBO) == (128, 256)


def test_generator_is_frozen():
    """Stored captures regenerate their inputs from the seed: a new probe needs a new GENERATOR_VERSION."""
    h = hashlib.sha256()
    for v in cap.VARIANTS:
        h.update(cap._digest(cap.generate(v, scale=0.25)).encode())
    assert h.hexdigest() == "12e7a22e1ea5ca21e8bb16cc9c494e6bcf91e9c442b7ff1492bffc22ec07b219"


def test_every_variant_covers_its_categories_and_the_scale_d_flag():
    for v in cap.VARIANTS:
        gen = cap.generate(v, scale=0.25)
        assert len(gen["names"]) == len(set(gen["names"])) and gen["scale_d"].dtype == bool
        assert (~gen["scale_d"]).any() and gen["scale_d"].any(), v.key
        assert gen["a"].shape[1:] == (64, v.f.K) and gen["b"].shape[1:] == (v.f.K, v.N)


def test_fake_capture_round_trip_and_mismatch_report(tmp_path, capsys):
    """The host logic on the model through the fragment maps: files written and read back, exit status 0; a
    corrupted run gives exit status 2 and names the variant."""
    only = "f32_f16_f16_n8,s32_u8_s8_n64_sat,f16_e5m2_e4m3_n64_nb,tf32_tf32_n8"
    assert cap.main(["--out", str(tmp_path), "--fake", "--scale", "0.25", "--only", only]) == 0
    back = cap.load_capture(tmp_path / "wgmma_sm90.npz")
    assert {"wgmma_f32_f16_f16_n8", "wgmma_s32_u8_s8_n64_sat", "wgmma_f32_tf32_tf32_n8"} <= set(back["variants"])
    summary = json.loads((tmp_path / "wgmma_sm90_summary.json").read_text())
    assert summary["provenance"]["kernel"] == "kernel/capture/wgmma.cu"
    assert all(r["total_bad"] == 0 for r in summary["verdict"].values())
    assert (
        cap.main(["--out", str(tmp_path), "--fake", "--scale", "0.25", "--only", "n8_ra", "--fake-corrupt", "5"]) == 2
    )
    assert "differ" in capsys.readouterr().out
    assert cap.main(["--out", str(tmp_path), "--fake", "--only", "nothing"]) == 1
