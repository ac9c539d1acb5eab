"""FlashInfer's Hopper single prefill (the FlashAttention-3-derived kernel of flashinfer-python 0.7.4: a TMA producer
warpgroup, wgmma consumer warpgroups, a 2-stage transaction-count mbarrier pipeline, setmaxnreg), built from the
pinned wheel with FlashInfer's JIT flags and launched in flashsim.ptx from the parameters FlashInfer's own host code
builds (flashsim.ptx.hostshim): the host code's maps are what Q, K and V ask for, the simulated prefill computes
attention within bf16's bound of a float64 reference, runs clean under racecheck and memcheck, and is bit for bit what
the GPU returned (tests/data/thirdparty/flashinfer_sm90_prefill_<case>_sm90a.npz, made by
tools/thirdparty_capture.py capture-flashinfer), from the very PTX the GPU's program embedded.

Cost: each variant is one nvcc run of two to four and a half minutes on the 2-core machine (cached in the user cache
afterwards), and the pinned wheel is a 101 MB download. Five variants on a fresh machine would push the default suite
far past its ten minutes, so a case runs where its variant is already built, or everywhere with
FLASHSIM_THIRDPARTY_FULL=1 (tests/thirdparty/hostprogram.FULL_BUILDS: it builds what is missing); elsewhere it skips
saying so. The cases: d = 64 and 128,
causal or not, f16 and bf16, adversarial inputs, N up to 1024 (the slow ones: N = 1024, racecheck).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from thirdparty import build, capture, hostprogram, packages
from thirdparty import flashinfer_prefill as fi

pytestmark = [
    pytest.mark.sass,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit's compiler) on PATH"),
]

QUICK = "flashinfer_sm90_prefill_d64_normal"


def _gate(name: str) -> list:
    """The case's marks: slow past the quick one; skipped where its variant is not built (hostprogram.unbuilt)."""
    variant = fi.VARIANTS[fi.CASES[name].variant]
    marks = [] if name == QUICK else [pytest.mark.slow]
    why = hostprogram.unbuilt(variant, f"{name}: FlashInfer's prefill ({variant.name})")
    if why:
        marks.append(pytest.mark.skip(reason=why))
    return marks


CASES = [pytest.param(n, marks=_gate(n)) for n in sorted(fi.CASES)]
QUICK_BUILT = _gate(QUICK)  # the marks of the tests on the quick case's build alone
_BUILDS: dict = {}
_RUNS: dict = {}


def built(variant: str):
    """(program, PTX) of a variant, built once per session (and cached on disk)."""
    if variant not in _BUILDS:
        _BUILDS[variant] = fi.build(fi.VARIANTS[variant])
    return _BUILDS[variant]


def simulated(name: str):
    """(inputs before, arrays after the simulated launch under memcheck) of a case, once per session."""
    if name not in _RUNS:
        case = fi.CASES[name]
        program, ptx = built(case.variant)
        arrays = fi.inputs(case)
        before = {n: a.copy() for n, a in arrays.items()}
        fi.simulate(case, ptx, program, arrays, check="memcheck")
        _RUNS[name] = before, arrays
    return _RUNS[name]


@pytest.mark.parametrize("name", [pytest.param(QUICK, marks=QUICK_BUILT)])
def test_host_code_asks_for_the_maps_of_q_k_and_v(name):
    """FlashInfer's host code, run here without a driver: one 3D map per operand over the whole (d, N, H) tensor
    (innermost first, byte strides), a 128B swizzle, boxes of the tile (Q: d x 192 query rows, K and V: d x 128
    keys for d = 64); the launch is one 512-thread block per 192-row query tile and head (a producer warpgroup and
    three consumer warpgroups); the parameters are the three structs the PTX entry declares."""
    case = fi.CASES[QUICK]
    program, ptx = built(case.variant)
    arrays = fi.inputs(case)
    launch, log, params = fi.describe(case, ptx, program, arrays)
    assert [len(p) for p in params] == fi.entry(ptx)[1]
    assert (launch["grid"], launch["block"]) == ([1, case.heads, 1], [512, 1, 1])
    assert 0 < launch["shared_bytes"] <= 227 * 1024
    d, n, h = 64, case.qo_len, case.heads
    maps = fi.relative_maps(log, launch["pointers"])
    shape = [(m["global_address"], m["global_dim"], m["global_strides"], m["box_dim"], m["swizzle"]) for m in maps]
    assert shape == [
        (["Q", 0], [d, n, h], [2 * d * h, 2 * d], [d, 192, 1], 3),
        (["K", 0], [d, n, h], [2 * d * h, 2 * d], [d, 128, 1], 3),
        (["V", 0], [d, n, h], [2 * d * h, 2 * d], [d, 128, 1], 3),
    ]


@pytest.mark.parametrize("name", CASES)
def test_simulated_prefill_computes_attention(name):
    case = fi.CASES[name]
    before, after = simulated(name)
    o, o_bound, lse, lse_bound = fi.reference(case, before)
    got = after["O"].astype(np.float64)
    assert np.isfinite(got).all() and np.isfinite(after["LSE"]).all()
    err = np.abs(got - o)
    worst = np.unravel_index(np.argmax(err / o_bound), err.shape)
    assert (err <= o_bound).all(), f"{name}: O{worst} is {err[worst]:.3g} off, past its bound {o_bound[worst]:.3g}"
    lerr = np.abs(after["LSE"].astype(np.float64) - lse)
    assert (lerr <= lse_bound).all(), f"{name}: LSE off by up to {lerr.max():.3g}"


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(QUICK, marks=QUICK_BUILT)])
def test_prefill_runs_clean_under_racecheck(name):
    """No shared-memory hazard: the producer's TMA writes, the consumers' wgmma reads of Q, K and V, the O tile's
    stmatrix writes and the epilogue's reads, ordered by mbarriers, fences and named barriers."""
    case = fi.CASES[QUICK]
    program, ptx = built(case.variant)
    arrays = fi.inputs(case)
    fi.simulate(case, ptx, program, arrays, check="racecheck")
    assert arrays["O"].view(np.uint16).tobytes() == simulated(QUICK)[1]["O"].view(np.uint16).tobytes()


@pytest.mark.parametrize("name", CASES)
def test_simulator_is_bit_equal_to_the_gpu(name):
    path = capture.capture_path(name, fi.ARCH)
    if not path.is_file():
        pytest.skip(
            f"{path.name} is not captured yet: run `python3 tools/thirdparty_capture.py capture-flashinfer --sources "
            f".thirdparty --out DIR` on an H100 / H200 and store DIR/{path.name} in tests/data/thirdparty/"
        )
    stored_before, stored_after, meta = capture.load(path)
    package = packages.PACKAGES[fi.PACKAGE]
    assert (meta["package"], meta["version"], meta["archive_sha256"]) == (package.name, package.version, package.sha256)
    if meta["nvcc"] != build.nvcc_version():
        pytest.skip(f"the capture ran PTX from nvcc {meta['nvcc']!r}; this machine's is {build.nvcc_version()!r}")
    case = fi.CASES[name]
    program, ptx = built(case.variant)
    assert meta["ptx_sha256"] == build.ptx_sha256(ptx), f"{name}: the PTX built today is not the one the GPU ran"
    before, after = simulated(name)
    for array, value in stored_before.items():
        assert value.tobytes() == before[array].tobytes(), f"{name}: stored input {array} is not the seeded one"
    # the same maps asked of the driver there as of the shim here, and the same launch
    launch, log, _params = fi.describe(case, ptx, program, fi.inputs(case))
    assert meta["tensor_maps"] == fi.relative_maps(log, launch["pointers"])
    shape = ("grid", "block", "shared_bytes")
    assert [meta[k] for k in shape] == [launch[k] for k in shape]
    for array, width in (("O", np.uint16), ("LSE", np.uint32)):
        gpu, sim = stored_after[array].view(width), after[array].view(width)
        diff = np.argwhere(gpu != sim)
        if diff.size:
            i = tuple(int(j) for j in diff[0])
            pytest.fail(
                f"{name}.{array}: {len(diff)} of {gpu.size} elements differ from the GPU's; first {array}{list(i)} "
                f"(row, head, ...): GPU {int(gpu[i]):#x}, simulator {int(sim[i]):#x}"
            )
