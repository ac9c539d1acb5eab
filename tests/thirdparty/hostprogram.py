"""Third-party units that are host programs too (kernel/thirdparty/cutlass_sm90_gemm.cu, cute_wgmma_tma_tutorial.cu):
built with nvcc for sm_90a with flashsim.ptx.hostshim's cuTensorMapEncodeTiled linked in, and run to learn the
kernel's launch and parameter bytes (no GPU needed) or, on a GPU, to launch it with the driver's maps.

A build is cached in the user cache (packages.cache_folder()/host), keyed by everything that goes into it (nvcc's
version, the flags, the includes, the unit, the shim, the header shims build.build_ptx also puts first on the include
path, and the package archive's sha256); with ``keep`` it is built
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

__all__ = ["ARCH", "build_program", "build_with_ptx", "run_program", "kept_ptx"]

ARCH = "sm_90a"  # wgmma, setmaxnreg and multicast TMA are sm_90a's


def _target(arch: str) -> str:
    """The program embeds its kernels as PTX alone (a GPU's driver compiles it at load): ptxas's SASS is never run
    here, and leaving it out takes 18% off the build (CUTLASS's sm90 GEMM: 33 s against 41 s, the same PTX)."""
    return f"-gencode=arch=compute_{arch[3:]},code=compute_{arch[3:]}"


def _command(unit: str, tree: pathlib.Path, includes, flags, out: pathlib.Path, keep, arch: str) -> list[str]:
    # the shims first, as build.build_ptx puts them: the program embeds the PTX that build would give
    incs = [f"-I{build.shim_folder()}"] + [f"-I{tree / inc}" for inc in includes]
    cmd = [cuda_tool("nvcc"), _target(arch), *flags, *incs, str(kernel_path(unit)), str(hostshim.SHIM_SOURCE)]
    cmd += ["-o", str(out), "-ldl"]
    return cmd + (["--keep", "--keep-dir", str(keep)] if keep is not None else [])


def _cache_path(spec, arch: str = ARCH) -> pathlib.Path:
    package = packages.PACKAGES[spec.package]
    h = hashlib.sha256()
    for part in (
        build.nvcc_version(),
        _target(arch),
        repr(tuple(spec.flags)),
        repr(tuple(spec.includes)),
        package.sha256,
    ):
        h.update(part.encode() + b"\0")
    h.update(kernel_path(spec.unit).read_bytes() + b"\0" + hostshim.SHIM_SOURCE.read_bytes())
    for shim in sorted(build.shim_folder().rglob("*.h*")):
        h.update(b"\0" + str(shim.relative_to(build.shim_folder())).encode() + b"\0" + shim.read_bytes())
    stem = pathlib.PurePosixPath(spec.unit).stem
    return packages.cache_folder() / "host" / f"{stem}-{h.hexdigest()[:24]}"


def _build(spec, staged, keep, out: pathlib.Path, arch: str) -> None:
    tree = packages.tree(packages.PACKAGES[spec.package], staged)
    cmd = _command(spec.unit, tree, spec.includes, spec.flags, out, keep, arch)
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=out.parent)
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"nvcc failed on {spec.unit}:\n{' '.join(cmd)}\n{done.stderr.strip()}")


def build_program(
    spec, staged: pathlib.Path | None = None, keep: pathlib.Path | None = None, arch: str = ARCH
) -> pathlib.Path:
    """The program of ``spec`` (package, unit, includes, flags), built for ``arch`` from the pinned package (or the
    copy staged in ``staged``); RuntimeError with nvcc's log if it fails."""
    cached = _cache_path(spec, arch)
    if keep is None and cached.is_file():
        return cached
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / cached.name.rsplit("-", 1)[0]
        _build(spec, staged, keep, out, arch)
        if keep is not None:
            cached = pathlib.Path(tempfile.mkdtemp()) / out.name
        cached.parent.mkdir(parents=True, exist_ok=True)
        out.replace(cached)
    return cached


def is_built(spec, arch: str = ARCH) -> bool:
    """Whether ``build_with_ptx(spec, arch=arch)`` would come from the cache (no nvcc run, no download)."""
    cached = _cache_path(spec, arch)
    return cached.is_file() and cached.with_suffix(".ptx").is_file()


# Opt-in for third-party builds that cost minutes of nvcc on the 2-core machine (FlashInfer's prefill, CUTLASS's sm120
# GEMMs): their tests run where the build is cached, or everywhere with this set (which builds what is missing)
FULL_BUILDS = "FLASHSIM_THIRDPARTY_FULL"


def unbuilt(spec, what: str, arch: str = ARCH) -> str | None:
    """Why a test of ``spec``'s build should skip (it is not built here and FULL_BUILDS is not set), or None."""
    if os.environ.get(FULL_BUILDS) or is_built(spec, arch):
        return None
    return f"{what} is not built here (one nvcc run of minutes): {FULL_BUILDS}=1 builds it, then it is cached"


def build_with_ptx(
    spec, staged: pathlib.Path | None = None, cache: bool = True, arch: str = ARCH
) -> tuple[pathlib.Path, str]:
    """(the program of ``spec``, the PTX nvcc assembled into it) from one nvcc run for ``arch``, cached together (the
    PTX beside the program, .ptx): the kernel the simulator runs is then the very one the program launches on a GPU,
    for half the compile time of building the PTX apart. ``cache=False`` builds afresh into a temporary folder."""
    cached = _cache_path(spec, arch)
    ptx_path = cached.with_suffix(".ptx")
    if cache and cached.is_file() and ptx_path.is_file():
        return cached, ptx_path.read_text()
    with tempfile.TemporaryDirectory() as tmp:
        keep = pathlib.Path(tmp) / "keep"
        keep.mkdir()
        out = pathlib.Path(tmp) / cached.name.rsplit("-", 1)[0]
        _build(spec, staged, keep, out, arch)
        ptx = kept_ptx(keep, arch)
        if not cache:
            cached = pathlib.Path(tempfile.mkdtemp()) / out.name
            ptx_path = cached.with_suffix(".ptx")
        cached.parent.mkdir(parents=True, exist_ok=True)
        out.replace(cached)
        ptx_path.write_text(ptx)
    return cached, ptx


def kept_ptx(keep: pathlib.Path, arch: str = ARCH) -> str:
    """The PTX nvcc assembled into a program built for ``arch`` with ``keep`` (internal names made stable, as
    build_ptx does)."""
    (kept,) = keep.glob("*.ptx")  # one unit, one target (``_target``)
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
