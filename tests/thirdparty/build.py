"""PTX of a third-party kernel: nvcc -ptx on its instantiation unit (kernel/thirdparty/*.cu) with the project's own
flags, its include folders inside the extracted package, and kernel/thirdparty/shims before them (the small
stand-ins for torch's and cuBLAS's headers that the units document).

nvcc, not NVRTC: the projects build with nvcc, and their headers use the host standard library (<tuple>, <vector>)
that NVRTC lacks. Builds are cached on disk (the user cache, keyed by everything that goes into them: nvcc's
version, the flags, the unit, the shims and the package archive's sha256), since FlashAttention-2's CuTe headers
take nvcc about half a minute.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import subprocess
import tempfile
from functools import lru_cache

from flashsim.gpu.build import cuda_tool, kernel_path

from . import packages

__all__ = ["nvcc_version", "build_ptx", "shim_folder", "ptx_sha256", "stable_internal_names"]


def shim_folder() -> pathlib.Path:
    return kernel_path("thirdparty/shims/cublas_v2.h").parent


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    """nvcc's version line ("Cuda compilation tools, release 13.0, V13.0.88")."""
    out = subprocess.run([cuda_tool("nvcc"), "--version"], capture_output=True, text=True, check=True).stdout
    return next((line.strip() for line in out.splitlines() if "release" in line), out.strip())


def ptx_sha256(ptx: str) -> str:
    return hashlib.sha256(ptx.encode()).hexdigest()


_INTERNAL_HASH = re.compile(r"(_INTERNAL_|_GLOBAL__N__)[0-9a-f]{8}_")


def stable_internal_names(ptx: str) -> str:
    """The PTX with the 8 hex digits nvcc puts in internal-linkage names (_INTERNAL_<hash>_, _GLOBAL__N__<hash>_)
    set to zeros. nvcc derives them from the unit's absolute path, so the same sources built from two checkouts give
    two PTX texts that differ in those names alone; zeroed (the same length, so the mangling stays valid), every
    machine builds, hashes and runs one text."""
    return _INTERNAL_HASH.sub(lambda m: m.group(1) + "0" * 8 + "_", ptx)


def _command(unit: pathlib.Path, tree: pathlib.Path, includes, flags, arch: str, out: pathlib.Path) -> list[str]:
    incs = [f"-I{shim_folder()}"] + [f"-I{tree / inc}" for inc in includes]
    return [cuda_tool("nvcc"), "-ptx", f"-arch={arch}", *flags, *incs, str(unit), "-o", str(out)]


def _key(unit: pathlib.Path, package, includes, flags, arch: str) -> str:
    h = hashlib.sha256()
    parts = ("stable-internal-names", nvcc_version(), arch, repr(tuple(flags)), repr(tuple(includes)), package.sha256)
    for part in (*parts, unit.read_text()):
        h.update(part.encode() + b"\0")
    for shim in sorted(shim_folder().rglob("*.h*")):
        h.update(str(shim.relative_to(shim_folder())).encode() + b"\0" + shim.read_bytes() + b"\0")
    return h.hexdigest()


def build_ptx(kernel, arch: str = "sm_90", staged: pathlib.Path | None = None, cache: bool = True) -> str:
    """The PTX of ``kernel`` (a tests/thirdparty/kernels.py description) for ``arch``, from the pinned package (or the
    copy staged in ``staged``); RuntimeError with nvcc's log if it fails."""
    package = packages.PACKAGES[kernel.package]
    unit = kernel_path(kernel.unit)
    key = _key(unit, package, kernel.includes, kernel.flags, arch)
    cached = packages.cache_folder() / "ptx" / f"{kernel.name}-{key[:24]}.ptx"
    if cache and cached.is_file():
        return cached.read_text()
    tree = packages.tree(package, staged)
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / f"{kernel.name}.ptx"
        cmd = _command(unit, tree, kernel.includes, kernel.flags, arch, out)
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
        if done.returncode != 0 or not out.is_file():
            raise RuntimeError(f"nvcc failed on {kernel.unit}:\n{' '.join(cmd)}\n{done.stderr.strip()}")
        ptx = stable_internal_names(out.read_text())
    if cache:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(ptx)
    return ptx
