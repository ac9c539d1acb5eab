"""flashsim.gpu.attention for cupy arrays: asynchronous on cupy's current stream (or ``stream=``), outputs from cupy's
memory pool. A repeated call looks its Plan up by a key of what the checks depend on (shapes, dtypes, devices,
contiguity, options): a key lookup, an alignment test of the three data pointers, the output allocations and the
launch. cupy is never imported here: the caller passes the module of its arrays."""

from __future__ import annotations

from ..overflow import OverflowCheck
from ..problem import Options, prepare
from . import launch
from . import runtime as rt

_KEYS: dict = launch.fast_keys()  # fast key -> Plan


def _key(q, k, v, opts, arch):
    return (
        q.shape,
        k.shape,
        v.shape,
        q.dtype,
        k.dtype,
        v.dtype,
        q.device.id,
        k.device.id,
        v.device.id,
        q.flags.c_contiguous,
        k.flags.c_contiguous,
        v.flags.c_contiguous,
        opts,
        arch,
    )


def _miss(cupy, key, q, k, v, opts, arch):
    for name, x in (("k", k), ("v", v)):
        if not isinstance(x, cupy.ndarray):
            raise ValueError(f"{name} must be a cupy array like q, got {type(x).__name__}")
        if x.device.id != q.device.id:
            raise ValueError(
                f"{name} is on device {x.device.id} but q is on device {q.device.id}: q, k and v must be on one device"
            )
    rt.require_gpu()
    if q.device.id != rt.device_id():
        raise ValueError(f"q is on device {q.device.id}, but flashsim.gpu runs on device {rt.device_id()}")
    gpu_arch = launch.check_arch(arch)
    prob = prepare(q, k, v, opts, arch=gpu_arch)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not x.flags.c_contiguous:
            raise ValueError(
                f"{name} must be C-contiguous, got strides {x.strides} for shape {x.shape} "
                "(cupy.ascontiguousarray first)"
            )
    plan = launch.plan_for(prob)
    if len(_KEYS) >= launch.MAX_KEYS:
        _KEYS.clear()
    _KEYS[key] = plan
    return plan


def _setup(cupy, q, k, v, opts, arch, stream):
    key = _key(q, k, v, opts, arch)
    plan = _KEYS.get(key)
    if plan is None:
        plan = _miss(cupy, key, q, k, v, opts, arch)
    qp, kp, vp = q.data.ptr, k.data.ptr, v.data.ptr
    if (qp | kp | vp) % launch.ALIGNMENT:
        launch.misaligned(q=qp, k=kp, v=vp)
    with q.device:
        o = cupy.empty(plan.o_shape, dtype=q.dtype)
        lse = cupy.empty(plan.lse_shape, dtype=cupy.float32)
        flag = cupy.full((1,), launch.NO_OVERFLOW, dtype=cupy.uint64) if plan.problem.config.pv_mma_f16 else None
        scratch = cupy.empty((plan.scratch_bytes,), dtype=cupy.uint8) if plan.scratch_bytes else None
        handle = cupy.cuda.get_current_stream().ptr if stream is None else rt.stream_handle(stream)
    args = (
        qp,
        kp,
        vp,
        o.data.ptr,
        lse.data.ptr,
        flag.data.ptr if flag is not None else 0,
        scratch.data.ptr if scratch is not None else 0,
    )
    return plan, rt.stream_from_handle(handle), args, o, lse, (flag, scratch)


def attention(cupy, q, k, v, opts: Options, arch, stream, check_overflow=True):
    """flashsim.gpu.attention for cupy arrays: on cupy's current stream (or ``stream``), outputs from cupy's pool,
    no wait unless the overflow check reads the flag."""
    plan, s, args, o, lse, (flag, _scratch) = _setup(cupy, q, k, v, opts, arch, stream)
    rt.bind_thread()
    launch.launch_plan(plan, s, *args)
    if check_overflow is True and flag is not None:
        launch.raise_if_overflowed(plan.problem, int(flag.get()[0]), v)  # .get() waits for the stream
    if check_overflow == "deferred":
        return (
            o,
            lse,
            OverflowCheck(
                None if flag is None else (lambda: launch.raise_if_overflowed(plan.problem, int(flag.get()[0]), v))
            ),
        )
    return o, lse


def prepared(cupy, q, k, v, opts: Options, arch, stream):
    """flashsim.gpu.prepared_launch for cupy arrays."""
    plan, s, args, o, lse, (flag, scratch) = _setup(cupy, q, k, v, opts, arch, stream)
    keep = (q, k, v, o, lse, flag, scratch)

    def go(sync=True, **parts):
        rt.bind_thread()
        launch.launch_plan(plan, s, *args, **parts)
        if sync:
            launch.sync_stream(s, plan.what)
        return keep

    return go, (o, lse), plan.problem
