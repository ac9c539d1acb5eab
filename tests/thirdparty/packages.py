"""The pinned source packages: where an archive comes from, what it must hash to, and the part of it the builds use.

An archive is fetched with pip from PyPI (``pip download --no-deps --no-binary :all:``, the registry's own client;
``--only-binary :all:`` for a package whose sources PyPI carries in a wheel only: NVIDIA's nvidia-cutlass wheel is
CUTLASS's source tree under cutlass_library/source) into the user cache (flashsim.calibration.cache_root()/thirdparty)
and checked against its pinned sha256 before anything reads it. ``tree(package)`` extracts the members the builds need
(``keep``: path prefixes and suffixes, or ``listed``: a committed list of the exact files) into the cache;
``stage(package, folder)`` writes the same members as a smaller archive with a manifest, for a machine without network
(the GPU machine); ``tree(package, staged=folder)`` reads that back. Both give the same files, so the PTX built from
either is the same.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from functools import cache

from flashsim import calibration

__all__ = ["Package", "PACKAGES", "cache_folder", "archive", "tree", "stage", "sha256_file"]


@dataclass(frozen=True)
class Package:
    """A source archive on PyPI. ``root``: its top folder; ``keep``: (folder under root, suffixes, nested)
    triples, the members the builds read (files of that folder with one of the suffixes, and of its subfolders
    where ``nested``); ``build_isolation``: False where pip's metadata step needs this environment's packages
    (flash-attn's setup.py imports torch); ``pip_env``: variables pip's metadata step needs (flash-attn's setup.py
    looks for a CUDA toolkit unless told to skip its CUDA build, which a download never runs); ``wheel``: the
    archive is a wheel (a zip), fetched as one; ``listed``: a file beside this module naming the exact members
    (paths under root, one a line, # comments) the builds read, kept instead of ``keep`` where a package holds far
    more than a build includes (FlashInfer's wheel: 101 MB, of which one kernel's build reads 2 MB compressed)."""

    name: str
    version: str
    filename: str
    sha256: str
    root: str
    keep: tuple
    build_isolation: bool = True
    pip_env: tuple = ()
    wheel: bool = False
    listed: str = ""

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


_HEADERS = (".h", ".hpp", ".cuh", ".inl", ".inc")

PACKAGES = {
    p.name: p
    for p in (
        Package(
            name="flash-attn",
            version="2.8.3",
            filename="flash_attn-2.8.3.tar.gz",
            sha256="1e71dd64a9e0280e0447b8a0c2541bad4bf6ac65bdeaa2f90e51a9e57de0370d",
            root="flash_attn-2.8.3",
            keep=(("csrc/flash_attn/", _HEADERS, True), ("csrc/cutlass/include/", _HEADERS, True)),
            build_isolation=False,
            pip_env=(("FLASH_ATTENTION_SKIP_CUDA_BUILD", "TRUE"),),
        ),
        Package(
            # CUTLASS 4.2's sources as NVIDIA publishes them on PyPI (flash-attn's sdist carries CUTLASS's include/
            # without the collective builders' .inl files, so no CollectiveBuilder GEMM builds from it)
            name="nvidia-cutlass",
            version="4.2.0.0",
            filename="nvidia_cutlass-4.2.0.0-py3-none-any.whl",
            sha256="f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6",
            root="cutlass_library/source",
            keep=(
                ("include/", _HEADERS, True),
                ("tools/util/include/", _HEADERS, True),  # CUTLASS's host utilities (packed strides)
                ("examples/cute/tutorial/hopper/", (".cu",), False),
            ),
            wheel=True,
        ),
        Package(
            # FlashInfer's Hopper prefill (include/flashinfer/attention/hopper/), with the CUTLASS and CCCL headers
            # its JIT builds with, as sources in its wheel (flashinfer/data/); only the headers nvcc reads for
            # kernel/thirdparty/flashinfer_sm90_prefill.cu are kept
            name="flashinfer-python",
            version="0.7.4",
            filename="flashinfer_python-0.7.4-py3-none-any.whl",
            sha256="a051a62e09a2738e8b0de47a1944fd2f0f3eff01b728b662141ea660cb09dd32",
            root="flashinfer/data",
            keep=(),
            wheel=True,
            listed="flashinfer_headers.txt",
        ),
        Package(
            name="llama-cpp-python",
            version="0.3.36",
            filename="llama_cpp_python-0.3.36.tar.gz",
            sha256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",
            root="llama_cpp_python-0.3.36",
            keep=(
                ("vendor/llama.cpp/ggml/include/", _HEADERS, True),
                ("vendor/llama.cpp/ggml/src/ggml-cuda/", _HEADERS, True),
                ("vendor/llama.cpp/ggml/src/", _HEADERS, False),  # ggml-impl.h, ggml-common.h, ...
            ),
        ),
    )
}


def cache_folder() -> pathlib.Path:
    """Where archives and extracted trees live: the user cache (flashsim.calibration.cache_root()/thirdparty)."""
    return calibration.cache_root() / "thirdparty"


def sha256_file(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def archive(package: Package) -> pathlib.Path:
    """The package's archive in the cache, fetched with pip if absent; ValueError if it does not hash as pinned."""
    folder = cache_folder() / "archives"
    path = folder / package.filename
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as tmp:
            only = "--only-binary" if package.wheel else "--no-binary"
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", only, ":all:", "--quiet"]
            cmd += [] if package.build_isolation else ["--no-build-isolation"]
            cmd += ["-d", tmp, f"{package.name}=={package.version}"]
            env = {**os.environ, **dict(package.pip_env)}
            done = subprocess.run(cmd, capture_output=True, text=True, env=env)
            got = pathlib.Path(tmp) / package.filename
            if done.returncode != 0 or not got.is_file():
                raise RuntimeError(f"pip could not fetch {package.key}: {' '.join(cmd)}\n{done.stderr.strip()}")
            got.replace(path)
    digest = sha256_file(path)
    if digest != package.sha256:
        raise ValueError(f"{path} has sha256 {digest}, but {package.key} is pinned to {package.sha256}")
    return path


@cache
def listed_members(package: Package) -> frozenset:
    """The members ``package.listed`` names (paths under the package root); empty where it names no list."""
    if not package.listed:
        return frozenset()
    lines = (pathlib.Path(__file__).with_name(package.listed).read_text()).splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def _kept(package: Package, member: str) -> bool:
    prefix = package.root + "/"
    if not member.startswith(prefix):
        return False
    rel = member[len(prefix) :]
    if package.listed:
        return rel in listed_members(package)
    return any(
        rel.startswith(folder) and rel.endswith(suffixes) and (nested or "/" not in rel[len(folder) :])
        for folder, suffixes, nested in package.keep
    )


def _members(source: pathlib.Path, wanted):
    """(name, bytes) of each regular file of the tar.gz or wheel (zip) ``source`` whose name ``wanted`` accepts, in
    the archive's order (the others are never decompressed)."""
    if zipfile.is_zipfile(source):
        with zipfile.ZipFile(source) as z:
            for info in z.infolist():
                if not info.is_dir() and wanted(info.filename):
                    yield info.filename, z.read(info)
        return
    with tarfile.open(source, "r:gz") as tar:
        for m in tar.getmembers():
            if m.isfile() and wanted(m.name):
                yield m.name, tar.extractfile(m).read()


def _kept_members(source: pathlib.Path, package: Package):
    """(path relative to the package root, bytes) of each kept file of ``source``."""
    wanted = lambda name: _kept(package, name) and ".." not in pathlib.PurePosixPath(name).parts  # noqa: E731
    for name, data in _members(source, wanted):
        yield name[len(package.root) + 1 :], data


def _extract(source: pathlib.Path, package: Package, dest: pathlib.Path) -> list[str]:
    """Write the kept files of ``source`` under ``dest`` (paths relative to the package root); their names."""
    names = []
    for rel, data in _kept_members(source, package):
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        names.append(rel)
    return sorted(names)


def _fill(folder: pathlib.Path, package: Package, source: pathlib.Path, archive_sha256: str) -> pathlib.Path:
    """Extract the kept members of the archive ``source`` into ``folder``/<key> once (a marker holds the archive's
    sha256 and the hash of the listed members, so a different archive or list re-extracts)."""
    dest = folder / package.key
    marker = dest / ".flashsim-source"
    listed = sorted(listed_members(package))
    stamp = archive_sha256 + ("\n" + hashlib.sha256("\n".join(listed).encode()).hexdigest() if listed else "")
    if marker.is_file() and marker.read_text() == stamp:
        return dest
    # Extracted apart and renamed into place: test workers fill the same tree at once on a fresh machine, and one
    # deleting or half-writing the folder another reads broke both (a stale tree is moved aside first, atomically).
    folder.mkdir(parents=True, exist_ok=True)
    fresh = pathlib.Path(tempfile.mkdtemp(prefix=f".{package.key}-", dir=folder))
    _extract(source, package, fresh)
    (fresh / marker.name).write_text(stamp)
    if dest.exists() and not (marker.is_file() and marker.read_text() == stamp):
        stale = pathlib.Path(tempfile.mkdtemp(prefix=f".{package.key}-stale-", dir=folder))
        try:
            dest.rename(stale / "tree")
        except OSError:  # another worker moved it first
            pass
        shutil.rmtree(stale, ignore_errors=True)
    try:
        fresh.rename(dest)
    except OSError:  # another worker's complete tree got there first: the same files
        shutil.rmtree(fresh, ignore_errors=True)
        if not (marker.is_file() and marker.read_text() == stamp):
            raise
    return dest


def tree(package: Package, staged: pathlib.Path | None = None) -> pathlib.Path:
    """The folder holding the package's kept files: from the pinned archive in the cache, or, with ``staged``, from
    the stripped archive ``stage`` wrote there (its manifest must name the pinned archive)."""
    if staged is None:
        return _fill(cache_folder() / "trees", package, archive(package), package.sha256)
    manifest = json.loads((staged / f"{package.key}.json").read_text())
    if manifest["archive_sha256"] != package.sha256:
        raise ValueError(
            f"{staged}: {package.key} was staged from {manifest['archive_sha256']}, not the pinned archive"
        )
    stripped = staged / f"{package.key}.tar.gz"
    if sha256_file(stripped) != manifest["stripped_sha256"]:
        raise ValueError(f"{stripped} does not hash as its manifest says")
    return _fill(staged / "trees", package, stripped, manifest["stripped_sha256"])


def stage(package: Package, folder: pathlib.Path) -> pathlib.Path:
    """Write ``folder``/<key>.tar.gz (the kept members of the pinned archive, under the same root) and
    ``folder``/<key>.json (package, version, the pinned archive's sha256, each kept file's sha256)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{package.key}.tar.gz"
    files = {}
    with tarfile.open(out, "w:gz") as dst:
        for rel, data in _kept_members(archive(package), package):
            files[rel] = hashlib.sha256(data).hexdigest()
            info = tarfile.TarInfo(f"{package.root}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            dst.addfile(info, io.BytesIO(data))
    manifest = {
        "package": package.name,
        "version": package.version,
        "archive": package.filename,
        "archive_sha256": package.sha256,
        "stripped_sha256": sha256_file(out),
        "files": dict(sorted(files.items())),
    }
    (folder / f"{package.key}.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return out
