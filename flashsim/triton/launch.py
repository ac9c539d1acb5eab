"""``launch(kernel, grid, *args, target=..., arch=None, **meta)``: a ``@triton.jit`` kernel run on the CPU as Triton's
build for ``target`` runs on the GPU ``arch`` (by default the H200 for every build it runs: flashsim.triton.support),
with Triton's own compiler and Triton's own argument conventions; ``jit(kernel)[grid](*args, **meta)`` on top.

What Triton's JIT and launcher do, done here the same way (triton/runtime/jit.py, triton/backends/nvidia/driver.py):
    bind       the arguments to the kernel's parameters with Triton's own binder (defaults, keywords, constexprs);
    specialize with Triton's own specializer, on the simulated device addresses (flashsim.triton.args);
    compile    for the target with the options ``num_warps``, ``num_stages`` and any other Triton option in ``meta``
               (``enable_fp_fusion``, ``maxnreg``...), cached (flashsim.triton.build);
    grid       a tuple, or a callable given the bound arguments (constexprs included) by name, as ``triton.jit``;
    launch     ``32 * num_warps`` threads per block, the metadata's shared memory as dynamic shared memory, the
               expanded signature's values, then the global scratch buffer (``grid size * num_ctas *
               global_scratch_size`` bytes, aligned as the metadata asks, zero-filled; NULL where the size is 0) and
               the profile scratch buffer likewise: Triton's two hidden trailing parameters.

Errors: a value that does not match the kernel names its parameter (TritonArgumentError); a simulator finding
(memcheck, racecheck, initcheck, a fault) names the Triton source line through the PTX's ``.loc``.
"""

from __future__ import annotations

import numpy as np

from .. import ptx as fptx
from ..arch import get_arch
from .args import Pointer, convert, encode
from .build import Compiled, build
from .support import TritonArgumentError, import_triton
from .support import target as _target

__all__ = ["launch", "jit", "prepare", "Prepared"]

_LAUNCH_KEYS = ("target", "check", "trace", "executor", "progress", "communicating")


def _function(kernel):
    """The JITFunction of ``kernel``; a clear error for autotuned / heuristic wrappers and plain functions."""
    from triton.runtime.jit import JITFunction

    if isinstance(kernel, JITFunction):
        return kernel
    inner = getattr(kernel, "fn", None)
    if isinstance(inner, JITFunction):
        raise TritonArgumentError(
            f"kernel: {type(kernel).__name__} wraps {inner.__name__}: pass the @triton.jit kernel itself "
            f"({type(kernel).__name__}.fn) with the meta-parameters of the configuration to run"
        )
    raise TritonArgumentError(f"kernel: a @triton.jit function expected, got {type(kernel).__name__}")


_BINDERS: dict = {}


def _binder(fn, backend, target):
    from triton.runtime.jit import create_function_from_signature

    key = (id(fn), target.name)
    hit = _BINDERS.get(key)
    if hit is None or hit[0] is not fn:
        hit = _BINDERS[key] = (fn, create_function_from_signature(fn.signature, fn.params, backend))
    return hit[1]


class Prepared:
    """A launch bound and specialized: ``compiled`` (flashsim.triton.build.Compiled), ``bound`` (parameter name ->
    the value the user passed), ``values`` (name -> the converted value), ``grid`` (3 ints)."""

    def __init__(self, compiled: Compiled, bound: dict, values: dict, grid: tuple):
        self.compiled, self.bound, self.values, self.grid = compiled, bound, values, grid

    def arguments(self) -> list:
        """The flashsim.ptx launch arguments: the expanded signature's values, then the two scratch buffers."""
        from triton.backends.driver import expand_signature

        c = self.compiled
        meta = getattr(c.metadata, "tensordesc_meta", None) or None
        out, types = [], []
        desc_index = [0]
        for name, ty in c.signature.items():
            _flatten(name, ty, self.values[name], meta, desc_index, c, out, types)
        expanded = [t for t in _flat(expand_signature(c.signature.values(), meta, "nvTmaDesc")) if t != "constexpr"]
        if expanded != types:  # an internal check: the conventions followed must be Triton's own
            raise AssertionError(f"flashsim.triton expanded the signature to {types}, Triton to {expanded}")
        n_grid = self.grid[0] * self.grid[1] * self.grid[2] * int(getattr(c.metadata, "num_ctas", 1))
        for what in ("global", "profile"):
            size = int(getattr(c.metadata, f"{what}_scratch_size", 0) or 0)
            align = int(getattr(c.metadata, f"{what}_scratch_align", 1) or 1)
            out.append(_scratch(n_grid * size, align) if size else np.uint64(0))
        params = c.kernel.params
        if len(out) != len(params):
            raise AssertionError(
                f"{c.kernel.name}: {len(out)} launch values for {len(params)} PTX parameters (Triton's conventions "
                "changed?)"
            )
        return out


def _flat(items):
    for x in items:
        if isinstance(x, tuple):
            yield from _flat(x)
        else:
            yield x


def _flatten(where, ty, value, meta, desc_index, compiled, out, types):
    """Append the launch values of one signature entry (tuples flattened, descriptors expanded) to ``out``."""
    if isinstance(ty, tuple):
        for i, (t, v) in enumerate(zip(ty, value)):
            _flatten(f"{where}[{i}]", t, v, meta, desc_index, compiled, out, types)
        return
    if ty == "constexpr":
        return
    if isinstance(ty, str) and ty.startswith("tensordesc"):
        d = value
        rank = len(d.shape)
        if not meta:  # the target has no TMA: Triton rewrote the descriptor to pointer, shape, strides, flags
            parts = [("*" + str(d.base.dtype), d.base)]
            parts += [("i64", s) for s in d.shape] + [("i64", s) for s in d.strides]
            parts += [("i1", d.padding == "nan"), ("i1", bool(d.round_f32_to_tf32))]
        else:
            from .tensormap import tensor_map

            parts = [("nvTmaDesc", tensor_map(d, meta[desc_index[0]], where))]
            desc_index[0] += 1
        parts += [("i32", s) for s in d.shape] + [("i64", s) for s in d.strides]
        for k, (t, v) in enumerate(parts):
            types.append(t)
            out.append(encode(t, v, f"{where} (descriptor field {k} of {len(parts)}, rank {rank})"))
        return
    types.append(ty)
    out.append(encode(ty, value, where))


def _scratch(nbytes: int, align: int) -> np.ndarray:
    """A zero-filled buffer of ``nbytes`` whose simulated address is a multiple of ``align`` (buffers start
    256-byte aligned; a larger alignment is reached by offsetting into a larger one)."""
    raw = np.zeros(nbytes + max(align, 1), np.uint8)
    skip = (-fptx.address(raw)) % max(align, 1)
    return raw[skip : skip + max(nbytes, 1)]


def _grid(grid, bound: dict) -> tuple:
    if callable(grid):
        try:
            grid = grid(dict(bound))
        except KeyError as exc:
            raise TritonArgumentError(f"grid: the grid function asked for {exc}, which is no parameter") from None
    if isinstance(grid, (int, np.integer)):
        grid = (int(grid),)
    try:
        dims = tuple(int(g) for g in grid)
    except TypeError:
        raise TritonArgumentError(f"grid: a tuple of 1 to 3 ints or a callable giving one, got {grid!r}") from None
    if not 1 <= len(dims) <= 3:
        raise TritonArgumentError(f"grid: 1 to 3 dimensions, got {dims}")
    return dims + (1,) * (3 - len(dims))


def prepare(kernel, grid, *args, target="sm_90", arch=None, num_warps=4, num_stages=3, **meta) -> Prepared:
    """Bind, specialize and compile a launch (the module docstring) without running it."""
    import_triton()
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    fn = _function(kernel)
    tgt = _target(target)
    if arch is not None:
        try:
            arch = get_arch(arch).name
        except ValueError as exc:
            raise TritonArgumentError(f"arch: {exc}") from None
    backend = make_backend(GPUTarget("cuda", tgt.capability, 32))
    names = [p.name for p in fn.params]
    option_names = set(backend.parse_options({}).__dict__)
    for k in meta:
        if k not in names and k not in option_names:
            raise TritonArgumentError(
                f"{k}: {fn.__name__} has no parameter {k!r} and Triton has no option of that name "
                f"(parameters: {', '.join(names)})"
            )
    if len(args) > len(names):
        raise TritonArgumentError(f"{fn.__name__} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    roots: dict = {}
    conv_args = [convert(a, f"argument {names[i]!r}", roots) for i, a in enumerate(args)]
    conv_meta = {k: convert(v, f"argument {k!r}", roots) if k in names else v for k, v in meta.items()}
    kwargs = dict(conv_meta, num_warps=num_warps, num_stages=num_stages)
    try:
        bound, specialization, _ = _binder(fn, backend, tgt)(*conv_args, **kwargs)
    except TypeError as exc:
        missing = [p for p in fn.params if p.name not in meta and p.num >= len(args) and not p.has_default]
        if missing:
            p = missing[0]
            kind = "a tl.constexpr" if p.is_constexpr else "a parameter"
            raise TritonArgumentError(
                f"argument {p.name!r}: missing ({kind} of {fn.__name__} with no default; pass {p.name}=...)"
            ) from None
        for i, p in enumerate(fn.params):  # find the value Triton's specializer cannot take
            v = conv_args[i] if i < len(conv_args) else conv_meta.get(p.name)
            if not p.is_constexpr and isinstance(v, str):
                raise TritonArgumentError(f"argument {p.name!r}: a string is only allowed for a tl.constexpr") from None
            if not p.is_constexpr and v is not None and not isinstance(v, (bool, int, float, Pointer, tuple)):
                if type(v).__name__ != "TensorDescriptor":
                    raise TritonArgumentError(f"argument {p.name!r}: Triton cannot pass a {type(v).__name__}") from None
        raise TritonArgumentError(f"{fn.__name__}: {exc}") from None
    for p in fn.params:
        v = bound[p.name]
        if p.is_constexpr and isinstance(v, Pointer):
            raise TritonArgumentError(f"argument {p.name!r}: a tl.constexpr cannot be a buffer")
        if not p.is_constexpr and isinstance(v, str):
            raise TritonArgumentError(f"argument {p.name!r}: a string is only allowed for a tl.constexpr")
    try:
        options = backend.parse_options(kwargs)
    except (AssertionError, ValueError, TypeError) as exc:
        given = {k: v for k, v in kwargs.items() if k not in names}
        raise TritonArgumentError(f"options {given}: Triton refuses them: {exc or type(exc).__name__}") from None
    signature = {p.name: s[0] for p, s in zip(fn.params, specialization)}
    from triton._utils import find_paths_if, get_iterable_path

    sigvals = list(signature.values())
    constexprs = {
        path: get_iterable_path(list(bound.values()), path)
        for path in find_paths_if(sigvals, lambda _, v: v == "constexpr")
    }
    attrvals = ["" if s[0] == "constexpr" else s[1] for s in specialization]
    attrs = {
        path: backend.parse_attr(get_iterable_path(attrvals, path))
        for path in find_paths_if(attrvals, lambda _, x: isinstance(x, str))
    }
    compiled = build(fn, signature, constexprs, attrs, tgt, options, arch)
    originals = dict(zip(names, args))
    originals.update({k: v for k, v in meta.items() if k in names})
    shown = {name: originals.get(name, bound[name]) for name in bound}
    return Prepared(compiled, shown, dict(bound), _grid(grid, shown))


def launch(
    kernel,
    grid,
    *args,
    target="sm_90",
    arch=None,
    num_warps=4,
    num_stages=3,
    check=None,
    trace=None,
    executor=None,
    progress=None,
    communicating=None,
    **meta,
):
    """Run ``kernel`` (a ``@triton.jit`` function) over ``grid`` on the CPU as Triton would run it on ``target``
    ("sm_80", "sm_89", "sm_90" (the sm_90a build), "sm_120" (the sm_120a build)) on a GPU of ``arch`` (default: the
    H200, "sm_90", for every build it can run, as flashsim.ptx's default; "sm_120" for the sm_120a build; a later GPU
    than the target runs its PTX as the driver does, compiled for itself, with its own numerics: "sm_80" names the
    A100 itself; flashsim.triton.support.TARGETS); ``args`` and the keyword
    ``meta`` (constexprs, other parameters, Triton options) as in ``kernel[grid](*args, **meta)``. Arrays are written
    in place. ``executor``, ``progress``, ``communicating``: as flashsim.ptx.launch's (the blocks over a cluster
    engine's workers: "local:N", an address, a dask.distributed.Client). Returns the flashsim.ptx Report, with
    ``compiled`` (flashsim.triton.build.Compiled) attached."""
    prepared = prepare(
        kernel, grid, *args, target=target, arch=arch, num_warps=num_warps, num_stages=num_stages, **meta
    )
    c = prepared.compiled
    if int(getattr(c.metadata, "num_ctas", 1)) > 1:
        raise TritonArgumentError("num_ctas: clusters of CTAs (num_ctas > 1) are not run by flashsim.triton yet")
    report = fptx.launch(
        c.kernel,
        prepared.grid,
        c.block,
        prepared.arguments(),
        shared_mem=int(c.metadata.shared or 0),
        check=check,
        trace=trace,
        executor=executor,
        progress=progress,
        communicating=communicating,
    )
    report.compiled = c
    return report


class _Launcher:
    def __init__(self, kernel, defaults: dict):
        self.kernel, self.defaults = kernel, defaults

    def __getitem__(self, grid):
        def run(*args, **meta):
            return launch(self.kernel, grid, *args, **{**self.defaults, **meta})

        return run

    def __repr__(self) -> str:
        return f"flashsim.triton.jit({self.kernel!r})"


def jit(kernel, **defaults):
    """``jit(kernel)[grid](*args, **meta)``: Triton's launch spelling on top of ``launch``; ``defaults`` (e.g.
    ``target="sm_80"``, ``check="memcheck"``) apply to every launch unless ``meta`` overrides them."""
    import_triton()
    _function(kernel)
    return _Launcher(kernel, defaults)
