"""Where calibration data lives: a user cache per architecture, and the data shipped in the package.

Measured tables (the SFU's ex2/rcp tables, captured by ``flashsim calibrate``) are files named
``<kind>_tables_<tag>.npz`` (tag: "sm90" for sm_90). Load order for an architecture:

1. the user cache for that arch: ``$FLASHSIM_CACHE/<arch>/`` if set, else
   ``$XDG_CACHE_HOME/flashsim/<arch>/`` or ``~/.cache/flashsim/<arch>/``;
2. the data shipped in the package for that arch (``flashsim/data/<kind>/``);
3. the shipped sm_90 data (the H200 the project was calibrated on), with a one-time visible warning
   "no calibration for sm_120: using sm_90 data".

``locate`` returns None when none of these exists; the caller decides what to fall back to.

Data derived from a calibration file (the SFU's decoded tables) is cached under ``<cache root>/derived/``
(``derived_path``), named by the sha256 of the file it came from, written atomically and memory-mapped on load.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import tempfile
import warnings
from dataclasses import dataclass

import numpy as np

from .arch import get_arch
from .settings import cache_override

REFERENCE_ARCH = "sm_90"  # the architecture whose data ships with the package
_PACKAGE_DATA = pathlib.Path(__file__).resolve().parent / "data"
_warned: set = set()


class CalibrationWarning(UserWarning):
    """Calibration data is missing or borrowed from another architecture (results may not be bit-exact)."""


def warn_once(key, message: str) -> None:
    """Emit ``message`` as a CalibrationWarning the first time ``key`` is seen in this process."""
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(message, CalibrationWarning, stacklevel=3)


def arch_tag(arch) -> str:
    """ "sm_90" -> "sm90": the suffix of calibration file names."""
    return get_arch(arch).name.replace("_", "")


def filename(kind: str, arch) -> str:
    """The file name of ``kind`` ("sfu", ...) calibration tables for ``arch``."""
    if not isinstance(kind, str) or not kind.isidentifier():
        raise ValueError(f"kind must be an identifier such as 'sfu', got {kind!r}")
    return f"{kind}_tables_{arch_tag(arch)}.npz"


def cache_root() -> pathlib.Path:
    """The user cache folder: $FLASHSIM_CACHE, else $XDG_CACHE_HOME/flashsim, else ~/.cache/flashsim."""
    env = cache_override()
    if env:
        return pathlib.Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg).expanduser() if xdg else pathlib.Path.home() / ".cache"
    return base / "flashsim"


def cache_dir(arch) -> pathlib.Path:
    """The user cache folder of one architecture (not created here)."""
    return cache_root() / get_arch(arch).name


def shipped_path(kind: str, arch) -> pathlib.Path:
    """Where the package keeps ``kind`` tables for ``arch`` (the file may not exist)."""
    return _PACKAGE_DATA / kind / filename(kind, arch)


@dataclass(frozen=True)
class Located:
    """A calibration file found for a request: its path, the arch it was measured on, and where it came from."""

    path: pathlib.Path
    arch: str  # the architecture the data belongs to
    requested: str  # the architecture asked for
    source: str  # "cache" or "package"

    @property
    def borrowed(self) -> bool:
        return self.arch != self.requested


def locate(kind: str, arch="sm_90", *, warn: bool = True) -> Located | None:
    """Find ``kind`` calibration data for ``arch`` in load order (module docstring); None if there is none.

    When the sm_90 data stands in for another arch, warns once per (kind, arch).
    """
    name = get_arch(arch).name
    for path, source in ((cache_dir(name) / filename(kind, name), "cache"), (shipped_path(kind, name), "package")):
        if path.is_file():
            return Located(path, name, name, source)
    ref = shipped_path(kind, REFERENCE_ARCH)
    if name != REFERENCE_ARCH and ref.is_file():
        if warn:
            warn_once(
                ("borrowed", kind, name),
                f"no calibration for {name}: using {REFERENCE_ARCH} data ({kind} tables from {ref}); "
                f"run `flashsim calibrate` on a {name} GPU for bit-exact results",
            )
        return Located(ref, REFERENCE_ARCH, name, "package")
    return None


def install(src, kind: str, arch) -> pathlib.Path:
    """Copy the file ``src`` into the user cache as the ``kind`` tables of ``arch`` (atomic replace)."""
    src = pathlib.Path(src)
    if not src.is_file():
        raise ValueError(f"src must be an existing file, got {str(src)!r}")
    dest_dir = cache_dir(arch)
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / filename(kind, arch)
    fd, tmp = tempfile.mkstemp(prefix=dest.name + ".", dir=dest_dir)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
    return dest


# -- derived data ------------------------------------------------------------------------------------


def file_sha256(path) -> str:
    """sha256 (hex) of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def derived_path(name: str) -> pathlib.Path:
    """Where data derived from calibration files is cached: ``<cache root>/derived/<name>`` (not created here).
    ``name`` should carry the sha256 of its source file, so that a changed source never meets a stale entry."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"name must be a plain file name, got {name!r}")
    return cache_root() / "derived" / name


def load_array(path, *, shape, dtype) -> np.ndarray | None:
    """The .npy array at ``path`` memory-mapped read-only, or None if it is missing, unreadable or not of the
    expected ``shape`` and ``dtype``."""
    try:
        a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    if a.shape != tuple(shape) or a.dtype != np.dtype(dtype):
        return None
    return a


def save_array(path, a: np.ndarray) -> bool:
    """Write ``a`` to ``path`` as .npy atomically (a temporary file in the same folder, then os.replace), so that
    a concurrent reader sees the old file or the new one, never a part. False (and nothing left behind) when the
    folder cannot be written."""
    path = pathlib.Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            np.save(fh, np.ascontiguousarray(a), allow_pickle=False)
        os.replace(tmp, path)
        return True
    except OSError:
        if tmp is not None:
            pathlib.Path(tmp).unlink(missing_ok=True)
        return False
