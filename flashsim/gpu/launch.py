"""The launch plan of kernel/flash_fwd.cu: build, load and launch it for one Problem, with no host work per call.

The kernel is built with NVRTC for the GPU's own arch from the shared KernelConfig (its defines) plus the
scalar-math constants of flashsim.constants, so the emulator and the kernel read one description; the define set is
flashsim.provenance.build_defines, which the captures' fingerprints hash too. Everything a launch needs for one
Problem (flashsim.problem.prepare: shapes, config, arch, scales) is built once: the compiled and loaded kernel with
its shared-memory attribute set (per (KernelConfig, arch)), the cuda.core LaunchConfig and the scalar arguments (per
Problem). The front-ends (flashsim.gpu.host for numpy / DLPack arrays, cupy_api, torch_op) allocate the outputs
with their library's allocator and call ``launch_plan``; flashsim.gpu.api dispatches to them by input type.

Safety. GPU inputs must be C-contiguous and 16-byte aligned (the kernel reads them with 16-byte cp.async; a
misaligned address would fault and poison the CUDA context), all on the device flashsim.gpu.runtime uses; ``arch``
must name that device's architecture.
"""

from __future__ import annotations

import numpy as np

from .. import provenance
from ..arch import get_arch
from ..config import KernelConfig
from ..constants import (
    FP4_BLOCK,
    MEAN_SLICES,
    MMA8_K,
    QUANT_BLOCK,
    QUANT_V_THREADS,
    QUANT_WARPS,
    fp8_keys,
    v_scalars,
)
from ..errors import GPUError, UnsupportedConfig
from ..overflow import overflow_error, v_head
from . import runtime as rt
from .build import compile_cuda, kernel_path

KERNEL_FILE = "flash_fwd.cu"
KERNEL_NAME = "flash_fwd"
QUANT_FILE = "quantize.cu"  # the quantization pass of quant "int8" / "int8-fp8" / "nvfp4"
SCRATCH_ALIGN = 256  # bytes: each scratch array's offset in the buffer (16-byte cp.async reads of s8)
ALIGNMENT = 16  # bytes: cp.async.cg 16-byte copies from q, k, v
_INT32_MAX = 2**31 - 1
_GRID_YZ_MAX = 65535
MAX_KEYS = 4096  # entries per fast-key cache before it is emptied (plans and kernels stay)


def build_defines(config: KernelConfig) -> dict:
    """Every define the kernel build receives: configuration, expected shared memory, math constants (computed
    in flashsim.provenance.build_defines, the one place the build and the captures' fingerprints share)."""
    return provenance.build_defines(KERNEL_NAME, config)


def build_kernel(
    config: KernelConfig, arch: str, *, source: str | None = None, extra_defines: dict | None = None, extra_options=()
):
    """Compile the kernel for ``arch`` (works with no GPU); returns flashsim.gpu.build.Build. ``source``: another
    text of flash_fwd.cu (an experiment's patched kernel), ``extra_defines`` on top of the configuration's (its
    switch), ``extra_options`` NVRTC options (compile_cuda's, e.g. "--generate-line-info"): the tools and probes
    that build variants of the kernel go through here. ValueError, before compiling, for a configuration ``arch``
    cannot build (KernelConfig.check_arch: quant "nvfp4" off sm_120); NVFP4 builds for sm_120a."""
    target = config.build_arch(arch)
    text = kernel_path(KERNEL_FILE).read_text() if source is None else source
    return compile_cuda(
        text, arch=target, defines={**build_defines(config), **(extra_defines or {})}, extra_options=extra_options
    )


def build_quantize(config: KernelConfig, arch: str):
    """Compile kernel/quantize.cu for ``config``'s head dim and element type (works with no GPU); NVFP4 as
    ``build_kernel``."""
    return compile_cuda(
        kernel_path(QUANT_FILE).read_text(),
        arch=config.build_arch(arch),
        name=QUANT_FILE,
        defines=provenance.build_defines("quantize", config),
    )


# -- plans: what one launch needs, built once ----------------------------------------------------------

_KERNELS: dict = {}  # (KernelConfig, arch) -> rt.Kernel, dynamic shared memory attribute already set
_PLANS: dict = {}  # Problem -> Plan
_FAST_KEYS: list = []  # the front-ends' fast-key caches (fast_keys)
_core_launch = None  # cuda.core.launch, bound by the first plan


def fast_keys() -> dict:
    """A front-end's cache of fast keys -> Plan, emptied with the others by ``clear_caches``."""
    cache: dict = {}
    _FAST_KEYS.append(cache)
    return cache


def clear_caches() -> None:
    """Forget loaded kernels, plans and every front-end's fast keys (after editing kernel/ behind the build cache's
    back; tests)."""
    _KERNELS.clear()
    _PLANS.clear()
    for cache in _FAST_KEYS:
        cache.clear()


def strides(prob, which: str) -> tuple[int, int, int]:
    """Element strides (batch, head, row) of q / o (``which`` "q") or k / v ("kv") in the problem's layout, C order."""
    heads, n = (prob.heads, prob.nq) if which == "q" else (prob.heads_kv, prob.nk)
    d = prob.head_dim
    if prob.layout == "bhnd":
        return heads * n * d, n * d, d
    return n * heads * d, d, heads * d


def kernel_scalars(prob) -> tuple:
    """The scalar arguments of flash_fwd after the six pointers, with the kernel's widths: nq, nk, group, q's and
    k / v's strides, lse_scale, scale_log2, cap_scale, the window's bounds (0 without one)."""
    win = prob.window
    return (
        np.int32(prob.nq),
        np.int32(prob.nk),
        np.int32(prob.group),
        *(np.int64(x) for x in strides(prob, "q")),
        *(np.int64(x) for x in strides(prob, "kv")),
        np.float32(prob.lse_scale),
        np.float32(prob.scale_log2),
        np.float32(prob.cap_scale),
        np.int32(win.left if win else 0),
        np.int32(win.right if win else 0),
    )


def scratch_layout(prob) -> dict:
    """The scratch arrays of a quant, name -> (byte offset, shape, numpy dtype), in one buffer: q8 and k8 (s8,
    q's and k's shapes and layout; NVFP4: q4 and k4, the e2m1 codes two a byte, rows of d / 2 bytes, and q_sf (B,
    Hq, nqb 16, d / 16) and k_sf (B, Hkv, nkb 16, d / 16), their ue4m3 block scales), q_scale (B, Hq, nqb = ceil(nq
    / 16)), k_scale (B, Hkv, nkb = ceil(nk / 16)), mean (B, Hkv, d) and corr (B, Hq, nq), f32. Empty without
    quant."""
    if not prob.config.quantized:
        return {}
    p = prob
    nqb, nkb = -(-p.nq // QUANT_BLOCK), -(-p.nk // QUANT_BLOCK)
    q_shape = output_shape(p)
    k_shape = (p.batch, p.heads_kv, p.nk, p.head_dim) if p.layout == "bhnd" else (p.batch, p.nk, p.heads_kv, p.head_dim)
    if prob.config.nvfp4:
        sf_row = p.head_dim // FP4_BLOCK
        codes = (
            ("q4", q_shape[:-1] + (p.head_dim // 2,), np.uint8),
            ("k4", k_shape[:-1] + (p.head_dim // 2,), np.uint8),
            ("q_sf", (p.batch, p.heads, nqb * QUANT_BLOCK, sf_row), np.uint8),
            ("k_sf", (p.batch, p.heads_kv, nkb * QUANT_BLOCK, sf_row), np.uint8),
        )
    else:
        codes = (("q8", q_shape, np.int8), ("k8", k_shape, np.int8))
    arrays = codes + (
        ("q_scale", (p.batch, p.heads, nqb), np.float32),
        ("k_scale", (p.batch, p.heads_kv, nkb), np.float32),
        ("mean", (p.batch, p.heads_kv, p.head_dim), np.float32),
        ("corr", (p.batch, p.heads, p.nq), np.float32),
    )
    if prob.config.fp8_pv:  # V^T in e4m3 (keys padded to 32), and the per-channel factors
        arrays += (
            ("v8t", (p.batch, p.heads_kv, p.head_dim, fp8_keys(p.nk)), np.uint8),
            ("v_inv", (p.batch, p.heads_kv, p.head_dim), np.float32),
            ("v_deq", (p.batch, p.heads_kv, p.head_dim), np.float32),
        )
    out, off = {}, 0
    for name, shape, dt in arrays:
        out[name] = (off, shape, np.dtype(dt))
        off += -(-int(np.prod(shape)) * np.dtype(dt).itemsize // SCRATCH_ALIGN) * SCRATCH_ALIGN
    return out


def scratch_bytes(prob) -> int:
    """Bytes of the scratch buffer a launch of ``prob`` needs (0 without quant)."""
    lay = scratch_layout(prob)
    if not lay:
        return 0
    return max(off + int(np.prod(shape)) * dt.itemsize for off, shape, dt in lay.values())


def output_shape(prob) -> tuple:
    """o's shape: q's, in the problem's layout."""
    p = prob
    return (p.batch, p.heads, p.nq, p.head_dim) if p.layout == "bhnd" else (p.batch, p.nq, p.heads, p.head_dim)


QUANT_KERNELS = ("k_mean", "quantize_k", "quantize_q", "v_absmax", "quantize_v")  # kernel/quantize.cu, in order
# NVFP4: the same pass with Q and K in NVFP4 (their kernels exist only in builds with FS_QUANT_NVFP4)
QUANT_KERNELS_FP4 = ("k_mean", "quantize_k_fp4", "quantize_q_fp4", "v_absmax", "quantize_v")


def quant_kernels(config) -> tuple:
    """The quantization pass's kernels of ``config`` (kernel/quantize.cu), in launch order."""
    return QUANT_KERNELS_FP4 if config.nvfp4 else QUANT_KERNELS


def quant_dims(prob) -> tuple:
    """(grid, block) of each of QUANT_KERNELS for ``prob``."""
    p = prob
    rows = QUANT_BLOCK * QUANT_WARPS  # rows per quantize_k / quantize_q block
    return (
        ((p.head_dim // 32, p.heads_kv, p.batch), (32, MEAN_SLICES, 1)),
        ((-(-p.nk // rows), p.heads_kv, p.batch), (32 * QUANT_WARPS, 1, 1)),
        ((-(-p.nq // rows), p.heads, p.batch), (32 * QUANT_WARPS, 1, 1)),
        ((p.head_dim // 32, p.heads_kv, p.batch), (32, MEAN_SLICES, 1)),
        ((fp8_keys(p.nk) // MMA8_K, p.heads_kv, p.batch), (QUANT_V_THREADS, 1, 1)),
    )


def attention_dims(prob) -> tuple:
    """(grid, block, dynamic shared bytes) of flash_fwd for ``prob``."""
    cfg = prob.config
    return (prob.q_blocks, prob.heads, prob.batch), (cfg.threads, 1, 1), cfg.smem_bytes


def launch_list(prob, q: int, k: int, v: int, o: int, lse: int, overflow: int = 0, scratch: int = 0) -> list:
    """Every launch of one attention call in order, without a GPU: (kernel name, grid, block, dynamic shared bytes,
    arguments) with the addresses given as ints; the quantization pass's kernels (kernel/quantize.cu, with a
    quant) before flash_fwd. ``launch_plan`` enqueues the same launches on a GPU; flashsim.ptx runs them on a CPU."""
    grid, block, smem = attention_dims(prob)
    attend = (
        KERNEL_NAME,
        grid,
        block,
        smem,
        attention_args(prob, kernel_scalars(prob), q, k, v, o, lse, overflow, scratch),
    )
    if not prob.config.quantized:
        return [attend]
    passes = zip(quant_kernels(prob.config), quant_dims(prob), quant_args(prob, q, k, v, scratch))
    return [(name, g, b, 0, args) for name, (g, b), args in passes] + [attend]


def _pointers(prob, scratch: int) -> dict:
    return {name: scratch + off for name, (off, _, _) in scratch_layout(prob).items()}


def quant_args(prob, q: int, k: int, v: int, scratch: int) -> list:
    """The arguments of each kernel of the quantization pass (``quant_kernels``; the FP8 V pair only with FP8
    P@V)."""
    p = prob
    s = _pointers(p, scratch)
    u = np.uint64
    ks = tuple(np.int64(x) for x in strides(p, "kv"))
    qs = tuple(np.int64(x) for x in strides(p, "q"))
    if p.config.nvfp4:  # the codes, then their block scales
        k_out, q_out = (u(s["k4"]), u(s["k_sf"])), (u(s["q4"]), u(s["q_sf"]))
    else:
        k_out, q_out = (u(s["k8"]),), (u(s["q8"]),)
    args = [
        (u(k), u(s["mean"]), np.int32(p.nk), *ks),
        (u(k), u(s["mean"]), *k_out, u(s["k_scale"]), np.int32(p.nk), *ks),
        (u(q), u(s["mean"]), *q_out, u(s["q_scale"]), u(s["corr"]), np.int32(p.nq), np.int32(p.group), *qs),
    ]
    if p.config.fp8_pv:
        args += [
            (u(v), u(s["v_inv"]), u(s["v_deq"]), np.int32(p.nk), *ks, *v_scalars(p.config.fp8_v_range)),
            (u(v), u(s["v_inv"]), u(s["v8t"]), np.int32(p.nk), np.int32(fp8_keys(p.nk)), *ks),
        ]
    return args


def attention_args(prob, scalars, q, k, v, o, lse, overflow, scratch: int = 0) -> tuple:
    """flash_fwd's arguments: the six pointers (with a quant the quantized q / k / V^T from the scratch), the
    scalars (``kernel_scalars``), then the quant's scales, correction, V's factors and padded key count (null and 0
    without one), and with NVFP4 the block scales of Q and K."""
    u = np.uint64
    if not prob.config.quantized:
        return (u(q), u(k), u(v), u(o), u(lse), u(overflow), *scalars, *_NO_QUANT_ARGS)
    s = _pointers(prob, scratch)
    fp8 = prob.config.fp8_pv
    fp4 = prob.config.nvfp4
    return (
        u(s["q4" if fp4 else "q8"]),
        u(s["k4" if fp4 else "k8"]),
        u(s["v8t"]) if fp8 else u(v),
        u(o),
        u(lse),
        u(overflow),
        *scalars,
        u(s["q_scale"]),
        u(s["k_scale"]),
        u(s["corr"]),
        u(s["v_deq"]) if fp8 else u(0),
        np.int32(fp8_keys(prob.nk) if fp8 else 0),
        *((u(s["q_sf"]), u(s["k_sf"])) if fp4 else ()),
    )


class QuantPlan:
    """The quantization pass of one Problem (any quant): kernel/quantize.cu's kernels (``quant_kernels``; the FP8 V
    pair used only with FP8 P@V) with their launch configurations (``quant_dims``), and the scratch layout they write
    (``scratch_layout``)."""

    __slots__ = ("kernels", "configs", "layout")

    def __init__(self, prob, kernels):
        self.kernels = kernels
        self.layout = scratch_layout(prob)
        self.configs = tuple(rt.launch_config(grid, block) for grid, block in quant_dims(prob))

    def pointers(self, scratch_ptr: int) -> dict:
        return {name: scratch_ptr + off for name, (off, _, _) in self.layout.items()}


class Plan:
    """One Problem's launch: the loaded kernel, the cuda.core LaunchConfig, the scalar arguments (``kernel_scalars``),
    the output shapes, and with a quant the quantization pass (``quant``, a QuantPlan) and the bytes of
    scratch it needs (``scratch_bytes``; the caller allocates them with its own allocator)."""

    __slots__ = (
        "problem",
        "kernel",
        "launch_config",
        "scalars",
        "o_shape",
        "lse_shape",
        "what",
        "quant",
        "scratch_bytes",
    )

    def __init__(self, problem, kernel, launch_config, scalars, what, quant=None):
        self.problem = problem
        self.kernel = kernel
        self.launch_config = launch_config
        self.scalars = scalars
        p = problem
        self.o_shape = output_shape(p)
        self.lse_shape = (p.batch, p.heads, p.nq)
        self.what = what
        self.quant = quant
        self.scratch_bytes = scratch_bytes(p)

    def __repr__(self) -> str:
        return f"Plan({self.what})"


def kernel_for(config: KernelConfig, arch: str):
    key = (config, arch)
    kern = _KERNELS.get(key)
    if kern is None:
        kern = rt.load(build_kernel(config, arch), KERNEL_NAME)
        rt.set_dynamic_smem(kern, config.smem_bytes)
        _KERNELS[key] = kern
    return kern


def _quant_kernels_for(config: KernelConfig, arch: str) -> tuple:
    """kernel/quantize.cu's kernels (``quant_kernels``), loaded once per (quantize defines, arch)."""
    key = ("quantize", tuple(sorted(config.quantize_defines().items())), arch)
    kerns = _KERNELS.get(key)
    if kerns is None:
        build = build_quantize(config, arch)
        kerns = _KERNELS[key] = tuple(rt.load(build, name) for name in quant_kernels(config))
    return kerns


def planned(prob) -> bool:
    """Whether ``prob``'s Plan is built (its kernel compiled and loaded)."""
    return prob in _PLANS


def plan_for(prob) -> Plan:
    """The cached Plan of ``prob`` (a flashsim.problem.Problem for the current GPU): compiles and loads the kernel
    the first time. UnsupportedConfig when the device cannot run it."""
    global _core_launch
    plan = _PLANS.get(prob)
    if plan is not None:
        return plan
    cfg = prob.config
    cfg.check_arch(prob.arch)  # quant "nvfp4" off sm_120: refused before anything compiles
    cap = get_arch(prob.arch).smem_per_block_optin
    if cfg.smem_bytes > cap:
        raise UnsupportedConfig(
            f"configuration needs {cfg.smem_bytes} B of shared memory per block; "
            f"{prob.arch} allows {cap} B ({cfg.describe()})"
        )
    if prob.heads > _GRID_YZ_MAX or prob.batch > _GRID_YZ_MAX:
        raise UnsupportedConfig(f"grid y/z limited to {_GRID_YZ_MAX}: heads={prob.heads}, batch={prob.batch}")
    if prob.nq > _INT32_MAX or prob.nk > _INT32_MAX:
        raise UnsupportedConfig(f"sequence lengths must fit int32: Nq={prob.nq}, Nk={prob.nk}")
    if _core_launch is None:
        from cuda.core import launch as core_launch

        _core_launch = core_launch
    kern = kernel_for(cfg, prob.arch)
    grid, block, _ = attention_dims(prob)
    what = f"kernel {KERNEL_NAME} (grid {grid}, block {block}, {cfg.smem_bytes} B dynamic smem; {cfg.describe()})"
    quant = None
    if cfg.quantized:
        quant = QuantPlan(prob, _quant_kernels_for(cfg, prob.arch))
        what += f"; after kernel/quantize.cu's {', '.join(quant_kernels(cfg)[:3])}"
    plan = Plan(prob, kern, rt.launch_config(grid, block, cfg.smem_bytes), kernel_scalars(prob), what, quant)
    _PLANS[prob] = plan
    return plan


# flash_fwd's trailing arguments without a quant: q_scale, k_scale, q_corr, v_deq (null) and nkp (0); built once, not
# per launch
_NO_QUANT_ARGS = (np.uint64(0),) * 4 + (np.int32(0),)

NO_OVERFLOW = 2**64 - 1  # the overflow flag's initial value (kernel/flash_fwd.cu lowers it to a flagged row)


def launch_plan(
    plan: Plan,
    stream,
    q_ptr: int,
    k_ptr: int,
    v_ptr: int,
    o_ptr: int,
    lse_ptr: int,
    overflow_ptr: int = 0,
    scratch_ptr: int = 0,
    *,
    quantize: bool = True,
    attend: bool = True,
) -> None:
    """Enqueue the kernel on ``stream`` (a cuda.core Stream); no host synchronisation. GPUError naming the kernel
    if the launch fails, and before it if the context is unusable after an earlier sticky error. overflow_ptr:
    a u64 set to NO_OVERFLOW, needed with an f16 P@V mma (config.pv_mma_f16); 0 otherwise (never touched).
    scratch_ptr: ``plan.scratch_bytes`` of device memory (ALIGNMENT-aligned) with a quant, whose pass runs
    first on the same stream; 0 without quant. ``quantize`` / ``attend`` False leave out the quantization pass / the
    attention kernel (benchmarks time them apart; the scratch then holds an earlier pass's result)."""
    sticky = rt.sticky_error()
    if sticky:
        raise GPUError(
            f"the CUDA context of this process is unusable after an earlier error ({sticky}); restart the process"
        )
    qp = plan.quant
    if qp is not None and (not scratch_ptr or scratch_ptr % ALIGNMENT):
        raise ValueError(
            f"quant={plan.problem.config.quant!r} needs a {ALIGNMENT}-byte aligned scratch buffer of "
            f"{plan.scratch_bytes} B (got pointer {scratch_ptr:#x})"
        )
    try:
        if qp is not None and quantize:
            kernels = [kern.kernel for kern in qp.kernels]
            for config, kern, args in zip(
                qp.configs, kernels, quant_args(plan.problem, q_ptr, k_ptr, v_ptr, scratch_ptr)
            ):
                _core_launch(stream, config, kern, *args)
        if qp is None or attend:
            args = attention_args(
                plan.problem, plan.scalars, q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, overflow_ptr, scratch_ptr
            )
            _core_launch(stream, plan.launch_config, plan.kernel.kernel, *args)
    except Exception as exc:
        rt.launch_failed(plan.what, exc)


def sync_stream(stream, what: str) -> None:
    """Wait for ``stream``; GPUError naming ``what`` on an asynchronous failure."""
    rt._checked(f"running {what}", stream.sync)


def misaligned(**ptrs) -> None:
    """Raise ValueError naming the first argument whose data pointer is not ALIGNMENT-byte aligned."""
    for name, ptr in ptrs.items():
        if ptr % ALIGNMENT:
            raise ValueError(
                f"{name}'s data pointer 0x{ptr:x} is not {ALIGNMENT}-byte aligned (the kernel copies "
                f"{ALIGNMENT}-byte chunks with cp.async); pass a freshly allocated or .clone()d tensor"
            )


# -- options shared by every path -------------------------------------------------------------------------


def check_arch(arch) -> str:
    """The current GPU's arch; ValueError if ``arch`` (when given) names another one."""
    gpu_arch = rt.current_arch()
    if arch is not None and get_arch(arch).name != gpu_arch:
        raise ValueError(f"arch={arch!r} but the current GPU (device {rt.device_id()}) is {gpu_arch}")
    return gpu_arch


def raise_if_overflowed(prob, flag: int, v) -> None:
    """FloatingPointError (flashsim.overflow) when the kernel's overflow flag names a row; ``v``: the values (numpy,
    torch, cupy or DeviceArray) for the bound in the message (read only on this error path)."""
    if int(flag) == NO_OVERFLOW or int(flag) < 0:
        return
    head = v_head(prob, v.to_numpy() if hasattr(v, "to_numpy") else v, int(flag))
    if hasattr(head, "detach"):
        head = head.detach().float().abs().max().item()
    elif hasattr(head, "get"):
        head = head.get()
    raise overflow_error(prob, int(flag), float(np.abs(np.asarray(head, np.float32)).max()))
