"""INT8 attention (quant="int8") on this GPU, beside our f16 kernel, torch SDPA's FlashAttention-2 and cuDNN, and the
mma.sync ceilings measured in the same run (flashsim bench peak). CUDA events, medians of rounds:

    PYTHONPATH=. python3 benchmarks/bench_quant.py --json OUT.json

Rows (TFLOP/s = 4 B H Nq Nk d / time, halved for causal):
  peak      the mma.sync ceilings (m16n8k16 f16 with f32 / f16 accumulation, m16n8k32 s8, e4m3 f32 / f16)
  quant     at 4 x 16 x 4096 x {64, 128} (non-causal and causal at d = 128): f16 against int8 (f32 and f16 P@V) and
            int8-fp8 (FP8 P@V, f32 and two-level f16) with the same P@V accumulation, timed in alternating rounds;
            each three ways: the whole call (quantization pass + attention),
            the attention kernel alone (the scratch holding a pass's result) and the pass alone
  sdpa      FlashAttention-2 and cuDNN (torch SDPA) on the same f16 inputs
"""

from __future__ import annotations

import argparse
import json

from flashsim.commands.bench import cuda_time, cuda_time_pair, kernel_alone, sdpa_ms

REPS, ROUNDS = 20, 7


def main(argv=None):
    import torch

    from flashsim import gpu
    from flashsim.gpu import peak

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    rows = []

    def row(group, name, flops, ms, config="", **extra):
        tf = flops / (ms * 1e-3) / 1e12
        rows.append(dict(group=group, name=name, ms=ms, tflops=tf, config=config, **extra))
        print(f"{group:6} {name:52} {ms:8.3f} ms {tf:7.1f} TFLOP/s  {config}", flush=True)

    ceil = peak.measure()
    for name, r in ceil.items():
        if not isinstance(r, dict):
            continue
        rows.append(dict(group="peak", name=name, **r))
        print(f"peak   {name:52} {r['tflops']:7.1f}", flush=True)

    rnd = lambda *s: torch.randn(*s, device="cuda", dtype=torch.float16)
    for d, causal in ((128, False), (128, True), (64, False)):
        b, h, n = 4, 16, 4096
        flops = 4.0 * b * h * n * n * d / (2 if causal else 1)
        q, k, v = rnd(b, h, n, d), rnd(b, h, n, d), rnd(b, h, n, d)
        k = k + 2.0 * torch.randn(b, h, 1, d, device="cuda", dtype=torch.float16)  # keys with a mean
        tag = f"d {d}{' causal' if causal else ''}"
        for quant, acc in (("int8", "f32"), ("int8", "f16"), ("int8-fp8", "f32"), ("int8-fp8", "f16x2")):
            g16, _, p16 = gpu.prepared_launch(q, k, v, causal=causal, pv_accum=acc)
            g8, _, p8 = gpu.prepared_launch(q, k, v, causal=causal, pv_accum=acc, quant=quant)
            k8 = kernel_alone(g8, True)  # the scratch holds a pass's result from here on
            t16, t8 = cuda_time_pair(lambda: g16(sync=False), lambda: g8(sync=False), REPS, ROUNDS)
            row("quant", f"{tag} f16 {acc} P@V (alternating)", flops, t16[0], p16.config.describe())
            row(
                "quant",
                f"{tag} {quant} {acc} P@V, pass + kernel (alternating)",
                flops,
                t8[0],
                p8.config.describe(),
                speedup=t16[0] / t8[0],
            )
            ms_k = cuda_time(k8, REPS, ROUNDS)[0]
            row(
                "quant",
                f"{tag} {quant} {acc} P@V, kernel alone",
                flops,
                ms_k,
                p8.config.describe(),
                speedup=t16[0] / ms_k,
            )
            ms_q = cuda_time(lambda: g8(sync=False, attend=False), REPS, ROUNDS)[0]
            rows.append(dict(group="quant", name=f"{tag} {quant} quantization pass alone", ms=ms_q))
            print(f"quant  {tag + ' ' + quant + ' quantization pass alone':52} {ms_q:8.3f} ms", flush=True)
        for backend, ms in sdpa_ms(q, k, v, causal, REPS, ROUNDS).items():
            if ms:
                row("sdpa", f"{tag} {backend}", flops, ms)
    with open(args.json, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
