"""flashsim.gpu.attention_with_kvcache / attention_varlen for torch tensors: the custom ops
``torch.ops.flashsim.attention_with_kvcache`` and ``torch.ops.flashsim.attention_varlen``.

Importing this module imports torch and registers both ops (flashsim.gpu's serving calls import it on their first
call with a torch tensor)::

    flashsim::attention_with_kvcache(Tensor q, Tensor k_cache, Tensor v_cache, Tensor? cache_seqlens=None,
        Tensor? block_table=None, int num_splits=0, int? max_seqlen_k=None, bool causal=False,
        float? softmax_scale=None, str pv_accum="f32", int[] tiles=[], str? arch=None, bool flag=True,
        int[] window=[-1, -1], float softcap=0.0, bool check_indices=True) -> (Tensor o, Tensor lse, Tensor overflow)
    flashsim::attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k,
        int max_seqlen_q, int max_seqlen_k, bool causal=False, ...the same options...) -> (o, lse, overflow)

``num_splits`` 0 is the heuristic (None in Python), on the device's own SM count, over the key tiles of
``max_seqlen_k`` (the longest row the caller states; None: the cache's capacity); ``tiles`` as flashsim::attention's.
Fake (meta) implementations give the output shapes, so both ops trace under torch.compile(fullgraph=True).

CUDA tensors: with ``check_indices`` serving_check (the index rules, on the device), then flash_fwd, then (split-KV)
flash_combine, on torch's current stream of q's device; o, lse and the split parts come from torch's caching
allocator. A repeated call does a read of the index check's record (mapped host memory: no wait), a key lookup
(shapes, dtypes, devices, contiguity, the index tensors' shapes and dtypes, options), a 16-byte alignment test, the
allocations and the launches: no copy, no host synchronisation, so the call can be captured in a CUDA graph and
replayed. A bad index found on the device raises its ValueError when the record is read (flashsim.gpu.serving: the
next serving call, a flag read, or flashsim.gpu.check_index_errors()); the kernel clamps every index it reads, so it
never reads outside the caches. The first call for a key checks everything else (ValueError naming the argument)
and compiles the kernels, which must not happen inside a capture (call the shapes once before capturing). CPU
tensors run through the GPU synchronously, their indices checked on the host first.
"""

from __future__ import annotations

import torch
from torch.library import Library

from ..config import overflow_flag_live
from ..errors import GPUError
from ..serving.problem import _is_int, index_of, prepare_kvcache, prepare_varlen
from . import launch, serving
from . import runtime as rt
from .torch_op import (
    _ELEMENT,
    _capturing,
    _numpy_of,
    _op_args,
    _op_tail,
    _options,
    _raw_stream,
    _torch_of,
    _torch_stream,
)

_OPTIONS = (
    'bool causal=False, float? softmax_scale=None, str pv_accum="f32", int[] tiles=[], str? arch=None, '
    "bool flag=True, int[] window=[-1, -1], float softcap=0.0, bool check_indices=True"
)
SCHEMAS = {
    "attention_with_kvcache": "attention_with_kvcache(Tensor q, Tensor k_cache, Tensor v_cache, "
    f"Tensor? cache_seqlens=None, Tensor? block_table=None, int num_splits=0, int? max_seqlen_k=None, {_OPTIONS}) "
    "-> (Tensor o, Tensor lse, Tensor overflow)",
    "attention_varlen": "attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, "
    f"int max_seqlen_q, int max_seqlen_k, {_OPTIONS}) -> (Tensor o, Tensor lse, Tensor overflow)",
}
_KEYS: dict = launch.fast_keys()  # fast key -> (ServingProblem, ServingPlan)
_INDEX = {
    "attention_with_kvcache": ("cache_seqlens", "block_table"),
    "attention_varlen": ("cu_seqlens_q", "cu_seqlens_k"),
}


def _describe(x):
    return None if x is None else (x.shape, x.dtype, x.device, x.is_contiguous())  # torch.Size hashes as a tuple


def _check_devices(tensors: dict) -> None:
    q = tensors["q"]
    for name, x in tensors.items():
        if x is not None and x.device != q.device:
            raise ValueError(f"{name} is on {x.device} but q is on {q.device}: every tensor must be on one device")


def _problem(op, tensors: dict, scalars: dict, opts, arch, sm_count):
    if op == "attention_with_kvcache":
        n = scalars["num_splits"]
        return prepare_kvcache(
            tensors["q"],
            tensors["k_cache"],
            tensors["v_cache"],
            tensors["cache_seqlens"],
            tensors["block_table"],
            None if n == 0 else n,
            opts=opts,
            arch=arch,
            sm_count=sm_count,
            max_seqlen_k=scalars["max_seqlen_k"],
        )
    return prepare_varlen(
        tensors["q"],
        tensors["k"],
        tensors["v"],
        tensors["cu_seqlens_q"],
        tensors["cu_seqlens_k"],
        scalars["max_seqlen_q"],
        scalars["max_seqlen_k"],
        opts=opts,
        arch=arch,
    )


def _miss(op, key, tensors, scalars, opts, arch):
    """First call for ``key``: every check (ValueError naming the argument) before anything runs, then the plan."""
    _check_devices(tensors)
    q = tensors["q"]
    rt.require_gpu()
    if q.get_device() != rt.device_id():
        raise ValueError(f"q is on {q.device}, but flashsim.gpu runs on device {rt.device_id()}")
    gpu_arch = launch.check_arch(arch)
    prob = _problem(op, tensors, scalars, opts, gpu_arch, rt.sm_count())
    for name, x in tensors.items():
        if x is not None and not x.is_contiguous():
            raise ValueError(f"{name} must be contiguous, got strides {tuple(x.stride())} (call .contiguous() first)")
    if _capturing():
        raise GPUError(
            f"flashsim.gpu.{op}: the first call for these shapes happens inside a CUDA graph capture, where "
            "compiling and loading the kernel is not allowed; call it once with the same shapes before capturing"
        )
    plan = serving.plan_for(prob)
    if len(_KEYS) >= launch.MAX_KEYS:
        _KEYS.clear()
    _KEYS[key] = (prob, plan)
    return prob, plan


def _host_index(op, tensors):
    """The index tensors' values on the host (a copy that waits for the GPU; the overflow error's path only)."""
    return index_of(**{n: None if tensors[n] is None else tensors[n].detach().cpu().numpy() for n in _INDEX[op]})


def _run_cuda(op, tensors, scalars, causal, softmax_scale, pv_accum, tiles, arch, flag, window, softcap, check):
    serving.raise_pending()  # an earlier call's bad index (a read of mapped host memory: no wait)
    key = (
        op,
        *(_describe(x) for x in tensors.values()),
        tuple(sorted(scalars.items())),
        bool(causal),
        softmax_scale,
        pv_accum,
        tuple(tiles),
        arch,
        tuple(window),
        softcap,
    )
    hit = _KEYS.get(key)
    if hit is None:
        opts = _options(tensors["q"], causal, softmax_scale, pv_accum, tiles, window, softcap, "bnhd")
        hit = _miss(op, key, tensors, scalars, opts, arch)
    prob, plan = hit
    q = tensors["q"]
    names = ("q", "k_cache", "v_cache") if op == "attention_with_kvcache" else ("q", "k", "v")
    qp, kp, vp = (tensors[n].data_ptr() for n in names)
    if (qp | kp | vp) & 15:
        launch.misaligned(**{n: tensors[n].data_ptr() for n in names})
    o = q.new_empty(prob.o_shape)
    lse = q.new_empty(prob.lse_shape, dtype=torch.float32)
    live = overflow_flag_live(pv_accum)
    out_flag = torch.full((1,), -1, dtype=torch.int64, device=q.device) if live and flag else None
    parts = q.new_empty((plan.part_bytes,), dtype=torch.uint8) if plan.part_bytes else None
    sink = out_flag if out_flag is not None else (q.new_empty((1,), dtype=torch.int64) if live else None)  # unread
    ptr = lambda n: 0 if tensors.get(n) is None else tensors[n].data_ptr()  # noqa: E731
    ptrs = dict(
        q=qp,
        k=kp if prob.k_total else qp,
        v=vp if prob.k_total else qp,
        o=o.data_ptr(),
        lse=lse.data_ptr(),
        overflow=sink.data_ptr() if sink is not None else 0,
        cu_q=ptr("cu_seqlens_q"),
        cu_k=ptr("cu_seqlens_k"),
        seqlens_k=ptr("cache_seqlens"),
        block_table=ptr("block_table"),
        parts=parts.data_ptr() if parts is not None else 0,
    )
    dev = q.get_device()
    stream = rt.stream_from_handle(_raw_stream(dev))
    rt.bind_thread()
    serving.launch_serving(plan, stream, ptrs, check=bool(check))
    return o, lse, out_flag if out_flag is not None else q.new_empty((0,), dtype=torch.int64)


def _run_cpu(op, tensors, scalars, causal, softmax_scale, pv_accum, tiles, arch, flag, window, softcap, check):
    """CPU tensors through the GPU, synchronously (numpy in between)."""
    _check_devices(tensors)
    for name in ("q",) + tuple(n for n in tensors if n not in _INDEX[op] and n != "q"):
        if tensors[name].dtype not in _ELEMENT:
            raise ValueError(
                f"{name} must be float16 or bfloat16, got {str(tensors[name].dtype).replace('torch.', '')}"
            )
    arrays = {
        n: (None if x is None else _numpy_of(x) if n not in _INDEX[op] else x.numpy()) for n, x in tensors.items()
    }
    opts = _options(tensors["q"], causal, softmax_scale, pv_accum, tiles, window, softcap, "bnhd")
    gpu_arch = launch.check_arch(arch)
    prob = _problem(op, arrays, scalars, opts, gpu_arch, rt.sm_count())
    names = ("q", "k_cache", "v_cache") if op == "attention_with_kvcache" else ("q", "k", "v")
    o, lse = serving.run_host(
        *(arrays[n] for n in names), prob, {n: arrays[n] for n in _INDEX[op]}, check=check, check_overflow=False
    )
    return _torch_of(o), torch.from_numpy(lse), torch.zeros((0,), dtype=torch.int64)


def _kvcache_impl(device):
    def impl(
        q,
        k_cache,
        v_cache,
        cache_seqlens=None,
        block_table=None,
        num_splits=0,
        max_seqlen_k=None,
        causal=False,
        softmax_scale=None,
        pv_accum="f32",
        tiles=(),
        arch=None,
        flag=True,
        window=(-1, -1),
        softcap=0.0,
        check_indices=True,
    ):
        tensors = dict(q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=cache_seqlens, block_table=block_table)
        run = _run_cuda if device == "cuda" else _cpu_runner
        return run(
            "attention_with_kvcache",
            tensors,
            dict(num_splits=int(num_splits), max_seqlen_k=max_seqlen_k),
            causal,
            softmax_scale,
            pv_accum,
            tiles,
            arch,
            flag,
            window,
            softcap,
            check_indices,
        )

    return impl


def _varlen_impl(device):
    def impl(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        max_seqlen_q,
        max_seqlen_k,
        causal=False,
        softmax_scale=None,
        pv_accum="f32",
        tiles=(),
        arch=None,
        flag=True,
        window=(-1, -1),
        softcap=0.0,
        check_indices=True,
    ):
        tensors = dict(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
        scalars = dict(max_seqlen_q=int(max_seqlen_q), max_seqlen_k=int(max_seqlen_k))
        run = _run_cuda if device == "cuda" else _cpu_runner
        return run(
            "attention_varlen",
            tensors,
            scalars,
            causal,
            softmax_scale,
            pv_accum,
            tiles,
            arch,
            flag,
            window,
            softcap,
            check_indices,
        )

    return impl


def _cpu_runner(*args):
    return _run_cpu(*args)  # looked up at call time (tests route CPU tensors to the CUDA path with mocks)


# -- fake (meta) implementations: shapes for torch.compile ----------------------------------------------------


def _fake_outputs(q, lse_shape, pv_accum, flag):
    live = overflow_flag_live(pv_accum)
    return (
        q.new_empty(q.shape),
        q.new_empty(lse_shape, dtype=torch.float32),
        q.new_empty((int(live and flag),), dtype=torch.int64),
    )


def _fake_kvcache(
    q,
    k_cache,
    v_cache,
    cache_seqlens=None,
    block_table=None,
    num_splits=0,
    max_seqlen_k=None,
    causal=False,
    softmax_scale=None,
    pv_accum="f32",
    tiles=(),
    arch=None,
    flag=True,
    window=(-1, -1),
    softcap=0.0,
    check_indices=True,
):
    if q.dim() != 4:
        raise ValueError(f"q must have 4 dimensions (B, Nq, Hq, d), got shape {tuple(q.shape)}")
    _check_devices(dict(q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=cache_seqlens, block_table=block_table))
    b, nq, h, _ = q.shape
    return _fake_outputs(q, (b, h, nq), pv_accum, flag)


def _fake_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    causal=False,
    softmax_scale=None,
    pv_accum="f32",
    tiles=(),
    arch=None,
    flag=True,
    window=(-1, -1),
    softcap=0.0,
    check_indices=True,
):
    if q.dim() != 3:
        raise ValueError(f"q must have 3 dimensions (total_q, Hq, d), got shape {tuple(q.shape)}")
    _check_devices(dict(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k))
    total, h, _ = q.shape
    return _fake_outputs(q, (h, total), pv_accum, flag)


def _register():
    lib = Library("flashsim", "FRAGMENT")
    tag = getattr(torch.Tag, "needs_fixed_stride_order", None)
    for schema in SCHEMAS.values():
        lib.define(schema, tags=(tag,) if tag is not None else ())
    lib.impl("attention_with_kvcache", _kvcache_impl("cuda"), "CUDA")
    lib.impl("attention_with_kvcache", _kvcache_impl("cpu"), "CPU")
    lib.impl("attention_varlen", _varlen_impl("cuda"), "CUDA")
    lib.impl("attention_varlen", _varlen_impl("cpu"), "CPU")
    torch.library.register_fake("flashsim::attention_with_kvcache", _fake_kvcache, lib=lib)
    torch.library.register_fake("flashsim::attention_varlen", _fake_varlen, lib=lib)
    return lib


_LIB = _register()  # torch_op (imported above) defined the "flashsim" library this fragment adds to
KVCACHE_OP = torch.ops.flashsim.attention_with_kvcache.default
VARLEN_OP = torch.ops.flashsim.attention_varlen.default


# -- the Python entry points ----------------------------------------------------------------------------------


def _check_tensors(tensors: dict) -> None:
    for name, x in tensors.items():
        if x is not None and not isinstance(x, torch.Tensor):
            raise ValueError(f"{name} must be a torch tensor like q, got {type(x).__name__}")
    if torch.is_grad_enabled():
        for name, x in tensors.items():
            if x is not None and x.requires_grad:
                raise ValueError(
                    f"{name} requires grad, but flashsim.gpu's serving calls have no backward; call them under "
                    "torch.no_grad() or pass detached tensors"
                )


def _finish(op, flag, tensors, opts, arch, check_overflow, prob_args, wait=None):
    """The checks after a call, where it waits for the GPU: reading its overflow flag (check_overflow with an f16
    P@V), or ``wait`` (a deferred check's wait for the call's stream); then the index check's record is read too, and
    its ValueError comes first. A call that does not wait leaves the record to the next read (the next serving call,
    flashsim.gpu.check_index_errors), so a bad index raises at a point that does not depend on the GPU's timing."""
    if check_overflow is False or (not flag.numel() and wait is None):
        return None
    value = launch.NO_OVERFLOW
    if flag.numel():
        value = int(flag.item()) & launch.NO_OVERFLOW  # a host synchronisation
    else:
        wait()
    serving.raise_pending()
    if value == launch.NO_OVERFLOW:
        return None
    prob = _problem(op, tensors, prob_args, opts, arch or rt.current_arch(), rt.sm_count())
    v = tensors["v_cache" if op == "attention_with_kvcache" else "v"].detach().float().cpu().numpy()
    serving.raise_if_overflowed(prob, _host_index(op, tensors), value, v)


def _call(op_name, op, tensors, scalars, opts, arch, stream, check_overflow, check):
    _check_tensors(tensors)
    causal, softmax_scale, pv_accum, tiles = _op_args(opts)
    window, softcap, _, _ = _op_tail(opts)
    args = (
        *tensors.values(),
        *scalars.values(),
        causal,
        softmax_scale,
        pv_accum,
        tiles,
        arch,
        check_overflow is not False,
        window,
        softcap,
        check,
    )
    q = tensors["q"]
    if stream is None:
        o, lse, flag = op(*args)
        on = torch.cuda.current_stream(q.device) if check_overflow == "deferred" and q.is_cuda else None
    else:
        on = _torch_stream(stream, q)
        with torch.cuda.stream(on):
            o, lse, flag = op(*args)
    if check_overflow == "deferred":
        wait = on.synchronize if q.is_cuda else None
        return o, lse, serving.OverflowCheck(lambda: _finish(op_name, flag, tensors, opts, arch, True, scalars, wait))
    _finish(op_name, flag, tensors, opts, arch, check_overflow, scalars)
    return o, lse


def attention_with_kvcache(
    q,
    k_cache,
    v_cache,
    cache_seqlens,
    block_table,
    num_splits,
    opts,
    *,
    max_seqlen_k=None,
    arch=None,
    stream=None,
    check_overflow=True,
    check_indices=True,
):
    """flashsim.gpu.attention_with_kvcache for torch tensors (see there)."""
    tensors = dict(q=q, k_cache=k_cache, v_cache=v_cache, cache_seqlens=cache_seqlens, block_table=block_table)
    if max_seqlen_k is not None:  # a numpy int is an int here; anything else is named as prepare_kvcache names it
        if not _is_int(max_seqlen_k):
            raise ValueError(f"max_seqlen_k must be None or an int, got {max_seqlen_k!r}")
        max_seqlen_k = int(max_seqlen_k)
    scalars = dict(num_splits=0 if num_splits is None else num_splits, max_seqlen_k=max_seqlen_k)
    return _call(
        "attention_with_kvcache", KVCACHE_OP, tensors, scalars, opts, arch, stream, check_overflow, check_indices
    )


def attention_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    opts,
    *,
    arch=None,
    stream=None,
    check_overflow=True,
    check_indices=True,
):
    """flashsim.gpu.attention_varlen for torch tensors (see there)."""
    tensors = dict(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    scalars = dict(max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)
    return _call("attention_varlen", VARLEN_OP, tensors, scalars, opts, arch, stream, check_overflow, check_indices)
