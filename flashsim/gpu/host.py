"""flashsim.gpu.attention for numpy arrays, flashsim.gpu.runtime.DeviceArray and other DLPack arrays: synchronous,
on flashsim.gpu.runtime's stream (or ``stream=``)."""

from __future__ import annotations

import numpy as np

from ..numerics.formats import get_format
from ..overflow import OverflowCheck
from ..problem import Options, prepare
from . import launch
from . import runtime as rt


def prepared(q, k, v, opts: Options, arch, stream):
    """(launch, (o, lse), Problem) for numpy arrays, flashsim.gpu.runtime.DeviceArray or other DLPack arrays: host
    arrays copied to the GPU, GPU arrays borrowed (C-contiguous); outputs are DeviceArrays. ``launch(sync=True)``
    launches (and waits) and returns the memory it keeps alive, the overflow flag (or None) last."""
    rt.require_gpu()
    gpu_arch = launch.check_arch(arch)
    prob = prepare(q, k, v, opts, arch=gpu_arch)
    dq, dk, dv = (rt.to_device(x) for x in (q, k, v))  # host arrays copied; GPU arrays borrowed (C-contiguous)
    launch.misaligned(q=dq.ptr, k=dk.ptr, v=dv.ptr)
    plan = launch.plan_for(prob)
    do, dl = rt.empty(plan.o_shape, get_format(prob.config.dtype).dtype), rt.empty(plan.lse_shape, np.float32)
    s = rt.as_stream(stream)
    flag = rt.to_device(np.array([launch.NO_OVERFLOW], np.uint64)) if prob.config.pv_mma_f16 else None
    scratch = rt.empty((plan.scratch_bytes,), np.uint8) if plan.scratch_bytes else None
    args = (
        dq.ptr,
        dk.ptr,
        dv.ptr,
        do.ptr,
        dl.ptr,
        flag.ptr if flag is not None else 0,
        scratch.ptr if scratch is not None else 0,
    )
    keep = (dq, dk, dv, do, dl, scratch, flag)  # the memory stays alive as long as the launch

    def go(sync=True, **parts):
        if s is not rt.default_stream():
            rt.synchronize()  # copies / DLPack imports ran on the module's stream
        rt.bind_thread()
        launch.launch_plan(plan, s, *args, **parts)
        if sync:
            launch.sync_stream(s, plan.what)
        return keep

    return go, (do, dl), prob


def attention(q, k, v, opts: Options, *, arch=None, stream=None, check_overflow=True):
    """flashsim.gpu.attention for numpy arrays and other non-torch, non-cupy arrays (synchronous): numpy in, numpy
    out; otherwise DeviceArray outputs. ``check_overflow`` as there (a checked mode, flashsim.overflow.check_mode)."""
    go, (do, dl), prob = prepared(q, k, v, opts, arch, stream)
    flag = go(sync=True)[-1]
    if check_overflow is True and flag is not None:
        launch.raise_if_overflowed(prob, flag.to_numpy()[0], v)
    out = (do.to_numpy(), dl.to_numpy()) if all(isinstance(x, np.ndarray) for x in (q, k, v)) else (do, dl)
    if check_overflow == "deferred":
        check = None if flag is None else (lambda: launch.raise_if_overflowed(prob, flag.to_numpy()[0], v))
        return (*out, OverflowCheck(check))
    return out
