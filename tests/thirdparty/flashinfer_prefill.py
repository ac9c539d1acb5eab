"""FlashInfer's Hopper single prefill (kernel/thirdparty/flashinfer_sm90_prefill.cu: the FlashAttention-3-derived
kernel of flashinfer-python 0.7.4, warp-specialised, wgmma + TMA + transaction-count mbarriers + setmaxnreg), launched
from the parameters FlashInfer's own host code builds.

FlashAttention-3's own ``hopper/`` sources are on no package registry (flash-attn's sdist carries its Python files
only), so this is the nearest registry source of an FA3 forward: FlashInfer's kernel keeps FA3's structure (a
producer warpgroup issuing TMA loads of Q, K and V into a 2-stage mbarrier pipeline, consumer warpgroups running
Q K^T and P V as wgmma, the online softmax in registers between them, setmaxnreg moving registers to the consumers).

The unit is a host program as well as a kernel, as CUTLASS's GEMM is (tests/thirdparty/cutlass_gemm.py): FlashInfer's
SinglePrefillWithKVCacheDispatched builds the three by-value parameters (mainloop params with the Q, K, V maps,
epilogue params, scheduler params) and launches; the unit's cudaLaunchKernel wrapper writes them out. Here the device
addresses are flashsim.ptx.address values and the tagged maps are replaced by tensor_map_tiled's (``describe``); on
the GPU the same program runs the kernel with the driver's maps (tools/thirdparty_capture.py capture-flashinfer).

One build per ``Variant`` (head dim, causal, bf16 or f16: template arguments, chosen by -D flags), several input
``Case`` s per variant. Q, K, V and O are (N, H, d) row-major (FlashInfer's NHD), LSE (N, H) float32 in base 2 (the
kernel's: log2 of the softmax denominator plus the scaled row maximum), sm_scale = 1/sqrt(d).
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import flashsim
import flashsim.ptx as fptx
from flashsim.ptx import hostshim
from flashsim.ptx.parser import parse

from . import hostprogram

__all__ = [
    "PACKAGE",
    "UNIT",
    "ARCH",
    "FLAGS",
    "VARIANTS",
    "CASES",
    "Variant",
    "Case",
    "inputs",
    "reference",
    "build",
    "entry",
    "describe",
    "simulate",
    "relative_maps",
]

PACKAGE = "flashinfer-python"
UNIT = "thirdparty/flashinfer_sm90_prefill.cu"
ARCH = hostprogram.ARCH
# FlashInfer's JIT include path for its kernels (flashinfer/jit/cpp_ext.py build_common_cflags, env.py): its
# vendored CCCL first (with -I, so it takes precedence over the toolkit's), then its own include/ and CUTLASS's.
INCLUDES = (
    "cccl/cub",
    "cccl/libcudacxx/include",
    "cccl/thrust",
    "include",
    "cutlass/include",
    "cutlass/tools/util/include",
)
# FlashInfer's JIT flags for a Release build of an sm90 attention module (flashinfer/jit/core.py gen_jit_spec and
# sm90a_nvcc_flags, cpp_ext.py build_cuda_cflags): C++17, fast math (gen_jit_spec's default), its dtype switches,
# -DNDEBUG -O3, --expt-relaxed-constexpr, -static-global-template-stub=false (CUDA >= 12.8) and the sm90a defines.
# Left out as they change no device code: -Xfatbin=-compress-all / --compress-mode=size (fatbin packing),
# --compiler-options=-fPIC and -DPy_LIMITED_API / the glibcxx ABI define (host code of a Python extension), the
# -gencode pair (the arch comes from the build: sm_90a). CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL makes CuTe's host
# code call cuTensorMapEncodeTiled by name, so that flashsim.ptx.hostshim is linked in; it changes no device code.
FLAGS = (
    "-std=c++17",
    "-use_fast_math",
    "-DFLASHINFER_ENABLE_F16",
    "-DFLASHINFER_ENABLE_BF16",
    "-DFLASHINFER_ENABLE_FP8_E4M3",
    "-DFLASHINFER_ENABLE_FP8_E5M2",
    "-DNDEBUG",
    "-O3",
    "--expt-relaxed-constexpr",
    "-static-global-template-stub=false",
    "-DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED",
    "-DFLASHINFER_ENABLE_FP8_E8M0",
    "-DFLASHINFER_ENABLE_FP4_E2M1",
    "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1",
)


@dataclass(frozen=True)
class Variant:
    """One instance of the kernel (one build): what build.build_ptx and hostprogram.build_program read."""

    name: str
    head_dim: int
    causal: bool
    half: bool = False  # f16 rather than bf16 for Q, K, V and O
    package: str = PACKAGE
    unit: str = UNIT
    includes: tuple = INCLUDES

    @property
    def flags(self) -> tuple:
        defines = (f"-DFLASHSIM_HEAD_DIM={self.head_dim}", f"-DFLASHSIM_CAUSAL={int(self.causal)}")
        return (*FLAGS, *defines, f"-DFLASHSIM_HALF={int(self.half)}")

    @property
    def dtype(self):
        return np.dtype(np.float16) if self.half else np.dtype(ml_dtypes.bfloat16)


VARIANTS = {
    v.name: v
    for v in (
        Variant("flashinfer_sm90_prefill_d64", 64, False),
        Variant("flashinfer_sm90_prefill_d64_causal", 64, True),
        Variant("flashinfer_sm90_prefill_d128", 128, False),
        Variant("flashinfer_sm90_prefill_d128_causal", 128, True),
        Variant("flashinfer_sm90_prefill_d64_f16", 64, False, half=True),
    )
}


@dataclass(frozen=True)
class Case:
    """One launch: ``name`` names the capture (tests/data/thirdparty/<name>_sm90a.npz)."""

    name: str
    variant: str
    qo_len: int
    kv_len: int
    heads: int
    seed: int
    adversarial: bool
    note: str
    outputs: tuple = ("O", "LSE")

    @property
    def build(self) -> Variant:
        return VARIANTS[self.variant]

    # what capture.record reads of a third-party launch
    @property
    def package(self) -> str:
        return self.build.package

    @property
    def unit(self) -> str:
        return self.build.unit

    @property
    def includes(self) -> tuple:
        return self.build.includes

    @property
    def flags(self) -> tuple:
        return self.build.flags


_ADVERSARIAL = (
    "rows of Q scaled by 2^4..2^7 (scores far apart: most exponentials underflow to 0), a key whose scores dominate "
    "its rows, rows of Q of 2^-100 (every score 0: a uniform softmax), V entries that are bf16 subnormals and of "
    "2^60, and exactly cancelling V pairs"
)

CASES = {
    c.name: c
    for c in (
        Case("flashinfer_sm90_prefill_d64_normal", "flashinfer_sm90_prefill_d64", 128, 128, 1, 300, False, "normal"),
        Case(
            "flashinfer_sm90_prefill_d64_causal_adversarial",
            "flashinfer_sm90_prefill_d64_causal",
            256,
            320,
            2,
            301,
            True,
            "causal (keys past the diagonal -inf), kv_len 320 over 128-key tiles (the last one cut by TMA's "
            "out-of-bound fill), " + _ADVERSARIAL,
        ),
        Case("flashinfer_sm90_prefill_d128_normal", "flashinfer_sm90_prefill_d128", 256, 256, 2, 302, False, "normal"),
        Case(
            "flashinfer_sm90_prefill_d128_adversarial",
            "flashinfer_sm90_prefill_d128",
            200,
            448,
            1,
            303,
            True,
            "qo_len 200 (a cut 128-row tile), kv_len 448 over 192-key tiles, " + _ADVERSARIAL,
        ),
        Case(
            "flashinfer_sm90_prefill_d128_causal_normal",
            "flashinfer_sm90_prefill_d128_causal",
            384,
            384,
            1,
            304,
            False,
            "causal, standard normal",
        ),
        Case(
            "flashinfer_sm90_prefill_d128_causal_adversarial",
            "flashinfer_sm90_prefill_d128_causal",
            256,
            256,
            2,
            305,
            True,
            "causal (keys past the diagonal -inf), " + _ADVERSARIAL,
        ),
        Case(
            "flashinfer_sm90_prefill_d64_f16_adversarial",
            "flashinfer_sm90_prefill_d64_f16",
            256,
            256,
            1,
            307,
            True,
            "f16 Q, K, V and O; " + _ADVERSARIAL.replace("bf16 subnormals and of 2^60", "f16 subnormals and of 2^14"),
        ),
        Case(
            "flashinfer_sm90_prefill_d128_n1024_normal",
            "flashinfer_sm90_prefill_d128",
            1024,
            1024,
            1,
            306,
            False,
            "the benchmark's problem: B=1, H=1, N=1024, d=128, standard normal",
        ),
    )
}


def _rounded(x, dtype) -> np.ndarray:
    return np.asarray(x, np.float64).astype(np.float32).astype(dtype)


def inputs(case: Case) -> dict:
    """Q (qo_len, H, d), K and V (kv_len, H, d) of the variant's dtype; O zeros like Q; LSE (qo_len, H) zeros."""
    v = case.build
    rng = np.random.default_rng(case.seed)
    d, h = v.head_dim, case.heads
    q = rng.standard_normal((case.qo_len, h, d))
    k = rng.standard_normal((case.kv_len, h, d))
    val = rng.standard_normal((case.kv_len, h, d))
    if case.adversarial:
        big = rng.choice(case.qo_len, case.qo_len // 8, replace=False)
        q[big] *= 2.0 ** rng.integers(4, 8, (len(big), h, 1))
        tiny = rng.choice(np.setdiff1d(np.arange(case.qo_len), big), case.qo_len // 16, replace=False)
        q[tiny] = rng.choice([-1.0, 1.0], (len(tiny), h, d)) * 2.0**-100
        k[case.kv_len // 3] = 3.0 * np.sign(q.mean(axis=0))  # a key aligned with the average query
        sub = -133 if not v.half else -24
        val[:, :, :4] = rng.choice([-1.0, 1.0], (case.kv_len, h, 4)) * 2.0 ** rng.integers(sub, sub + 6, (1, 1, 4))
        val[: case.kv_len // 2, :, 4] = 2.0**60 if not v.half else 2.0**14
        val[case.kv_len // 2 :, :, 4] = -val[: case.kv_len - case.kv_len // 2, :, 4]
    o = np.zeros((case.qo_len, h, d), v.dtype)
    lse = np.zeros((case.qo_len, h), np.float32)
    return {"Q": _rounded(q, v.dtype), "K": _rounded(k, v.dtype), "V": _rounded(val, v.dtype), "O": o, "LSE": lse}


def reference(case: Case, arrays: dict) -> tuple:
    """(float64 O, its elementwise bound, float64 LSE in base 2, its bound) from ``arrays``' inputs, through
    flashsim.reference_attention (causal bottom-right aligned, as FlashInfer's mask). O's bound: P is rounded to
    the inputs' 8-bit (bf16) or 11-bit (f16) significand before P V and O once more at the end, so each output may be
    off by 2^-(p-1) of sum_j p_j |v_j| (p the significand bits), plus the f32 steps and the SFU's ex2 (far smaller);
    the LSE's: 2^-16 relative plus lg2.approx's 2^-20 absolute, in log2 units. Near zero the error is absolute: P
    entries and O below f16's subnormal grid or the f32 flush of .ftz (bf16) may be off by that floor."""
    v = case.build
    q, k, val = (arrays[n][None] for n in "QKV")  # (1, N, H, d): flashsim's "bnhd"
    opts = dict(causal=v.causal, softmax_scale=1.0 / np.sqrt(v.head_dim), layout="bnhd")
    o, lse = flashsim.reference_attention(q, k, val, **opts)
    mag, _ = flashsim.reference_attention(q, k, np.abs(val), **opts)
    # significand bits; the absolute floor: f16's smallest subnormal, or for bf16 the f32 flush of the kernel's .ftz
    # arithmetic (2^-126, above bf16's subnormals)
    bits, floor = (11, 2.0**-24) if v.half else (8, 2.0**-126)
    # P below the floor is off by up to the floor (the row sum it is divided by is at least 1), O itself too
    spread = floor * np.abs(arrays["V"].astype(np.float64)).sum(axis=0)[None]  # (1, H, d)
    o_bound = 2.0 ** -(bits - 2) * mag[0] + spread + floor
    lse2 = np.asarray(lse[0], np.float64).T / np.log(2.0)  # (N, H), base 2
    return o[0], o_bound, lse2, 2.0**-16 * np.abs(lse2) + 2.0**-12


def build(variant: Variant, staged: pathlib.Path | None = None, cache: bool = True) -> tuple[pathlib.Path, str]:
    """(the variant's program, the PTX it embeds): one nvcc run of the unit with the variant's flags
    (hostprogram.build_with_ptx), from the pinned wheel or the copy staged in ``staged``."""
    return hostprogram.build_with_ptx(variant, staged, cache)


def entry(ptx: str) -> tuple[str, list]:
    """(the kernel's entry name, its parameter sizes) in ``ptx`` (the unit's PTX holds the one kernel)."""
    ir = parse(ptx)
    (name,) = ir.entries()
    return name, [p.size for p in ir.functions[name].params]


def run_harness(program, args: list, folder: pathlib.Path, mode: str, sizes: list) -> tuple[dict, list]:
    """Run the unit's program in ``folder``; (the launch it made, the shim's log)."""
    env = {"FLASHSIM_LAUNCH_JSON": str(folder / "launch.json"), "FLASHSIM_PARAM_SIZES": ",".join(map(str, sizes))}
    log = hostprogram.run_program(program, args, folder, mode, env)
    return json.loads((folder / "launch.json").read_text()), log


NAMES = ("Q", "K", "V", "O", "LSE")


def describe(case: Case, ptx: str, program, arrays: dict) -> tuple[dict, list, list]:
    """(the launch, the shim's log, the kernel's parameters with flashsim's maps) for ``arrays`` in the simulator."""
    _name, sizes = entry(ptx)
    pointers = [hex(fptx.address(arrays[n])) for n in NAMES]
    args = ["describe", case.qo_len, case.kv_len, case.heads, *pointers]
    with tempfile.TemporaryDirectory() as tmp:
        launch, log = run_harness(program, args, pathlib.Path(tmp), "tag", sizes)
    params = hostshim.patch_params([bytes.fromhex(p) for p in launch["params"]], log, list(arrays.values()))
    return launch, log, params


def simulate(case: Case, ptx: str, program, arrays: dict, check=None):
    """Run the prefill in flashsim.ptx on ``arrays`` (O and LSE written in place); the launch report."""
    launch, _log, params = describe(case, ptx, program, arrays)
    module = fptx.load(ptx, arch=ARCH)
    name, _sizes = entry(ptx)
    return fptx.launch(
        module.kernel(name),
        tuple(launch["grid"]),
        tuple(launch["block"]),
        params,
        shared_mem=launch["shared_bytes"],
        check=check,
    )


def relative_maps(log: list, pointers: list) -> list:
    """The shim's log with each global address written as (array name, byte offset) against ``pointers`` (Q, K, V,
    O, LSE's device addresses): comparable between the simulator's run and the GPU's."""
    out = []
    for record in log:
        where = int(record["global_address"])
        name, base = max(((n, p) for n, p in zip(NAMES, pointers) if p <= where), key=lambda np_: np_[1])
        out.append({**record, "global_address": [name, where - base]})
    return out
