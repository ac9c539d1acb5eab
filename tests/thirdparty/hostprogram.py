"""Third-party units that are host programs too (kernel/thirdparty/cutlass_sm90_gemm.cu, cute_wgmma_tma_tutorial.cu):
built with nvcc for sm_90a with flashsim.ptx.hostshim's cuTensorMapEncodeTiled linked in, and run to learn the
kernel's launch and parameter bytes (no GPU needed) or, on a GPU, to launch it with the driver's maps.

A build is cached in the user cache (packages.cache_folder()/host), keyed by everything that goes into it (nvcc's
version, the flags, the includes, the unit, the shim and the package archive's sha256); with ``keep`` it is built
afresh and nvcc's intermediate files go there, the PTX it assembled into the program among them.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import tempfile

from flashsim.gpu.build import cuda_tool, kernel_path
from flashsim.ptx import hostshim

from . import build, packages

__all__ = ["ARCH", "build_program", "run_program", "kept_ptx"]

ARCH = "sm_90a"  # wgmma, setmaxnreg and multicast TMA are sm_90a's


def _command(unit: str, tree: pathlib.Path, includes, flags, out: pathlib.Path, keep, arch: str) -> list[str]:
    incs = [f"-I{tree / inc}" for inc in includes]
    cmd = [cuda_tool("nvcc"), f"-arch={arch}", *flags, *incs, str(kernel_path(unit)), str(hostshim.SHIM_SOURCE)]
    cmd += ["-o", str(out), "-ldl"]
    return cmd + (["--keep", "--keep-dir", str(keep)] if keep is not None else [])


def build_program(
    spec, staged: pathlib.Path | None = None, keep: pathlib.Path | None = None, arch: str = ARCH
) -> pathlib.Path:
    """The program of ``spec`` (package, unit, includes, flags), built for ``arch`` from the pinned package (or the
    copy staged in ``staged``); RuntimeError with nvcc's log if it fails."""
    package = packages.PACKAGES[spec.package]
    h = hashlib.sha256()
    for part in (build.nvcc_version(), arch, repr(tuple(spec.flags)), repr(tuple(spec.includes)), package.sha256):
        h.update(part.encode() + b"\0")
    h.update(kernel_path(spec.unit).read_bytes() + b"\0" + hostshim.SHIM_SOURCE.read_bytes())
    stem = pathlib.PurePosixPath(spec.unit).stem
    cached = packages.cache_folder() / "host" / f"{stem}-{h.hexdigest()[:24]}"
    if keep is None and cached.is_file():
        return cached
    tree = packages.tree(package, staged)
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / stem
        cmd = _command(spec.unit, tree, spec.includes, spec.flags, out, keep, arch)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"nvcc failed on {spec.unit}:\n{' '.join(cmd)}\n{done.stderr.strip()}")
        if keep is not None:
            cached = pathlib.Path(tempfile.mkdtemp()) / stem
        cached.parent.mkdir(parents=True, exist_ok=True)
        out.replace(cached)
    return cached


def kept_ptx(keep: pathlib.Path) -> str:
    """The PTX nvcc assembled into a program built with ``keep`` (internal names made stable, as build_ptx does)."""
    (kept,) = keep.glob(f"*.compute_{ARCH[3:]}.ptx")
    return build.stable_internal_names(kept.read_text())


def run_program(program, args: list, folder: pathlib.Path, mode: str, env: dict | None = None) -> list:
    """Run ``program`` with ``args`` in ``folder``, the shim in ``mode`` ("tag" or "forward") and ``env`` added; the
    shim's log (RuntimeError with the program's stderr if it fails)."""
    log = folder / "tensormaps.jsonl"
    log.unlink(missing_ok=True)
    env = {**os.environ, **(env or {}), "FLASHSIM_TENSORMAP_LOG": str(log), "FLASHSIM_TENSORMAP_MODE": mode}
    done = subprocess.run([str(program), *map(str, args)], capture_output=True, text=True, env=env, cwd=folder)
    if done.returncode != 0:
        raise RuntimeError(f"{program} {' '.join(map(str, args))}: exit {done.returncode}\n{done.stderr.strip()}")
    return hostshim.read_log(log) if log.is_file() else []
