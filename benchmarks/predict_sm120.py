"""Predict the kernel's rate on an RTX 5090 (sm_120, the seed's GPU; nothing runs here) from H200 measurements.

    python benchmarks/predict_sm120.py benchmarks/logs/2026-11-30g/bench_quant.json

The model: the time of a KV tile is its tensor-core time plus the non-tensor
time that does not overlap it (FP32, SFU, shuffles, ldmatrix, conversions), the latter the same number of clocks per
SM on both GPUs (4 sub-partitions, 128 FP32 lanes, 16 SFU lanes per SM on sm_90 and sm_120). Half the flops are
Q K^T, half P V, each at its instruction's rate. From a measured H200 rate R and the H200's ceiling C for the same
mix, the non-overlapped time is (C / R - 1) times the tensor time; on the 5090 the tensor time of the same tile is
scaled by the per-SM, per-clock rates, the rest is kept. Cross-check (benchmarks/RESULTS.md): the model puts FA2 at 85%
of the 5090's f32 ceiling where FA2 measures 91%, so it is about 7% pessimistic.

Inputs: the H200 ceilings and kernel rates of benchmarks/bench_quant.py's JSON (same run; an FP8 ceiling is
bounded by the f16 one, the HMMA rate Hopper runs FP8 mma.sync at), the H200's and the
5090's SM counts and boost clocks, and the 5090's dense tensor rates (RTX Blackwell whitepaper, shared/ANCHORS.md
section 8). Prints one line per kernel and writes nothing else.

The NVFP4 kernel (quant "nvfp4", built for sm_120a only) cannot run on the H200, so it has no H200 rate of its own:
its rows take the non-overlapped time of the int8-fp8 kernel of the same P@V accumulation (the same loop, FP8 P V
path and quantization pass; only the Q K^T mma and its block-scale loads differ) and put Q K^T at the 5090's FP4 rate
(1676 TFLOP/s dense, RTX Blackwell whitepaper, the FP4 tensor rate with f32 accumulation; assumed to be the rate of
mma.sync.m16n8k64.kind::mxf4nvf4). A prediction from a proxy: nothing of it is measured, on any GPU.
"""

from __future__ import annotations

import json
import sys

from flashsim.arch import get_arch

# (SMs, boost clock in Hz): H200 SXM (132 SMs, cudaDeviceProp on the machine; 1.98 GHz boost, NVIDIA's spec) and
# RTX 5090 (170 SMs, 2.41 GHz boost: NVIDIA's spec, not a measurement)
H200 = (132, 1.98e9)
RTX5090 = (170, 2.41e9)
# RTX 5090 dense mma rates, TFLOP/s (TOPS for s8), RTX Blackwell whitepaper (ANCHORS section 8)
RTX5090_RATES = {
    "f16.f32": 209.5,
    "f16.f16": 419.0,
    "s8": 838.0,
    "e4m3.f32": 419.0,
    "e4m3.f16": 838.0,
    "e2m1": 1676.0,  # FP4 with f32 accumulation (dense; 3352 with sparsity): the block-scaled e2m1 mma.sync
}
# the H200 ceiling rows of bench_quant.py's JSON (flashsim bench peak's probe), by the same keys
PEAK_ROWS = {
    "f16.f32": "m16n8k16 f32.f16.f16.f32",
    "f16.f16": "m16n8k16 f16.f16.f16.f16",
    "s8": "m16n8k32 s32.s8.s8.s32",
    "e4m3.f32": "m16n8k32 f32.e4m3.e4m3.f32",
    "e4m3.f16": "m16n8k32 f16.e4m3.e4m3.f16",
}
# kernel -> (bench row with its H200 rate, Q K^T instruction, P V instruction, P@V accumulation). The f16 kernels
# come first: each quantized kernel is compared with the f16 kernel of the same P@V accumulation.
KERNELS = {
    "f16, f32 P@V": ("d 128 f16 f32 P@V (alternating)", "f16.f32", "f16.f32", "f32"),
    "f16, f16 P@V": ("d 128 f16 f16 P@V (alternating)", "f16.f32", "f16.f16", "f16"),
    "f16, f16x2 P@V": ("d 128 f16 f16x2 P@V (alternating)", "f16.f32", "f16.f16", "f16x2"),
    "int8, f32 P@V": ("d 128 int8 f32 P@V, kernel alone", "s8", "f16.f32", "f32"),
    "int8, f16 P@V": ("d 128 int8 f16 P@V, kernel alone", "s8", "f16.f16", "f16"),
    "int8-fp8 (f32)": ("d 128 int8-fp8 f32 P@V, kernel alone", "s8", "e4m3.f32", "f32"),
    "int8-fp8 (f16x2)": ("d 128 int8-fp8 f16x2 P@V, kernel alone", "s8", "e4m3.f16", "f16x2"),
}
# kernels with no H200 rate of their own -> (the kernel of KERNELS whose H200 share they take, their Q K^T
# instruction on the 5090): NVFP4 Q K^T (module docstring)
PROXIED = {
    "nvfp4 (f32), via int8-fp8's share": ("int8-fp8 (f32)", "e2m1"),
    "nvfp4 (f16x2), via int8-fp8's share": ("int8-fp8 (f16x2)", "e2m1"),
}


# the benchmark's shape (B, H, N, d) = (4, 16, 4096, 128), non-causal: 4 B H N^2 d flops (two matmuls of 2 N^2 d)
SHAPE_FLOPS = 4 * 4 * 16 * 4096 * 4096 * 128


def per_sm_clock(rate_tflops: float, gpu) -> float:
    """flops per SM per clock of a rate in TFLOP/s."""
    sms, clock = gpu
    return rate_tflops * 1e12 / (sms * clock)


def mix_time(qk: float, pv: float) -> float:
    """Clocks per flop of half the flops at rate qk and half at rate pv (flops per SM per clock)."""
    return 0.5 / qk + 0.5 / pv


def predict(h200_rate: float, h200_peaks: dict, qk: str, pv: str, qk5: str | None = None) -> tuple[float, float, float]:
    """(the H200 ceiling of the mix, the 5090's ceiling of it, the predicted 5090 rate), TFLOP/s. ``qk5``: the Q K^T
    instruction of the 5090's kernel when it is not the measured one's (a PROXIED kernel), else ``qk``."""
    th = mix_time(per_sm_clock(h200_peaks[qk], H200), per_sm_clock(h200_peaks[pv], H200))
    t5 = mix_time(per_sm_clock(RTX5090_RATES[qk5 or qk], RTX5090), per_sm_clock(RTX5090_RATES[pv], RTX5090))
    ceiling_h = 1.0 / th * H200[0] * H200[1] / 1e12
    other = th * (ceiling_h / h200_rate - 1.0)  # non-overlapped clocks per flop, kept on the 5090
    ceiling_5 = 1.0 / t5 * RTX5090[0] * RTX5090[1] / 1e12
    return ceiling_h, ceiling_5, 1.0 / (t5 + other) * RTX5090[0] * RTX5090[1] / 1e12


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    rows = json.load(open(argv[0]))["rows"]
    peaks = {
        k: next(r["tflops"] for r in rows if r["group"] == "peak" and r["name"] == name)
        for k, name in PEAK_ROWS.items()
    }
    rate = {r["name"]: r["tflops"] for r in rows if r["group"] == "quant" and r.get("tflops")}
    print(f"H200 ceilings from {argv[0]}: " + ", ".join(f"{k} {v:.1f}" for k, v in peaks.items()))
    # Hopper has no FP8 mma.sync in silicon: ptxas runs each m16n8k32 e4m3 as two HMMA.16816 on unpacked f16 (the
    # same flops as two f16 mma's) plus the unpacking and the adds of c (tests/test_sass.py), so its rate is at most
    # the f16 one of the same accumulation. The probe before 2026-11-30g let ptxas hoist those HMMA out of the timed
    # loop (kernel/bench/mma_peak.cu), so the JSONs' FP8 ceilings until then are too high: bound them. From 2026-11-30g
    # on the probe times them (398 / 430 TFLOP/s: B unpacked every mma, as in the kernel) and no bound applies.
    for fp8, f16 in (("e4m3.f32", "f16.f32"), ("e4m3.f16", "f16.f16")):
        if get_arch("sm_90").mma8_on_f16_mma and peaks[fp8] > peaks[f16]:
            print(f"  {fp8}: {peaks[fp8]:.1f} is above the HMMA rate it runs at on sm_90; {peaks[f16]:.1f} used")
            peaks[fp8] = peaks[f16]
    # "H200 ceiling" is the mix's (half the flops at each instruction's ceiling); "x f16" divides it by the f16
    # kernel's of the same P@V accumulation: the most a quantized kernel can gain on the H200 at equal efficiency
    print(
        f"{'kernel (d = 128, 4 x 16 x 4096, non-causal)':44} {'H200':>7} {'H200 ceiling':>12} {'x f16':>6} "
        f"{'of ceiling':>10} {'5090 ceiling':>12} {'5090 predicted':>14} {'x f16 kernel, same P@V accumulator':>36}"
        f" {'5090 ms':>8}"
    )
    base, base_h = {}, {}
    for name, (row, qk, pv, acc) in KERNELS.items():
        if row not in rate:  # an older JSON without this kernel
            continue
        ch, c5, p5 = predict(rate[row], peaks, qk, pv)
        base.setdefault(acc, p5)
        base_h.setdefault(acc, ch)
        print(
            f"{name:44} {rate[row]:7.1f} {ch:12.1f} {ch / base_h[acc]:6.2f} {rate[row] / ch:10.1%} {c5:12.1f} "
            f"{p5:14.1f} {p5 / base[acc]:36.2f} {SHAPE_FLOPS / p5 / 1e9:8.2f}"
        )
    for name, (proxy, qk5) in PROXIED.items():  # no H200 rate: "-" there; "of ceiling" is the proxy's share
        row, qk, pv, acc = KERNELS[proxy]
        if row not in rate:
            continue
        ch, c5, p5 = predict(rate[row], peaks, qk, pv, qk5)
        print(
            f"{name:44} {'-':>7} {'-':>12} {'-':>6} {rate[row] / ch:10.1%} {c5:12.1f} {p5:14.1f} {p5 / base[acc]:36.2f}"
            f" {SHAPE_FLOPS / p5 / 1e9:8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
