"""CUTLASS 3's sm90 TMA warp-specialised GEMM (kernel/thirdparty/cutlass_sm90_gemm.cu), launched from the Params
CUTLASS's own host code builds.

The unit is a host program as well as a kernel: built with nvcc (the device code for sm_90a, the host code linked
with flashsim.ptx.hostshim's cuTensorMapEncodeTiled shim), it writes the kernel's parameter bytes and launch for
the device addresses it is given. Here those are flashsim.ptx.address values, and the tagged maps are replaced by
tensor_map_tiled's (``describe``); on the GPU the same program runs the GEMM itself with the driver's maps
(tools/thirdparty_capture.py cutlass). The PTX the simulator runs is ``nvcc -ptx`` of the same unit and flags,
which is the PTX nvcc embeds and assembles in the program (the capture checks it from the build's kept files).

Problem: D = alpha A B + beta C, M = N = 256, K = 128: a 2 x 2 grid of 128 x 128 tiles (two 2 x 1 clusters, the B
tiles multicast), two K blocks of 64 per tile. Two input sets: standard normals, and adversarial ones (``CASES``).
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import flashsim.ptx as fptx
from flashsim.ptx import hostshim

from . import hostprogram

__all__ = [
    "UNIT",
    "ARCH",
    "CASES",
    "Case",
    "inputs",
    "reference",
    "build_host",
    "describe",
    "simulate",
    "relative_maps",
]

PACKAGE = "nvidia-cutlass"
UNIT = "thirdparty/cutlass_sm90_gemm.cu"
ARCH = hostprogram.ARCH
INCLUDES = ("include", "tools/util/include")
# CUTLASS's CMake build of a Release sm90a kernel: -O3 -DNDEBUG, C++17, --expt-relaxed-constexpr and
# CUTLASS_ENABLE_TENSOR_CORE_MMA; CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL (CUTLASS's CMake option of that name) makes
# the host code call cuTensorMapEncodeTiled by name, so that the shim is linked in; it changes no device code.
FLAGS = (
    "-O3",
    "-DNDEBUG",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
)
M, N, K = 256, 256, 128
ALPHA, BETA = 1.25, -0.5  # exact in f32; beta != 0, so C is loaded (by TMA) and the epilogue is an FMA


@dataclass(frozen=True)
class Case:
    """One input set: ``name`` names the capture (tests/data/thirdparty/<name>_sm90a.npz)."""

    name: str
    seed: int
    adversarial: bool
    note: str
    # what build.build_ptx and capture.record read of a third-party launch
    package: str = PACKAGE
    unit: str = UNIT
    includes: tuple = INCLUDES
    flags: tuple = FLAGS
    outputs: tuple = ("D",)


CASES = {
    c.name: c
    for c in (
        Case("cutlass_sm90_gemm_normal", 90, False, "standard normal A, B, C"),
        Case(
            "cutlass_sm90_gemm_adversarial",
            91,
            True,
            "exponents over 2^-60..2^60 and bf16 subnormals, K entries of A up to 2^121 (bf16's top range) against "
            "B's down to 2^-120, exactly cancelling product pairs with a small remainder, and C set to cancel "
            "alpha A B",
        ),
    )
}


def _bf16(x) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float32).astype(ml_dtypes.bfloat16)


def inputs(case: Case, n: int = N) -> dict:
    """A (M x K, row-major), B (K x N column-major, stored N x K), C and D (M x N column-major, stored N x M); ``n``
    (a multiple of the 128-column tile) for a smaller problem than the captures' (the sanitizer runs)."""
    rng = np.random.default_rng(case.seed)
    if not case.adversarial:
        a, b = _bf16(rng.standard_normal((M, K))), _bf16(rng.standard_normal((n, K)))
        c = rng.standard_normal((n, M)).astype(np.float32)
        return {"A": a, "B": b, "C": c, "D": np.zeros((n, M), np.float32)}
    sign = lambda shape: rng.choice([-1.0, 1.0], shape)  # noqa: E731
    a = sign((M, K)) * rng.uniform(1, 2, (M, K)) * 2.0 ** rng.integers(-60, 61, (M, K))
    b = sign((n, K)) * rng.uniform(1, 2, (n, K)) * 2.0 ** rng.integers(-60, 61, (n, K))
    a[:, :8] = sign((M, 8)) * 2.0 ** rng.integers(-133, -127, (M, 8))  # bf16 subnormals
    pairs = slice(32, 64)  # rows whose odd K entries cancel the even ones exactly, leaving tiny terms
    a[pairs, 1::2] = -a[pairs, 0::2]
    b[:, 1::2] = b[:, 0::2]
    a[pairs, K - 1] = 2.0**-20
    big = slice(16, 24)  # K entries of A reaching 2^120 against B's down to 2^-120: products of ordinary size
    a[:, big] *= 2.0**60
    b[:, big] *= 2.0**-60
    a, b = _bf16(a), _bf16(b)
    prod = a.astype(np.float64) @ b.astype(np.float64).T  # M x N
    c = np.ascontiguousarray(ALPHA / -BETA * prod.T, np.float32)  # beta C cancels alpha A B up to rounding
    c[:, ::3] = rng.standard_normal((n, (M + 2) // 3)).astype(np.float32)
    return {"A": a, "B": b, "C": c, "D": np.zeros((n, M), np.float32)}


def reference(arrays: dict) -> tuple:
    """(float64 D as stored, N x M; elementwise error bound) for ``arrays``' inputs: the bound is 2^-16 of the sum of
    the magnitudes that enter each output (f32 accumulation over K = 128 in chunks, then the epilogue's rounding)."""
    a, b = arrays["A"].astype(np.float64), arrays["B"].astype(np.float64)
    c = arrays["C"].astype(np.float64)
    want = ALPHA * (b @ a.T) + BETA * c
    scale = abs(ALPHA) * (np.abs(b) @ np.abs(a).T) + abs(BETA) * np.abs(c)
    return want, 2.0**-16 * scale + 2.0**-126


def build_host(staged: pathlib.Path | None = None, keep: pathlib.Path | None = None) -> pathlib.Path:
    """The harness program (hostprogram.build_program of this unit)."""
    return hostprogram.build_program(CASES[next(iter(CASES))], staged, keep)


def run_harness(program, args: list, folder: pathlib.Path, mode: str) -> tuple[dict, list]:
    """Run the harness with ``args`` in ``folder``, the shim in ``mode`` ("tag" or "forward"); (its launch JSON,
    the shim's log)."""
    log = hostprogram.run_program(program, args, folder, mode)
    return json.loads((folder / "launch.json").read_text()), log


def describe(program, arrays: dict) -> tuple[dict, list, bytes]:
    """(the launch JSON, the shim's log, the parameter bytes with flashsim's maps) for ``arrays`` in the
    simulator: the harness run with their flashsim.ptx addresses."""
    pointers = [hex(fptx.address(arrays[n])) for n in "ABCD"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        (m, k), n = arrays["A"].shape, arrays["B"].shape[0]
        args = ["describe", m, n, k, repr(ALPHA), repr(BETA), *pointers, folder / "launch.json"]
        launch, log = run_harness(program, args, folder, "tag")
    params = hostshim.patch_params(bytes.fromhex(launch["params"]), log, list(arrays.values()))
    return launch, log, params


def simulate(ptx: str, program, arrays: dict, check=None):
    """Run the GEMM in flashsim.ptx on ``arrays`` (D written in place); the launch report."""
    launch, _log, params = describe(program, arrays)
    module = fptx.load(ptx, arch=ARCH)
    (entry,) = module.ir.entries()
    return fptx.launch(
        module.kernel(entry),
        tuple(launch["grid"]),
        tuple(launch["block"]),
        [params],
        shared_mem=launch["shared_bytes"],
        cluster=tuple(launch["cluster"]),
        check=check,
    )


def relative_maps(log: list, pointers: list) -> list:
    """The shim's log with each global address written as (array name, byte offset) against ``pointers`` (A, B, C,
    D's device addresses): comparable between the simulator's run and the GPU's."""
    out = []
    for record in log:
        where = int(record["global_address"])
        name, base = max(((n, p) for n, p in zip("ABCD", pointers) if p <= where), key=lambda np_: np_[1])
        out.append({**record, "global_address": [name, where - base]})
    return out
