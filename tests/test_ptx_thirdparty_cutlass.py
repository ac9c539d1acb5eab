"""CUTLASS 3's sm90 TMA warp-specialised cooperative GEMM (2 x 1 cluster, multicast TMA, wgmma, TMA epilogue), built
from the pinned nvidia-cutlass wheel with CUTLASS's flags and launched in flashsim.ptx from the Params CUTLASS's own
host code builds (flashsim.ptx.hostshim): the host code's tensor maps are what the operands ask for, the simulated
GEMM computes alpha A B + beta C, runs clean under racecheck and memcheck, and is bit for bit what the GPU returned
(tests/data/thirdparty/cutlass_sm90_gemm_<case>_sm90a.npz, made by tools/thirdparty_capture.py capture-cutlass),
from the very PTX the GPU ran, with the maps CUTLASS asked of the driver there. The same for CuTe's Hopper tutorial
GEMM (wgmma_tma_sm90.cu, fp16 accumulators, a 3-stage pipeline, its maps passed as separate kernel arguments), run
from the arguments the tutorial's own host code passes to cudaLaunchKernelExC.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from thirdparty import build, capture, cute_tutorial, cutlass_gemm, hostprogram, packages

from flashsim.ptx import hostshim

pytestmark = [
    pytest.mark.sass,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit's compiler) on PATH"),
]

CASES = sorted(cutlass_gemm.CASES)


@pytest.fixture(scope="module")
def built():
    """(the harness program: host code linked with the shim; the PTX nvcc assembled into it): one nvcc run, kept in
    the user cache (the PTX is nvcc -ptx's of the unit and flags, which the captures' PTX hash holds)."""
    return hostprogram.build_with_ptx(cutlass_gemm.CASES[CASES[0]], arch=cutlass_gemm.ARCH)


@pytest.fixture(scope="module")
def ptx(built):
    return built[1]


@pytest.fixture(scope="module")
def program(built):
    return built[0]


@pytest.fixture(scope="module")
def simulated(ptx, program):
    """{case: its arrays after the simulated launch (under memcheck)}."""
    out = {}
    for name in CASES:
        arrays = cutlass_gemm.inputs(cutlass_gemm.CASES[name])
        cutlass_gemm.simulate(ptx, program, arrays, check="memcheck")
        out[name] = arrays
    return out


def test_every_case_is_one_build():
    """The cases differ in their inputs only: what goes into the build (package, unit, includes, flags) is the same,
    so one build serves them all (each capture's PTX hash is checked against it below)."""
    for cases in (cutlass_gemm.CASES, cute_tutorial.CASES):
        assert len({(c.package, c.unit, c.includes, c.flags) for c in cases.values()}) == 1


def test_host_code_asks_for_the_operands_maps(program):
    """CUTLASS's host code, run here without a driver: one map per operand, each over its whole matrix (dims
    innermost first, byte strides, the batch mode of extent 1 with stride 0), a 128B swizzle, and boxes of the
    tile's K block (A: 64 x 128; B: 64 x 64, half of its 128 rows, since each block of the 2 x 1 cluster loads half
    and multicasts it); and the launch is a persistent 2 x 2 grid of 384-thread blocks in 2 x 1 clusters."""
    arrays = cutlass_gemm.inputs(cutlass_gemm.CASES[CASES[0]])
    launch, log, params = cutlass_gemm.describe(program, arrays)
    M, N, K = cutlass_gemm.M, cutlass_gemm.N, cutlass_gemm.K
    maps = cutlass_gemm.relative_maps(log, [int(p) for p in launch["pointers"]])
    shape = [(m["global_address"], m["global_dim"], m["global_strides"], m["box_dim"], m["swizzle"]) for m in maps]
    assert shape == [
        (["A", 0], [K, M, 1], [2 * K, 0], [64, 128, 1], 3),
        (["B", 0], [K, N, 1], [2 * K, 0], [64, 64, 1], 3),
        (["C", 0], [M, N, 1], [4 * M, 0], [32, 32, 1], 3),
        (["D", 0], [M, N, 1], [4 * M, 0], [32, 32, 1], 3),
    ]
    assert (launch["grid"], launch["block"], launch["cluster"]) == ([2, 2, 1], [384, 1, 1], [2, 1, 1])
    assert 0 < launch["shared_bytes"] <= 227 * 1024
    raw = bytes.fromhex(launch["params"])
    tags = [o for o in range(0, len(raw), 64) if raw[o : o + 8] == hostshim.TAG]
    assert len(tags) == len(log) and len(params) == len(raw)
    assert all(params[o : o + 128] == hostshim.tensor_map(log[raw[o + 8]], arrays.values()).bytes for o in tags)


@pytest.mark.parametrize("name", CASES)
def test_simulated_gemm_computes_alpha_ab_plus_beta_c(name, simulated):
    arrays = simulated[name]
    want, bound = cutlass_gemm.reference(arrays)
    assert np.isfinite(arrays["D"]).all()
    err = np.abs(arrays["D"].astype(np.float64) - want)
    worst = np.unravel_index(np.argmax(err / bound), err.shape)
    assert (err <= bound).all(), f"{name}: D{worst} is {err[worst]:.3g} off, past its bound {bound[worst]:.3g}"


@pytest.mark.parametrize("check", ["racecheck", "memcheck"])
def test_gemm_runs_clean_under_the_sanitizers(check, ptx, program):
    """No shared-memory hazard (the producer's TMA writes, the consumers' wgmma reads and the epilogue's stores
    ordered by mbarriers, fences and named barriers) and no access outside the arrays; on one 2 x 1 cluster (N = 128:
    the captures' problem has two alike, and racecheck's bookkeeping is most of this file's time)."""
    arrays = cutlass_gemm.inputs(cutlass_gemm.CASES["cutlass_sm90_gemm_normal"], n=128)
    cutlass_gemm.simulate(ptx, program, arrays, check=check)
    want, bound = cutlass_gemm.reference(arrays)
    assert (np.abs(arrays["D"] - want) <= bound).all()


@pytest.mark.parametrize("name", CASES)
def test_simulator_is_bit_equal_to_the_gpu(name, ptx, program, simulated):
    path = capture.capture_path(name, cutlass_gemm.ARCH)
    if not path.is_file():
        pytest.skip(
            f"{path.name} is not captured yet: run `python3 tools/thirdparty_capture.py capture-cutlass --sources "
            f".thirdparty --out DIR` on an H100 / H200 and store DIR/{path.name} in tests/data/thirdparty/"
        )
    before, after, meta = capture.load(path)
    package = packages.PACKAGES[cutlass_gemm.PACKAGE]
    assert (meta["package"], meta["version"], meta["archive_sha256"]) == (package.name, package.version, package.sha256)
    if meta["nvcc"] != build.nvcc_version():
        pytest.skip(f"the capture ran PTX from nvcc {meta['nvcc']!r}; this machine's is {build.nvcc_version()!r}")
    assert meta["ptx_sha256"] == build.ptx_sha256(ptx), f"{name}: the PTX built today is not the one the GPU ran"
    seeded = cutlass_gemm.inputs(cutlass_gemm.CASES[name])
    for array, value in before.items():
        assert value.tobytes() == seeded[array].tobytes(), f"{name}: stored input {array} is not the seeded one"
    # the same maps asked of the driver there as of the shim here (the Params bytes themselves are not compared:
    # CUTLASS's Params has padding the host code leaves uninitialised, stack bytes that differ run to run)
    launch, log, _params = cutlass_gemm.describe(program, seeded)
    assert meta["tensor_maps"] == cutlass_gemm.relative_maps(log, launch["pointers"])
    assert [meta["grid"], meta["block"], meta["cluster"], meta["shared_bytes"]] == [
        launch["grid"],
        launch["block"],
        launch["cluster"],
        launch["shared_bytes"],
    ]
    gpu, sim = after["D"].view(np.uint32), simulated[name]["D"].view(np.uint32)
    diff = np.argwhere(gpu != sim)
    if diff.size:
        i = tuple(int(j) for j in diff[0])
        pytest.fail(
            f"{name}.D: {len(diff)} of {gpu.size} elements differ from the GPU's; first D[{i[1]}, {i[0]}] (row, "
            f"column): GPU {int(gpu[i]):#010x}, simulator {int(sim[i]):#010x}"
        )


# CuTe's Hopper tutorial GEMM (tests/thirdparty/cute_tutorial.py): the maps and arguments its own host code passes
TUTORIAL = sorted(cute_tutorial.CASES)


@pytest.fixture(scope="module")
def tutorial():
    """(its PTX, its program, {case: (inputs before, arrays after the simulated launch under memcheck)})."""
    program, ptx = hostprogram.build_with_ptx(cute_tutorial.CASES[TUTORIAL[0]], arch=cute_tutorial.ARCH)
    runs = {}
    for name in TUTORIAL:
        arrays = cute_tutorial.inputs(cute_tutorial.CASES[name])
        before = {n: a.copy() for n, a in arrays.items()}
        cute_tutorial.simulate(ptx, program, arrays, check="memcheck")
        runs[name] = (before, arrays)
    return ptx, program, runs


def test_tutorial_host_code_launches_what_the_tutorial_says(tutorial):
    """gemm_tn's launch: 128 x 128 tiles in 2 x 1 clusters of 128-thread blocks; one 128B-swizzled map per operand
    with a 64 x 128 box (K block x tile rows), passed as separate arguments; every argument as the PTX declares it."""
    ptx, program, _runs = tutorial
    arrays = cute_tutorial.inputs(cute_tutorial.CASES[TUTORIAL[0]])
    launch, log, params = cute_tutorial.describe(ptx, program, arrays)
    assert (launch["grid"], launch["block"], launch["cluster"]) == ([2, 2, 1], [128, 1, 1], [2, 1, 1])
    assert [len(p) for p in params] == cute_tutorial.entry(ptx)[1]
    maps = cutlass_gemm.relative_maps(log, cute_tutorial.pointers(launch))
    M, N, K = cute_tutorial.M, cute_tutorial.N, cute_tutorial.K
    assert [(m["global_address"], m["global_dim"], m["global_strides"], m["box_dim"], m["swizzle"]) for m in maps] == [
        (["A", 0], [K, M], [2 * K], [64, 128], 3),
        (["B", 0], [K, N], [2 * K], [64, 128], 3),
    ]


@pytest.mark.parametrize("name", TUTORIAL)
def test_simulated_tutorial_computes_alpha_ab_plus_beta_c(name, tutorial):
    before, after = tutorial[2][name]
    want, bound = cute_tutorial.reference(before)
    got = after["C"].astype(np.float64)
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= bound).all(), f"{name}: max error {np.abs(got - want).max():.3g}"


def test_tutorial_runs_clean_under_racecheck(tutorial):
    ptx, program, _runs = tutorial
    arrays = cute_tutorial.inputs(cute_tutorial.CASES["cute_tutorial_gemm_normal"])
    cute_tutorial.simulate(ptx, program, arrays, check="racecheck")


@pytest.mark.parametrize("name", TUTORIAL)
def test_simulated_tutorial_is_bit_equal_to_the_gpu(name, tutorial):
    ptx, program, runs = tutorial
    path = capture.capture_path(name, cute_tutorial.ARCH)
    if not path.is_file():
        pytest.skip(
            f"{path.name} is not captured yet: run `python3 tools/thirdparty_capture.py capture-cutlass --sources "
            f".thirdparty --out DIR` on an H100 / H200 and store DIR/{path.name} in tests/data/thirdparty/"
        )
    before, after, meta = capture.load(path)
    if meta["nvcc"] != build.nvcc_version():
        pytest.skip(f"the capture ran PTX from nvcc {meta['nvcc']!r}; this machine's is {build.nvcc_version()!r}")
    assert meta["ptx_sha256"] == build.ptx_sha256(ptx), f"{name}: the PTX built today is not the one the GPU ran"
    seeded, simulated = runs[name]
    assert all(before[n].tobytes() == seeded[n].tobytes() for n in "ABC"), f"{name}: stored inputs are not the seeded"
    launch, log, _params = cute_tutorial.describe(ptx, program, cute_tutorial.inputs(cute_tutorial.CASES[name]))
    assert meta["tensor_maps"] == cutlass_gemm.relative_maps(log, cute_tutorial.pointers(launch))
    gpu, sim = after["C"].view(np.uint16), simulated["C"].view(np.uint16)
    diff = np.argwhere(gpu != sim)
    if diff.size:
        i = tuple(int(j) for j in diff[0])
        pytest.fail(
            f"{name}.C: {len(diff)} of {gpu.size} elements differ from the GPU's; first C[{i[1]}, {i[0]}] (row, "
            f"column): GPU {int(gpu[i]):#06x}, simulator {int(sim[i]):#06x}"
        )
