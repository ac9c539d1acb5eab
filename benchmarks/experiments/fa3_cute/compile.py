"""Compile FlashAttention's CuTe-DSL Hopper forward (FlashAttentionForwardSm90) to PTX on a machine without a GPU.

Runs in a Python 3.12 venv with nvidia-cutlass-dsl==4.1.0 (the version flash_attn/cute/interface.py names; its
wheels are cp312 only), never in flashsim's venv:

    python3.12 -m venv /tmp/cutedsl312 && /tmp/cutedsl312/bin/pip install nvidia-cutlass-dsl==4.1.0
    CUTE_DSL_ARCH=sm_90a /tmp/cutedsl312/bin/python benchmarks/experiments/fa3_cute/compile.py \\
        --sdist flash_attn-2.8.3.post2.tar.gz

How, and why each step:
- flash_attn/cute is taken from flash-attn 2.8.3.post2's sdist (sha256 checked) into a temporary folder. Its
  package __init__ imports interface.py, which imports torch; the packages flash_attn and flash_attn.cute are
  registered as bare namespace modules instead, so flash_fwd.py imports without torch.
- Q, K, V, O are numpy uint16 arrays of shape (1, N, 1, d) whose DLPack tensors are retyped as BFloat16
  (the runtime's element_type setter, meant for types frameworks lack); LSE is float32 (1, 1, N). The layouts are
  marked dynamic as flash_attn/cute/interface.py marks them, so the PTX does not depend on N.
- CUTE_DSL_ARCH=sm_90a: without a GPU the DSL would target its default, sm_100.
- cute.compile runs the DSL's MLIR pipeline "cute-to-nvvm{cubin-format=bin ...}", whose embedded NVVM / ptxas
  need no driver; only the final step, the host JIT (an MLIR ExecutionEngine linking libcuda's cuLaunchKernel),
  fails without one ("libcuda.so.1: cannot open shared object file", then "Symbols not found: [ cuFuncSetAttribute,
  cuLaunchKernel ]"). The pipeline's cubin-format is switched to "isa" so that the gpu.binary holds the PTX text
  (the same PTX ptxas is given for the cubin), and the module is taken from the compiler before the JIT step.
The host IR's shared-memory size is checked against run.py's shared_bytes (the launch's dynamic shared memory).
The PTX is written to the repository's .thirdparty/fa3_cute/fwd_sm90_bf16_d{64,128}_{noncausal,causal}.ptx
(ignored by git: third-party kernels are rebuilt from their pinned sources, never stored here; a device call
carries .thirdparty).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import io
import math
import os
import re
import sys
import tarfile
import tempfile
import types
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SDIST = "flash_attn-2.8.3.post2"
SDIST_SHA256 = "d0f9f0b08a986cdeadbffcf5ec8b3a8f514366c68ad1853d3ab061bc83cc340b"
# Head dims built, in this order: interface.py's sm90 configuration is the same for both (below). The kernel's name
# ends in the DSL's count of compilations in the process (_0, _1, ...), so the order fixes each PTX's bytes: d = 128
# first keeps the PTX the first captures ran.
DIMS = (128, 64)
_spec = importlib.util.spec_from_file_location("fa3_cute_run", HERE / "run.py")
RUN = importlib.util.module_from_spec(_spec)  # run.py's shared_bytes, checked here against the host IR
_spec.loader.exec_module(RUN)


class Captured(Exception):
    """Raised in place of the host JIT: the compiled MLIR module's text."""


def extract(sdist: Path, into: Path) -> Path:
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{sdist}: sha256 {digest}, expected {SDIST_SHA256} ({SDIST}.tar.gz from PyPI)")
    prefix = f"{SDIST}/flash_attn/cute/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix) and m.name.endswith(".py")]
        tar.extractall(into, members=members, filter="data")
    root = into / SDIST / "flash_attn"
    for name, path in (("flash_attn", root), ("flash_attn.cute", root / "cute")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    return root


def intercept_compiler() -> None:
    """Compile to PTX ("isa") instead of a cubin, and stop before the host JIT with the module's text."""
    from cutlass.base_dsl import compiler

    run_pipeline = compiler.Compiler.compile

    def compile_isa(self, module, pipeline, *args, **kwargs):
        assert "cubin-format=bin" in pipeline, pipeline
        return run_pipeline(self, module, pipeline.replace("cubin-format=bin", "cubin-format=isa"), *args, **kwargs)

    def no_jit(self, module, *args, **kwargs):
        text = io.StringIO()
        print(module, file=text)
        raise Captured(text.getvalue())

    compiler.Compiler.compile = compile_isa
    compiler.Compiler.jit = no_jit


def ptx_of(mlir: str) -> str:
    """The PTX text of the module's gpu.binary (an MLIR string: \\XX hex escapes, \\\\ and \\")."""
    found = re.findall(r'assembly = "((?:[^"\\]|\\.)*)"', mlir)
    if len(found) != 1:
        raise SystemExit(f"expected one gpu.binary with assembly, found {len(found)}")
    text = re.sub(r"\\([0-9A-Fa-f]{2})|\\([\\\"])", lambda g: chr(int(g[1], 16)) if g[1] else g[2], found[0])
    return text.rstrip("\0")


def host_shared_bytes(mlir: str) -> int:
    """The dynamic shared memory the host code sets with cuFuncSetAttribute (the DSL's SharedStorage size)."""
    (value,) = re.findall(r"cuFuncSetAttribute\(%\w+, %\w+, %(\w+)\)", mlir)
    (size,) = re.findall(rf"%{value} = llvm\.mlir\.constant\((\d+) : i32\)", mlir)
    return int(size)


def compile_forward(causal: bool, d: int, n: int = 256) -> tuple[str, str]:
    """(PTX, the compiled module's MLIR text) of the forward for head dim ``d``."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import from_dlpack
    from flash_attn.cute.flash_fwd import FlashAttentionForwardSm90

    def tensor(shape, dtype, align, element_type=None):
        t = from_dlpack(np.zeros(shape, dtype), assumed_align=align)
        if element_type is not None:
            t.element_type = element_type
        return t.mark_layout_dynamic(leading_dim=len(shape) - 1)

    q, k, v, o = (tensor((1, n, 1, d), np.uint16, 16, cutlass.BFloat16) for _ in range(4))
    lse = tensor((1, 1, n), np.float32, 4)
    # flash_attn/cute/interface.py's sm90 configuration for bf16 (its block sizes do not depend on the head dim),
    # one head per KV head
    fwd = FlashAttentionForwardSm90(
        cutlass.BFloat16,
        d,
        d,
        1,
        is_causal=causal,
        is_local=False,
        pack_gqa=False,
        m_block_size=128,
        n_block_size=128 if causal else 192,
        num_stages=2,
        num_threads=384,
        Q_in_regs=False,
    )
    try:
        cute.compile(fwd, q, k, v, o, lse, 1 / math.sqrt(d), cuda.CUstream(0), *([None] * 9))
    except Exception as e:  # the DSL wraps what the compiler raises
        cause = e
        while cause is not None and not isinstance(cause, Captured):
            cause = getattr(cause, "cause", None) or cause.__cause__
        if cause is None:
            raise
        return ptx_of(cause.args[0]), cause.args[0]
    raise SystemExit("cute.compile returned without reaching the host JIT")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdist", type=Path, required=True, help=f"{SDIST}.tar.gz")
    ap.add_argument("--out", type=Path, default=HERE.parents[2] / ".thirdparty" / "fa3_cute")
    ap.add_argument(
        "--d",
        type=int,
        nargs="+",
        default=list(DIMS),
        choices=DIMS,
        help="head dims to build (all of them, for the names the captures ran)",
    )
    a = ap.parse_args(argv)
    if os.environ.get("CUTE_DSL_ARCH") != "sm_90a":
        raise SystemExit("set CUTE_DSL_ARCH=sm_90a (without a GPU the DSL targets sm_100)")
    os.environ.setdefault("CUTE_DSL_DISABLE_FILE_CACHING", "1")
    with tempfile.TemporaryDirectory() as tmp:
        extract(a.sdist, Path(tmp))
        intercept_compiler()
        a.out.mkdir(parents=True, exist_ok=True)
        for d in a.d:
            for causal in (False, True):
                ptx, mlir = compile_forward(causal, d)
                path = a.out / f"fwd_sm90_bf16_d{d}_{'causal' if causal else 'noncausal'}.ptx"
                smem = host_shared_bytes(mlir)
                if smem != RUN.shared_bytes(d, causal):
                    raise SystemExit(f"{path.name}: the host IR asks {smem} bytes of shared memory, run.py's "
                                     f"shared_bytes gives {RUN.shared_bytes(d, causal)}")  # fmt: skip
                path.write_text(ptx)
                print(f"{path}: {len(ptx)} bytes, sha256 {hashlib.sha256(ptx.encode()).hexdigest()[:16]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
