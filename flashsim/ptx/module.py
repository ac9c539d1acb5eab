"""Modules and kernels: ``compile`` (CUDA C++ to PTX with NVRTC, no GPU), ``load`` (PTX text from anywhere),
``Module.kernel(name)``. A Kernel decodes its program on first launch (flashsim.ptx.program) and keeps it."""

from __future__ import annotations

from ..arch import get_arch
from ..gpu.build import compile_ptx
from . import semantics  # noqa: F401 - registers the instruction table
from .contraction import contraction_table
from .ir import Function
from .memory import Layout, ModuleImage
from .names import find_kernel
from .parser import parse
from .program import Program

__all__ = ["Module", "Kernel", "compile", "load"]


class Kernel:
    """One ``.entry`` of a Module: ``name`` (as in the PTX), ``params`` (flashsim.ptx.ir.Param), and its decoded
    ``program`` (built on first use)."""

    def __init__(self, module: Module, fn: Function):
        self.module, self.fn = module, fn
        self.name = fn.name
        self.params = fn.params
        self._program = None

    @property
    def program(self) -> Program:
        if self._program is None:
            m = self.module
            self._program = Program(m.ir, self.fn, m.arch, Layout(m.image), m.contraction)
        return self._program

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, {len(self.params)} parameters, {self.module.arch})"


class Module:
    """A PTX module for ``arch``: ``ptx`` (the text), ``ir`` (flashsim.ptx.ir.Module), ``kernels`` (the entry
    names), ``kernel(name)``. ``arch`` selects the numerics (tensor cores, SFU) of flashsim.arch."""

    def __init__(self, ptx: str, arch: str, contraction="sass", *, image_base: int | None = None):
        self.arch = get_arch(arch).name
        self.ptx = ptx
        self.ir = parse(ptx)
        self.image = ModuleImage(self.ir, image_base)
        self._kernels: dict[str, Kernel] = {}
        # a mode of flashsim.ptx.contraction, or the table a mode gave (a worker of a distributed launch takes the
        # driver's: the same decisions without running ptxas again)
        self.contraction = contraction if isinstance(contraction, dict) else contraction_table(self, contraction)

    @property
    def kernels(self) -> list[str]:
        return self.ir.entries()

    def kernel(self, name: str) -> Kernel:
        """The kernel ``name``: its exact PTX name, or the C++ name of one mangled entry (UnknownKernel otherwise)."""
        fn = find_kernel(self.ir, name)
        k = self._kernels.get(fn.name)
        if k is None:
            k = self._kernels[fn.name] = Kernel(self, fn)
        return k

    def __repr__(self) -> str:
        return f"Module({self.arch}, kernels {self.kernels})"


def load(ptx_text: str, *, arch: str = "sm_90", contraction: str = "sass") -> Module:
    """A Module from PTX text (from nvcc, NVRTC, Triton or any other build). ``contraction``: how unrounded
    mul / add pairs are decided (flashsim.ptx.contraction)."""
    if not isinstance(ptx_text, str):
        raise TypeError(f"load() takes PTX text as a str, got {type(ptx_text).__name__}")
    return Module(ptx_text, arch, contraction)


def compile(source: str, *, arch: str = "sm_90", defines=None, include_dirs=(), options=()) -> Module:  # noqa: A001
    """CUDA C++ ``source`` to a Module, through NVRTC (no GPU needed): C++17, ``defines`` (name -> int) as -D,
    ``include_dirs`` besides kernel/ and the CUDA headers, ``options`` further NVRTC flags (e.g. "--use_fast_math",
    "-lineinfo"). NVRTC's errors raise flashsim.gpu.build.NvrtcFailed with its log."""
    ptx = compile_ptx(
        source,
        name="flashsim.cu",
        defines=dict(defines or {}),
        arch=arch,
        include_dirs=tuple(str(d) for d in include_dirs),
        options=tuple(options),
    )
    return load(ptx, arch=arch)
