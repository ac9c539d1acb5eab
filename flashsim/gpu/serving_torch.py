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
flash_combine, on torch's current stream of q's device (with flashsim.gpu.serving.FUSED, flash_fwd alone, its state
kept per (device, stream) like the parts' scratch); o and lse come from torch's caching allocator, the split
parts' scratch from a buffer kept per (device, stream, size) (a fresh allocation inside a CUDA graph capture). A
repeated call does a read of the index check's record (mapped host memory: no wait), a key lookup (shapes, dtypes,
devices, contiguity, the index tensors' shapes and dtypes, options), a 16-byte alignment test, two allocations and
the launches (flashsim.gpu.packed: the parameters packed when the key was first seen, the addresses rewritten): no
copy, no host synchronisation, so the call can be captured in a CUDA graph and replayed. The public calls
(``kvcache_call``, ``varlen_call``) run the ops' CUDA body (``_enqueue``) without torch's dispatcher when nothing
needs to see the op (``_eager``), through the op otherwise: the same launches either way. A bad index found on the
device raises its ValueError when the record is read (flashsim.gpu.serving: the next serving call, a flag read, or
flashsim.gpu.check_index_errors()); the kernel clamps every index it reads, so it never reads outside the caches.
The first call for a key checks everything else (ValueError naming the argument) and compiles the kernels, which
must not happen inside a capture (call the shapes once before capturing). CPU tensors run through the GPU
synchronously, their indices checked on the host first.
"""

from __future__ import annotations

import operator

import torch
from torch.library import Library

from ..config import overflow_flag_live
from ..errors import GPUError
from ..overflow import check_mode
from ..serving.problem import _is_int, index_of, prepare_kvcache, prepare_varlen, serving_options
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
_KEYS: dict = launch.fast_keys()  # fast key -> _Call
_INDEX = {
    "attention_with_kvcache": ("cache_seqlens", "block_table"),
    "attention_varlen": ("cu_seqlens_q", "cu_seqlens_k"),
}
_NAMES = {  # the op's tensor arguments in order
    "attention_with_kvcache": ("q", "k_cache", "v_cache", *_INDEX["attention_with_kvcache"]),
    "attention_varlen": ("q", "k", "v", *_INDEX["attention_varlen"]),
}
_SCALARS = {
    "attention_with_kvcache": ("num_splits", "max_seqlen_k"),
    "attention_varlen": ("max_seqlen_q", "max_seqlen_k"),
}


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


def _miss(op, key, tensors, scalars, opts, arch, pv_accum):
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
    call = _Call(prob, serving.plan_for(prob), q, pv_accum)
    if len(_KEYS) >= launch.MAX_KEYS:
        _KEYS.clear()
    _KEYS[key] = call
    return call


def _host_index(op, tensors):
    """The index tensors' values on the host (a copy that waits for the GPU; the overflow error's path only)."""
    return index_of(**{n: None if tensors[n] is None else tensors[n].detach().cpu().numpy() for n in _INDEX[op]})


class _Call:
    """What a repeated call of one fast key needs, built by its first call: the problem, the plan, the outputs'
    shapes, a tensor of lse's shape and dtype on q's device (``lse_like``: a call allocates lse by
    ``torch.empty_like`` of it, about half the host time of ``new_empty`` with a shape and a dtype), whether the
    kernel writes an overflow flag, the sink it writes when nobody reads it, and whether the caches are empty (the
    kernel is then given q's address: it never reads them)."""

    __slots__ = ("prob", "plan", "o_shape", "o_like_q", "lse_shape", "lse_like", "live", "sink", "empty_kv")

    def __init__(self, prob, plan, q, pv_accum):
        self.prob, self.plan = prob, plan
        self.o_shape, self.lse_shape = prob.o_shape, prob.lse_shape
        self.o_like_q = tuple(q.shape) == tuple(prob.o_shape)  # always, as the shapes are defined: empty_like(q)
        self.lse_like = q.new_empty(prob.lse_shape, dtype=torch.float32)  # contiguous: so is empty_like of it
        self.live = overflow_flag_live(pv_accum)
        # f16 P@V unchecked: a u64 the kernel may write and nobody reads (allocated here, outside any capture)
        self.sink = torch.empty((1,), dtype=torch.int64, device=q.device) if self.live else None
        self.empty_kv = not prob.k_total


def _per_stream(cache: dict, dev, stream, nbytes, make, capturing: bool):
    """A buffer of ``nbytes`` made by ``make(nbytes)`` for calls on raw stream ``stream`` of device ``dev``: one per
    (device, stream, size) in ``cache``, kept from call to call (calls on one stream run in its order, so they may
    share it); inside a CUDA graph capture (``capturing``, the caller's _capturing()) a fresh one from the capture's
    pool, so that a graph never shares memory
    with eager calls on another stream. (The buffer, its address): the caller holds the buffer until its launches
    are enqueued, because inside a capture torch hands a freed block to the next allocation of the same capture (a
    fused call's state, made after the split parts' scratch had been dropped, took the scratch's own block, and every
    graph of that call read its tickets from its parts). (A stream destroyed with work pending and a new one given
    the same handle would share it too early: not done.)"""
    if capturing:
        buf = make(nbytes)
        return buf, buf.data_ptr()
    key = (dev, stream, nbytes)
    hit = cache.get(key)
    if hit is None:
        if len(cache) >= 64:  # freed in stream order by the caching allocator: safe for queued work
            cache.clear()
        buf = make(nbytes)
        hit = cache[key] = (buf, buf.data_ptr())
    return hit


def _scratch(q, dev, stream, nbytes, capturing: bool):
    """The split parts' scratch (``nbytes``, unzeroed: each call's flash_fwd writes what its combine reads): (the
    buffer, its address)."""
    return _per_stream(_SCRATCH, dev, stream, nbytes, lambda n: q.new_empty((n,), dtype=torch.uint8), capturing)


def _state(q, dev, stream, nbytes, capturing: bool):
    """A fused launch's state (flashsim.gpu.serving.state_bytes), zeroed when made, on the current stream before the
    launch; each launch leaves it zeroed. (The buffer, its address.) A call being captured takes a slot of the
    device's slab (``_StateSlab``), so that the graph holds no memset node; only when the slab has no slot left
    (more captured calls than SLAB_SLOTS since the last call outside a capture) does it make a zeroed buffer inside
    the capture, a memset the graph replays."""
    slab = _SLABS.get(dev)
    if capturing and slab is not None:
        ptr = slab.take(nbytes)
        if ptr:
            return slab.buf, ptr
    elif not capturing and (slab is None or slab.low()):
        _SLABS[dev] = _StateSlab(q.device, slab)

    def zeroed(n):
        return torch.zeros((n,), dtype=torch.uint8, device=q.device)

    return _per_stream(_STATE, dev, stream, nbytes, zeroed, capturing)


class _StateSlab:
    """Fused states for calls captured into CUDA graphs: SLAB_SLOTS slots of SLOT_BYTES in one buffer zeroed outside
    any capture (by the first fused call on the device, and again by the first call outside a capture once half of
    them are given out), each slot given to one captured call for good: a graph's replays reuse it and each launch
    leaves it zeroed, and the graph holds no memset node before the launch.
    The slabs stay alive as long as the process (the graphs may): 64 KB each."""

    SLOT_BYTES = 64
    SLAB_SLOTS = 1024

    def __init__(self, device, previous=None):
        self.buf = torch.zeros((self.SLOT_BYTES * self.SLAB_SLOTS,), dtype=torch.uint8, device=device)
        self.base = self.buf.data_ptr()
        self.slots = iter(range(self.SLAB_SLOTS))  # next() on a range iterator: one slot per caller, thread-safe
        self.previous = previous  # kept: graphs captured earlier hold slots of it

    def take(self, nbytes: int) -> int:
        """The address of a fresh zeroed slot of at least ``nbytes``, or 0 when none is left."""
        if nbytes > self.SLOT_BYTES:
            return 0
        i = next(self.slots, None)
        return 0 if i is None else self.base + i * self.SLOT_BYTES

    def low(self) -> bool:
        """Half of the slots or more are given out (the iterator's remaining length says how many are left)."""
        return operator.length_hint(self.slots) * 2 <= self.SLAB_SLOTS


_NO_BUFFER = (None, 0)  # a launch without scratch or state: a null address
_SCRATCH: dict = {}  # (device, raw stream, bytes) -> (uint8 tensor, its address)
_STATE: dict = {}  # (device, raw stream, bytes) -> (zeroed uint8 tensor, its address)
_SLABS: dict = {}  # device index -> _StateSlab (states of captured fused calls)


def call_key(op, q, k, v, i0, i1, s0, s1, causal, softmax_scale, pv_accum, tiles, arch, window, softcap) -> tuple:
    """What a call's plan depends on: the tensors' shapes, dtypes, devices and contiguity, the arguments and
    flashsim.gpu.serving.FUSED (the cache key of ``_enqueue``; benchmarks/experiments/serving_host_time times it)."""
    return (
        op,
        q.shape,
        q.dtype,
        q.device,
        q.is_contiguous(),
        k.shape,
        k.dtype,
        k.device,
        k.is_contiguous(),
        v.shape,
        v.dtype,
        v.device,
        v.is_contiguous(),
        None if i0 is None else (i0.shape, i0.dtype, i0.device, i0.is_contiguous()),
        None if i1 is None else (i1.shape, i1.dtype, i1.device, i1.is_contiguous()),
        s0,
        s1,
        causal,
        softmax_scale,
        pv_accum,
        tuple(tiles),
        arch,
        tuple(window),
        softcap,
        serving.FUSED,
    )


def _enqueue(op, q, k, v, i0, i1, s0, s1, causal, softmax_scale, pv_accum, tiles, arch, flag, window, softcap, check):
    """One call on CUDA tensors (``i0``, ``i1``: the index tensors of ``_INDEX[op]``; ``s0``, ``s1``: the op's two
    ints): (o, lse, the overflow flag or None when nobody reads it). The body of both ops' CUDA kernel and of the
    public calls' eager path, so both run the same launches with the same arguments."""
    serving.raise_pending()  # an earlier call's bad index (a read of mapped host memory: no wait)
    key = call_key(op, q, k, v, i0, i1, s0, s1, causal, softmax_scale, pv_accum, tiles, arch, window, softcap)
    hit = _KEYS.get(key)
    if hit is None:
        names = _NAMES[op]
        tensors = dict(zip(names, (q, k, v, i0, i1)))
        scalars = dict(zip(_SCALARS[op], (s0, s1)))
        opts = _options(q, causal, softmax_scale, pv_accum, tiles, window, softcap, "bnhd")
        hit = _miss(op, key, tensors, scalars, opts, arch, pv_accum)
    plan = hit.plan
    qp, kp, vp = q.data_ptr(), k.data_ptr(), v.data_ptr()
    if (qp | kp | vp) & 15:
        launch.misaligned(**dict(zip(_NAMES[op], (qp, kp, vp))))
    if hit.empty_kv:  # an empty cache is never read: any valid address
        kp = vp = qp
    # o has q's shape and dtype; q is contiguous (the first call checked it), so empty_like(q) is too (and cheaper)
    o = torch.empty_like(q) if hit.o_like_q else q.new_empty(hit.o_shape)
    lse = torch.empty_like(hit.lse_like)
    out_flag = None
    fp = 0
    if hit.live:
        if flag:
            out_flag = torch.full((1,), -1, dtype=torch.int64, device=q.device)  # -1: NO_OVERFLOW as u64
            fp = out_flag.data_ptr()
        else:
            fp = hit.sink.data_ptr()
    dev = q.get_device()
    stream = _raw_stream(dev)
    # asked once per call (0.66 us on the H100's host: benchmarks/logs/2026-12-06-serving3/gpu_parts.txt)
    capturing = _capturing() if plan.part_bytes or plan.state_bytes else False
    scratch = _scratch(q, dev, stream, plan.part_bytes, capturing) if plan.part_bytes else _NO_BUFFER
    state = _state(q, dev, stream, plan.state_bytes, capturing) if plan.state_bytes else _NO_BUFFER
    pp, sp = scratch[1], state[1]
    i0p = 0 if i0 is None else i0.data_ptr()
    i1p = 0 if i1 is None else i1.data_ptr()
    rt.bind_thread()
    if op == "attention_with_kvcache":  # cu_q, cu_k, seqlens_k, block_table
        serving.enqueue(plan, stream, qp, kp, vp, o.data_ptr(), lse.data_ptr(), fp, 0, 0, i0p, i1p, pp, check, sp)
    else:
        serving.enqueue(plan, stream, qp, kp, vp, o.data_ptr(), lse.data_ptr(), fp, i0p, i1p, 0, 0, pp, check, sp)
    del scratch, state  # only now: a capture's blocks may go to its next allocation, after these launches in order
    return o, lse, out_flag


def _run_cuda(op, tensors, scalars, causal, softmax_scale, pv_accum, tiles, arch, flag, window, softcap, check):
    """The ops' CUDA kernel: ``_enqueue`` (``tensors``: q, k, v and the two index tensors of ``_INDEX[op]``;
    ``scalars``: the op's two ints), with an empty overflow tensor where nobody reads the flag."""
    q, k, v, i0, i1 = tensors
    s0, s1 = scalars
    o, lse, out_flag = _enqueue(
        op, q, k, v, i0, i1, s0, s1, causal, softmax_scale, pv_accum, tiles, arch, flag, window, softcap, check
    )
    if out_flag is None:
        out_flag = torch.empty_like(_no_flag(o))
    return o, lse, out_flag


def _no_flag(o):
    """A zero-size int64 tensor on o's device: the op's empty overflow output is ``torch.empty_like`` of it (half the
    host time of ``new_empty`` with a shape and a dtype)."""
    dev = o.get_device()
    t = _NO_FLAG.get(dev)
    if t is None:
        t = _NO_FLAG[dev] = o.new_empty((0,), dtype=torch.int64)
    return t


_NO_FLAG: dict = {}  # device index -> zero-size int64 tensor


def _run_cpu(op, tensors, scalars, causal, softmax_scale, pv_accum, tiles, arch, flag, window, softcap, check):
    """CPU tensors through the GPU, synchronously (numpy in between)."""
    tensors, scalars = dict(zip(_NAMES[op], tensors)), dict(zip(_SCALARS[op], scalars))
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
        run = _run_cuda if device == "cuda" else _cpu_runner
        return run(
            "attention_with_kvcache",
            (q, k_cache, v_cache, cache_seqlens, block_table),
            (int(num_splits), max_seqlen_k),
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
        run = _run_cuda if device == "cuda" else _cpu_runner
        return run(
            "attention_varlen",
            (q, k, v, cu_seqlens_q, cu_seqlens_k),
            (int(max_seqlen_q), int(max_seqlen_k)),
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


def _finish(op, flag, tensors, opts, arch, check_overflow, prob_args, wait=None):
    """The checks after a call, where it waits for the GPU: reading its overflow flag (check_overflow with an f16
    P@V), or ``wait`` (a deferred check's wait for the call's stream); then the index check's record is read too, and
    its ValueError comes first. A call that does not wait leaves the record to the next read (the next serving call,
    flashsim.gpu.check_index_errors), so a bad index raises at a point that does not depend on the GPU's timing.
    ``flag``: the op's overflow tensor, or None (the eager path, where nobody reads it)."""
    has_flag = flag is not None and flag.numel() > 0
    if check_overflow is False or (not has_flag and wait is None):
        return None
    value = launch.NO_OVERFLOW
    if has_flag:
        value = int(flag.item()) & launch.NO_OVERFLOW  # a host synchronisation
    else:
        wait()
    serving.raise_pending()
    if value == launch.NO_OVERFLOW:
        return None
    prob = _problem(op, tensors, prob_args, opts, arch or rt.current_arch(), rt.sm_count())
    v = tensors["v_cache" if op == "attention_with_kvcache" else "v"].detach().float().cpu().numpy()
    serving.raise_if_overflowed(prob, _host_index(op, tensors), value, v)


# -- the eager path: the op's body without torch's dispatcher -------------------------------------------------


def _probe(name):
    """torch._C's ``name`` (a no-argument predicate), or one that always says yes where this torch lacks it (the
    call then goes through the op)."""
    fn = getattr(torch._C, name, None)
    return fn if fn is not None else (lambda: True)


_dispatch_modes = _probe("_len_torch_dispatch_stack")  # FakeTensorMode, make_fx, FlopCounterMode, ...
_function_modes = _probe("_len_torch_function_stack")  # TorchFunctionMode (e.g. torch.device as a context)
_functorch = _probe("_are_functorch_transforms_active")  # vmap, grad
_jit_tracing = _probe("_get_tracing_state")  # torch.jit.trace
_profiling = getattr(torch._C._autograd, "_profiler_enabled", lambda: True)  # the profiler records ops by name
_compiling = torch.compiler.is_compiling  # Dynamo's tracing (a constant True inside torch.compile)
_grad_enabled = torch.is_grad_enabled
_Tensor = torch.Tensor


def _on_gpu(q) -> bool:
    return q.is_cuda


def _eager(q, k, v, i0, i1, s0, s1) -> bool:
    """Whether a call may run the op's CUDA body directly (``_enqueue``) rather than through torch's dispatcher:
    plain torch.Tensors (no subclass) on a CUDA device with ints for the op's int arguments (``s0``, ``s1``), nothing
    that needs to see the op (torch.compile's tracing, dispatch or function modes, functorch transforms, jit
    tracing, the profiler) and no input requiring grad with grad mode on (the op's path raises that ValueError). The
    dispatcher would pick the same CUDA body with the same arguments: the launches and the bits are the same either
    way (tests/test_serving_gpu_mock.py compares the launches; tests/test_serving_call_gpu.py the bits); it only
    costs host time, several us a call."""
    if _compiling() or _dispatch_modes() or _function_modes() or _functorch() or _jit_tracing() or _profiling():
        return False
    T = _Tensor
    if type(q) is not T or type(k) is not T or type(v) is not T:
        return False
    if (i0 is not None and type(i0) is not T) or (i1 is not None and type(i1) is not T):
        return False
    if (s0 is not None and type(s0) is not int) or (s1 is not None and type(s1) is not int):
        return False
    if not _on_gpu(q):
        return False
    if _grad_enabled() and (
        q.requires_grad
        or k.requires_grad
        or v.requires_grad
        or (i0 is not None and i0.requires_grad)
        or (i1 is not None and i1.requires_grad)
    ):
        return False
    return True


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


def resolved(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant, check_overflow):
    """(Options, the overflow check's mode, the op's option arguments (causal, softmax_scale, pv_accum, tiles,
    window, softcap)) of the public calls' option arguments: check_mode, then serving_options (their errors, in that
    order), resolved once per distinct hashable set of arguments and their types (so that causal=1 is still refused
    after causal=True), every time otherwise."""
    key = (
        (causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant, check_overflow),
        (
            type(causal),
            type(pv_accum),
            type(config),
            type(softmax_scale),
            type(window_size),
            type(softcap),
            type(layout),
            type(quant),
            type(check_overflow),
        ),
    )
    try:
        hit = _RESOLVED.get(key)
    except TypeError:  # an unhashable argument (a list for window_size)
        key = hit = None
    if hit is None:
        mode = check_mode(check_overflow)
        opts = serving_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
        causal, softmax_scale, pv_accum, tiles = _op_args(opts)
        window, cap, _, _ = _op_tail(opts)
        hit = (opts, mode, (causal, softmax_scale, pv_accum, tuple(tiles), tuple(window), cap))
        if key is not None:
            if len(_RESOLVED) >= 256:
                _RESOLVED.clear()
            _RESOLVED[key] = hit
    return hit


_RESOLVED: dict = {}  # resolved's arguments and their types -> its result


def _call(op_name, tensors, scalars, opts, option_args, arch, stream, check_overflow, check):
    """One public call: ``tensors`` (q, k, v and the two index tensors of ``_INDEX[op_name]``) and ``scalars`` (the
    op's two ints) in the op's order; ``option_args`` (causal, softmax_scale, pv_accum, tiles, window, softcap)."""
    causal, softmax_scale, pv_accum, tiles, window, softcap = option_args
    flag_read = check_overflow is not False
    q, k, v, i0, i1 = tensors
    s0, s1 = scalars
    if _eager(q, k, v, i0, i1, s0, s1):
        if stream is None:
            o, lse, flag = _enqueue(
                op_name, q, k, v, i0, i1, s0, s1, causal, softmax_scale, pv_accum, tiles, arch, flag_read, window,
                softcap, check,
            )  # fmt: skip
        else:
            with torch.cuda.stream(_torch_stream(stream, q)):
                o, lse, flag = _enqueue(
                    op_name, q, k, v, i0, i1, s0, s1, causal, softmax_scale, pv_accum, tiles, arch, flag_read, window,
                    softcap, check,
                )  # fmt: skip
        if check_overflow is False or (flag is None and check_overflow is True):
            return o, lse  # nothing to read: the decode loop's case
    else:
        _check_tensors(dict(zip(_NAMES[op_name], tensors)))
        op = KVCACHE_OP if op_name == "attention_with_kvcache" else VARLEN_OP
        args = (*tensors, *scalars, causal, softmax_scale, pv_accum, list(tiles), arch, flag_read, list(window))
        if stream is None:
            o, lse, flag = op(*args, softcap, check)
        else:
            with torch.cuda.stream(_torch_stream(stream, q)):
                o, lse, flag = op(*args, softcap, check)
    named = dict(zip(_NAMES[op_name], tensors))
    named_scalars = dict(zip(_SCALARS[op_name], scalars))
    if check_overflow == "deferred":
        on = None
        if q.is_cuda:
            on = torch.cuda.current_stream(q.device) if stream is None else _torch_stream(stream, q)
        wait = on.synchronize if on is not None else None
        return (
            o,
            lse,
            serving.OverflowCheck(lambda: _finish(op_name, flag, named, opts, arch, True, named_scalars, wait)),
        )
    _finish(op_name, flag, named, opts, arch, check_overflow, named_scalars)
    return o, lse


def kvcache_call(
    q,
    k_cache,
    v_cache,
    cache_seqlens,
    block_table,
    num_splits,
    max_seqlen_k,
    causal,
    pv_accum,
    config,
    softmax_scale,
    window_size,
    softcap,
    layout,
    quant,
    arch,
    stream,
    check_overflow,
    check_indices,
):
    """flashsim.gpu.attention_with_kvcache for torch tensors, from its own arguments (see there)."""
    opts, mode, option_args = resolved(
        causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant, check_overflow
    )
    if max_seqlen_k is not None and type(max_seqlen_k) is not int:  # a numpy int is an int here; else as named
        if not _is_int(max_seqlen_k):
            raise ValueError(f"max_seqlen_k must be None or an int, got {max_seqlen_k!r}")
        max_seqlen_k = int(max_seqlen_k)
    scalars = (0 if num_splits is None else num_splits, max_seqlen_k)
    return _call(
        "attention_with_kvcache",
        (q, k_cache, v_cache, cache_seqlens, block_table),
        scalars,
        opts,
        option_args,
        arch,
        stream,
        mode,
        check_indices,
    )


def varlen_call(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    causal,
    pv_accum,
    config,
    softmax_scale,
    window_size,
    softcap,
    layout,
    quant,
    arch,
    stream,
    check_overflow,
    check_indices,
):
    """flashsim.gpu.attention_varlen for torch tensors, from its own arguments (see there)."""
    opts, mode, option_args = resolved(
        causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant, check_overflow
    )
    return _call(
        "attention_varlen",
        (q, k, v, cu_seqlens_q, cu_seqlens_k),
        (max_seqlen_q, max_seqlen_k),
        opts,
        option_args,
        arch,
        stream,
        mode,
        check_indices,
    )
