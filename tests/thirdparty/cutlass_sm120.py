"""CUTLASS 4.2's sm120 block-scaled GEMM (kernel/thirdparty/cutlass_sm120_nvfp4_gemm.cu: NVFP4 x NVFP4, f32 out),
launched in flashsim.ptx with arch="sm_120" from the Params CUTLASS's own host code builds.

As the sm90 GEMM (cutlass_gemm.py), the unit is a host program as well as a kernel, built with nvcc for sm_120a and
flashsim.ptx.hostshim's cuTensorMapEncodeTiled shim: it writes the kernel's parameter bytes and launch for the
device addresses it is given, and where CUTLASS's scale-factor layouts put each block scale; here those addresses
are flashsim.ptx.address values and the tagged maps are replaced by tensor_map_tiled's (``describe``). No sm_120 GPU
is here: the launch is held to float64 and each mma to mmasim (tests/test_ptx_thirdparty_sm120.py).

Problem: D = alpha A B + beta C, M = N = 128, K = 256: one 128 x 128 tile, two K blocks of 128 (the pipeline turns
over), every scale of A and B its own (K / 16 = 16 per row and column).
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

__all__ = ["ARCH", "CASE", "Case", "inputs", "reference", "build_host", "layout", "describe", "simulate"]

PACKAGE = "nvidia-cutlass"
UNIT = "thirdparty/cutlass_sm120_nvfp4_gemm.cu"
ARCH = "sm_120a"  # the block-scaled mma kinds and cluster launch control are sm_120a's
INCLUDES = ("include", "tools/util/include")
# CUTLASS's CMake build of a Release sm120a kernel (as for the sm90 unit: cutlass_gemm.FLAGS)
FLAGS = (
    "-O3",
    "-DNDEBUG",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-DCUTLASS_ENABLE_TENSOR_CORE_MMA=1",
    "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
)
M, N, K = 128, 128, 256
SF_VEC = 16  # NVFP4: one ue4m3 scale per 16 consecutive k
ALPHA, BETA = 1.25, -0.5
POINTERS = ("A", "B", "SFA", "SFB", "C", "D")


@dataclass(frozen=True)
class Case:
    """What build.build_ptx reads of a third-party launch (the unit's one input set)."""

    name: str = "cutlass_sm120_nvfp4_gemm"
    seed: int = 120
    package: str = PACKAGE
    unit: str = UNIT
    includes: tuple = INCLUDES
    flags: tuple = FLAGS
    outputs: tuple = ("D",)


CASE = Case()


def _e2m1(codes) -> np.ndarray:
    return np.asarray(codes, np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float64)


def _ue4m3(codes) -> np.ndarray:
    """ue4m3 scale codes (0..127) -> float64: e4m3 with the sign bit clear (ml_dtypes' float8_e4m3fn)."""
    return (np.asarray(codes, np.uint8) & 0x7F).view(ml_dtypes.float8_e4m3fn).astype(np.float64)


def _pack(codes: np.ndarray) -> np.ndarray:
    """e2m1 codes (rows, K) -> (rows, K / 2) bytes, the lower k in the low nibble (CUTLASS's sub-byte packing)."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def _unpack(packed: np.ndarray) -> np.ndarray:
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[0], -1)


def layout(program) -> dict:
    """CUTLASS's scale-factor layouts for M, N, K: {"sfa": (M, K / 16) element offsets, "sfb": (N, K / 16),
    "sfa_size", "sfb_size"} (the harness run with placeholder addresses)."""
    launch, _log = _run(program, [hex(0x10000 * (i + 1)) for i in range(len(POINTERS))])
    return {
        "sfa": np.array(launch["sfa"], np.int64).reshape(M, K // SF_VEC),
        "sfb": np.array(launch["sfb"], np.int64).reshape(N, K // SF_VEC),
        "sfa_size": launch["sfa_size"],
        "sfb_size": launch["sfb_size"],
    }


def inputs(case: Case, sf_layout: dict) -> dict:
    """A (M x K e2m1 codes, row-major, packed), B (N x K, packed: K x N column-major), their ue4m3 scales placed as
    CUTLASS's layouts say (each scale 2^-3..2^3 with random mantissas), C (M x N f32, row-major) and D."""
    rng = np.random.default_rng(case.seed)
    a = rng.integers(0, 16, (M, K)).astype(np.uint8)
    b = rng.integers(0, 16, (N, K)).astype(np.uint8)
    sfa = np.zeros(sf_layout["sfa_size"], np.uint8)
    sfb = np.zeros(sf_layout["sfb_size"], np.uint8)
    sfa[sf_layout["sfa"]] = rng.integers(0x20, 0x51, (M, K // SF_VEC))
    sfb[sf_layout["sfb"]] = rng.integers(0x20, 0x51, (N, K // SF_VEC))
    c = rng.standard_normal((M, N)).astype(np.float32)
    return {"A": _pack(a), "B": _pack(b), "SFA": sfa, "SFB": sfb, "C": c, "D": np.zeros((M, N), np.float32)}


def dequantised(arrays: dict, sf_layout: dict) -> tuple[np.ndarray, np.ndarray]:
    """(A, B^T) as float64 (M x K, N x K): codes times their block scales."""
    sa = np.repeat(_ue4m3(arrays["SFA"][sf_layout["sfa"]]), SF_VEC, axis=1)
    sb = np.repeat(_ue4m3(arrays["SFB"][sf_layout["sfb"]]), SF_VEC, axis=1)
    return _e2m1(_unpack(arrays["A"])) * sa, _e2m1(_unpack(arrays["B"])) * sb


def reference(arrays: dict, sf_layout: dict) -> tuple:
    """(float64 D, elementwise bound). Each mma (k64, mxf4nvf4) sums its 4 exact groups of 16 products and c aligned
    to F = 35 bits, rounded toward zero to f32 (at most 2^-23 of the largest magnitude in it); K / 64 of them chain
    through c; the epilogue's fma rounds once more: 2^-22 (K / 64 + 1) of the magnitudes bounds all of it."""
    a, b = dequantised(arrays, sf_layout)
    c = arrays["C"].astype(np.float64)
    want = ALPHA * (a @ b.T) + BETA * c
    scale = abs(ALPHA) * (np.abs(a) @ np.abs(b).T) + abs(BETA) * np.abs(c)
    return want, 2.0**-22 * (K // 64 + 1) * scale + 2.0**-126


def build_host(staged: pathlib.Path | None = None) -> pathlib.Path:
    """The harness program (hostprogram.build_program of this unit, for sm_120a)."""
    return hostprogram.build_program(CASE, staged, arch=ARCH)


def _run(program, pointers: list) -> tuple[dict, list]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        args = ["describe", M, N, K, repr(ALPHA), repr(BETA), *pointers, folder / "launch.json"]
        log = hostprogram.run_program(program, args, folder, "tag")
        return json.loads((folder / "launch.json").read_text()), log


def describe(program, arrays: dict) -> tuple[dict, list, bytes]:
    """(the launch JSON, the shim's log, the parameter bytes with flashsim's maps) for ``arrays`` in the simulator."""
    launch, log = _run(program, [hex(fptx.address(arrays[n])) for n in POINTERS])
    params = hostshim.patch_params(bytes.fromhex(launch["params"]), log, [arrays[n] for n in POINTERS])
    return launch, log, params


def simulate(ptx: str, program, arrays: dict, check=None, trace=None):
    """Run the GEMM in flashsim.ptx (arch="sm_120") on ``arrays`` (D written in place); (the launch report, the launch
    JSON)."""
    launch, _log, params = describe(program, arrays)
    module = fptx.load(ptx, arch="sm_120")
    (entry,) = module.ir.entries()
    report = fptx.launch(
        module.kernel(entry),
        tuple(launch["grid"]),
        tuple(launch["block"]),
        [params],
        shared_mem=launch["shared_bytes"],
        cluster=(1, 1, 1),
        check=check,
        trace=trace,
    )
    return report, launch
