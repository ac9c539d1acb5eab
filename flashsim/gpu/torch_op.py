"""flashsim.gpu.attention for torch tensors: the custom op ``torch.ops.flashsim.attention``.

Importing this module imports torch and registers the op (flashsim.gpu.attention imports it on its first call
with a torch tensor; flashsim.gpu itself imports neither torch nor cuda-python)::

    flashsim::attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? softmax_scale=None,
                        str pv_accum="f32", int[] tiles=[], str? arch=None, bool flag=True,
                        int[] window=[-1, -1], float softcap=0.0, str layout="bhnd")
                        -> (Tensor o, Tensor lse, Tensor overflow)

``tiles`` is [] for the arch's default tiling, else [head_dim, warps, m_tiles, kv_tile, stages] of a KernelConfig
(whose causal, pv_accum, dtype, window and soft-capping follow from the op's own arguments and q's dtype), with its
warp_split after them where that is on (the serving op's decode configurations). A fake (meta) implementation gives
the output shapes, so
the op traces under torch.compile(fullgraph=True); it is defined with torch.library.Library rather than
torch.library.custom_op, whose Python wrapper costs about 20 us a call.

CUDA tensors: the kernel is enqueued on torch's current stream of q's device, o and lse come from torch's caching
allocator (torch.empty), and nothing synchronises with the host, so the op can be captured in a CUDA graph
(torch.cuda.graph) and replayed. A repeated call does: a key lookup (shapes, dtypes, devices, contiguity,
options), a 16-byte alignment test of the three data pointers, two allocations and the cuda.core launch. The first
call for a key checks everything and raises ValueError (naming the argument) before anything is launched; it also
compiles and loads the kernel, which must not happen during a capture: call the same shapes once before
capturing (a first call inside a capture raises GPUError saying so). CPU tensors run through the GPU
synchronously and come back as CPU tensors.

The op has no backward: flashsim.gpu.attention raises ValueError when an input requires grad with grad mode on
(use torch.no_grad() or .detach()), instead of returning outputs that autograd would silently treat as constants.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch
from torch.library import Library

from ..arch import get_arch
from ..config import KernelConfig, overflow_flag_live
from ..errors import GPUError
from ..overflow import OverflowCheck, check_mode
from ..problem import Options, dims, prepare, resolve_options
from . import host, launch
from . import runtime as rt

NAME = "flashsim::attention"
SCHEMA = (
    "attention(Tensor q, Tensor k, Tensor v, bool causal=False, float? softmax_scale=None, "
    'str pv_accum="f32", int[] tiles=[], str? arch=None, bool flag=True, int[] window=[-1, -1], '
    'float softcap=0.0, str layout="bhnd", str quant="none") -> (Tensor o, Tensor lse, Tensor overflow)'
)
_SINKS: dict = {}  # device -> a u64 the kernel may write when nobody reads the flag (flag=False)

_F16, _F32 = torch.float16, torch.float32
_ELEMENT = {torch.float16: "f16", torch.bfloat16: "bf16"}
_KEYS: dict = launch.fast_keys()  # fast key -> flashsim.gpu.launch.Plan

_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
if _raw_stream is None:  # CPU-only builds; CUDA builds have the raw getter inductor uses

    def _raw_stream(device_index):
        return torch.cuda.current_stream(device_index).cuda_stream


_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def tiles_of(config: KernelConfig | None) -> list:
    """The op's ``tiles`` argument for ``config`` ([] for the arch default; its warp_split last where it is on)."""
    if config is None:
        return []
    tiles = [config.head_dim, config.warps, config.m_tiles, config.kv_tile, config.stages]
    return tiles + [config.warp_split] if config.warp_split > 1 else tiles


def _options(q, causal, softmax_scale, pv_accum, tiles, window, softcap, layout, quant="none") -> Options:
    """The Options of one op call (the KernelConfig rebuilt from ``tiles``, q's dtype and the options)."""
    opts = resolve_options(bool(causal), pv_accum, None, softmax_scale, tuple(window), softcap, layout, quant)
    if not tiles:
        return opts
    if len(tiles) not in (5, 6):
        raise ValueError(
            f"tiles must be [] or [head_dim, warps, m_tiles, kv_tile, stages(, warp_split)], got {list(tiles)}"
        )
    d, warps, m_tiles, kv_tile, stages, warp_split = (*(int(t) for t in tiles), 1)[:6]
    # every tiling field is given, so no arch default is left in the result (the arch named is immaterial)
    config = opts.kernel_config(
        "sm_90", d, _ELEMENT.get(q.dtype, "f16"), warps=warps, m_tiles=m_tiles, kv_tile=kv_tile, stages=stages,
        warp_split=warp_split,
    )  # fmt: skip
    return replace(opts, config=config)


# -- the CUDA implementation: the hot path -------------------------------------------------------------


def _key(q, k, v, causal, softmax_scale, pv_accum, tiles, arch, window, softcap, layout, quant):
    return (
        q.shape,
        k.shape,
        v.shape,
        q.dtype,
        k.dtype,
        v.dtype,
        q.device,
        k.device,
        v.device,
        q.is_contiguous(),
        k.is_contiguous(),
        v.is_contiguous(),
        causal,
        softmax_scale,
        pv_accum,
        tuple(tiles),
        arch,
        tuple(window),
        softcap,
        layout,
        quant,
    )


def _capturing() -> bool:
    try:
        return bool(torch.cuda.is_current_stream_capturing())
    except Exception:  # no CUDA in this torch build
        return False


def _not_warm(what: str):
    raise GPUError(
        f"flashsim.gpu.attention: the first call for these shapes and options happens inside a CUDA graph "
        f"capture, where {what} is not allowed; call it once with the same shapes before capturing"
    )


def _miss(key, q, k, v, opts: Options, arch):
    """First call for ``key``: every check (ValueError naming the argument), then the plan (cached)."""
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device:
            raise ValueError(f"{name} is on {x.device} but q is on {q.device}: q, k and v must be on one device")
    if not rt.opened() and _capturing():
        _not_warm("opening the GPU")
    rt.require_gpu()
    dev = rt.device_id()
    if q.get_device() != dev:
        raise ValueError(
            f"q is on {q.device}, but flashsim.gpu runs on device {dev} "
            "(the first visible GPU: set CUDA_VISIBLE_DEVICES to choose it)"
        )
    gpu_arch = launch.check_arch(arch)
    prob = prepare(q, k, v, opts, arch=gpu_arch)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not x.is_contiguous():
            raise ValueError(
                f"{name} must be contiguous, got strides {tuple(x.stride())} for shape "
                f"{tuple(x.shape)} (call .contiguous() first)"
            )
    if not launch.planned(prob) and _capturing():
        _not_warm("compiling and loading the kernel")
    plan = launch.plan_for(prob)
    if len(_KEYS) >= launch.MAX_KEYS:
        _KEYS.clear()
    if q.device not in _SINKS:  # allocated here, outside any capture (a first call cannot be captured)
        _SINKS[q.device] = torch.empty((1,), dtype=torch.int64, device=q.device)
    _KEYS[key] = plan
    return plan


def _scratch(plan, q):
    """quant="int8"'s scratch from torch's caching allocator on q's device and current stream (None without)."""
    return q.new_empty((plan.scratch_bytes,), dtype=torch.uint8) if plan.scratch_bytes else None


def _launch_on(plan, dev, q, k, v, o, lse, qp, kp, vp, fp=0) -> None:
    stream = rt.stream_from_handle(_raw_stream(dev))
    rt.bind_thread()
    scratch = _scratch(plan, q)  # freed after the launch is enqueued: the caching allocator keeps it
    sp = scratch.data_ptr() if scratch is not None else 0  # for this stream's later work, in stream order
    if _current_device() == dev:
        launch.launch_plan(plan, stream, qp, kp, vp, o.data_ptr(), lse.data_ptr(), fp, sp)
    else:  # the launch goes into the current context: make it q's device's
        with torch.cuda.device(dev):
            launch.launch_plan(plan, stream, qp, kp, vp, o.data_ptr(), lse.data_ptr(), fp, sp)


def _impl_cuda(
    q,
    k,
    v,
    causal=False,
    softmax_scale=None,
    pv_accum="f32",
    tiles=(),
    arch=None,
    flag=True,
    window=(-1, -1),
    softcap=0.0,
    layout="bhnd",
    quant="none",
):
    key = _key(q, k, v, causal, softmax_scale, pv_accum, tiles, arch, window, softcap, layout, quant)
    plan = _KEYS.get(key)
    if plan is None:
        plan = _miss(
            key, q, k, v, _options(q, causal, softmax_scale, pv_accum, tiles, window, softcap, layout, quant), arch
        )
    qp, kp, vp = q.data_ptr(), k.data_ptr(), v.data_ptr()
    if (qp | kp | vp) & 15:
        launch.misaligned(q=qp, k=kp, v=vp)
    o = q.new_empty(plan.o_shape)  # q's dtype (checked), contiguous like the fake's
    lse = q.new_empty(plan.lse_shape, dtype=_F32)
    live = overflow_flag_live(pv_accum, quant)  # the kernel writes its overflow flag
    if live and flag:  # -1 is NO_OVERFLOW as u64
        out = torch.full((1,), -1, dtype=torch.int64, device=q.device)
        _launch_on(plan, q.get_device(), q, k, v, o, lse, qp, kp, vp, out.data_ptr())
        return o, lse, out
    # f32 P@V never writes the flag (0 is never touched); f16 unchecked writes a sink no one reads: no fill kernel
    sink = _SINKS[q.device].data_ptr() if live else 0
    _launch_on(plan, q.get_device(), q, k, v, o, lse, qp, kp, vp, sink)
    return o, lse, q.new_empty((0,), dtype=torch.int64)


# -- CPU tensors: through the GPU, synchronously ---------------------------------------------------------


def _host_arrays(q, k, v) -> tuple:
    """numpy views of CPU tensors q, k, v (after the device and dtype checks numpy cannot do itself)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.device != q.device:
            raise ValueError(f"{name} is on {x.device} but q is on {q.device}: q, k and v must be on one device")
        if x.dtype not in _ELEMENT:
            raise ValueError(
                f"{name} must be float16 or bfloat16, got {str(x.dtype).replace('torch.', '')} "
                "(nothing is cast silently)"
            )
    return tuple(_numpy_of(x) for x in (q, k, v))


def _numpy_of(x):
    """A CPU tensor as numpy (bfloat16 through its bits, as ml_dtypes.bfloat16)."""
    if x.dtype == torch.bfloat16:
        import ml_dtypes

        return x.detach().contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.detach().numpy()


def _torch_of(a: np.ndarray):
    if a.dtype.name == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def _impl_cpu(
    q,
    k,
    v,
    causal=False,
    softmax_scale=None,
    pv_accum="f32",
    tiles=(),
    arch=None,
    flag=True,
    window=(-1, -1),
    softcap=0.0,
    layout="bhnd",
    quant="none",
):
    go, (do, dl), _ = host.prepared(
        *_host_arrays(q, k, v),
        _options(q, causal, softmax_scale, pv_accum, tiles, window, softcap, layout, quant),
        arch,
        None,
    )
    flag_dev = go(sync=True)[-1]
    value = flag_dev.to_numpy().view(np.int64).copy() if flag and flag_dev is not None else np.zeros(0, np.int64)
    return _torch_of(do.to_numpy()), torch.from_numpy(dl.to_numpy()), torch.from_numpy(value)


def _cpu_kernel(*args, **kwargs):
    return _impl_cpu(*args, **kwargs)  # looked up at call time (tests route it to the CUDA path with mocks)


# -- fake (meta) implementation: shapes for torch.compile -----------------------------------------------


def _fake(
    q,
    k,
    v,
    causal=False,
    softmax_scale=None,
    pv_accum="f32",
    tiles=(),
    arch=None,
    flag=True,
    window=(-1, -1),
    softcap=0.0,
    layout="bhnd",
    quant="none",
):
    """Output shapes, with the shape checks of flashsim.problem.prepare (which runs on the real call)."""

    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dim() != 4:
            raise ValueError(f"{name} must have 4 dimensions, got shape {tuple(x.shape)}")
        if x.dtype not in _ELEMENT or x.dtype != q.dtype:
            raise ValueError(
                f"{name} must be float16 or bfloat16 like q, got {str(x.dtype).replace('torch.', '')} "
                "(nothing is cast silently)"
            )
        if x.device != q.device:
            raise ValueError(f"{name} is on {x.device} but q is on {q.device}: q, k and v must be on one device")
        if q.device.type == "cuda" and not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous (call .contiguous() first)")
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"k and v must have the same shape, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    b, h, nq, d = dims(tuple(q.shape), layout)
    bk, hk, _, dk = dims(tuple(k.shape), layout)
    if (bk, dk) != (b, d) or hk == 0 or h % hk:
        raise ValueError(
            f"k {tuple(k.shape)} does not fit q {tuple(q.shape)} (layout {layout!r}: B and d equal, "
            "Hq a multiple of Hkv)"
        )
    return (
        q.new_empty(q.shape),
        q.new_empty((b, h, nq), dtype=_F32),
        q.new_empty((int(overflow_flag_live(pv_accum, quant) and flag),), dtype=torch.int64),
    )


# -- registration ------------------------------------------------------------------------------------------


def _register():
    lib = Library("flashsim", "DEF")
    tag = getattr(torch.Tag, "needs_fixed_stride_order", None)  # inductor: pass the strides eager would
    lib.define(SCHEMA, tags=(tag,) if tag is not None else ())
    lib.impl("attention", _impl_cuda, "CUDA")
    lib.impl("attention", _cpu_kernel, "CPU")
    torch.library.register_fake(NAME, _fake, lib=lib)
    return lib


_LIB = _register()
OP = torch.ops.flashsim.attention.default


# -- the Python entry points (flashsim.gpu.attention / prepared_launch with torch tensors) ----------------------


def _on_host(t) -> bool:
    return not t.is_cuda


def _check_inputs(q, k, v):
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor like q, got {type(x).__name__}")
    if torch.is_grad_enabled():
        for name, x in (("q", q), ("k", k), ("v", v)):
            if x.requires_grad:
                raise ValueError(
                    f"{name} requires grad, but flashsim.gpu.attention has no backward; call it under "
                    "torch.no_grad() or pass detached tensors"
                )


def _torch_stream(stream, q):
    if isinstance(stream, torch.cuda.Stream):
        return stream
    handle = rt.stream_handle(stream)
    if handle == 0:
        return torch.cuda.default_stream(q.device)
    return torch.cuda.ExternalStream(handle, device=q.device)


def _op_args(opts: Options) -> tuple:
    """The op's arguments after q, k, v for ``opts`` (arch and flag apart)."""
    return (opts.causal, opts.softmax_scale, opts.pv_accum, tiles_of(opts.config))


def _op_tail(opts: Options) -> tuple:
    return (list(opts.window_size), float(opts.softcap), opts.layout, opts.quant)


def attention(q, k, v, opts: Options, *, arch=None, stream=None, check_overflow=True):
    """flashsim.gpu.attention for torch tensors (see there): the op on torch's current stream, or on ``stream``
    (made torch's current stream for the call, so the outputs are allocated on it too). With an f16 P@V mma and
    check_overflow, the op's overflow flag is read (a host synchronisation) and a flagged row raises;
    check_overflow="deferred" returns (o, lse, check) and ``check()`` reads the flag later."""
    _check_inputs(q, k, v)
    if arch is not None and not isinstance(arch, str):
        arch = get_arch(arch).name
    mode = check_mode(check_overflow)
    check = mode is not False
    args = (q, k, v, *_op_args(opts), arch, check, *_op_tail(opts))
    if stream is None:
        o, lse, flag = OP(*args)
    else:
        with torch.cuda.stream(_torch_stream(stream, q)):
            o, lse, flag = OP(*args)
    if mode == "deferred":
        return (
            o,
            lse,
            OverflowCheck(
                None
                if not flag.numel()
                else lambda: launch.raise_if_overflowed(
                    _problem_of(q, k, v, opts, arch), int(flag.item()) & launch.NO_OVERFLOW, v
                )
            ),
        )
    if check and flag.numel():
        value = int(flag.item()) & launch.NO_OVERFLOW  # int64 -1 is the u64 NO_OVERFLOW
        if value != launch.NO_OVERFLOW:
            launch.raise_if_overflowed(_problem_of(q, k, v, opts, arch), value, v)
    return o, lse


def _problem_of(q, k, v, opts, arch):
    """The Problem of a call (error path only: for the overflow message)."""
    return prepare(q, k, v, opts, arch=arch or rt.current_arch())


def prepared_launch(q, k, v, opts: Options, *, arch=None, stream=None):
    """flashsim.gpu.prepared_launch for torch tensors: CUDA tensors get torch outputs and a launch on ``stream`` (or
    torch's current stream now); CPU tensors go the numpy way (DeviceArray outputs)."""
    _check_inputs(q, k, v)
    if _on_host(q):
        return host.prepared(*_host_arrays(q, k, v), opts, arch, stream)
    if arch is not None and not isinstance(arch, str):
        arch = get_arch(arch).name
    causal, softmax_scale, pv_accum, tiles = _op_args(opts)
    window, softcap, layout, quant = _op_tail(opts)
    key = _key(q, k, v, causal, softmax_scale, pv_accum, tiles, arch, window, softcap, layout, quant)
    plan = _KEYS.get(key) or _miss(
        key, q, k, v, _options(q, causal, softmax_scale, pv_accum, tiles, window, softcap, layout, quant), arch
    )
    qp, kp, vp = q.data_ptr(), k.data_ptr(), v.data_ptr()
    launch.misaligned(q=qp, k=kp, v=vp)
    if stream is None:
        o, lse = q.new_empty(plan.o_shape), q.new_empty(plan.lse_shape, dtype=_F32)
        scratch = _scratch(plan, q)
        s = rt.stream_from_handle(_raw_stream(q.get_device()))
    else:  # allocated on the stream that writes them
        with torch.cuda.stream(_torch_stream(stream, q)):
            o, lse = q.new_empty(plan.o_shape), q.new_empty(plan.lse_shape, dtype=_F32)
            scratch = _scratch(plan, q)
        s = rt.stream_from_handle(rt.stream_handle(stream))
    sink = _SINKS[q.device].data_ptr() if plan.problem.config.pv_mma_f16 else 0  # nobody reads the flag here
    args = (qp, kp, vp, o.data_ptr(), lse.data_ptr(), sink, scratch.data_ptr() if scratch is not None else 0)
    keep = (q, k, v, o, lse, scratch)  # the launch writes o, lse: they live as long as it

    def go(sync=True, **parts):
        rt.bind_thread()
        launch.launch_plan(plan, s, *args, **parts)
        if sync:
            launch.sync_stream(s, plan.what)
        return keep

    return go, (o, lse), plan.problem
