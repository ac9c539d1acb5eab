"""Consumer Blackwell (sm_120a) kernels of other projects, built from their pinned PyPI sources with their own nvcc
flags for sm_120a and run in flashsim.ptx with arch="sm_120": llama.cpp's W4A4 MXFP4 and NVFP4 mmq (tests/thirdparty:
kernels.SM120_KERNELS) and CUTLASS 4.2's sm120 NVFP4 GEMM (cutlass_sm120.py, launched from CUTLASS's own host
code). No sm_120 GPU is here, so there is no silicon capture: each simulated launch is held to a float64 reference
of the kernel's own math (the operands as the kernel quantised them, then exact arithmetic) within the bound the
model predicts, and each of its block-scaled mma.sync instructions, warp by warp, to MMA-Sim's RTX Blackwell model
(mmasim) on the registers the kernel fed it (tests/thirdparty/mma_trace.py). The CUTLASS GEMMs cost minutes of nvcc
each: they run where built, or with FLASHSIM_THIRDPARTY_FULL=1 (tests/thirdparty/hostprogram.FULL_BUILDS).
"""

from __future__ import annotations

import importlib.util
import shutil
import types

import numpy as np
import pytest
from thirdparty import build, capture, cutlass_sm120, hostprogram, kernels, mma_trace

import flashsim.ptx as fptx
from flashsim.ptx.errors import UnsupportedInstruction
from flashsim.ptx.parser import parse

pytestmark = [
    pytest.mark.sass,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit's compiler) on PATH"),
]

NAMES = sorted(kernels.SM120_KERNELS)
BUILD_ARCH = "sm_120a"  # the block-scaled kinds exist on sm_120a alone (ptxas refuses them on plain sm_120)
ARCH = "sm_120"


@pytest.fixture(scope="module")
def ptx():
    """{kernel name: its sm_120a PTX}, built once (and kept in the user cache)."""
    return {name: build.build_ptx(kernels.SM120_KERNELS[name], arch=BUILD_ARCH) for name in NAMES}


@pytest.fixture(scope="module")
def simulated(ptx):
    """{kernel name: (its arrays after the simulated launch under memcheck, the mma instructions, their trace, the
    launch's block)}."""
    if importlib.util.find_spec("mmasim") is None:
        pytest.skip("needs mmasim (MMA-Sim's models: the per-instruction oracle)")
    out = {}
    for name in NAMES:
        kernel = kernels.SM120_KERNELS[name]
        module = fptx.load(ptx[name], arch=ARCH)
        entry = capture.single_entry(module.ir)
        grid, block, shared = kernel.launch(module.ir)
        arrays = kernel.arrays()
        params = kernel.parameters(module.ir, arrays, lambda n, arrays=arrays: fptx.address(arrays[n]))
        mmas = mma_trace.kind_mmas(module.ir, entry)
        trace = mma_trace.trace(mmas)
        fptx.launch(module.kernel(entry), grid, block, params, shared_mem=shared, check="memcheck", trace=trace)
        out[name] = (arrays, mmas, trace, block)
    return out


FORMS = {
    "llama_mmq_mxfp4": "kind::mxf4.block_scale.scale_vec::2X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue8m0",
    "llama_mmq_nvfp4": "kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3",
}


@pytest.mark.parametrize("name", NAMES)
def test_the_build_takes_the_block_scaled_path(name, ptx):
    """Built for sm_120a, llama.cpp's W4A4 FP4 kernels multiply with one block-scaled form alone (mma.cuh's
    mma_block_scaled_fp4 under BLACKWELL_MMA_AVAILABLE): 16 instructions, selectors {0, 0}, no other mma."""
    mmas = [line for line in ptx[name].splitlines() if line.strip().startswith("mma.")]
    form = "mma.sync.aligned." + FORMS[name] + " "
    assert len(mmas) == 16 and all(m.strip().startswith(form) and m.count("{0, 0}") == 2 for m in mmas)


@pytest.mark.parametrize("name", NAMES)
def test_parameters_fit_the_ptx(name, ptx):
    kernel = kernels.SM120_KERNELS[name]
    ir = parse(ptx[name])
    entry = ir.functions[capture.single_entry(ir)]
    grid, block, shared = kernel.launch(ir)
    assert all(g >= 1 for g in grid) and 32 <= np.prod(block) <= 1024 and block[0] * block[1] % 32 == 0
    assert 0 < shared <= 101376  # sm_120's opt-in cap per block
    arrays = kernel.arrays()
    params = kernel.parameters(ir, arrays, lambda n: 0x1000 * (1 + sorted(arrays).index(n)))
    assert [len(p) for p in params] == [p.size for p in entry.params]


@pytest.mark.parametrize("name", NAMES)
def test_simulated_launch_computes_its_operation(name, simulated):
    arrays = simulated[name][0]
    for output, (want, bound) in kernels.SM120_KERNELS[name].reference(arrays).items():
        got = arrays[output].astype(np.float64)
        assert np.isfinite(got).all(), f"{name}.{output} holds non-finite values"
        err = np.abs(got - want)
        worst = np.unravel_index(np.argmax(err / bound), err.shape)
        assert (err <= bound).all(), f"{name}.{output}{worst}: {err[worst]:.3g} off, past its bound {bound[worst]:.3g}"


@pytest.mark.parametrize("name", NAMES)
def test_every_mma_instruction_is_mmasims(name, simulated):
    """Each warp's every block-scaled mma, on the fragments, scales and selectors the kernel gave it, is bit for bit
    MMA-Sim's RTX Blackwell model (2 tiles x 8 warps x 16 mma: 256 warp-level instructions)."""
    arrays, mmas, trace, block = simulated[name]
    result = mma_trace.check(mmas, trace, block)
    assert result["mismatches"] == 0, f"{name}: {result['mismatches']} elements of d differ; {result['first']}"
    assert result["instructions"] == 256


def test_the_instruction_check_sees_a_wrong_result(simulated):
    """The per-instruction check is not vacuous: one bit of one traced d flipped is reported, with its place."""
    arrays, mmas, trace, block = simulated["llama_mmq_mxfp4"]
    m = mmas[3]
    records = trace.records
    row = np.flatnonzero((records["line"] == m.line) & records["after"])[5]
    changed = records.copy()
    changed[m.d[2]][row] ^= 1
    result = mma_trace.check([m], types.SimpleNamespace(records=changed), block)
    assert result["mismatches"] == 1 and f"PTX line {m.line}" in result["first"]


@pytest.mark.parametrize("name", NAMES)
def test_refused_below_sm_120(name, ptx):
    """The same PTX on sm_90: the block-scaled kinds are refused when the kernel is decoded, as ptxas refuses them
    there, before anything runs (the output stays untouched)."""
    kernel = kernels.SM120_KERNELS[name]
    module = fptx.load(ptx[name], arch="sm_90")
    grid, block, shared = kernel.launch(module.ir)
    arrays = kernel.arrays()
    params = kernel.parameters(module.ir, arrays, lambda n: fptx.address(arrays[n]))
    entry = module.kernel(capture.single_entry(module.ir))
    with pytest.raises(UnsupportedInstruction, match="requires sm_120a"):
        fptx.launch(entry, grid, block, params, shared_mem=shared)
    assert not arrays[kernel.outputs[0]].any()


# CUTLASS 4.2's sm120 block-scaled GEMMs (tests/thirdparty/cutlass_sm120.py): NVFP4 x NVFP4 and MXFP8 x MXFP6,
# launched from the Params CUTLASS's own host code builds (TMA maps through flashsim.ptx.hostshim)
GEMMS = sorted(cutlass_sm120.CASES)


@pytest.fixture(scope="module")
def cutlass():
    """{case: (its PTX, its harness program, CUTLASS's scale-factor layouts)}, built once (kept in the user cache)."""
    out = {}
    for name in GEMMS:
        case = cutlass_sm120.CASES[name]
        why = hostprogram.unbuilt(case, f"CUTLASS's sm120 GEMM {name}", arch=cutlass_sm120.ARCH)
        if why:
            pytest.skip(why)
        program, ptx = cutlass_sm120.build(case)
        out[name] = (ptx, program, cutlass_sm120.layout(program, case))
    return out


@pytest.fixture(scope="module")
def cutlass_runs(cutlass):
    """{case: (arrays after the simulated launch under memcheck, the mma instructions, their trace, the launch)}."""
    if importlib.util.find_spec("mmasim") is None:
        pytest.skip("needs mmasim (MMA-Sim's models: the per-instruction oracle)")
    out = {}
    for name in GEMMS:
        ptx, program, sf_layout = cutlass[name]
        arrays = cutlass_sm120.inputs(cutlass_sm120.CASES[name], sf_layout)
        module = fptx.load(ptx, arch=ARCH)
        mmas = mma_trace.kind_mmas(module.ir, capture.single_entry(module.ir))
        trace = mma_trace.trace(mmas)
        _report, launch = cutlass_sm120.simulate(ptx, program, arrays, check="memcheck", trace=trace)
        out[name] = (arrays, mmas, trace, launch)
    return out


@pytest.mark.parametrize("name", GEMMS)
def test_cutlass_build_is_the_block_scaled_clc_kernel(name, cutlass):
    """The sm120 builder's kernel: one block-scaled mma form throughout (NVFP4: kind::mxf4nvf4 4X ue4m3, 64 in the
    PTX; MXFP8 x MXFP6: kind::mxf8f6f4 1X ue8m0, 128, its FP6 tile read by ldmatrix .b6x16_p32), ldmatrix, and the
    persistent scheduler's cluster launch control."""
    ptx = cutlass[name][0]
    case = cutlass_sm120.CASES[name]
    mmas = [line.strip() for line in ptx.splitlines() if line.strip().startswith("mma.")]
    assert len(mmas) == 64 * 64 // case.mma_k and all(m.startswith(case.mma_form + " ") for m in mmas)
    assert "clusterlaunchcontrol.try_cancel" in ptx and "ldmatrix" in ptx
    assert ("b6x16_p32" in ptx) == (case.b_format == "e3m2")


@pytest.mark.parametrize("name", GEMMS)
def test_cutlass_host_code_asks_for_the_operands_maps(name, cutlass):
    """CUTLASS's host code, run here without a driver: A and B by sub-byte maps where their codes are (NVFP4: both
    16U4_ALIGN8B, 64B swizzle; MXFP6: B by the padded 16U6_ALIGN16B, e4m3 A by UINT8), dims in codes, 128-code-wide
    boxes; the scale factors as UINT16 maps in CUTLASS's interleaved layout, C and D as f32 maps; one persistent
    384-thread block for the one tile, within sm_120's 99 KB of shared memory."""
    _ptx, program, sf_layout = cutlass[name]
    case = cutlass_sm120.CASES[name]
    arrays = cutlass_sm120.inputs(case, sf_layout)
    launch, log, params = cutlass_sm120.describe(program, arrays)
    M, N, K = cutlass_sm120.M, cutlass_sm120.N, cutlass_sm120.K
    base = {fptx.address(arrays[n]): n for n in cutlass_sm120.POINTERS}
    maps = [(base[r["global_address"]], r["data_type"], r["global_dim"], r["box_dim"][0]) for r in log]
    want = {"e2m1": 13, "e3m2": 15, "e4m3": 0}
    assert maps[:2] == [("A", want[case.a_format], [K, M, 1], 128), ("B", want[case.b_format], [K, N, 1], 128)]
    assert [m[:2] for m in maps[2:]] == [("SFA", 1), ("SFB", 1), ("C", 7), ("D", 7)]
    assert (launch["grid"], launch["block"]) == ([1, 1, 1], [384, 1, 1]) and launch["shared_bytes"] <= 101376
    assert len(params) == len(bytes.fromhex(launch["params"]))
    # every scale of A's rows and B's columns has a place of its own
    per = K // case.sf_vec
    assert np.unique(sf_layout["sfa"]).size == M * per and np.unique(sf_layout["sfb"]).size == N * per


@pytest.mark.parametrize("name", GEMMS)
def test_cutlass_gemm_computes_alpha_ab_plus_beta_c(name, cutlass, cutlass_runs):
    arrays = cutlass_runs[name][0]
    want, bound = cutlass_sm120.reference(arrays, cutlass[name][2], cutlass_sm120.CASES[name])
    got = arrays["D"].astype(np.float64)
    assert np.isfinite(got).all()
    err = np.abs(got - want)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert (err <= bound).all(), f"D{worst} is {err[worst]:.3g} off, past its bound {bound[worst]:.3g}"


@pytest.mark.parametrize("name", GEMMS)
def test_cutlass_every_mma_instruction_is_mmasims(name, cutlass_runs):
    """8 consumer warps, 2 K blocks of 128, each warp's 32 x 64 tile: 512 warp-level k64 instructions (NVFP4) or
    1024 k32 ones (MXFP8 x MXFP6), each on the fragments, scales and (register) selectors the kernel gave it, bit for
    bit MMA-Sim's RTX Blackwell model."""
    _arrays, mmas, trace, launch = cutlass_runs[name]
    result = mma_trace.check(mmas, trace, launch["block"])
    assert result["mismatches"] == 0, f"{name}: {result['mismatches']} elements of d differ; {result['first']}"
    assert result["instructions"] == 8 * 2 * (32 // 16) * (64 // 8) * (128 // cutlass_sm120.CASES[name].mma_k)


@pytest.mark.parametrize("name", GEMMS)
def test_cutlass_gemm_runs_clean_under_racecheck(name, cutlass):
    """The producer warp's TMA writes, the consumers' ldmatrix / scale reads and the epilogue ordered by mbarriers,
    fences and named barriers: no shared-memory hazard."""
    ptx, program, sf_layout = cutlass[name]
    case = cutlass_sm120.CASES[name]
    arrays = cutlass_sm120.inputs(case, sf_layout)
    cutlass_sm120.simulate(ptx, program, arrays, check="racecheck")
    want, bound = cutlass_sm120.reference(arrays, sf_layout, case)
    assert (np.abs(arrays["D"] - want) <= bound).all()
