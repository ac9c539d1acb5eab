"""The attention variants on this GPU, beside torch SDPA's FlashAttention-2 and cuDNN backends (issue: bf16, GQA,
head dims, windows, softcap). Kernel alone (flashsim.gpu.prepared_launch launches), CUDA events, medians:

    PYTHONPATH=. python3 benchmarks/bench_variants.py --json OUT.json

Rows (TFLOP/s = 4 B Hq Nq Nk d / time, halved for causal; "per visible key" rows divide by the keys actually visible):
  dtype     f16 vs bf16 (f32 P@V), 4 x 16 x 4096 x 128, non-causal; FA2 / cuDNN in the same dtype
  gqa       Hq = 16 with Hkv = 16 (MHA) and Hkv = 4 (GQA, group 4), 4 x 4096 x 128, f16; SDPA with enable_gqa
  window    N = 8192, d = 128, B = 2, H = 16, window (w, w) for w = 256, 1024, 4096 and unbounded: time and time per
            visible key (the kernel skips the tiles outside the window)
  headdim   d = 32, 64, 128, 256 at 4 x 16 x 4096, f16 and f32 P@V; FA2 / cuDNN
  softcap   softcap 30 vs none, 4 x 16 x 4096 x 128, f16 (the cost of the modelled tanh: two SFU ops a score)
"""
from __future__ import annotations

import argparse
import json
import statistics


def _time(fn, reps=10, rounds=5):
    import torch
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b) / reps)
    return statistics.median(ms)


def ours(q, k, v, **opts):
    from flashsim import gpu
    go, _, prob = gpu.prepared_launch(q, k, v, **opts)
    return _time(lambda: go(sync=False)), prob.config.describe()


def sdpa(q, k, v, causal=False, gqa=False):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = {}
    for name, backend in (("FA2", SDPBackend.FLASH_ATTENTION), ("cuDNN", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                              enable_gqa=gqa)
                fn()
                out[name] = _time(fn)
        except RuntimeError:
            out[name] = None
    return out


def main(argv=None):
    import torch
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    args = p.parse_args(argv)
    rows = []

    def row(group, name, flops, ms, config="", ref=None, **extra):
        tf = flops / (ms * 1e-3) / 1e12
        r = dict(group=group, name=name, ms=ms, tflops=tf, config=config, **extra)
        if ref:
            r.update({f"{k}_tflops": (flops / (t * 1e-3) / 1e12 if t else None) for k, t in ref.items()})
        rows.append(r)
        refs = " ".join(f"{k} {flops / (t * 1e-3) / 1e12:6.1f}" if t else f"{k}    n/a" for k, t in (ref or {}).items())
        print(f"{group:8} {name:34} {ms:8.3f} ms {tf:7.1f} TFLOP/s  {refs}  {' '.join(f'{k}={v}' for k, v in extra.items())}",
              flush=True)

    rnd = lambda *s, dt=torch.float16: torch.randn(*s, device="cuda", dtype=dt)
    b, h, n, d = 4, 16, 4096, 128
    flops = 4.0 * b * h * n * n * d
    for dt, name in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        q, k, v = rnd(b, h, n, d, dt=dt), rnd(b, h, n, d, dt=dt), rnd(b, h, n, d, dt=dt)
        ms, cfg = ours(q, k, v)
        row("dtype", f"{name} f32 P@V", flops, ms, cfg, sdpa(q, k, v))
    for hk in (16, 4):
        q, k, v = rnd(b, h, n, d), rnd(b, hk, n, d), rnd(b, hk, n, d)
        ms, cfg = ours(q, k, v)
        row("gqa", f"Hq 16 Hkv {hk} f32 P@V", flops, ms, cfg, sdpa(q, k, v, gqa=hk != h))
        ms, cfg = ours(q, k, v, pv_accum="f16")
        row("gqa", f"Hq 16 Hkv {hk} f16 P@V", flops, ms, cfg)
    bw, nw = 2, 8192
    q, k, v = rnd(bw, h, nw, d), rnd(bw, h, nw, d), rnd(bw, h, nw, d)
    for w in (256, 1024, 4096, -1):
        visible = sum(min(nw - 1, i + w) - max(0, i - w) + 1 for i in range(nw)) if w >= 0 else nw * nw
        ms, cfg = ours(q, k, v, window_size=(w, w))
        vflops = 4.0 * bw * h * visible * d
        row("window", f"N 8192 window ({w}, {w})", vflops, ms, cfg, visible_keys=visible,
            ns_per_visible_key_row=ms * 1e6 / (bw * h * visible))
    for d2 in (32, 64, 128, 256):
        q, k, v = rnd(b, h, n, d2), rnd(b, h, n, d2), rnd(b, h, n, d2)
        f2 = 4.0 * b * h * n * n * d2
        ref = sdpa(q, k, v)
        for acc in ("f32", "f16"):
            ms, cfg = ours(q, k, v, pv_accum=acc)
            row("headdim", f"d {d2} {acc} P@V", f2, ms, cfg, ref if acc == "f32" else None)
    q, k, v = rnd(b, h, n, d), rnd(b, h, n, d), rnd(b, h, n, d)
    for cap in (0.0, 30.0):
        for acc in ("f32", "f16"):
            ms, cfg = ours(q, k, v, softcap=cap, pv_accum=acc)
            row("softcap", f"softcap {cap:g} {acc} P@V", flops, ms, cfg)
    with open(args.json, "w") as f:
        json.dump(dict(gpu=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
