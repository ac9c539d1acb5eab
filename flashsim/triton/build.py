"""Triton's compiler for a target, without a GPU, and the compiled kernels kept.

``build(kernel, signature, constexprs, attrs, target, options, arch)`` runs ``triton.compile(ASTSource(...),
target=GPUTarget("cuda", capability, 32), options=...)``, exactly what ``triton.jit`` compiles for that GPU, and loads
the PTX into flashsim.ptx with the numerics of the GPU that runs it (``arch``). Two caches: on disk, Triton's own
(``TRITON_CACHE_DIR``, default ~/.triton/cache), keyed as Triton keys it (the source hash of the kernel and everything
it calls, the signature, the constexprs and attributes, the target, the options, the Triton and ptxas versions and
the environment variables Triton lists), so a later process skips the compiler; and in this process, keyed by the
same things and ``arch``, the Compiled record with its decoded program, so a second launch does neither the compile
nor the decode.

The contraction of unrounded mul / add pairs (flashsim.ptx.contraction): Triton passes ``--fmad=false`` to ptxas
unless ``enable_fp_fusion`` (its default in 3.9), so without fusion no pair is fused ("none"), and with it the SASS of
the PTX decides ("sass"), assembled for the PTX's own ``.target`` by a ptxas that reads its ``.version``
(flashsim.gpu.build.select_ptxas: the one of the release that writes that version, Triton's own where installed).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ptx as fptx
from ..arch import get_arch
from .support import Target, TritonArgumentError, TritonCompileError

__all__ = ["Compiled", "build", "clear_cache"]


@dataclass
class Compiled:
    """One specialization of a kernel for a target: ``module`` / ``kernel`` (flashsim.ptx), ``metadata`` (Triton's:
    shared, num_warps, global_scratch_size...), ``signature`` (name -> Triton type), ``constexprs``, ``asm`` (Triton's
    stages: "ptx", "cubin", ...), ``target``, ``arch`` (the GPU whose numerics run it), ``attrs`` (the
    specialization's hints: argument path -> [["tt.divisibility", 16]])."""

    module: object
    kernel: object
    metadata: object
    signature: dict
    constexprs: dict
    asm: dict
    target: Target
    arch: str
    attrs: dict

    @property
    def ptx(self) -> str:
        return self.asm["ptx"]

    @property
    def cubin(self) -> bytes:
        return self.asm["cubin"]

    @property
    def block(self) -> tuple:
        return (32 * int(self.metadata.num_warps), 1, 1)


_CACHE: dict = {}


def clear_cache() -> None:
    """Forget the compiled kernels of this process (Triton's disk cache stays)."""
    _CACHE.clear()


def _key(kernel, signature, constexprs, attrs, target, options, arch) -> tuple:
    return (
        kernel.cache_key,
        repr(signature),
        repr(sorted(constexprs.items())),
        repr(attrs),
        target.name,
        options.hash(),
        arch,
    )


def build(kernel, signature: dict, constexprs: dict, attrs: dict, target: Target, options, arch=None) -> Compiled:
    """The Compiled record of ``kernel`` specialized so (module docstring), its PTX run with the numerics of ``arch``
    (flashsim.arch; default ``target.arch``: the H200 for every build it runs, sm_120 for sm_120a);
    TritonCompileError with Triton's message where its compiler refuses."""
    arch = get_arch(arch or target.arch).name
    if int(arch[3:]) < target.capability:
        raise TritonArgumentError(f"arch: a {arch} GPU cannot run a {target.name} build (it needs a later GPU)")
    key = _key(kernel, signature, constexprs, attrs, target, options, arch)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    src = ASTSource(kernel, signature, constexprs, attrs)
    try:
        compiled = triton.compile(src, target=GPUTarget("cuda", target.capability, 32), options=options.__dict__)
    except Exception as exc:  # noqa: BLE001 - Triton's CompilationError, PTXASError, its asserts: all the user's
        name = getattr(kernel, "__name__", None) or kernel.fn.__name__
        text = str(exc).strip() or type(exc).__name__
        raise TritonCompileError(
            f"Triton cannot build {name} for {target.name} (its {target.build} build): {type(exc).__name__}: {text}"
        ) from exc
    contraction = "sass" if options.enable_fp_fusion else "none"
    module = fptx.load(compiled.asm["ptx"], arch=arch, contraction=contraction)
    fn = module.kernel(compiled.metadata.name)
    asm = dict(compiled.asm)
    record = Compiled(module, fn, compiled.metadata, dict(signature), dict(constexprs), asm, target, arch, dict(attrs))
    _CACHE[key] = record
    return record
