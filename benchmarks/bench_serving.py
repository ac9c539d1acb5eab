"""The serving speed table on the GPU: decode, speculative decoding, paged caches, varlen and prefill, the kernel
beside torch SDPA's FlashAttention-2 and cuDNN backends in the same run.

    python3 benchmarks/bench_serving.py --json bench_serving.json [--sweep] [--quick | --decode] [--flush read]
    python3 benchmarks/bench_serving.py --call --json bench_call.json      # the public call beside FA2 alone

Every time is the median (milliseconds, shown in us) of a CUDA graph replaying one call (the kernels alone: the
host's per-call work is apart, reported for ours as "eager" beside it), timed as triton.testing.do_bench times (25 ms
of warm-up, 100 ms of timed calls, each between two events after the L2 is emptied by a 256 MB buffer). How the L2 is
emptied is ``--flush``: "zero" (the default: do_bench's own, which writes the buffer with zeros) leaves the L2 full of
dirty lines that the timed kernel's own traffic must write back: on an H100 the decode's load path alone took 8.8 us
longer inside its own blocks after it than with no emptying at all (benchmarks/experiments/decode_bulk/overhead.py),
about 9% of a 100-us decode but 1.4% of the 1 GiB copy the "of copy" rates divide by. "read" reads the buffer
instead: an L2 as cold, and clean, as a decode's is after the layer's projections in a model. Rows:

* decode: B=8, Hq=32, Hkv=8, Nq=1, Nk=8192, d=128, bf16, contiguous cache (cache_seqlens all 8192), num_splits
  chosen by the heuristic; its K and V bytes over its time against the copy bandwidth measured here (torch's
  device-to-device copy, bytes read plus written); FA2 and cuDNN on the same cache (transposed views, GQA); with
  splits also "serial_combine": the combine launched in stream order instead of as flash_fwd's programmatic
  dependent (flashsim.gpu.serving.OVERLAP_COMBINE).
* B=1, Nk=32768 (d=128), and d=64 / d=256 at the decode shape, beside FA2.
* speculative: Nq=16 causal (bottom-right: SDPA's causal_lower_right), beside cuDNN and FA2.
* paged: the decode shape in pages of 16 and of 256 keys in a shuffled order, against the contiguous cache.
* varlen: 16 sequences of lengths drawn from 1..4096 (seed 0), causal, Hq=Hkv=16, d=128, f16, TFLOP/s against the
  dense kernel on one sequence with the same causal work (N = sqrt(sum n_i^2)).
* prefill: flashsim.gpu.attention at 4,16,4096,128 f16 (full and causal), TFLOP/s, the regression check against
  benchmarks/RESULTS.md's bench kernel table.
* sm_120: the decode configuration's budget there (ptxas, occupancy) and a predicted time on the RTX 5090 (1.79
  TB/s, NVIDIA's spec): the decode's bytes at the fraction of copy bandwidth it reached on this GPU. A prediction.
* --sweep: every decode shape with the neighbouring tilings and split counts (what a change of
  flashsim.tuning.decode_tiling or of the split choice needs to be measured).
* --call (these rows alone): the public call flashsim.gpu.attention_with_kvcache as a user makes it (torch tensors,
  cache_seqlens on the GPU, default arguments: the index check on the device, no host copy) on the decode shapes
  (B=8 Hq=32 Hkv=8 Nk=8192 d=128 bf16; d=64; B=1 Nk=32768; B=1 Nk=2048), in each of its forms (CALL_FORMS: "serial",
  the index check, flash_fwd and the combine in stream order; "pdl", flash_fwd launched as the check's programmatic
  dependent, flashsim.gpu.serving.OVERLAP_CHECK; "fused", the check inside flash_fwd, FUSED; "call" is the default's
  row): its CUDA-graph replay, eager (do_bench of the call: what a loop of calls gets) and the host time per call
  (host_us: the median of 9 rounds of 50 back-to-back calls without a synchronisation); the kernels alone (a graph
  of the unchecked call: "kernel", and "fused_kernel" of the fused build); the host time of the bare launches
  (flashsim.gpu.serving.launch_serving), of the torch op without the Python wrapper, and of the op's body without the
  dispatcher, what the public call runs eagerly (flashsim.gpu.serving_torch._enqueue); beside FA2 through torch SDPA
  and flash_attn.flash_attn_with_kvcache where it is importable, measured alike.

The JSON holds every row (times, bytes, rates, targets met or not, the configuration and split count of ours, and
errors); the text is printed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time

import numpy as np

COPY_BYTES = 1 << 30
FLUSH_BYTES = 256 * 10**6  # the buffer that empties the L2 between timed calls (triton.testing.do_bench's size)
FLUSHES = {  # how it is emptied (module docstring); --flush picks one for the whole run
    "zero": lambda buf: buf.zero_(),  # triton.testing.do_bench's: written, so the lines stay dirty in L2
    "read": lambda buf: buf.sum(),  # read: the lines stay clean
}
FLUSH = "zero"  # the run's method where a timing names none: main() sets it from --flush before any timing
WARMUP_MS, REP_MS = 25, 100  # do_bench's warm-up and timed durations
RTX5090_TB_S = 1.79  # NVIDIA's RTX 5090 memory bandwidth (spec sheet), a prediction's input


def _do_bench(fn, flush=None):
    """Median ms of ``fn`` timed as triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") times it
    (the call count from an estimate over 5 calls, a warm-up, then each timed call between two events after the L2 is
    emptied), the L2 emptied by ``flush``'s method (FLUSHES; None: the run's, FLUSH)."""
    import torch

    flush, buf = FLUSHES[flush or FLUSH], _flush_buffer()
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush(buf)
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = start.elapsed_time(end) / 5
    for _ in range(max(1, int(WARMUP_MS / estimate))):
        fn()
    n = max(1, int(REP_MS / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        flush(buf)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return float(statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)))


_FLUSH_BUFFER: list = []  # the one flush buffer of the process, made at the first timing


def _flush_buffer():
    import torch

    if not _FLUSH_BUFFER:
        _FLUSH_BUFFER.append(torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda"))
    return _FLUSH_BUFFER[0]


def graph_of(fn):
    """The replay of a CUDA graph holding one call of ``fn`` (captured after a warm call on the capture stream)."""
    import torch

    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # a warm call on the capture stream
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def timed(fn, flush=None):
    """(ms per call of a CUDA graph replaying ``fn``, or of ``fn`` itself if it cannot be captured; the method), the
    L2 emptied by ``flush`` (as _do_bench)."""
    import torch

    try:
        replay = graph_of(fn)
    except Exception as exc:  # noqa: BLE001 - a backend that cannot be captured is timed eagerly
        torch.cuda.synchronize()
        return _do_bench(fn, flush), f"eager ({type(exc).__name__})"
    return _do_bench(replay, flush), "graph"


def copy_bandwidth():
    """TB/s of torch's device-to-device copy of 1 GiB, bytes read plus written."""
    import torch

    src = torch.empty(COPY_BYTES // 2, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = _do_bench(lambda: dst.copy_(src))
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e12


def sdpa(name, q, k, v, causal_lower_right=False):
    """A function calling torch SDPA's backend ``name`` ("FA2" or "cuDNN") on (B, H, N, d) views, GQA enabled."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = {"FA2": SDPBackend.FLASH_ATTENTION, "cuDNN": SDPBackend.CUDNN_ATTENTION}[name]
    mask = None
    if causal_lower_right:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(q.shape[2], k.shape[2])
    gqa = q.shape[1] != k.shape[1]

    def fn():
        with sdpa_kernel(backend):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)

    return fn


def cache(b, n, h, hk, d, dtype, seed=0):
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn((b, 1, h, d), generator=g, device="cuda", dtype=torch.float32).to(dtype)
    k = torch.randn((b, n, hk, d), generator=g, device="cuda", dtype=torch.float32).to(dtype)
    v = torch.randn((b, n, hk, d), generator=g, device="cuda", dtype=torch.float32).to(dtype)
    return q, k, v


def paged(k, v, page_size, seed=0):
    """(k pages, v pages, block table) of the caches in a shuffled page order."""
    import torch

    b, n, hk, d = k.shape
    per = n // page_size
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(b * per).astype(np.int32)).cuda()
    table = perm.reshape(b, per)
    kp = torch.empty((b * per, page_size, hk, d), dtype=k.dtype, device="cuda")
    vp = torch.empty_like(kp)
    kp[table.reshape(-1).long()] = k.reshape(b * per, page_size, hk, d)
    vp[table.reshape(-1).long()] = v.reshape(b * per, page_size, hk, d)
    return kp, vp, table


def ours(q, k, v, **kw):
    """(fn, ServingProblem) of flashsim.gpu.attention_with_kvcache, unchecked (no host copy, graph-capturable)."""
    import flashsim
    from flashsim.gpu import runtime as rt
    from flashsim.problem import resolve_options
    from flashsim.serving import prepare_kvcache

    kw = dict(kw, check_indices=False, check_overflow=False)
    flashsim.gpu.attention_with_kvcache(q, k, v, **kw)
    opts = resolve_options(kw.get("causal"), None, kw.get("config"), None, None, None, "bnhd", None)
    prob = prepare_kvcache(
        q,
        k,
        v,
        kw.get("cache_seqlens"),
        kw.get("block_table"),
        kw.get("num_splits"),
        opts=opts,
        arch=rt.current_arch(),
        sm_count=rt.sm_count(),
    )
    return (lambda: flashsim.gpu.attention_with_kvcache(q, k, v, **kw)), prob


def equals_one_warp_call(fn, q, k, v, config, num_splits=1, **kw) -> bool:
    """True when ``fn()``'s O and LSE are bit for bit those of the one-warp call of warp_split ``config``'s tiles with
    ``num_splits`` x W splits (what a warp_split call with ``num_splits`` blocks a row group must give); ``kw``: the
    call's cache_seqlens / block_table."""
    import torch

    o, lse = fn()
    one = config.with_(warps=1, warp_split=1)
    o1, lse1 = ours(q, k, v, config=one, num_splits=num_splits * config.warp_split, **kw)[0]()
    return bool(
        torch.equal(o.view(torch.int16), o1.view(torch.int16))
        and torch.equal(lse.view(torch.int32), lse1.view(torch.int32))
    )


def split_call_splits(q, k, v, cache_seqlens, block_table=None, arch=None, sm_count=None) -> int:
    """The split count of the default call without flashsim.tuning's warp_split rule (the one-warp split call), on
    ``arch`` with ``sm_count`` SMs (default: this GPU's)."""
    from flashsim import tuning
    from flashsim.gpu import runtime as rt
    from flashsim.problem import resolve_options
    from flashsim.serving import prepare_kvcache

    was, tuning.WARP_SPLIT_DECODE = tuning.WARP_SPLIT_DECODE, False
    try:
        prob = prepare_kvcache(
            q,
            k,
            v,
            cache_seqlens,
            block_table,
            None,
            opts=resolve_options(layout="bnhd"),
            arch=arch or rt.current_arch(),
            sm_count=sm_count if arch else rt.sm_count(),
        )
    finally:
        tuning.WARP_SPLIT_DECODE = was
    return prob.num_splits


HOST_CALLS = 50  # back-to-back calls timed for the host time per call (3 launches each: inside the launch queue)
HOST_ROUNDS = 9  # rounds of HOST_CALLS: the median resists the host's spikes (one round of 100 varied 25-43 us)


def host_us(fn, n=HOST_CALLS, rounds=HOST_ROUNDS):
    """Host time per call of ``fn`` in us: the wall time of ``n`` calls without a synchronisation (after a warm-up
    and a synchronisation), divided by n, the median of ``rounds`` such rounds; the GPU's queue absorbs the
    launches meanwhile."""
    import torch

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(runs)


def _measure(r, prefix, fn, host=True):
    """Graph replay, eager and host time of ``fn`` into row ``r`` (keys prefix_graph_us, prefix_eager_us,
    prefix_host_us); an error is recorded, the row goes on."""
    try:
        ms, how = timed(fn)
        r[f"{prefix}_graph_us" if how == "graph" else f"{prefix}_eager_only_us"] = ms * 1e3
        r[f"{prefix}_eager_us"] = _do_bench(fn) * 1e3
        if host:
            r[f"{prefix}_host_us"] = host_us(fn)
    except Exception as exc:  # noqa: BLE001 - recorded
        r[f"{prefix}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"


def bench_call(rows, args):
    """The public call beside the launches alone and FA2 (module docstring, --call)."""
    import torch

    try:
        from flash_attn import flash_attn_with_kvcache
    except Exception:  # noqa: BLE001 - not installed: SDPA's FA2 alone
        flash_attn_with_kvcache = None
    shapes = [
        ("call decode", 8, 8192, 128),
        ("call decode d=64", 8, 8192, 64),
        ("call decode B=1 Nk=32768", 1, 32768, 128),
        ("call decode B=1 Nk=2048", 1, 2048, 128),
    ]
    for name, b, n, d in shapes[: 1 if args.quick else None]:  # --quick: the first row alone
        call_row(rows, name, b, n, d, flash_attn_with_kvcache)
        torch.cuda.empty_cache()


def kvcache_plan(b, n, d, splits=None):
    """(ServingProblem, ServingPlan) of the KV-cache call already made on a cache of B=b, Nk=n, d (with ``splits``
    splits, if given): what the torch call planned and launches (flashsim.gpu.serving_torch's call cache)."""
    from flashsim.gpu import serving_torch

    return next(
        (hit.prob, hit.plan)
        for hit in serving_torch._KEYS.values()
        if (hit.prob.batch, hit.prob.nk_cap, hit.prob.head_dim, hit.prob.kind) == (b, n, d, "kvcache")
        and splits in (None, hit.prob.num_splits)
    )


# The forms of the public call (flashsim.gpu.serving's switches): three launches, flash_fwd as the check's
# programmatic dependent (OVERLAP_CHECK), the check inside flash_fwd (FUSED: one launch fewer)
CALL_FORMS = {
    "serial": dict(OVERLAP_CHECK=False, FUSED=False),
    "pdl": dict(OVERLAP_CHECK=True, FUSED=False),
    "fused": dict(FUSED=True),
}


def default_form() -> str:
    """The CALL_FORMS entry the call runs with flashsim.gpu.serving's switches as they are."""
    from flashsim.gpu import serving as gs

    return "fused" if gs.FUSED else "pdl" if gs.OVERLAP_CHECK else "serial"


def call_row(rows, name, b, n, d, flash_attn_with_kvcache=None):
    """One --call row: decode B x Hq=32 x Hkv=8 x Nk=n x d, bf16, cache_seqlens on the GPU."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import flashsim
    from flashsim.gpu import serving as gs
    from flashsim.gpu import serving_torch
    from flashsim.gpu.torch_op import _raw_stream

    q, k, v = cache(b, n, 32, 8, d, torch.bfloat16)
    sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
    r = row(rows, name, shape=dict(B=b, Hq=32, Hkv=8, Nq=1, Nk=n, d=d, dtype="bf16"))
    r["bytes"] = 2 * k.numel() * k.element_size()

    def call():
        return flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl)

    def unchecked():
        return flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=sl, check_indices=False)

    try:
        call()
        unchecked()
        prob, plan = kvcache_plan(b, n, d)
        r["config"], r["num_splits"] = prob.config.describe(), prob.num_splits
    except Exception as exc:  # noqa: BLE001
        r["error"] = f"{type(exc).__name__}: {exc}"
        return
    for form, flags in CALL_FORMS.items():  # each form of the call, then the kernels alone of its build
        saved = {name: getattr(gs, name) for name in flags}
        try:
            for name, value in flags.items():
                setattr(gs, name, value)
            call()
            _measure(r, form, call)
            if form in ("serial", "fused"):  # (pdl's unchecked launches are serial's)
                _measure(r, "kernel" if form == "serial" else "fused_kernel", unchecked, host=False)
        finally:
            for name, value in saved.items():
                setattr(gs, name, value)
    default = default_form()
    for what in ("graph", "eager", "host"):  # the call as it runs by default is one of the forms
        if f"{default}_{what}_us" in r:
            r[f"call_{what}_us"] = r[f"{default}_{what}_us"]
    r["default_form"] = default
    op_args = (q, k, v, sl, None, 0, None, False, None, "f32", [], None, False, [-1, -1], 0.0, True)
    r["op_host_us"] = host_us(lambda: serving_torch.KVCACHE_OP(*op_args))
    r["body_host_us"] = host_us(lambda: serving_torch._enqueue("attention_with_kvcache", *op_args))
    o, lse = torch.empty_like(q), torch.empty((b, 32, 1), dtype=torch.float32, device="cuda")
    parts = torch.empty((max(plan.part_bytes, 1),), dtype=torch.uint8, device="cuda")
    ptrs = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr())
    ptrs.update(seqlens_k=sl.data_ptr(), parts=parts.data_ptr())
    stream = _raw_stream(q.get_device())  # the raw handle, as the call passes it
    r["launch_host_us"] = host_us(lambda: gs.launch_serving(plan, stream, ptrs))
    if "call_graph_us" in r:
        r["tb_s"] = r["bytes"] / (r["call_graph_us"] * 1e-6) / 1e12
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):  # entered once: its own cost is not the call's
        _measure(r, "FA2", lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True))
    if flash_attn_with_kvcache is not None:
        _measure(r, "flash_attn", lambda: flash_attn_with_kvcache(q, k, v, cache_seqlens=sl))
    fa = r.get("flash_attn_host_us", r.get("FA2_host_us"))
    if fa is not None and "call_host_us" in r:
        r["target"] = "host time per call at most FA2's (aim 10 us); the call's graph replay near the kernels'"
        r["met"] = r["call_host_us"] <= fa


def varlen_lengths():
    """The varlen row's 16 sequence lengths, drawn from 1..4096 with seed 0."""
    return np.random.default_rng(0).integers(1, 4097, 16)


def dense_equal_work(lens) -> int:
    """N of the one dense sequence with the causal work of sequences of ``lens``: sqrt(sum n_i^2), to a multiple of
    128."""
    return int(round(math.sqrt(float((np.asarray(lens, np.float64) ** 2).sum())) / 128) * 128)


def row(rows, name, **fields):
    rows.append(dict(name=name, **fields))
    return rows[-1]


def _serial_combine(fn):
    """us per graph replay of ``fn`` with flash_combine launched in plain stream order, not as flash_fwd's
    programmatic dependent (flashsim.gpu.serving.OVERLAP_COMBINE off): what the overlap gains."""
    from flashsim.gpu import serving as gs

    overlap = gs.OVERLAP_COMBINE
    try:
        gs.OVERLAP_COMBINE = False
        return timed(fn)[0] * 1e3
    finally:
        gs.OVERLAP_COMBINE = overlap


# The decode rows: (name, B, Nk, d), Hq 32, Hkv 8, one query row, bf16 (the experiments of
# benchmarks/experiments/decode_bulk time the same rows)
DECODE_SHAPES = [
    ("decode", 8, 8192, 128),
    ("decode B=1 Nk=32768", 1, 32768, 128),
    ("decode d=64", 8, 8192, 64),
    ("decode d=256", 8, 8192, 256),
]


def bench_decode(rows, bw, args):
    import torch

    bf16 = torch.bfloat16
    for name, b, n, d in DECODE_SHAPES[: 1 if args.quick else None]:  # --quick: the first row alone
        q, k, v = cache(b, n, 32, 8, d, bf16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        r = row(rows, name, shape=dict(B=b, Hq=32, Hkv=8, Nq=1, Nk=n, d=d, dtype="bf16"))
        r["bytes"] = 2 * k.numel() * k.element_size()
        try:
            fn, prob = ours(q, k, v, cache_seqlens=sl)
            r["config"], r["num_splits"] = prob.config.describe(), prob.num_splits
            ms, r["method"] = timed(fn)
            r["ours_us"] = ms * 1e3
            r["eager_us"] = _do_bench(fn) * 1e3
            r["eager_host_us"] = host_us(fn)
            r["tb_s"] = r["bytes"] / (ms * 1e-3) / 1e12
            r["copy_fraction"] = r["tb_s"] / bw
            if prob.config.split:  # the combine launched after flash_fwd in stream order instead of overlapped
                r["serial_combine_us"] = _serial_combine(fn)
            if prob.config.warp_split > 1:  # the decode rule's warp_split form: the split call it replaced beside it
                n = split_call_splits(q, k, v, sl)
                r["split_call_us"] = timed(ours(q, k, v, cache_seqlens=sl, num_splits=n)[0])[0] * 1e3
                r["split_call_copy_fraction"] = r["bytes"] / (r["split_call_us"] * 1e-6) / 1e12 / bw
        except Exception as exc:  # noqa: BLE001 - recorded, the table goes on
            r["error"] = f"{type(exc).__name__}: {exc}"
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        for other in ("FA2", "cuDNN"):
            try:
                r[f"{other}_us"] = timed(sdpa(other, qt, kt, vt))[0] * 1e3
            except Exception as exc:  # noqa: BLE001
                r[f"{other}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        if name == "decode":
            r["target"] = "at most FA2's time and >= 80% of the copy bandwidth (aim 90%)"
            if "ours_us" in r and "FA2_us" in r:
                r["met"] = r["ours_us"] <= r["FA2_us"] and r["copy_fraction"] >= 0.8
        elif "ours_us" in r and "FA2_us" in r:
            r["target"] = "beside FA2"
            r["vs_FA2"] = r["FA2_us"] / r["ours_us"]
        if name == "decode" and not args.quick:
            for page_size in (16, 256):
                p = row(rows, f"decode paged {page_size}", shape=r["shape"], bytes=r["bytes"])
                try:
                    kp, vp, table = paged(k, v, page_size)
                    fn, prob = ours(q, kp, vp, cache_seqlens=sl, block_table=table)
                    p["config"], p["num_splits"] = prob.config.describe(), prob.num_splits
                    ms, p["method"] = timed(fn)
                    p["ours_us"] = ms * 1e3
                    if "ours_us" in r:
                        p["vs_contiguous"] = p["ours_us"] / r["ours_us"]
                        p["target"] = "within 5% of the contiguous cache"
                        p["met"] = p["vs_contiguous"] <= 1.05
                except Exception as exc:  # noqa: BLE001
                    p["error"] = f"{type(exc).__name__}: {exc}"
                del kp, vp
        if args.sweep:
            sweep(rows, q, k, v, sl, r, name)


SWEEP_TILINGS = ((16, 3), (32, 2), (32, 3), (64, 2), (64, 3), (128, 2))  # (kv_tile, stages), one warp
SWEEP_SPLITS = (1, 2, 3, 4, 6, 8, 9, 10, 11, 12, 16, 20, 24, 32, 40, 48, 64)


def sweep(rows, q, k, v, sl, base, name):
    """A decode shape with neighbouring tilings (one warp; kv_tile, stages: those whose shared memory fits) and split
    counts: what a change of flashsim.tuning.decode_tiling or of the split choice needs to be measured."""
    from flashsim import KernelConfig
    from flashsim.errors import UnsupportedConfig

    d = q.shape[-1]
    for kv_tile, stages in SWEEP_TILINGS:
        cfg = KernelConfig(head_dim=d, warps=1, m_tiles=1, kv_tile=kv_tile, stages=stages, dtype="bf16", layout="bnhd")
        s = row(rows, f"sweep {name} 1x{kv_tile}x{stages}", shape=base["shape"], bytes=base["bytes"])
        try:
            fn, prob = ours(q, k, v, cache_seqlens=sl, config=cfg)
            s["config"], s["num_splits"] = prob.config.describe(), prob.num_splits
            s["ours_us"] = timed(fn)[0] * 1e3
        except UnsupportedConfig as exc:  # a neighbour this GPU cannot hold (d = 256's widest tile): not a failure
            s["not_run"] = str(exc)
        except Exception as exc:  # noqa: BLE001
            s["error"] = f"{type(exc).__name__}: {exc}"
    for splits in SWEEP_SPLITS:
        s = row(rows, f"sweep {name} splits={splits}", shape=base["shape"], bytes=base["bytes"])
        try:
            fn, prob = ours(q, k, v, cache_seqlens=sl, num_splits=splits)
            s["config"], s["num_splits"] = prob.config.describe(), prob.num_splits
            s["ours_us"] = timed(fn)[0] * 1e3
        except Exception as exc:  # noqa: BLE001
            s["error"] = f"{type(exc).__name__}: {exc}"


def bench_speculative(rows, args):
    import torch

    b, n, nq = 8, 8192, 16
    q, k, v = cache(b, n, 32, 8, 128, torch.bfloat16)
    q = torch.randn((b, nq, 32, 128), device="cuda").to(torch.bfloat16)
    sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
    r = row(rows, "speculative Nq=16 causal", shape=dict(B=b, Hq=32, Hkv=8, Nq=nq, Nk=n, d=128, dtype="bf16"))
    try:
        fn, prob = ours(q, k, v, cache_seqlens=sl, causal=True)
        r["config"], r["num_splits"] = prob.config.describe(), prob.num_splits
        ms, r["method"] = timed(fn)
        r["ours_us"] = ms * 1e3
    except Exception as exc:  # noqa: BLE001
        r["error"] = f"{type(exc).__name__}: {exc}"
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    for other in ("cuDNN", "FA2"):
        try:
            r[f"{other}_us"] = timed(sdpa(other, qt, kt, vt, causal_lower_right=True))[0] * 1e3
        except Exception as exc:  # noqa: BLE001
            r[f"{other}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    r["target"] = "at most cuDNN's time"
    if "ours_us" in r and "cuDNN_us" in r:
        r["met"] = r["ours_us"] <= r["cuDNN_us"]


def _pairs_causal(n):
    return n * (n + 1) // 2


def bench_varlen(rows, args):
    import torch

    import flashsim
    from flashsim.gpu import runtime as rt
    from flashsim.problem import resolve_options
    from flashsim.serving import prepare_varlen

    h, d = 16, 128
    lens = varlen_lengths()
    cu = torch.tensor(np.concatenate([[0], np.cumsum(lens)]).astype(np.int32), device="cuda")
    total = int(lens.sum())
    q, k, v = (torch.randn((total, h, d), device="cuda").half() for _ in range(3))
    r = row(rows, "varlen 16 x 1..4096 causal", shape=dict(lengths=lens.tolist(), H=h, d=d, dtype="f16"))
    flops = 4.0 * d * h * sum(_pairs_causal(int(x)) for x in lens)
    try:
        kw = dict(causal=True, check_indices=False, check_overflow=False)

        def fn():
            return flashsim.gpu.attention_varlen(q, k, v, cu, cu, int(lens.max()), int(lens.max()), **kw)

        fn()
        prob = prepare_varlen(
            q,
            k,
            v,
            cu,
            cu,
            int(lens.max()),
            int(lens.max()),
            opts=resolve_options(True, layout="bnhd"),
            arch=rt.current_arch(),
        )
        r["config"] = prob.config.describe()
        ms, r["method"] = timed(fn)
        r["ours_us"], r["tflops"] = ms * 1e3, flops / (ms * 1e-3) / 1e12
    except Exception as exc:  # noqa: BLE001
        r["error"] = f"{type(exc).__name__}: {exc}"
    n = dense_equal_work(lens)
    dq = torch.randn((1, h, n, d), device="cuda").half()
    try:
        go, _, prob = flashsim.gpu.prepared_launch(dq, dq, dq, causal=True)
        go(sync=True)
        ms = _do_bench(lambda: go(sync=False))
        dense = 4.0 * d * h * _pairs_causal(n)
        r["dense"] = dict(N=n, us=ms * 1e3, tflops=dense / (ms * 1e-3) / 1e12, config=prob.config.describe())
        if "tflops" in r:
            r["vs_dense"] = r["tflops"] / r["dense"]["tflops"]
            r["target"] = "at least 0.9x the dense kernel's TFLOP/s at equal work"
            r["met"] = r["vs_dense"] >= 0.9
    except Exception as exc:  # noqa: BLE001
        r["dense_error"] = f"{type(exc).__name__}: {exc}"


def bench_prefill(rows, args):
    import torch

    import flashsim

    reference = {False: 367.9, True: 340.5}  # benchmarks/RESULTS.md, bench kernel, 4,16,4096,128 f32 P@V
    for causal in (False, True):
        r = row(rows, f"prefill 4,16,4096,128{' causal' if causal else ''}", shape=dict(B=4, H=16, N=4096, d=128))
        try:
            x = torch.randn((4, 16, 4096, 128), device="cuda").half()
            go, _, prob = flashsim.gpu.prepared_launch(x, x, x, causal=causal)
            go(sync=True)
            ms = _do_bench(lambda: go(sync=False))
            f = 4.0 * 4 * 16 * 4096 * 4096 * 128 / (2 if causal else 1)
            r.update(us=ms * 1e3, tflops=f / (ms * 1e-3) / 1e12, results_md_tflops=reference[causal])
            r["vs_results_md"] = r["tflops"] / reference[causal]
        except Exception as exc:  # noqa: BLE001
            r["error"] = f"{type(exc).__name__}: {exc}"


def predict_sm120(rows):
    """The decode configuration's budget on sm_120 and its predicted RTX 5090 time (a prediction): the build the
    public call runs (the fused-check build where flashsim.gpu.serving.FUSED is on)."""
    from flashsim.gpu.serving import FUSED
    from flashsim.resources.serving import decode_config, serving_budget

    r = row(rows, "sm_120 decode (prediction)")
    try:
        main, combine = serving_budget(decode_config("sm_120", 128, 4).with_(fused=FUSED), "sm_120")
        r["budget"] = dict(
            config=main.config.describe(),
            registers=main.registers,
            smem_bytes=main.smem_bytes,
            blocks_per_sm=main.blocks_per_sm,
            occupancy=main.occupancy,
        )
        if combine is not None:
            r["budget"].update(combine_registers=combine.registers, combine_blocks_per_sm=combine.blocks_per_sm)
        decode = next((x for x in rows if x["name"] == "decode" and "copy_fraction" in x), None)
        if decode is not None:
            # the share of copy bandwidth of the form sm_120 runs at this shape: the split call where its decode rule
            # declines the warp_split form (sm_120's smaller blocks) and the H100 ran it beside the default
            share = decode["copy_fraction"]
            if "split_call_copy_fraction" in decode and not sm120_takes_warp_split(decode["shape"]):
                share = decode["split_call_copy_fraction"]
                r["form"] = "the split call (sm_120's rule declines warp_split here)"
            tb_s = RTX5090_TB_S * share
            r["predicted_us"] = decode["bytes"] / (tb_s * 1e12) * 1e6
            r["how"] = (
                f"the decode's {decode['bytes']} B of K and V at {share:.1%} of the "
                f"RTX 5090's {RTX5090_TB_S} TB/s (the share of the copy bandwidth it reached on this GPU): "
                "a prediction, nothing ran on sm_120"
            )
    except Exception as exc:  # noqa: BLE001
        r["error"] = f"{type(exc).__name__}: {exc}"


def sm120_takes_warp_split(shape: dict) -> bool:
    """Whether the default decode call of ``shape`` (bench_decode's row shape) takes the warp_split form on sm_120
    (its reference GPU's SMs), from the call's own rule."""
    from flashsim.problem import resolve_options
    from flashsim.serving import prepare_kvcache

    q = np.broadcast_to(np.zeros((), np.float16), (shape["B"], shape["Nq"], shape["Hq"], shape["d"]))
    k = np.broadcast_to(np.zeros((), np.float16), (shape["B"], shape["Nk"], shape["Hkv"], shape["d"]))
    sl = np.full(shape["B"], shape["Nk"], np.int32)
    prob = prepare_kvcache(q, k, k, sl, None, None, opts=resolve_options(layout="bnhd"), arch="sm_120")
    return prob.config.warp_split > 1


def text(rows, bw, dev):
    out = [
        f"bench_serving on {dev}; copy bandwidth {bw:.2f} TB/s (read + written); times: do_bench medians (us), "
        f"L2 emptied by {FLUSH} before each"
    ]
    for r in rows:
        parts = [f"{r['name']:34}"]
        for key in ("ours_us", "serial_combine_us", "split_call_us", "eager_us", "FA2_us", "cuDNN_us", "us"):
            if key in r:
                parts.append(f"{key[:-3]} {r[key]:8.1f}")
        if "default_form" in r:
            parts.append(f"(call = {r['default_form']})")
        for who in ("serial", "pdl", "fused", "fused_kernel", "kernel", "FA2", "flash_attn"):
            for what in ("graph", "eager", "eager_only", "host"):
                if f"{who}_{what}_us" in r:
                    parts.append(f"{who} {what} {r[f'{who}_{what}_us']:.1f}")
        for key in ("op_host_us", "body_host_us", "launch_host_us"):
            if key in r:
                parts.append(f"{key[:-3].replace('_', ' ')} {r[key]:.1f}")
        for key, fmt in (
            ("tb_s", "{:.2f} TB/s"),
            ("copy_fraction", "{:.1%} of copy"),
            ("tflops", "{:.1f} TFLOP/s"),
            ("vs_contiguous", "{:.3f}x contiguous"),
            ("vs_dense", "{:.3f}x dense"),
            ("vs_FA2", "FA2/ours {:.2f}"),
            ("vs_results_md", "{:.3f}x RESULTS.md"),
            ("num_splits", "splits {}"),
            ("predicted_us", "predicted {:.1f} us"),
        ):
            if key in r:
                parts.append(fmt.format(r[key]))
        if "met" in r:
            parts.append("MET" if r["met"] else "NOT MET")
        for key in [k for k in r if k.endswith("error")]:
            parts.append(f"{key}: {r[key][:100]}")
        if "not_run" in r:
            parts.append(f"not run: {r['not_run'][:80]}")
        out.append("  ".join(parts))
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write every row as JSON")
    p.add_argument("--sweep", action="store_true", help="also time neighbouring decode tilings and split counts")
    p.add_argument("--quick", action="store_true", help="the decode row alone (a smoke run)")
    p.add_argument("--call", action="store_true", help="the public call's rows alone (host time, graphs, FA2)")
    p.add_argument("--decode", action="store_true", help="the decode rows alone (every shape, the paged caches)")
    p.add_argument("--flush", choices=sorted(FLUSHES), default="zero", help="how the L2 is emptied between timed calls")
    args = p.parse_args(argv)
    import torch

    global FLUSH
    FLUSH = args.flush

    t0 = time.time()
    dev = torch.cuda.get_device_name()
    bw = copy_bandwidth()
    rows: list = []
    steps = [bench_decode, bench_speculative, bench_varlen, bench_prefill]
    if args.quick or args.decode:
        steps = [bench_decode]
    if args.call:
        steps = [bench_call]
    for step in steps:
        try:
            step(rows, bw, args) if step is bench_decode else step(rows, args)
        except Exception as exc:  # noqa: BLE001
            row(rows, step.__name__, error=f"{type(exc).__name__}: {exc}")
        torch.cuda.empty_cache()
    if not args.call:
        predict_sm120(rows)
    report = text(rows, bw, dev)
    print(report)
    print(f"bench_serving: {time.time() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev, copy_tb_s=bw, flush=FLUSH, rows=rows, torch=torch.__version__), f, indent=1)
    return 0 if not any("error" in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
