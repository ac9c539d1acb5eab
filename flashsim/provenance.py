"""Which build produced a GPU capture, so that stored captures cannot silently drift from the kernel.

Two records per capture, one for what ran and one for what the GPU executes:

- The source record (``fingerprint``): sha256 of the kernel source and of every file it includes from kernel/, and
  the complete define set of the build. Every capture writer (``flashsim verify --save-cases`` and the tools in
  flashsim/gpu/capture/) stores it on the GPU machine: it says exactly which sources ran.
- The compiled record (``compiled_fingerprint``): sha256 of the PTX that NVRTC emits for the build, with the same
  program name, defines and options as the GPU runner, for the capture's architecture, its comment lines removed.
  tools/stamp_captures.py adds it to a capture on the development machine after checking that the capture's source
  record equals the working tree's (tools/collect_device_round.sh calls it), and tests/test_drift.py recomputes it.
  A capture whose compiled record differs from today's build is stale; a capture whose sources merely differ in
  comments or whitespace is not.

Why the PTX and not the source text: a comment or a blank line in kernel/ changes every source hash and forced a
GPU re-capture of every file (and one more copy of ~27 MB of captures in the history each time), although the GPU
runs the very same code. The PTX is what the kernel means for one configuration: comments and whitespace do not
reach it (the kernel uses no __LINE__ or assert, and builds carry no line information), nor does the folder the
source lies in; a changed constant or a changed define does. Why not the SASS: ptxas's output is a function of the
PTX and of the ptxas version, so the PTX already decides it, and NVRTC's front end alone is fast (``arch`` sm_XY
is compiled for the virtual compute_XY: the same PTX text, without running ptxas).
The comment lines go because they carry the compiler's version and build id (``// Cuda compilation tools ...``)
and NVRTC's inline-asm markers, none of which the GPU executes.

What the PTX depends on besides the build: NVRTC's version (and the CUDA headers it bundles) and the program name
(internal symbols are named after it; the name is the runner's, ``PROGRAM_NAMES``). So every compiled record names
the NVRTC version it was made with, read from NVRTC's own output; CI pins that version (.ci/constraints.txt), and
a check under another version is not decidable (tests/test_drift.py then fails, naming both versions).

The define set of every build lives here, once: ``build_defines(kernel, config)`` is what the NVRTC builds pass
(flashsim.gpu.attention, flashsim.gpu.capture.*), what the source record hashes and what the PTX is compiled with.
The source record needs nothing but file bytes and integers (no cuda-python); the compiled one needs NVRTC
(cuda-bindings and nvidia-cuda-nvrtc, the gpu extra), imported only when it is computed.

    fingerprint("flash_fwd", config)   -> {"kernel": "kernel/flash_fwd.cu", "files": {...}, "source_sha256": ...,
                                            "defines": {...}, "config": {...}, "fingerprint": ...}
    source_fingerprint(kernel, defines) -> the same without "config", for an explicit define dict
    compiled_fingerprint("flash_fwd", config, arch="sm_90")
                                        -> {"arch": "sm_90", "nvrtc": "13.0.88", "ptx_sha256": {"kernel/flash_fwd.cu":
                                            ...}, "fingerprint": ...}
    compiled_fingerprints([(kernel, config, arch), ...]) -> the same for many builds, each distinct PTX once
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re

from .gpu.build import compile_ptx, kernel_dir

# name -> source file under kernel/
KERNELS = {
    "flash_fwd": "flash_fwd.cu",
    "quantize": "quantize.cu",
    "mma_capture": "capture/mma.cu",
    "mma_k32_capture": "capture/mma_k32.cu",
    "wgmma_capture": "capture/wgmma.cu",
    "layout_capture": "capture/layout.cu",
    "sfu_capture": "capture/sfu.cu",
    "sfu_approx_capture": "capture/sfu_approx.cu",
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
    log (flashsim.emulator.kernel_math), and with ``config.fused`` the index rules' numbers
    (flashsim.serving.indices.defines). layout_capture: flashsim.layout.silicon's slot table. mma_capture,
    wgmma_capture, sfu_capture and sfu_approx_capture: none.
    """
    name = _kernel_name(kernel)
    if name in NEEDS_CONFIG:
        if config is None:
            raise ValueError(f"{name}: build_defines needs the KernelConfig")
        if name == "quantize":
            return config.quantize_defines()
        from .constants import math_defines

        defines = {**config.defines(), "FS_EXPECTED_SMEM": config.smem_bytes, **math_defines()}
        if config.fused:  # the index rules run inside flash_fwd (kernel/serving_rules.cuh): their numbers
            from .serving.indices import defines as index_defines

            defines.update(index_defines())
        return defines
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


# -- the compiled fingerprint: the PTX of the build --------------------------------------------------

# The NVRTC program name of each build, as the GPU runner names it (flashsim.gpu.launch: compile_cuda's default for
# flash_fwd, the file for quantize; compile_file(KERNEL) and the SFU tool: the path under kernel/). The PTX names
# internal symbols after it, so the fingerprint compiles under the same name (tests/test_drift.py checks the runner).
PROGRAM_NAMES = {
    "flash_fwd": "flashsim.cu",
    "quantize": "quantize.cu",
    "mma_capture": "capture/mma.cu",
    "mma_k32_capture": "capture/mma_k32.cu",
    "wgmma_capture": "capture/wgmma.cu",
    "layout_capture": "capture/layout.cu",
    "sfu_capture": "capture/sfu.cu",
    "sfu_approx_capture": "capture/sfu_approx.cu",
}
_NVRTC_RELEASE = re.compile(r"^//.*\bV(\d+\.\d+\.\d+)\s*$", re.MULTILINE)  # "// Cuda compilation tools, ..., V13.0.88"


def ptx_code(ptx: str) -> str:
    """``ptx`` without its comment lines (compiler version and build id, inline-asm markers): what the GPU runs."""
    return "".join(line for line in ptx.splitlines(keepends=True) if not line.lstrip().startswith("//"))


def nvrtc_release(ptx: str) -> str:
    """The NVRTC release ("13.0.88") that wrote ``ptx``, from its header."""
    m = _NVRTC_RELEASE.search(ptx)
    if not m:
        raise ValueError("no 'V<major>.<minor>.<patch>' compiler line in the PTX header")
    return m.group(1)


def nvrtc_version() -> str:
    """The release of the NVRTC that this process loads ("13.0.88"), as NVRTC writes it into its PTX."""
    probe = 'extern "C" __global__ void probe() {}'
    return nvrtc_release(compile_ptx(probe, name="probe.cu", defines={}, arch="sm_90"))


def compiled_builds(kernel, config=None) -> list[str]:
    """The KERNELS names whose PTX a capture of ``kernel`` ran: flash_fwd, and quantize before it with INT8 Q K^T
    (flashsim.gpu.launch runs kernel/quantize.cu only then); a capture kernel alone."""
    name = _kernel_name(kernel)
    if name == "flash_fwd" and config is not None and config.quantized:
        return ["flash_fwd", "quantize"]
    return [name]


def compiled_fingerprint(kernel, config=None, *, arch: str = "sm_90", root=None) -> dict:
    """The compiled record of the build of ``kernel`` (with ``config`` for flash_fwd and quantize) for ``arch``.

    ptx_sha256: {kernel/<source>: sha256 of its PTX code (``ptx_code``)} for every build the capture ran
    (``compiled_builds``); nvrtc: the NVRTC release that compiled it; fingerprint: sha256 over arch and
    ptx_sha256 (the release is recorded, not hashed: under another release the check is not decidable at all).
    ``root``: another kernel/ folder (tests)."""
    return compiled_fingerprints([(kernel, config, arch)], root=root)[0]


def _ptx_job(job) -> tuple[str, str]:
    """(sha256 of the PTX code, NVRTC release) of one (KERNELS name, sorted defines, arch, kernel/ folder)."""
    build, defines, arch, root = job
    root = pathlib.Path(root)
    ptx = compile_ptx(
        (root / KERNELS[build]).read_text(),
        name=PROGRAM_NAMES[build],
        defines=dict(defines),
        arch=arch,
        include_dirs=(root,),
    )
    return hashlib.sha256(ptx_code(ptx).encode()).hexdigest(), nvrtc_release(ptx)


def compiled_fingerprints(builds, *, root=None, workers: int = 1) -> list[dict]:
    """``compiled_fingerprint`` of every (kernel, config, arch) of ``builds``, in order. Each distinct PTX (source,
    defines, arch) is compiled once: the quantization pass of many INT8 configurations is one build. ``workers`` > 1
    compiles in a process pool of that many (spawned: the caller may hold threads, JAX's or a test runner's, that a
    forked child would inherit mid-operation)."""
    root = str(pathlib.Path(root) if root is not None else _kernel_root())
    plans = []
    for kernel, config, arch in builds:
        parts = compiled_builds(kernel, config)
        target = config.build_arch(arch) if config is not None else arch  # NVFP4: sm_120a
        plans.append(
            (
                arch,
                [
                    (p, tuple(sorted(build_defines(p, config if p in NEEDS_CONFIG else None).items())), target, root)
                    for p in parts
                ],
            )
        )
    jobs = list(dict.fromkeys(job for _, parts in plans for job in parts))
    if workers > 1 and len(jobs) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=multiprocessing.get_context("spawn")) as pool:
            done = dict(zip(jobs, pool.map(_ptx_job, jobs)))
    else:
        done = {job: _ptx_job(job) for job in jobs}
    out = []
    for arch, parts in plans:
        hashes = {"kernel/" + KERNELS[job[0]]: done[job][0] for job in parts}
        releases = {done[job][1] for job in parts}
        digest = hashlib.sha256(json.dumps({"arch": arch, "ptx_sha256": hashes}, sort_keys=True).encode()).hexdigest()
        out.append({"arch": arch, "nvrtc": releases.pop(), "ptx_sha256": hashes, "fingerprint": digest})
    return out


def compare_compiled(stored: dict | None, current: dict) -> list[str]:
    """What differs between a stored compiled record and the current one, in words; [] when they agree. A record
    of another NVRTC release or architecture is not compared (``stored["nvrtc"]`` must equal ``current["nvrtc"]``:
    the caller decides what that means)."""
    if not stored:
        return ["no compiled fingerprint recorded (tools/stamp_captures.py adds it)"]
    if stored.get("fingerprint") == current["fingerprint"]:
        return []
    if stored.get("arch") != current["arch"]:
        return [f"arch {stored.get('arch')} -> {current['arch']}"]
    old, new = stored.get("ptx_sha256") or {}, current["ptx_sha256"]
    changed = [
        f"the PTX of {p} {'changed' if p in old and p in new else 'is new' if p in new else 'is no longer built'}"
        for p in sorted(set(old) | set(new))
        if old.get(p) != new.get(p)
    ]
    return changed or ["fingerprint differs (stored record inconsistent with its own fields)"]
