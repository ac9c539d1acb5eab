"""CuTe's Hopper tutorial GEMM (examples/cute/tutorial/hopper/wgmma_tma_sm90.cu of the pinned nvidia-cutlass wheel,
through kernel/thirdparty/cute_wgmma_tma_tutorial.cu), launched from the arguments the tutorial's own host code
passes to cudaLaunchKernelExC.

Its gemm_tn: C = alpha A B + beta C in fp16 (fp16 wgmma accumulators), A (M x K) and B (N x K) K-major, C (M x N)
column-major; M = N = K = 256: a 2 x 2 grid in 2 x 1 clusters, four K blocks of 64 through a 3-stage pipeline (the
stages wrap). The kernel takes its TMA atoms as separate by-value arguments (256 bytes each, the map first).
"""

from __future__ import annotations

import json
import pathlib
import tempfile
from dataclasses import dataclass

import numpy as np

import flashsim.ptx as fptx
from flashsim.ptx import hostshim
from flashsim.ptx.parser import parse

from . import cutlass_gemm, hostprogram

__all__ = ["CASES", "Case", "inputs", "reference", "build_host", "entry", "pointers", "describe", "simulate"]

PACKAGE = cutlass_gemm.PACKAGE
UNIT = "thirdparty/cute_wgmma_tma_tutorial.cu"
ARCH = hostprogram.ARCH
INCLUDES = (*cutlass_gemm.INCLUDES, "examples/cute/tutorial/hopper")
FLAGS = cutlass_gemm.FLAGS
M, N, K = 256, 256, 256
ALPHA, BETA = 1.0, 0.5  # what the unit passes (fp16)
ENTRY_PREFIX = "_Z11gemm_device"  # the tutorial's kernel; the PTX also holds thrust's empty kernel


@dataclass(frozen=True)
class Case:
    name: str
    seed: int
    adversarial: bool
    note: str
    package: str = PACKAGE
    unit: str = UNIT
    includes: tuple = INCLUDES
    flags: tuple = FLAGS
    outputs: tuple = ("C",)


CASES = {
    c.name: c
    for c in (
        Case("cute_tutorial_gemm_normal", 190, False, "standard normal A, B and C, fp16"),
        Case(
            "cute_tutorial_gemm_adversarial",
            191,
            True,
            "fp16 exponents over 2^-12..2^6 and subnormals, K entries of A up to 2^14 against B's down to 2^-13, "
            "exactly cancelling product pairs with a small remainder, C set to cancel A B",
        ),
    )
}


def inputs(case: Case) -> dict:
    """A (M x K), B (N x K), C (N x M: column-major M x N), fp16."""
    rng = np.random.default_rng(case.seed)
    if not case.adversarial:
        a, b = rng.standard_normal((M, K)), rng.standard_normal((N, K))
        c = rng.standard_normal((N, M))
        return {"A": a.astype(np.float16), "B": b.astype(np.float16), "C": c.astype(np.float16)}
    sign = lambda shape: rng.choice([-1.0, 1.0], shape)  # noqa: E731
    a = sign((M, K)) * rng.uniform(1, 2, (M, K)) * 2.0 ** rng.integers(-12, 7, (M, K))
    b = sign((N, K)) * rng.uniform(1, 2, (N, K)) * 2.0 ** rng.integers(-12, 7, (N, K))
    a[:, :8] = sign((M, 8)) * 2.0 ** rng.integers(-24, -14, (M, 8))  # fp16 subnormals
    pairs = slice(32, 64)
    a[pairs, 1::2] = -a[pairs, 0::2]
    b[:, 1::2] = b[:, 0::2]
    a[pairs, K - 1] = 2.0**-10
    big = slice(16, 24)
    a[:, big] = np.clip(a[:, big] * 2.0**8, -(2.0**15), 2.0**15)
    b[:, big] *= 2.0**-8
    a, b = a.astype(np.float16), b.astype(np.float16)
    prod = a.astype(np.float64) @ b.astype(np.float64).T
    c = np.ascontiguousarray(np.clip(-ALPHA / BETA * prod.T, -60000, 60000), np.float16)  # beta C cancels A B
    c[:, ::3] = rng.standard_normal((N, (M + 2) // 3)).astype(np.float16)
    return {"A": a, "B": b, "C": c}


def reference(before: dict) -> tuple:
    """(float64 C after, as stored N x M; elementwise bound) from the inputs ``before``: fp16 accumulation over K =
    256 rounds to 11 bits along the way, so the bound is 2^-6 of the magnitudes that enter each output."""
    a, b, c = (before[n].astype(np.float64) for n in "ABC")
    want = ALPHA * (b @ a.T) + BETA * c
    scale = abs(ALPHA) * (np.abs(b) @ np.abs(a).T) + abs(BETA) * np.abs(c)
    return want, 2.0**-6 * scale + 2.0**-14


def build_host(staged: pathlib.Path | None = None, keep: pathlib.Path | None = None) -> pathlib.Path:
    return hostprogram.build_program(CASES[next(iter(CASES))], staged, keep)


def entry(ptx: str) -> tuple[str, list]:
    """(the tutorial kernel's entry name, its parameter sizes) in ``ptx``."""
    ir = parse(ptx)
    (name,) = [n for n in ir.entries() if n.startswith(ENTRY_PREFIX)]
    return name, [p.size for p in ir.functions[name].params]


def pointers(launch: dict) -> list:
    """A, B and C's device addresses among the launch's arguments (gemm_device(shape, tiler, A, tma_a, B, tma_b, C,
    ...): arguments 2, 4 and 6)."""
    return [int.from_bytes(bytes.fromhex(launch["params"][i]), "little") for i in (2, 4, 6)]


def run_harness(program, args: list, folder: pathlib.Path, mode: str, sizes: list) -> tuple[dict, list]:
    """Run the unit's program (the tutorial's host code) in ``folder``; (the launch it made, the shim's log)."""
    env = {"FLASHSIM_LAUNCH_JSON": str(folder / "launch.json"), "FLASHSIM_PARAM_SIZES": ",".join(map(str, sizes))}
    log = hostprogram.run_program(program, args, folder, mode, env)
    return json.loads((folder / "launch.json").read_text()), log


def describe(ptx: str, program, arrays: dict) -> tuple[dict, list, list]:
    """(the launch, the shim's log, the kernel's parameters with flashsim's maps) for ``arrays`` in the simulator."""
    _name, sizes = entry(ptx)
    pointers = [hex(fptx.address(arrays[n])) for n in "ABC"]
    with tempfile.TemporaryDirectory() as tmp:
        launch, log = run_harness(program, ["describe", M, N, K, *pointers], pathlib.Path(tmp), "tag", sizes)
    params = hostshim.patch_params([bytes.fromhex(p) for p in launch["params"]], log, list(arrays.values()))
    return launch, log, params


def simulate(ptx: str, program, arrays: dict, check=None):
    """Run the tutorial's GEMM in flashsim.ptx on ``arrays`` (C updated in place); the launch report."""
    launch, _log, params = describe(ptx, program, arrays)
    module = fptx.load(ptx, arch=ARCH)
    name, _sizes = entry(ptx)
    return fptx.launch(
        module.kernel(name),
        tuple(launch["grid"]),
        tuple(launch["block"]),
        params,
        shared_mem=launch["shared_bytes"],
        cluster=tuple(launch["cluster"]),
        check=check,
    )
