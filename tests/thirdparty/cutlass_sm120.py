"""CUTLASS 4.2's sm120 block-scaled GEMMs (kernel/thirdparty/cutlass_sm120_gemm.cu: NVFP4 x NVFP4, and with
FLASHSIM_MXFP8_MXFP6 defined MXFP8 x MXFP6; f32 out), launched in flashsim.ptx with arch="sm_120" from the Params
CUTLASS's own host code builds.

As the sm90 GEMM (cutlass_gemm.py), the unit is a host program as well as a kernel, built with nvcc for sm_120a and
flashsim.ptx.hostshim's cuTensorMapEncodeTiled shim: it writes the kernel's parameter bytes and launch for the
device addresses it is given, and where CUTLASS's scale-factor layouts put each block scale; here those addresses
are flashsim.ptx.address values and the tagged maps are replaced by tensor_map_tiled's (``describe``). No sm_120 GPU
is here: the launch is held to float64 and each mma to mmasim (tests/test_ptx_thirdparty_sm120.py).

Problem: D = alpha A B + beta C, M = N = 128, K = 256: one 128 x 128 tile, two K blocks of 128 (the pipeline turns
over), every scale of A and B its own (K / 16 or K / 32 per row and column).
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

__all__ = ["ARCH", "CASES", "CASE", "Case", "inputs", "reference", "build", "layout", "describe", "simulate"]

PACKAGE = "nvidia-cutlass"
UNIT = "thirdparty/cutlass_sm120_gemm.cu"
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
ALPHA, BETA = 1.25, -0.5
POINTERS = ("A", "B", "SFA", "SFB", "C", "D")

# formats: bits per code in global memory, ml_dtypes type of the code (decoded as ml_dtypes decodes it)
_FORMATS = {
    "e2m1": (4, ml_dtypes.float4_e2m1fn),
    "e3m2": (6, ml_dtypes.float6_e3m2fn),
    "e4m3": (8, ml_dtypes.float8_e4m3fn),
}
_SCALES = {"ue4m3": ml_dtypes.float8_e4m3fn, "ue8m0": ml_dtypes.float8_e8m0fnu}


@dataclass(frozen=True)
class Case:
    """One build and input set: operand formats, the block-scale format and vector, the mma's K and the terms it
    aligns (its products' groups and c), and what build.build_ptx reads of a third-party launch."""

    name: str
    seed: int
    a_format: str
    b_format: str
    scale_format: str
    sf_vec: int
    mma_k: int
    mma_terms: int
    mma_form: str
    package: str = PACKAGE
    unit: str = UNIT
    includes: tuple = INCLUDES
    flags: tuple = FLAGS
    outputs: tuple = ("D",)


CASES = {
    c.name: c
    for c in (
        Case(
            "cutlass_sm120_nvfp4_gemm",
            120,
            "e2m1",
            "e2m1",
            "ue4m3",
            16,
            64,
            5,  # 4 exact groups of 16 products, and c
            "mma.sync.aligned.kind::mxf4nvf4.block_scale.scale_vec::4X.m16n8k64.row.col.f32.e2m1.e2m1.f32.ue4m3",
        ),
        Case(
            "cutlass_sm120_mxfp8_mxfp6_gemm",
            121,
            "e4m3",
            "e3m2",
            "ue8m0",
            32,
            32,
            33,  # 32 exact products, and c
            "mma.sync.aligned.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.row.col.f32.e4m3.e3m2.f32.ue8m0",
            flags=FLAGS + ("-DFLASHSIM_MXFP8_MXFP6",),
        ),
    )
}
CASE = CASES["cutlass_sm120_nvfp4_gemm"]


def _decode(codes, fmt: str) -> np.ndarray:
    return np.asarray(codes, np.uint8).view(_FORMATS[fmt][1]).astype(np.float64)


def _scale(codes, fmt: str) -> np.ndarray:
    """Scale codes -> float64 (ue4m3: e4m3 with the sign bit clear; ue8m0: 2^(code - 127))."""
    codes = np.asarray(codes, np.uint8) & (0x7F if fmt == "ue4m3" else 0xFF)
    return codes.view(_SCALES[fmt]).astype(np.float64)


def _pack(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Codes (rows, K) -> the rows' bytes as CUTLASS stores sub-byte types: a little-endian bit stream, code k in
    bits b k .. b k + b - 1 (b = 4, 6, 8)."""
    bits = _FORMATS[fmt][0]
    if bits == 8:
        return codes.astype(np.uint8)
    shifts = np.arange(bits, dtype=np.uint8)
    stream = ((codes[..., None] >> shifts) & 1).astype(np.uint8).reshape(codes.shape[0], -1)
    return np.packbits(stream, axis=1, bitorder="little")


def _unpack(packed: np.ndarray, fmt: str) -> np.ndarray:
    bits = _FORMATS[fmt][0]
    if bits == 8:
        return packed
    stream = np.unpackbits(packed, axis=1, bitorder="little").reshape(packed.shape[0], -1, bits)
    return (stream << np.arange(bits, dtype=np.uint8)).sum(axis=-1).astype(np.uint8)


def layout(program, case: Case = CASE) -> dict:
    """CUTLASS's scale-factor layouts for M, N, K: {"sfa": (M, K / sf_vec) element offsets, "sfb": (N, K / sf_vec),
    "sfa_size", "sfb_size"} (the harness run with placeholder addresses)."""
    launch, _log = _run(program, [hex(0x10000 * (i + 1)) for i in range(len(POINTERS))])
    return {
        "sfa": np.array(launch["sfa"], np.int64).reshape(M, K // case.sf_vec),
        "sfb": np.array(launch["sfb"], np.int64).reshape(N, K // case.sf_vec),
        "sfa_size": launch["sfa_size"],
        "sfb_size": launch["sfb_size"],
    }


def _codes(rng, fmt: str, shape) -> np.ndarray:
    """Random codes of ``fmt``, every finite one (e4m3's NaN codes 0x7F / 0xFF drawn again as zero)."""
    codes = rng.integers(0, 1 << _FORMATS[fmt][0], shape).astype(np.uint8)
    if fmt == "e4m3":
        codes[(codes & 0x7F) == 0x7F] = 0
    return codes


def _scale_codes(rng, fmt: str, shape) -> np.ndarray:
    """Scales within 2^-3 .. 2^3 (ue4m3 with random mantissas; ue8m0 powers of two)."""
    if fmt == "ue4m3":
        return rng.integers(0x20, 0x51, shape).astype(np.uint8)
    return rng.integers(127 - 3, 127 + 4, shape).astype(np.uint8)


def inputs(case: Case, sf_layout: dict) -> dict:
    """A (M x K codes, row-major, packed as CUTLASS packs them), B (N x K: K x N column-major), their block scales
    placed as CUTLASS's layouts say, C (M x N f32, row-major) and D."""
    rng = np.random.default_rng(case.seed)
    a = _codes(rng, case.a_format, (M, K))
    b = _codes(rng, case.b_format, (N, K))
    sfa = np.zeros(sf_layout["sfa_size"], np.uint8)
    sfb = np.zeros(sf_layout["sfb_size"], np.uint8)
    sfa[sf_layout["sfa"]] = _scale_codes(rng, case.scale_format, (M, K // case.sf_vec))
    sfb[sf_layout["sfb"]] = _scale_codes(rng, case.scale_format, (N, K // case.sf_vec))
    c = rng.standard_normal((M, N)).astype(np.float32)
    a_bytes, b_bytes = _pack(a, case.a_format), _pack(b, case.b_format)
    return {"A": a_bytes, "B": b_bytes, "SFA": sfa, "SFB": sfb, "C": c, "D": np.zeros((M, N), np.float32)}


def dequantised(arrays: dict, sf_layout: dict, case: Case = CASE) -> tuple[np.ndarray, np.ndarray]:
    """(A, B^T) as float64 (M x K, N x K): codes times their block scales."""
    sa = np.repeat(_scale(arrays["SFA"][sf_layout["sfa"]], case.scale_format), case.sf_vec, axis=1)
    sb = np.repeat(_scale(arrays["SFB"][sf_layout["sfb"]], case.scale_format), case.sf_vec, axis=1)
    a = _decode(_unpack(arrays["A"], case.a_format), case.a_format)
    b = _decode(_unpack(arrays["B"], case.b_format), case.b_format)
    return a * sa, b * sb


def reference(arrays: dict, sf_layout: dict, case: Case = CASE) -> tuple:
    """(float64 D, elementwise bound). Each mma aligns its exact terms (``case.mma_terms``: its products or groups of
    them, and c) and truncates each at F bits below the largest (F = 35 for k64, 25 for k32: at most 2^-23 of the
    largest magnitude each), then rounds toward zero to f32; K / mma_k of them chain through c; the epilogue's fma
    rounds once more: 2^-23 (K / mma_k) (terms + 1) of the magnitudes, plus 2^-24 of them, bounds all of it."""
    a, b = dequantised(arrays, sf_layout, case)
    c = arrays["C"].astype(np.float64)
    want = ALPHA * (a @ b.T) + BETA * c
    scale = abs(ALPHA) * (np.abs(a) @ np.abs(b).T) + abs(BETA) * np.abs(c)
    steps = K // case.mma_k
    return want, (2.0**-23 * steps * (case.mma_terms + 1) + 2.0**-24) * scale + 2.0**-126


def build(case: Case = CASE, staged: pathlib.Path | None = None) -> tuple[pathlib.Path, str]:
    """(the harness program of ``case``, the PTX nvcc assembled into it): one nvcc run for sm_120a
    (hostprogram.build_with_ptx), cached."""
    return hostprogram.build_with_ptx(case, staged, arch=ARCH)


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
