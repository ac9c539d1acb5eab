"""flashsim.gpu.attention: kernel/flash_fwd.cu on the GPU, the same contract as flashsim.attention, at the kernel's
speed; the call dispatches to the front-end of its inputs' library.

``attention(q, k, v, ...)`` returns what it is given:

* torch tensors -> torch tensors, through the custom op ``torch.ops.flashsim.attention`` (flashsim.gpu.torch_op,
  registered on the first call with a torch tensor; ``import flashsim.gpu.torch_op`` registers it up front). CUDA
  tensors: the launch goes on torch's current stream (or ``stream=``), the outputs come from torch's caching
  allocator, and nothing waits for the GPU, so the call works under torch.compile(fullgraph=True) and inside
  torch.cuda.graph capture. CPU tensors are copied through the GPU synchronously.
* cupy arrays -> cupy arrays: cupy's current stream (or ``stream=``), outputs from cupy's memory pool, no wait.
* numpy arrays -> numpy arrays (copied to the GPU and back; synchronous). Other GPU arrays with DLPack (and
  flashsim.gpu.runtime.DeviceArray) -> DeviceArray outputs (synchronous).

Caching. Everything a launch needs for one Problem is built once (flashsim.gpu.launch). The torch and cupy paths
look the Problem up by a
key of what the checks depend on (shapes, dtypes, devices, contiguity, options), so a repeated call does a key
lookup, an alignment test of the three data pointers, two output allocations and the launch. The first call for
a key validates everything and raises ValueError naming the argument before anything is launched.

CUDA graphs. Capture is legal once the shape has been called before outside capture (the cache then holds the
loaded kernel; a first call inside a capture raises GPUError instead of loading a module mid-capture).

Safety. GPU inputs must be C-contiguous and 16-byte aligned (the kernel reads them with 16-byte cp.async; a
misaligned address would fault and poison the CUDA context), all on the device flashsim.gpu.runtime uses; ``arch``
must name that device's architecture; ``causal``, ``pv_accum`` and ``config.head_dim`` must agree with ``config``.
"""

from __future__ import annotations

import sys

from ..overflow import check_mode
from ..problem import resolve_options
from ..serving.problem import serving_options
from . import cupy_api, host
from . import serving as serving_launch


def attention(
    q,
    k,
    v,
    *,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    arch=None,
    config=None,
    stream=None,
    check_overflow=True,
):
    """Run the real kernel: (o, lse) with o shaped like q, of q's dtype, and lse float32 (B, Hq, Nq), natural log.

    The same inputs and options as flashsim.attention (q (B, Hq, Nq, d), k and v (B, Hkv, Nk, d), or (B, N, H, d)
    with layout="bnhd"; float16 or bfloat16; causal, window_size, softcap, quant, pv_accum, softmax_scale, config,
    checked
    by flashsim.problem.resolve_options and prepare). arch: must name the GPU's architecture (default: it). stream:
    where the launch goes (a torch or
    cupy stream, a cuda.core Stream, a raw handle or any __cuda_stream__ object; default: torch's or cupy's
    current stream for their arrays, flashsim.gpu.runtime's stream otherwise); the inputs must be ready on it.
    Output types follow the inputs (module docstring): torch and cupy calls return without waiting for the GPU.
    With an f16 P@V mma (pv_accum "f16" / "f16x2") a row whose f16 accumulator overflowed raises
    FloatingPointError naming it (flashsim.overflow): that check waits for the GPU; check_overflow=False skips it
    (no host synchronisation, the kernel's inf / NaN is returned; needed under torch.compile and CUDA graphs);
    check_overflow="deferred" returns (o, lse, check): the flag is written by the kernel and ``check()`` reads it
    when the caller chooses (it waits for the kernel then, and raises the same error).
    """
    check_overflow = check_mode(check_overflow)
    opts = resolve_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
    torch = sys.modules.get("torch")  # never imported here: a torch tensor implies it already is
    if torch is not None and isinstance(q, torch.Tensor):
        from . import torch_op  # registers the op (cached in sys.modules after the first call)

        return torch_op.attention(q, k, v, opts, arch=arch, stream=stream, check_overflow=check_overflow)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(q, cupy.ndarray):
        return cupy_api.attention(cupy, q, k, v, opts, arch, stream, check_overflow)
    return host.attention(q, k, v, opts, arch=arch, stream=stream, check_overflow=check_overflow)


def prepared_launch(
    q,
    k,
    v,
    *,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    config=None,
    stream=None,
    arch=None,
):
    """(launch, (o, lse), Problem): inputs checked and on the device, outputs allocated (torch / cupy / DeviceArray
    like ``attention``), the launch cached, so that ``launch(sync=True)`` does no host work but the launch (and
    the wait, with sync=True). The stream is fixed now: ``stream=``, else torch's / cupy's current stream for
    their arrays, else flashsim.gpu.runtime's stream. ``flashsim bench kernel`` times ``launch(sync=False)``."""
    opts = resolve_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
    torch = sys.modules.get("torch")  # never imported here: a torch tensor implies it already is
    if torch is not None and isinstance(q, torch.Tensor):
        from . import torch_op  # registers the op

        return torch_op.prepared_launch(q, k, v, opts, arch=arch, stream=stream)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(q, cupy.ndarray):
        return cupy_api.prepared(cupy, q, k, v, opts, arch, stream)
    return host.prepared(q, k, v, opts, arch, stream)


# -- serving: a KV cache (contiguous or paged) and variable-length batches ---------------------------------------


def _device_problem(prepare, arch, *args, **kwargs):
    """``prepare`` (flashsim.serving.problem's) for the current GPU: its arch (``arch`` must name it) and its SMs."""
    from . import launch
    from . import runtime as rt

    rt.require_gpu()
    return prepare(*args, arch=launch.check_arch(arch), **kwargs)


def _serving_torch():
    """flashsim.gpu.serving_torch (importing it registers the torch ops), looked up once."""
    mod = _SERVING_TORCH.get("mod")
    if mod is None:
        from . import serving_torch as mod

        _SERVING_TORCH["mod"] = mod
    return mod


_SERVING_TORCH: dict = {}


def attention_with_kvcache(
    q,
    k_cache,
    v_cache,
    *,
    cache_seqlens=None,
    block_table=None,
    num_splits=None,
    max_seqlen_k=None,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    arch=None,
    config=None,
    stream=None,
    check_overflow=True,
    check_indices=True,
):
    """The real kernel over a KV cache: flashsim.attention_with_kvcache's contract and bits, on the GPU (flash_fwd,
    then with split-KV flash_combine, on one stream). Output types follow the inputs as flashsim.gpu.attention's
    do (torch: the op torch.ops.flashsim.attention_with_kvcache; cupy; numpy, synchronous). num_splits=None chooses
    for this GPU's SMs (flashsim.serving.splits) over the key tiles of ``max_seqlen_k`` (the longest row the caller
    states, FlashAttention's name; None: the cache's capacity), never from the lengths' values. With the index
    tensors on the GPU (torch, cupy) nothing is copied back and nothing waits: the call can be captured in a CUDA
    graph. ``check_indices``: check cache_seqlens and block_table (host arrays on the host before the launch; GPU
    ones by a check kernel on the device, whose ValueError is raised when its record is read: at the next serving
    call, where this call reads its overflow flag, in a deferred check, or by flashsim.gpu.check_index_errors());
    False leaves the check out. Either way the kernel clamps every index it reads: nothing outside the caches is
    read."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(q, torch.Tensor):  # first: the decode loop's path, its options cached there
        return _serving_torch().kvcache_call(
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
        )
    from ..serving.problem import prepare_kvcache
    from . import runtime as rt

    check_overflow = check_mode(check_overflow)
    opts = serving_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
    prob = _device_problem(
        prepare_kvcache,
        arch,
        q,
        k_cache,
        v_cache,
        cache_seqlens,
        block_table,
        num_splits,
        opts=opts,
        sm_count=rt.sm_count() if rt.gpu_available()[0] else None,
        max_seqlen_k=max_seqlen_k,
    )
    arrays = dict(cache_seqlens=cache_seqlens, block_table=block_table)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(q, cupy.ndarray):
        return serving_launch.run_cupy(
            cupy, q, k_cache, v_cache, prob, arrays, stream=stream, check=check_indices, check_overflow=check_overflow
        )
    return serving_launch.run_host(
        q, k_cache, v_cache, prob, arrays, stream=stream, check=check_indices, check_overflow=check_overflow
    )


def attention_varlen(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    *,
    causal=None,
    softmax_scale=None,
    pv_accum=None,
    window_size=None,
    softcap=None,
    layout=None,
    quant=None,
    arch=None,
    config=None,
    stream=None,
    check_overflow=True,
    check_indices=True,
):
    """The real kernel over a variable-length batch: flashsim.attention_varlen's contract and bits on the GPU
    (torch: torch.ops.flashsim.attention_varlen; cupy; numpy). ``check_indices`` as attention_with_kvcache's
    (cu_seqlens_q / cu_seqlens_k, on the device for GPU arrays); no copy back, no wait, capturable likewise."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(q, torch.Tensor):
        return _serving_torch().varlen_call(
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
        )
    from ..serving.problem import prepare_varlen

    check_overflow = check_mode(check_overflow)
    opts = serving_options(causal, pv_accum, config, softmax_scale, window_size, softcap, layout, quant)
    prob = _device_problem(
        prepare_varlen, arch, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, opts=opts
    )
    arrays = dict(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(q, cupy.ndarray):
        return serving_launch.run_cupy(
            cupy, q, k, v, prob, arrays, stream=stream, check=check_indices, check_overflow=check_overflow
        )
    return serving_launch.run_host(
        q, k, v, prob, arrays, stream=stream, check=check_indices, check_overflow=check_overflow
    )


def check_index_errors(wait: bool = True) -> None:
    """Raise the ValueError of a bad index that a serving call's check kernel (eager, or replayed in a CUDA graph)
    found on the GPU since the record was last read, naming the argument and the entry; ``wait``: first wait for
    all work on the device, so that every check launched so far has run (a host synchronisation)."""
    from . import serving

    serving.check_index_errors(wait)
