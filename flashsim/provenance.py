"""Which kernel source and which defines produced a GPU capture, so that stored captures cannot silently drift.

Every capture writer (``flashsim verify --save-cases`` and the tools in flashsim/gpu/capture/) stores the
fingerprint of the build it ran, and tests/test_drift.py recomputes it from the current sources: a capture whose
kernel source (or any file it includes from kernel/) or whose define set has changed since is stale.

The define set of every build lives here, once: ``build_defines(kernel, config)`` is what the NVRTC builds pass
(flashsim.gpu.attention, flashsim.gpu.capture.*) and what the fingerprint hashes. Nothing here compiles or needs
cuda-python: the fingerprint is a function of file bytes and integers.

    fingerprint("flash_fwd", config)   -> {"kernel": "kernel/flash_fwd.cu", "files": {...}, "source_sha256": ...,
                                            "defines": {...}, "config": {...}, "fingerprint": ...}
    source_fingerprint(kernel, defines) -> the same without "config", for an explicit define dict
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re

from .gpu.build import kernel_dir

# name -> source file under kernel/
KERNELS = {
    "flash_fwd": "flash_fwd.cu",
    "quantize": "quantize.cu",
    "mma_capture": "capture/mma.cu",
    "mma_k32_capture": "capture/mma_k32.cu",
    "layout_capture": "capture/layout.cu",
    "sfu_capture": "capture/sfu.cu",
}
NEEDS_CONFIG = ("flash_fwd", "quantize")
# Sources that run as part of another kernel's result: an attention capture comes from flash_fwd and, with
# quant="int8", from the quantization pass before it, so flash_fwd's record covers quantize.cu too (its defines are
# a subset of flash_fwd's: KernelConfig.quantize_defines).
COMPANIONS = {"flash_fwd": ("quantize",)}


def _kernel_name(kernel) -> str:
    """ "flash_fwd" / "flash_fwd.cu" / "kernel/flash_fwd.cu" / a path of a known source -> its KERNELS name."""
    text = str(kernel).replace(os.sep, "/")
    if text in KERNELS:
        return text
    for name, rel in KERNELS.items():
        if text in (rel, "kernel/" + rel) or text.endswith("/kernel/" + rel):
            return name
    raise ValueError(
        f"unknown kernel {kernel!r}; known: {', '.join(KERNELS)} "
        f"(sources {', '.join('kernel/' + r for r in KERNELS.values())})"
    )


# -- the define sets of the builds (the one place) -------------------------------------------------


def build_defines(kernel, config=None) -> dict[str, int]:
    """Every define the NVRTC build of ``kernel`` receives, name -> int.

    flash_fwd (needs ``config``, a KernelConfig): the configuration's defines, FS_EXPECTED_SMEM (the kernel
    static_asserts its own shared-memory layout against it) and the FS_LOG_* constants of the emulator's
    log (flashsim.emulator.kernel_math). layout_capture: flashsim.layout.silicon's slot table. mma_capture and
    sfu_capture: none.
    """
    name = _kernel_name(kernel)
    if name in NEEDS_CONFIG:
        if config is None:
            raise ValueError(f"{name}: build_defines needs the KernelConfig")
        if name == "quantize":
            return config.quantize_defines()
        from .constants import math_defines

        return {**config.defines(), "FS_EXPECTED_SMEM": config.smem_bytes, **math_defines()}
    if config is not None:
        raise ValueError(f"{name} takes no configuration (got {config!r})")
    if name == "layout_capture":
        from .layout import silicon

        return silicon.defines()
    return {}


# -- sources -----------------------------------------------------------------------------------------

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.MULTILINE)
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_LINE_COMMENT = re.compile(r"//[^\n]*")


def _kernel_root() -> pathlib.Path:

    return kernel_dir()


def includes(text: str) -> list[str]:
    """The file names of every #include line of ``text`` (comments removed; conditional ones count too)."""
    text = _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text))
    return _INCLUDE.findall(text)


def source_files(kernel, root=None) -> dict[str, str]:
    """{path relative to kernel/'s parent ("kernel/..."): sha256 of its bytes} for the source of ``kernel`` and
    its COMPANIONS and every file they include, transitively, that lies under kernel/ (as NVRTC resolves them: next
    to the including
    file, then kernel/). Headers outside kernel/ (cuda_fp16.h, ...) belong to the toolkit and are not listed."""
    root = pathlib.Path(root) if root is not None else _kernel_root()
    name = _kernel_name(kernel)
    mains = [root / KERNELS[n] for n in (name, *COMPANIONS.get(name, ()))]
    for main in mains:
        if not main.is_file():
            raise FileNotFoundError(f"kernel source {main} not found")
    out, todo, seen = {}, [m.resolve() for m in mains], set()
    root = root.resolve()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        data = path.read_bytes()
        out["kernel/" + path.relative_to(root).as_posix()] = hashlib.sha256(data).hexdigest()
        for inc in includes(data.decode("utf-8", errors="replace")):
            for base in (path.parent, root):
                cand = (base / inc).resolve()
                if cand.is_file() and cand.is_relative_to(root):
                    todo.append(cand)
                    break
    return dict(sorted(out.items()))


def _digest(files: dict) -> str:
    """sha256 of a sha256sum-style manifest ("<sha256>  <path>" lines, sorted by path)."""
    return hashlib.sha256("".join(f"{h}  {p}\n" for p, h in sorted(files.items())).encode()).hexdigest()


def source_fingerprint(kernel, defines: dict, *, root=None) -> dict:
    """The provenance record of a build of ``kernel`` (a KERNELS name or its source path) with ``defines``.

    kernel: "kernel/<source>"; files: {path: sha256} of the source and its includes under kernel/;
    source_sha256: sha256 over that manifest; defines: the complete define dict (sorted);
    fingerprint: sha256 over kernel, source_sha256 and the sorted defines. ``root``: another kernel/ folder
    (tests)."""
    name = _kernel_name(kernel)
    files = source_files(name, root)
    defs = {str(k): int(v) for k, v in sorted(dict(defines).items())}
    src = _digest(files)
    record = {"kernel": "kernel/" + KERNELS[name], "files": files, "source_sha256": src, "defines": defs}
    record["fingerprint"] = hashlib.sha256(
        json.dumps(
            {"kernel": record["kernel"], "source_sha256": src, "defines": sorted(defs.items())}, sort_keys=True
        ).encode()
    ).hexdigest()
    return record


def fingerprint(kernel, config=None, *, root=None) -> dict:
    """``source_fingerprint`` with the build's own defines (``build_defines``); for flash_fwd also the
    configuration's fields under "config" (informative: the fingerprint covers them through the defines)."""
    name = _kernel_name(kernel)
    record = source_fingerprint(name, build_defines(name, config), root=root)
    if config is not None:
        from dataclasses import asdict

        record["config"] = asdict(config)
    return record


def to_json(record: dict) -> str:
    return json.dumps(record, sort_keys=True)


def compare(stored: dict | None, current: dict) -> list[str]:
    """What differs between a stored record and the current one, in words; [] when the fingerprints agree."""
    if not stored:
        return ["no provenance recorded (captured before provenance existed)"]
    if stored.get("fingerprint") == current["fingerprint"]:
        return []
    out = []
    if stored.get("kernel") != current["kernel"]:
        out.append(f"kernel {stored.get('kernel')} -> {current['kernel']}")
    if stored.get("source_sha256") != current["source_sha256"]:
        old, new = stored.get("files") or {}, current["files"]
        changed = [p for p in sorted(set(old) | set(new)) if old.get(p) != new.get(p)]
        out.append(
            "source changed: "
            + (
                ", ".join(
                    f"{p} ({'added' if p not in old else 'removed' if p not in new else 'edited'})" for p in changed
                )
                if changed
                else f"source_sha256 {str(stored.get('source_sha256'))[:12]} -> {current['source_sha256'][:12]}"
            )
        )
    old_d, new_d = stored.get("defines") or {}, current["defines"]
    if old_d != new_d:
        parts = [f"+{k}={new_d[k]}" for k in sorted(set(new_d) - set(old_d))]
        parts += [f"-{k}" for k in sorted(set(old_d) - set(new_d))]
        parts += [f"{k} {old_d[k]} -> {new_d[k]}" for k in sorted(set(old_d) & set(new_d)) if old_d[k] != new_d[k]]
        out.append("defines changed: " + ", ".join(parts))
    return out or ["fingerprint differs (stored record inconsistent with its own fields)"]
