"""Benchmarks: the kernel beside torch SDPA on this GPU (`kernel`), or the emulator against numpy (`emulator`).

kernel:   TFLOP/s (4*B*H*Nq*Nk*d, halved for causal) of kernel/flash_fwd.cu for every P@V accumulation, two ways:
          the kernel alone (launches of flashsim.gpu.prepared_launch) and the public call with torch tensors
          (flashsim.gpu.attention(q, k, v, ...): key lookup, output allocation, launch), side by side with their
          ratio, beside torch's FLASH (FlashAttention-2) and cuDNN SDPA backends. Each figure is the median over
          --rounds of CUDA-event time around --reps back-to-back calls on torch's current stream (more for short
          launches: a round lasts at least --min-round-ms), divided by the calls; "host us" is the host time a call
          takes (to enqueue) in the same loop. The call's output is
          checked bit for bit against the kernel-alone output. Each kernel figure is also printed as a percentage of
          the mma.sync ceiling of its instruction mix, measured first in the same process (flashsim.gpu.peak;
          kernel_ceiling; --no-ceiling skips it). On the shapes of benchmarks/RESULTS.md (or --shape); --json FILE
          keeps every figure. Needs a GPU and torch.
emulator: seconds of flashsim.attention against a plain float64 numpy attention on the same CPU (one head).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time

import numpy as np

from ..config import SUPPORTED_M_TILES, SUPPORTED_PV_ACCUM, KernelConfig
from ..emulator import attention
from ..gpu import clocks, peak, prepared_launch
from ..gpu import runtime as rt
from .emulate import make_inputs

DEFAULT_SHAPES = [  # (B, H, N, d, causal): the shapes of benchmarks/RESULTS.md
    (4, 16, 4096, 128, False),
    (4, 16, 4096, 128, True),
    (4, 16, 4096, 64, False),
    (1, 16, 16384, 128, False),
    (16, 16, 1024, 128, False),
    (8, 32, 2048, 64, True),
]
TARGET_RATIO = 0.97  # the public call's throughput over the kernel alone's
# A timing round lasts at least this long (ms): --reps = 20 calls of a 0.4 ms launch (16,16,1024) are an 8 ms round,
# where the 2026-12-01 runs put the kernel alone and the public call on the same launches 2-7% apart
# (benchmarks/logs/2026-12-01e, f/bench.txt); launches of 1.25 ms or more keep --reps.
MIN_ROUND_MS = 25.0
# The mma.sync instruction of P V per accumulation (f16x2: each tile's P V by the f16 mma from zero); Q K^T always
# accumulates in f32. Keys: the accumulators of flashsim.gpu.peak's m16n8k16 probes (KINDS 0 and 1).
PV_MMA = {"f32": "f32", "f16": "f16", "f16x2": "f16"}
CEILING_KINDS = {"f32": 0, "f16": 1}


def add_arguments(p):
    p.add_argument(
        "what",
        choices=("kernel", "emulator", "peak"),
        help="what to benchmark: kernel (GPU), emulator (CPU), peak (GPU: the mma.sync ceiling)",
    )
    p.add_argument("--shape", action="append", default=[], metavar="B,H,N,D[,causal]")
    p.add_argument("--reps", type=int, default=20, help="kernel: back-to-back calls per timing")
    p.add_argument("--rounds", type=int, default=5, help="kernel: timings per figure (the median is reported)")
    p.add_argument(
        "--min-round-ms",
        type=float,
        default=MIN_ROUND_MS,
        help="kernel: a timing lasts at least this long; short launches get more than --reps calls "
        "(default %(default)s)",
    )
    p.add_argument("--json", metavar="FILE", help="kernel: write every figure as JSON")
    p.add_argument(
        "--ceiling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="kernel: measure the mma.sync ceiling first and print each kernel figure as a percentage of "
        "its instruction mix's ceiling (default: on)",
    )
    p.add_argument("--warps", type=int, default=None)
    p.add_argument("--m-tiles", type=int, default=None, choices=SUPPORTED_M_TILES, help="m16 tiles per warp")
    p.add_argument("--kv-tile", type=int, default=None)
    p.add_argument("--stages", type=int, default=None)
    p.add_argument("--n", type=int, action="append", default=[], help="emulator: sequence lengths (default 1024)")
    p.add_argument("--backend", choices=("numpy", "jax"), default="numpy", help="emulator backend")
    peak.add_probe_arguments(p, "peak: ")


def kernel_ceiling(pv_accum: str, ceilings: dict) -> float:
    """The mma.sync ceiling (TFLOP/s) of an unquantized build's instruction mix: Q K^T runs on the f32-accumulating
    mma and P V on its accumulation's (PV_MMA), each half of the FLOPs (attention_flops: 2 B H N^2 d each), so the
    time at the ceiling is the sum of the halves' times and the ceiling is the two rates' harmonic mean.
    ``ceilings``: {"f32": TFLOP/s, "f16": TFLOP/s} (measure_ceilings)."""
    qk, pv = ceilings["f32"], ceilings[PV_MMA[pv_accum]]
    return 2.0 / (1.0 / qk + 1.0 / pv)


def measure_ceilings() -> dict:
    """{"f32": TFLOP/s, "f16": TFLOP/s}: this GPU's m16n8k16 ceilings by accumulator (flashsim.gpu.peak, 8 chains
    per warp, every SM), measured now, so that the kernel's figures and their ceiling come from one session."""
    r = peak.measure(kinds=tuple(CEILING_KINDS.values()))
    return {acc: r[peak.KINDS[kind][0]]["tflops"] for acc, kind in CEILING_KINDS.items()}


def attention_flops(b, h, n, d, causal):
    """Q K^T and P V of the visible keys: 4 B H N^2 d, half of it causal (the FLOPs every TFLOP/s here counts)."""
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def _shapes(args):
    if not args.shape:
        return DEFAULT_SHAPES
    out = []
    for s in args.shape:
        parts = s.split(",")
        causal = len(parts) > 4 and parts[4].strip().lower() in ("causal", "1", "true")
        out.append(tuple(int(x) for x in parts[:4]) + (causal,))
    return out


def cuda_time(fn, reps, rounds, warmup=3):
    """(device ms per call, host us per call): medians over ``rounds`` of CUDA events around ``reps`` back-to-back
    calls of ``fn`` on torch's current stream, and of the host time the loop took."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dev_ms, host_us = [], []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        t1 = time.perf_counter()
        end.record()
        end.synchronize()
        dev_ms.append(start.elapsed_time(end) / reps)
        host_us.append((t1 - t0) / reps * 1e6)
    return statistics.median(dev_ms), statistics.median(host_us)


def reps_for(ms_per_call: float, reps: int, min_round_ms: float) -> int:
    """Back-to-back calls per timing round: ``reps``, or more when ``reps`` calls of ``ms_per_call`` would make a
    round shorter than ``min_round_ms``."""
    if not ms_per_call > 0:
        return reps
    return max(reps, math.ceil(min_round_ms / ms_per_call))


def calibrated_reps(fns, reps: int, min_round_ms: float) -> int:
    """``reps_for`` the fastest of ``fns`` (its rounds would be the shortest), timed once: one warm-up call and one
    round of ``reps`` calls each; no timing at all when ``min_round_ms`` asks for none."""
    if min_round_ms <= 0:
        return reps
    fastest = min(cuda_time(fn, reps, 1, warmup=1)[0] for fn in fns)
    return reps_for(fastest, reps, min_round_ms)


def cuda_time_alternating(fns: dict, reps, rounds, warmup=3) -> dict:
    """``cuda_time`` of several functions measured in alternating rounds (a, b, c, a, b, c, ...), so that clock and
    thermal drift over the run weigh on all alike: {name: (ms, us)}, medians over the rounds."""
    runs = {name: [] for name in fns}
    for r in range(rounds):
        for name, fn in fns.items():
            runs[name].append(cuda_time(fn, reps, 1, warmup if r == 0 else 1))
    med = statistics.median
    return {name: (med(x[0] for x in t), med(x[1] for x in t)) for name, t in runs.items()}


def cuda_time_pair(fn_a, fn_b, reps, rounds, warmup=3):
    """``cuda_time_alternating`` of two functions: ((ms, us) of a, (ms, us) of b)."""
    t = cuda_time_alternating({"a": fn_a, "b": fn_b}, reps, rounds, warmup)
    return t["a"], t["b"]


def kernel_alone(go, quantized: bool):
    """The attention kernel of a prepared launch (``prepared_launch``'s first value), without a quantization pass:
    run once in full first, so that the scratch holds the pass's result the kernel then reads at every call."""
    go(sync=True)
    return (lambda: go(sync=False, quantize=False)) if quantized else (lambda: go(sync=False))


def sdpa_ms(q, k, v, causal, reps, rounds, enable_gqa=False, min_round_ms=0.0) -> dict:
    """torch SDPA's FlashAttention-2 and cuDNN backends on the same tensors: {"FA2": ms, "cuDNN": ms}, None where a
    backend cannot run the shape (``cuda_time`` medians; each backend's rounds at least ``min_round_ms`` long)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out = {}
    for name, backend in (("FA2", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):

                def fn():
                    return torch.nn.functional.scaled_dot_product_attention(
                        q, k, v, is_causal=causal, enable_gqa=enable_gqa
                    )

                fn()
                out[name] = cuda_time(fn, calibrated_reps((fn,), reps, min_round_ms), rounds)[0]
        except RuntimeError:  # backend unavailable for this shape
            out[name] = None
    return out


def _tiles(cfg):
    return f"warps={cfg.warps} m_tiles={cfg.m_tiles} kv_tile={cfg.kv_tile} stages={cfg.stages}"


def _pct(tflops: float, pv_accum: str, ceilings: dict | None) -> float:
    """``tflops`` as a percentage of its build's ceiling (kernel_ceiling); NaN without measured ceilings."""
    return 100.0 * tflops / kernel_ceiling(pv_accum, ceilings) if ceilings else float("nan")


def _pct_text(pct: float) -> str:
    """A percentage cell, 6 wide; "-" where no ceiling was measured."""
    return f"{'-':>6}" if math.isnan(pct) else f"{pct:5.1f}%"


def _bench_shape(shape, arch, over, reps, rounds, report, min_round_ms=MIN_ROUND_MS, ceilings=None, sampler=None):
    """One row: every accumulation, kernel alone (and its percentage of the ceiling, with ``ceilings``) and public
    call, then torch SDPA; returns the printed line and the lowest call/kernel ratio. ``sampler``
    (flashsim.gpu.clocks.Sampler): each accumulation's JSON row gets the SM clock of its timing and whether the
    power cap held it."""
    import torch

    import flashsim.gpu

    b, h, n, d, causal = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((b, h, n, d), device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    flops = attention_flops(b, h, n, d, causal)
    cells, hosts, configs, worst = {}, [], [], float("inf")
    for acc in SUPPORTED_PV_ACCUM:
        cfg = KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=acc, **over)
        go, (o_k, lse_k), _ = prepared_launch(q, k, v, config=cfg)

        def call(cfg=cfg):  # f16 / f16x2: the no-sync path (the overflow check waits for the GPU)
            return flashsim.gpu.attention(q, k, v, config=cfg, check_overflow=False)

        n_reps = calibrated_reps((lambda: go(sync=False), call), reps, min_round_ms)
        t0 = time.time()
        (k_ms, k_host), (c_ms, c_host) = cuda_time_pair(lambda: go(sync=False), call, n_reps, rounds)
        clock = sampler.window(t0, time.time()) if sampler is not None else None
        o_c, lse_c = call()
        go(sync=False)
        torch.cuda.synchronize()
        same = bool(
            torch.equal(o_c.view(torch.int16), o_k.view(torch.int16))
            and torch.equal(lse_c.view(torch.int32), lse_k.view(torch.int32))
        )
        ratio = k_ms / c_ms
        worst = min(worst, ratio)
        cells[acc] = (flops / k_ms / 1e9, flops / c_ms / 1e9, ratio, _pct(flops / k_ms / 1e9, acc, ceilings))
        hosts.append(f"{c_host:.0f}/{k_host:.0f}")
        configs.append(f"{acc}: {_tiles(cfg)}")
        report["rows"].append(
            dict(
                shape=[b, h, n, d],
                causal=causal,
                pv_accum=acc,
                config=cfg.describe(),
                kernel_ms=k_ms,
                call_ms=c_ms,
                kernel_tflops=cells[acc][0],
                call_tflops=cells[acc][1],
                ratio=ratio,
                kernel_host_us=k_host,
                call_host_us=c_host,
                same_bits=same,
                reps=n_reps,
                **(_clock_fields(clock) if clock is not None else {}),
                **(
                    dict(ceiling_tflops=kernel_ceiling(acc, ceilings), kernel_pct_of_ceiling=cells[acc][3])
                    if ceilings
                    else {}
                ),
            )
        )
        if not same:
            print(f"  ERROR: the call's output differs from the kernel alone's ({acc}, {b},{h},{n},{d})")
    sdpa = {
        name: (flops / ms / 1e9 if ms else float("nan"))
        for name, ms in sdpa_ms(q, k, v, causal, reps, rounds, min_round_ms=min_round_ms).items()
    }
    report["rows"].append(dict(shape=[b, h, n, d], causal=causal, sdpa_tflops=sdpa))
    return _row_line(shape, cells, sdpa, hosts, configs), worst


def _clock_fields(w) -> dict:
    """A flashsim.gpu.clocks.Window as JSON fields."""
    return dict(
        sm_clock_mhz=w.mhz,
        sm_clock_min_mhz=w.mhz_min,
        sm_clock_max_mhz=w.mhz_max,
        power_capped=w.power_capped,
        clock_samples=w.samples,
    )


def per_clock_pct(row: dict, ceiling_mhz: float) -> float:
    """A kernel row's share of its ceiling at equal clocks: its percentage times the ceiling probe's mean SM clock
    over the kernel's (NaN without both)."""
    pct, mhz = row.get("kernel_pct_of_ceiling"), row.get("sm_clock_mhz")
    if pct is None or not mhz or not ceiling_mhz:
        return float("nan")
    return pct * ceiling_mhz / mhz


def _clock_table(report: dict) -> list[str]:
    """The clocks after the main table: per row and accumulation the mean SM clock (MHz), whether the software power
    cap held it, and the share of the ceiling at equal clocks; one line saying why when nothing was sampled."""
    clocks = report.get("clocks") or {}
    if not clocks.get("available"):
        return [f"SM clocks: not sampled ({clocks.get('why') or 'no sampler'})"]
    ceil = clocks.get("ceiling") or {}
    cmhz = ceil.get("sm_clock_mhz")
    head = (
        f"SM clock during each kernel timing (NVML every {clocks['period_s'] * 1000:.0f} ms; 'cap' = the "
        f"software power cap held the clock); '%/clk' = the share of the ceiling at equal clocks"
        + (
            f" (the ceiling probe ran at {cmhz:.0f} MHz{', power-capped' if ceil['power_capped'] else ''})"
            if cmhz
            else ""
        )
    )
    lines = [
        head,
        " | ".join(
            [f"{'B,H,N,d':16} {'causal':6}"]
            + [f"{acc + ' MHz':>10} {'cap':>3} {'%/clk':>6}" for acc in SUPPORTED_PV_ACCUM]
        ),
    ]
    rows = [r for r in report["rows"] if "pv_accum" in r]
    for shape in dict.fromkeys((tuple(r["shape"]), r["causal"]) for r in rows):
        cells = [f"{','.join(map(str, shape[0])):16} {str(shape[1]):6}"]
        for acc in SUPPORTED_PV_ACCUM:
            r = next((r for r in rows if (tuple(r["shape"]), r["causal"]) == shape and r["pv_accum"] == acc), {})
            if "sm_clock_mhz" not in r:
                cells.append(f"{'-':>10} {'-':>3} {'-':>6}")
                continue
            cells.append(
                f"{r['sm_clock_mhz']:10.0f} {'yes' if r['power_capped'] else 'no':>3} "
                f"{_pct_text(per_clock_pct(r, cmhz))}"
            )
        lines.append(" | ".join(cells))
    return lines


def _table_header() -> str:
    """The column heads of bench_kernel's table (_row_line's rows)."""
    heads = [f"{'B,H,N,d':16} {'causal':6}"]
    heads += [f"{name:>10} {'%':>6} {'call':>7} {'ratio':>6}" for name in ("f32 kernel", "f16 kernel", "f16x2 kern")]
    return " | ".join(heads + [f"{'FA2':>6} {'cuDNN':>6}", f"{'host us call/kernel':>27}"])


def _row_line(shape, cells, sdpa, hosts, configs) -> str:
    """The printed row of one shape: per accumulation (cells[acc] = kernel TFLOP/s, call TFLOP/s, kernel / call
    time, percent of the ceiling), torch SDPA's two backends, host times and tilings (the header of bench_kernel)."""
    b, h, n, d, causal = shape
    parts = [f"{f'{b},{h},{n},{d}':16} {str(causal):6}"]
    for acc in SUPPORTED_PV_ACCUM:
        kern, call, ratio, pct = cells[acc]
        parts.append(f"{kern:10.1f} {_pct_text(pct)} {call:7.1f} {ratio:6.3f}")
    parts.append(f"{sdpa['FA2']:6.1f} {sdpa['cuDNN']:6.1f}")
    parts.append(f"{' '.join(hosts):>27}   {'; '.join(configs)}")
    return " | ".join(parts)


def bench_kernel(args) -> int:
    try:
        import torch
        import torch.nn.attention  # noqa: F401 - SDPA backends for the comparison columns
    except ImportError as e:
        raise SystemExit(f"flashsim bench kernel needs torch with CUDA: {e}") from None

    rt.require_gpu()
    arch = rt.current_arch()
    dev_name = torch.cuda.get_device_name()
    reps, rounds = args.reps, args.rounds
    if reps < 1 or rounds < 1:
        raise SystemExit(f"--reps and --rounds must be >= 1, got {reps}, {rounds}")
    print(
        f"flashsim bench kernel on {dev_name} ({arch}); TFLOP/s, median of {rounds} CUDA-event timings of {reps} "
        f"back-to-back calls or more (each timing at least {args.min_round_ms:g} ms; the JSON has each row's count) "
        "(kernel and call in alternating rounds); kernel = prepared launch, call = "
        "flashsim.gpu.attention(torch tensors; f16 and f16x2 "
        "with check_overflow=False, the path without a host synchronisation)"
    )
    with clocks.Sampler() as sampler:
        t0 = time.time()
        ceilings = measure_ceilings() if args.ceiling else None
        ceiling_clock = sampler.window(t0, time.time()) if ceilings else None
        if ceilings:
            print(
                f"mma.sync ceiling of this GPU, measured now (m16n8k16, 8 chains per warp): f32 "
                f"{ceilings['f32']:.1f}, f16 {ceilings['f16']:.1f} TFLOP/s; '%' = the kernel's share of its mix's "
                f"ceiling (Q K^T on f32, P V on its accumulator: f32 {kernel_ceiling('f32', ceilings):.1f}, "
                f"f16 and f16x2 {kernel_ceiling('f16', ceilings):.1f})"
            )
        print(_table_header())
        report = dict(
            device=dev_name,
            arch=arch,
            reps=reps,
            rounds=rounds,
            min_round_ms=args.min_round_ms,
            torch=torch.__version__,
            target_ratio=TARGET_RATIO,
            ceilings=ceilings,
            rows=[],
            clocks=dict(
                available=sampler.available,
                why=sampler.why,
                period_s=sampler.period_s,
                ceiling=_clock_fields(ceiling_clock) if ceiling_clock is not None else None,
            ),
        )
        try:
            import cuda.core

            report["cuda_core"] = cuda.core.__version__
        except Exception:  # noqa: BLE001 - the version is only a label
            pass
        over = {
            key: val
            for key, val in (
                ("warps", args.warps),
                ("m_tiles", args.m_tiles),
                ("kv_tile", args.kv_tile),
                ("stages", args.stages),
            )
            if val is not None
        }
        worst = float("inf")
        with torch.no_grad():
            for shape in _shapes(args):
                line, low = _bench_shape(shape, arch, over, reps, rounds, report, args.min_round_ms, ceilings, sampler)
                worst = min(worst, low)
                print(line, flush=True)
                torch.cuda.empty_cache()
    print("\n".join(_clock_table(report)))
    verdict = "meets" if worst >= TARGET_RATIO else "MISSES"
    print(f"lowest call/kernel ratio {worst:.3f}: {verdict} the target {TARGET_RATIO}")
    report["lowest_ratio"] = worst
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    return 0


def bench_emulator(args) -> int:

    ns = args.n or [1024]
    print(f"flashsim bench emulator ({args.backend}): one head, d=128, seconds (best of 1)")
    print(f"{'N':>6} {'float64 numpy':>14} {'emulator f32':>13} {'ratio':>7} {'emulator f16':>13} {'ratio':>7}")
    for n in ns:
        q, k, v = make_inputs(1, 1, n, n, 128, seed=0)
        t0 = time.perf_counter()
        plain_attention(q, k, v)
        t_ref = time.perf_counter() - t0
        out = []
        for acc in ("f32", "f16"):
            t0 = time.perf_counter()
            attention(q, k, v, pv_accum=acc, backend=args.backend, progress=False)
            out.append(time.perf_counter() - t0)
        print(f"{n:6d} {t_ref:14.3f} {out[0]:13.2f} {out[0] / t_ref:7.1f} {out[1]:13.2f} {out[1] / t_ref:7.1f}")
    return 0


def plain_attention(q, k, v):
    """The comparison baseline: softmax(q k^T / sqrt(d)) v in float64 numpy, nothing else."""
    q64, k64, v64 = (x[0, 0].astype(np.float64) for x in (q, k, v))
    s = q64 @ k64.T / np.sqrt(q64.shape[-1])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v64


def bench_peak(args) -> int:
    """The mma.sync ceiling of this GPU for every instruction the kernels use (flashsim.gpu.peak)."""
    return peak.main(
        (["--json", args.json] if args.json else []) + (["--sweep"] if args.sweep else []) + ["--vary", args.vary]
    )


def run(args) -> int:
    return {"kernel": bench_kernel, "emulator": bench_emulator, "peak": bench_peak}[args.what](args)
