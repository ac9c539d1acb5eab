"""Compile CUDA C++ to a cubin with NVRTC (through cuda.core) for any architecture, with no GPU needed.

``compile_cuda`` returns a :class:`Build`: the cubin plus what ptxas reported for every entry function
(registers, spills, stack frame, static shared memory), so CI can check resource budgets on a machine
without a GPU and the runner can load the very same cubin on one. Builds are cached in-process.

``kernel_path`` finds a file under the repository's ``kernel/`` folder (editable checkout), or under the
copy shipped inside the package (``flashsim/gpu/_kernel``, a link to ``kernel/`` that a regular install
turns into real files).
"""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import re
import sys
from dataclasses import dataclass, field
from functools import lru_cache

from ..arch import Arch, get_arch
from ..errors import CompileError, GPUError

_PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
_REPO = _PACKAGE_DIR.parent.parent
_KERNEL_DIRS = tuple(
    d
    for d in (
        _REPO / "kernel" if (_REPO / "pyproject.toml").is_file() else None,  # checkout / editable install
        _PACKAGE_DIR / "_kernel",  # regular install: package data (a link to kernel/ in the repo)
    )
    if d is not None
)

# -- kernel sources -------------------------------------------------------------------------------


def kernel_dir() -> pathlib.Path:
    """The ``kernel/`` folder in use (checkout first, then the installed package data)."""
    for d in _KERNEL_DIRS:
        if d.is_dir():
            return d
    raise FileNotFoundError(
        "flashsim's kernel/ folder was not found; looked in: "
        + ", ".join(str(d) for d in _KERNEL_DIRS)
        + " (reinstall flashsim, or run from the repository root)"
    )


def kernel_path(relative: str) -> pathlib.Path:
    """Path of ``relative`` (e.g. "flash_fwd.cu", "capture/mma.cu") under kernel/; FileNotFoundError if absent."""
    if not isinstance(relative, (str, os.PathLike)) or not str(relative):
        raise ValueError(f"relative must be a non-empty path under kernel/, got {relative!r}")
    rel = pathlib.PurePosixPath(str(relative).replace(os.sep, "/"))
    if rel.is_absolute() or ".." in rel.parts:
        raise ValueError(f"relative must stay inside kernel/ (no absolute path, no '..'), got {relative!r}")
    looked = []
    for d in _KERNEL_DIRS:
        p = d / rel
        if p.is_file():
            return p
        looked.append(str(p))
    raise FileNotFoundError(f"kernel source {str(rel)!r} not found; looked for: {', '.join(looked)}")


# -- CUDA headers (cuda_fp16.h, ...) for NVRTC ----------------------------------------------------


@lru_cache(maxsize=1)
def _toolkit_roots() -> list[str]:
    """$CUDA_HOME and $CUDA_PATH where set: the platform's convention for where the CUDA toolkit lies."""
    return [r for r in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if r]


def cuda_include_dirs() -> tuple[str, ...]:
    """Folders holding the CUDA toolkit headers (cuda_fp16.h...), first found first; () if none.

    NVRTC knows no include folder by itself. Looked at, in order: $CUDA_HOME / $CUDA_PATH, the pip wheels
    (nvidia/cu13/include, nvidia/cuda_runtime/include, nvidia/cuda_nvrtc/include), /usr/local/cuda, nvcc's.
    """
    candidates = [os.path.join(c, "include") for c in _toolkit_roots()]
    for entry in sys.path:
        for sub in (
            "nvidia/cu13/include",
            "nvidia/cu12/include",
            "nvidia/cuda_runtime/include",
            "nvidia/cuda_nvrtc/include",
        ):
            candidates.append(os.path.join(entry or ".", sub))
    candidates.append("/usr/local/cuda/include")
    nvcc = next(
        (
            os.path.join(p, "nvcc")
            for p in os.environ.get("PATH", "").split(os.pathsep)
            if p and os.path.isfile(os.path.join(p, "nvcc"))
        ),
        None,
    )
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include"))
    for c in candidates:
        if os.path.isfile(os.path.join(c, "cuda_fp16.h")):
            return (os.path.realpath(c),)
    return ()


# -- the build record -----------------------------------------------------------------------------


@dataclass(frozen=True)
class EntryPoint:
    """What ptxas reported for one ``__global__`` function of a build."""

    name: str  # the name to load it by: extern "C" name or the name expression
    mangled: str  # the symbol in the cubin
    registers: int = 0
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    stack_bytes: int = 0
    static_smem_bytes: int = 0
    barriers: int = 0

    def __str__(self) -> str:
        return (
            f"{self.name}: {self.registers} registers, {self.spill_stores} B spill stores, "
            f"{self.spill_loads} B spill loads, {self.stack_bytes} B stack, "
            f"{self.static_smem_bytes} B static smem, {self.barriers} barriers"
        )


@dataclass(frozen=True, eq=False)  # identity: usable as a dict key
class Build:
    """A compiled cubin and its resource usage. The scalar fields are the worst case over entry points."""

    cubin: bytes = field(repr=False)
    arch: str
    entry_points: dict
    lowered_names: dict
    log: str = field(repr=False)
    source_name: str = "flashsim.cu"
    defines: tuple = ()
    key: str = field(default="", repr=False)  # cache key digest (identifies the build)

    def _worst(self, attr: str) -> int:
        return max((getattr(e, attr) for e in self.entry_points.values()), default=0)

    registers = property(lambda self: self._worst("registers"))
    spill_stores = property(lambda self: self._worst("spill_stores"))
    spill_loads = property(lambda self: self._worst("spill_loads"))
    stack_bytes = property(lambda self: self._worst("stack_bytes"))
    static_smem_bytes = property(lambda self: self._worst("static_smem_bytes"))

    @classmethod
    def of_cubin(cls, cubin: bytes, arch: str, source_name: str, key: str | None = None) -> Build:
        """A Build of a cubin ptxas assembled from PTX (no resource report, no lowered names), keyed by the cubin's
        sha256 unless ``key`` is given (the runtime caches loaded modules by it)."""
        key = hashlib.sha256(cubin).hexdigest() if key is None else key
        return cls(cubin=cubin, arch=arch, entry_points={}, lowered_names={}, log="", source_name=source_name, key=key)

    @property
    def resources_known(self) -> bool:
        """False when ptxas printed no -v report (the scalar numbers are then 0, not measured)."""
        return bool(self.entry_points)

    def entry(self, name: str) -> EntryPoint:
        """The resource record of ``name`` (extern "C" name, name expression or mangled symbol)."""
        if name in self.entry_points:
            return self.entry_points[name]
        for e in self.entry_points.values():
            if e.mangled == name:
                return e
        raise KeyError(f"no entry point {name!r} in this build; entry points: {', '.join(self.entry_points)}")

    def __str__(self) -> str:
        head = (
            f"{self.arch}: {self.registers} registers, {self.spill_stores} B spill stores, "
            f"{self.spill_loads} B spill loads, {self.stack_bytes} B stack, "
            f"{self.static_smem_bytes} B static smem"
        )
        if not self.entry_points:
            return f"{self.arch}: resource usage unknown (ptxas printed no -v report)"
        if len(self.entry_points) == 1:
            return head
        return (
            head
            + " (worst of "
            + str(len(self.entry_points))
            + " entry points)\n"
            + "\n".join("  " + str(e) for e in self.entry_points.values())
        )


# -- ptxas -v log ---------------------------------------------------------------------------------

_RE_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_RE_PROPS = re.compile(r"Function properties for (\S+)")
_RE_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_RE_USED = re.compile(r"Used (\d+) registers")
_RE_BARRIERS = re.compile(r"used (\d+) barriers")
_RE_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict[str, dict[str, int]]:
    """Per mangled entry-function name: registers, spills, stack, static smem, barriers (from ``ptxas -v``)."""
    entries: dict[str, dict[str, int]] = {}
    entry = props_for = None
    for line in log.splitlines():
        if m := _RE_ENTRY.search(line):
            entry = props_for = m.group(1)
            entries.setdefault(entry, {})
        elif m := _RE_PROPS.search(line):
            props_for = m.group(1)
        elif (m := _RE_FRAME.search(line)) and entry is not None and props_for == entry:
            entries[entry].update(
                stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3))
            )
        elif (m := _RE_USED.search(line)) and entry is not None:
            rec = entries[entry]
            rec["registers"] = int(m.group(1))
            if b := _RE_BARRIERS.search(line):
                rec["barriers"] = int(b.group(1))
            if s := _RE_SMEM.search(line):
                rec["static_smem_bytes"] = int(s.group(1))
    return entries


# -- options ---------------------------------------------------------------------------------------

_ALIASES = {
    "maxrregcount": "max_register_count",
    "g": "debug",
    "generate_line_info": "lineinfo",
    "std": "std",
    "use_fast_math": "use_fast_math",
    "ftz": "ftz",
}


def _arch_name(arch) -> str:
    """ "sm_90" / "90" / "sm_90a" / an Arch record -> the NVRTC arch string; ValueError if unknown."""
    if isinstance(arch, Arch):
        return arch.name
    if not isinstance(arch, str):
        raise ValueError(f"arch must be a string such as 'sm_90' or an Arch record, got {type(arch).__name__}")
    key = arch.strip().lower()
    if not key.startswith("sm_"):
        key = "sm_" + key
    get_arch(key)  # raises ValueError naming the known architectures
    return key


def _parse_value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text, 0)
    except ValueError:
        return text


def _normalise_extra(extra_options) -> tuple[tuple[str, object], ...]:
    """Extra ProgramOptions as sorted (field, value) pairs.

    Accepts a mapping {field: value}, (field, value) pairs, or option strings "--field[=value]" /
    "-field[=value]" where field is a cuda.core ProgramOptions field (dashes or underscores) or one of the
    nvcc spellings maxrregcount, G, generate-line-info.
    """
    from cuda.core import ProgramOptions  # local import keeps flashsim.gpu importable without cuda-python

    fields = set(ProgramOptions.__dataclass_fields__)
    items = extra_options.items() if isinstance(extra_options, dict) else extra_options
    if isinstance(items, str):
        items = (items,)
    out = {}
    for item in items:
        if isinstance(item, str):
            name, eq, value = item.lstrip("-").partition("=")
            key, value = name.replace("-", "_"), (_parse_value(value) if eq else True)
        elif isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
            key, value = item
        else:
            raise ValueError(
                f"extra_options entries must be '--option[=value]' strings or (field, value) pairs, got {item!r}"
            )
        key = _ALIASES.get(key.lower(), key)
        if key not in fields or key in ("arch", "name", "define_macro", "include_path"):
            raise ValueError(
                f"extra_options: unknown or reserved option {key!r}; use a cuda.core ProgramOptions "
                "field (arch, name, defines and include_dirs have their own arguments)"
            )
        if isinstance(value, list):
            value = tuple(value)
        out[key] = value
    return tuple(sorted(out.items()))


def _normalise_defines(defines) -> tuple[tuple[str, int], ...]:
    if defines is None:
        return ()
    if not isinstance(defines, dict):
        raise ValueError(f"defines must be a dict name -> int, got {type(defines).__name__}")
    out = []
    for name, value in defines.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"defines: {name!r} is not a C macro name")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int) and not (hasattr(value, "__index__") and not isinstance(value, float)):
            raise ValueError(f"defines[{name!r}] must be an int, got {value!r}")
        out.append((name, int(value)))
    return tuple(sorted(out))


def search_path(include_dirs=(), toolkit: bool = True) -> list[str]:
    """The folders NVRTC searches for includes, in order, each once: ``include_dirs``, kernel/ (flash_fwd.cu's
    headers: async_copy.cuh, serving_rules.cuh; absent from an install without it), then, with ``toolkit``, the CUDA
    toolkit headers (``cuda_include_dirs``). compile_cuda and compile_ptx both search this path."""
    dirs = [str(d) for d in include_dirs]
    try:
        dirs.append(str(kernel_dir()))
    except FileNotFoundError:
        pass
    return list(dict.fromkeys(dirs + (list(cuda_include_dirs()) if toolkit else [])))


def _headers_stamp(dirs) -> str:
    """Names, sizes and mtimes of the headers in ``dirs`` so that an edited header invalidates the cache."""
    h = hashlib.sha256()
    for d in dirs:
        p = pathlib.Path(d)
        if not p.is_dir():
            continue
        for f in sorted(p.rglob("*")):
            if f.suffix in (".cuh", ".h", ".hpp", ".inc", ".cu") and f.is_file():
                st = f.stat()
                h.update(f"{f}:{st.st_size}:{st.st_mtime_ns};".encode())
    return h.hexdigest()


# -- compile ---------------------------------------------------------------------------------------

_CACHE: dict[str, Build] = {}


def clear_cache() -> None:
    """Forget every cached build (tests; after editing sources behind the cache's back)."""
    _CACHE.clear()


def compile_cuda(
    source: str,
    *,
    arch="sm_90",
    defines: dict[str, int] | None = None,
    name_expressions=(),
    include_dirs=(),
    extra_options=(),
    name: str = "flashsim.cu",
) -> Build:
    """Compile CUDA C++ ``source`` to a cubin for ``arch`` with NVRTC; no GPU needed.

    defines: macros (name -> int) passed as -D; name_expressions: template instantiations to lower and make
    loadable by that expression (e.g. "flash_fwd<128, 4>"); include_dirs: extra header folders (kernel/ and the
    CUDA headers found by ``cuda_include_dirs`` are always searched); extra_options: see ``_normalise_extra``;
    name: the file name NVRTC shows in diagnostics. Raises CompileError carrying the NVRTC log.
    """
    if not isinstance(source, str) or not source.strip():
        raise ValueError(
            "source must be non-empty CUDA C++ source text (read a file with kernel_path(...).read_text())"
        )
    arch_name = _arch_name(arch)
    defs = _normalise_defines(defines)
    if isinstance(name_expressions, str):
        name_expressions = (name_expressions,)
    exprs = tuple(name_expressions)
    if not all(isinstance(e, str) and e for e in exprs):
        raise ValueError(f"name_expressions must be non-empty strings, got {exprs!r}")
    if isinstance(include_dirs, (str, os.PathLike)):
        include_dirs = (include_dirs,)
    user_dirs = [str(pathlib.Path(d).resolve()) for d in include_dirs]
    for d in user_dirs:
        if not os.path.isdir(d):
            raise ValueError(f"include_dirs: {d!r} is not a folder")
    try:
        from cuda.core import Program, ProgramOptions
    except ImportError as exc:
        raise GPUError(
            "compiling needs cuda-python: pip install 'cuda-core>=1.2' 'cuda-bindings>=13' "
            f"'nvidia-cuda-nvrtc>=13' (or flashsim[gpu]); import failed: {exc}"
        ) from exc
    extra = dict(_normalise_extra(extra_options))
    incs = search_path(user_dirs)

    digest = hashlib.sha256()
    for part in (
        source,
        arch_name,
        repr(defs),
        repr(exprs),
        repr(incs),
        repr(sorted(extra.items())),
        name,
        _headers_stamp(search_path(user_dirs, toolkit=False)),
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    key = digest.hexdigest()
    if key in _CACHE:
        return _CACHE[key]

    ptxas = ["-v"]
    user_ptxas = extra.pop("ptxas_options", ())
    ptxas += [user_ptxas] if isinstance(user_ptxas, str) else list(user_ptxas)
    if "no_cache" in ProgramOptions.__dataclass_fields__:
        # NVRTC >= 12.9 caches cubins on disk where a driver is present; a cache hit skips ptxas and so prints no
        # -v log (seen on the H200). The in-process cache above is ours; NVRTC's would hide the resource numbers.
        extra.setdefault("no_cache", True)
    options = ProgramOptions(
        name=name,
        arch=arch_name,
        std=extra.pop("std", "c++17"),
        ptxas_options=ptxas,
        define_macro=[(k, str(v)) for k, v in defs] or None,
        include_path=incs or None,
        **extra,
    )
    logs = io.StringIO()
    try:
        obj = Program(source, "c++", options).compile("cubin", name_expressions=exprs, logs=logs)
    except Exception as exc:  # cuda.core raises NVRTCError (a RuntimeError) with the log in its message
        log = (logs.getvalue() or str(exc)).replace("\0", "").strip()
        raise CompileError(
            f"NVRTC failed to compile {name} for {arch_name} (defines {dict(defs) or 'none'}):", log
        ) from exc
    log = logs.getvalue().replace("\0", "").strip()
    lowered = {}
    for expr, sym in (obj.symbol_mapping or {}).items():
        lowered[expr.decode() if isinstance(expr, bytes) else expr] = sym.decode() if isinstance(sym, bytes) else sym
    by_mangled = {v: k for k, v in lowered.items()}
    entries = {}
    for mangled, rec in parse_ptxas_log(log).items():
        nice = by_mangled.get(mangled, mangled)
        entries[nice] = EntryPoint(name=nice, mangled=mangled, **rec)
    build = Build(
        cubin=bytes(obj.code),
        arch=arch_name,
        entry_points=entries,
        lowered_names=lowered,
        log=log,
        source_name=name,
        defines=defs,
        key=key,
    )
    _CACHE[key] = build
    return build


class NvrtcUnavailable(GPUError):
    """NVRTC (cuda-bindings and the nvidia-cuda-nvrtc library) cannot be loaded: nothing can be compiled here."""


class NvrtcFailed(CompileError):
    """NVRTC rejected a build to PTX; the message holds its log."""


def _nvrtc():
    try:
        from cuda.bindings import nvrtc

        nvrtc.nvrtcVersion()  # loads the library: fails here when only the bindings are installed
    except Exception as exc:  # noqa: BLE001 - ImportError, or the loader's own error for a missing library
        raise NvrtcUnavailable(
            f"NVRTC not available ({type(exc).__name__}: {exc}); pip install 'flashsim[ptx]' (NVRTC, ptxas and "
            "nvdisasm for flashsim.ptx) or 'flashsim[gpu]'"
        ) from None
    return nvrtc


def _call(nvrtc, result, what: str):
    err, *value = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise NvrtcFailed(f"{what}: {err}")
    return value[0] if len(value) == 1 else value


def _virtual(arch: str) -> str:
    """ "sm_90" -> "compute_90" (the same PTX; a real arch would also run ptxas)."""
    if not re.fullmatch(r"sm_\d+[af]?", arch):
        raise ValueError(f"arch must be an sm_XY name such as 'sm_90', got {arch!r}")
    return "compute_" + arch[3:]


def compile_ptx(
    source: str, *, name: str, defines: dict, arch: str, include_dirs=(), line_info: bool = False, options=()
) -> str:
    """The PTX text NVRTC emits for ``source`` with the GPU runner's options (``compile_cuda``: C++17, the defines,
    the include path; no line information unless ``line_info``), for the virtual arch of ``arch`` (the same PTX as
    the real arch, without running ptxas): what the drift guard fingerprints and flashsim.ptx runs. ``options``:
    further NVRTC flags (e.g. "--use_fast_math"). Includes are searched on ``search_path(include_dirs)``, as
    compile_cuda does. No GPU needed."""
    nvrtc = _nvrtc()  # first: without cuda-python this is the one clear error, naming the extra
    from cuda.core import ProgramOptions  # the runner's option spelling, so that both pass the same flags

    include_dirs = search_path(include_dirs)

    options = ProgramOptions(
        name=name,
        arch=_virtual(arch),
        std="c++17",
        define_macro=[(k, str(int(v))) for k, v in sorted(defines.items())] or None,
        include_path=[str(d) for d in include_dirs] or None,
        lineinfo=line_info or None,
    ).as_bytes("nvrtc") + [bytes(str(o), "utf-8") for o in options]
    prog = _call(nvrtc, nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        err = nvrtc.nvrtcCompileProgram(prog, len(options), options)[0]
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            log = bytearray(_call(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize"))
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise NvrtcFailed(f"NVRTC failed on {name} for {arch} ({err}):\n{bytes(log).rstrip(bytes(1)).decode()}")
        ptx = bytearray(_call(nvrtc, nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize"))
        _call(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return bytes(ptx).rstrip(bytes(1)).decode()


def compile_file(relative: str, **kwargs) -> Build:
    """``compile_cuda`` of kernel/``relative``, named after the file in diagnostics."""
    path = kernel_path(relative)
    kwargs.setdefault("name", str(relative))
    return compile_cuda(path.read_text(), **kwargs)


# -- ptxas and nvdisasm ---------------------------------------------------------------------------


PTX_EXTRA = "pip install 'flashsim[ptx]'"
_HINTS = {
    "nvdisasm": f"{PTX_EXTRA} (brings nvdisasm 13.5)",
    "ptxas": f"{PTX_EXTRA} (brings ptxas 13.5) or install the CUDA toolkit",
}


def cuda_tools(name: str) -> list[str]:
    """Every CUDA binary ``name`` ("ptxas", "nvdisasm") found, in the order looked at: PATH, $CUDA_HOME / $CUDA_PATH,
    /usr/local/cuda, the pip wheels (nvidia-cuda-nvcc ships ptxas, nvidia-cuda-nvdisasm nvdisasm: the ``ptx`` extra),
    and Triton's own copies where Triton is installed (triton/backends/nvidia/bin: ``ptxas``, and ``ptxas-blackwell``,
    the newer one Triton uses for sm_90 and later)."""
    import importlib.util
    import shutil

    found = [shutil.which(name)]
    for root in (*_toolkit_roots(), "/usr/local/cuda"):
        found.append(str(pathlib.Path(root) / "bin" / name))
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec else []:
        found += [str(p) for p in sorted(pathlib.Path(root).glob(f"*/bin/{name}"))]
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        spec = None
    for root in spec.submodule_search_locations if spec else []:
        names = (name, "ptxas-blackwell") if name == "ptxas" else (name,)
        found += [str(pathlib.Path(root) / "backends" / "nvidia" / "bin" / n) for n in names]
    out = []
    for f in found:
        if f and os.path.isfile(f) and os.access(f, os.X_OK) and os.path.realpath(f) not in map(os.path.realpath, out):
            out.append(f)
    return out


def cuda_tool(name: str) -> str:
    """The path of the CUDA binary ``name`` ("ptxas", "nvdisasm"): the first of ``cuda_tools``; FileNotFoundError
    naming what to install."""
    found = cuda_tools(name)
    if found:
        return found[0]
    hint = _HINTS.get(name, "install the CUDA toolkit")
    raise FileNotFoundError(
        f"{name} was not found on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin or a pip wheel: {hint}"
    )


@lru_cache(maxsize=64)
def tool_version(path: str) -> str:
    """The version line of the CUDA binary at ``path`` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    import subprocess

    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout
    return next((line for line in out.splitlines() if "release" in line), out.strip())


def tool_release(path: str) -> tuple[int, int]:
    """(major, minor) of the CUDA release of the binary at ``path``; (0, 0) when its version line names none."""
    m = re.search(r"release (\d+)\.(\d+)", tool_version(path))
    return (int(m[1]), int(m[2])) if m else (0, 0)


def ptx_isa_of_release(release: tuple[int, int]) -> tuple[int, int]:
    """The newest PTX ISA version that ptxas of CUDA ``release`` reads (the PTX ISA's release notes; the same rule as
    Triton's ``ptx_get_version``): CUDA 11.x reads 7.x, 12.0-12.5 read 8.0-8.5, 12.6 8.5, 12.8 8.7, 12.9 8.8, and
    13.x reads 9.x (13.0 9.0, 13.4 9.4, 13.5 9.5)."""
    major, minor = release
    if major >= 13:
        return (9 + (major - 13), minor)
    if major == 12:
        return (8, minor if minor < 6 else minor - 1)
    if major == 11:
        return (7, minor)
    return (6, 3 + minor) if major == 10 else (0, 0)


def ptx_header(ptx: str) -> tuple[tuple[int, int], str]:
    """((major, minor) of ``.version``, the architecture of ``.target``) read from PTX text."""
    v = re.search(r"^\s*\.version\s+(\d+)\.(\d+)", ptx, re.M)
    t = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    if v is None or t is None:
        raise ValueError("the PTX has no .version or no .target directive")
    return (int(v[1]), int(v[2])), t[1]


def _dotted(v) -> str:
    return ".".join(map(str, v))


def select_ptxas(version: tuple[int, int]) -> str:
    """The ptxas to assemble PTX of ISA ``version`` with: among every ptxas found (``cuda_tools``), one of the CUDA
    release that writes exactly that version (NVRTC 13.0 writes 9.0, Triton 3.9 writes 9.4 for ptxas 13.4 and 8.8 for
    ptxas 12.9: the ptxas the kernel's own build ran, so the SASS read is the SASS the GPU runs), else the newest that
    reads it; FileNotFoundError naming what each one reads and the extra to install where none does."""
    found = [(tool_release(p), p) for p in cuda_tools("ptxas")]
    readers = [(r, p) for r, p in found if ptx_isa_of_release(r) >= tuple(version)]
    exact = [p for r, p in readers if ptx_isa_of_release(r) == tuple(version)]
    if exact:
        return exact[0]
    if readers:
        return max(readers, key=lambda rp: rp[0])[1]
    seen = ", ".join(f"{p} (CUDA {r[0]}.{r[1]}, reads up to {_dotted(ptx_isa_of_release(r))})" for r, p in found)
    raise FileNotFoundError(
        f"no ptxas here reads PTX .version {version[0]}.{version[1]} ({'found: ' + seen if seen else 'none found'}): "
        f"{PTX_EXTRA} brings ptxas 13.5, which reads up to 9.5"
    )


def assembler_for(ptx: str, arch) -> tuple[str, str]:
    """(ptxas path, architecture to assemble for) of ``ptx`` run on a GPU of ``arch``: the PTX's own ``.target``
    (sm_90a stays sm_90a: its architecture-specific instructions need it), or ``arch`` where that is a later GPU than
    the target (the driver compiles the PTX for the GPU it runs on: an sm_80 build on an H200 runs sm_90 SASS); and
    ``select_ptxas`` of its ``.version``."""
    version, target = ptx_header(ptx)
    gpu = get_arch(arch).name
    number = lambda name: int(re.sub(r"\D", "", name) or 0)  # noqa: E731
    return select_ptxas(version), (gpu if number(gpu) > number(target) else target)


def ptxas_version(path: str | None = None) -> str:
    """The version line of ptxas at ``path`` (default: the first found) ("Cuda compilation tools, release 13.0,
    V13.0.88")."""
    return tool_version(path or cuda_tool("ptxas"))


def assemble_ptx(ptx: str, arch: str, options=(), ptxas: str | None = None) -> bytes:
    """The cubin ptxas makes of ``ptx`` for ``arch`` (a real arch, e.g. "sm_90" or "sm_90a"), with the ptxas at
    ``ptxas`` (default: the first found); CompileError with its log."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, out = pathlib.Path(tmp, "in.ptx"), pathlib.Path(tmp, "out.cubin")
        src.write_text(ptx)
        done = subprocess.run(
            [ptxas or cuda_tool("ptxas"), f"-arch={_arch_name(arch)}", *map(str, options), str(src), "-o", str(out)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise CompileError(f"ptxas failed for {arch}:\n{done.stderr.strip()}")
        return out.read_bytes()
