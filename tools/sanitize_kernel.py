"""GPU: one small launch per default kernel variant, meant to run under compute-sanitizer (memcheck, racecheck).

Usage: compute-sanitizer --tool memcheck python3 tools/sanitize_kernel.py      (tools/device_round.sh sanitize)
       python3 tools/sanitize_kernel.py --list                                   (the variants; no GPU needed)
Shapes have ragged tails (Nq, Nk not multiples of the tiles) so the zero-fill and masking paths run. The variants:
every default configuration of sm_90 (4 warps x 2 m16 tiles) and of sm_120 (8 warps x 1 tile, the seed's block),
for d 64 / 128 x causal or not x every P@V accumulation (f32, f16, f16x2), each distinct configuration once; then
the attention variants (VARIANT_OPTIONS: every other head dim, bf16, GQA, windows, softcap, (B, N, H, d), O staged
with a 16-bit O and with f16x2 beyond d = 128, three and four m16 tiles per warp, and quant="int8" / "int8-fp8", f32
and f16x2 P@V, whose quantization kernels run under the sanitizer too).
"""

import itertools
import sys

import numpy as np

from flashsim import KernelConfig
from flashsim.config import SUPPORTED_PV_ACCUM

# (head_dim, options) of the attention variants run besides the defaults: every head dim, bf16, GQA (the shapes
# below use Hkv = 1 for them), windows, softcap, (B, N, H, d)
VARIANT_OPTIONS = [(d, {}) for d in (32, 96, 160, 192, 224, 256)] + [
    (128, dict(dtype="bf16", causal=True, window=(40, 0))),
    (64, dict(dtype="bf16", softcap=20.0, layout="bnhd")),
    (128, dict(window=(30, 17), pv_accum="f16", softcap=5.0)),
    (256, dict(dtype="bf16", window=(20, 20), layout="bnhd")),
    (96, dict(pv_accum="f16x2", causal=True, window=(50, 0))),
    # O staged through the Q tile (KernelConfig.stage_o) with a 16-bit O and with f16x2 beyond d = 128
    (160, dict(pv_accum="f16", causal=True)),
    (192, dict(pv_accum="f16", layout="bnhd")),
    (256, dict(pv_accum="f16", window=(40, 10))),
    (160, dict(pv_accum="f16x2")),
    (224, dict(pv_accum="f16x2", causal=True)),
    # three and four m16 tiles per warp (tiles: warps, m_tiles, kv_tile, stages; benchmarks/experiments/m_tiles/)
    (128, dict(pv_accum="f16", causal=True, tiles=(4, 3, 32, 2))),
    (64, dict(pv_accum="f16", window=(50, 0), tiles=(4, 4, 32, 3))),
    # quant="int8" (kernel/quantize.cu before flash_fwd): s8 rows of 2 (d 32), 4, 8 and 16 chunks; bf16, windows
    (32, dict(quant="int8")),
    (64, dict(quant="int8", pv_accum="f16", causal=True)),
    (128, dict(quant="int8")),
    (128, dict(quant="int8", pv_accum="f16x2", layout="bnhd")),
    (224, dict(quant="int8", dtype="bf16", window=(40, 10))),
    (256, dict(quant="int8", pv_accum="f16")),
    (64, dict(quant="int8-fp8", causal=True, layout="bnhd")),  # FP8 P@V: V^T rows of 2 .. 8 chunks
    (128, dict(quant="int8-fp8", window=(40, 10))),
    (256, dict(quant="int8-fp8")),
    # FP8 P@V with two-level f16 accumulation: groups of 64 keys (d 32's kv_tile 64) and 32 (d 128 / 256's kv_tile 32)
    (32, dict(quant="int8-fp8", pv_accum="f16x2", causal=True)),
    (128, dict(quant="int8-fp8", pv_accum="f16x2", layout="bnhd")),
    (256, dict(quant="int8-fp8", pv_accum="f16x2", window=(40, 10))),
]


def variants():
    """(config, options): every default configuration (d 64 / 128, causal or not, every P@V accumulation, sm_90 and
    sm_120) with plain options, then VARIANT_OPTIONS on sm_90's defaults (GQA with one K/V head)."""
    from flashsim.problem import resolve_options

    out = []
    for arch, d, causal, acc in itertools.product(("sm_90", "sm_120"), (64, 128), (False, True), SUPPORTED_PV_ACCUM):
        cfg = KernelConfig.default(arch, head_dim=d, causal=causal, pv_accum=acc)
        if cfg not in [c for c, _ in out]:
            out.append((cfg, {}))
    for d, o in VARIANT_OPTIONS:
        opts = resolve_options(
            o.get("causal", False),
            o.get("pv_accum", "f32"),
            None,
            None,
            o.get("window"),
            o.get("softcap"),
            o.get("layout"),
            o.get("quant"),
        )
        tiling = dict(zip(("warps", "m_tiles", "kv_tile", "stages"), o.get("tiles", ())))
        cfg = opts.kernel_config("sm_90", d, o.get("dtype", "f16"), **tiling)
        out.append((cfg, dict(window_size=opts.window_size, softcap=opts.softcap, layout=opts.layout, gqa=True)))
    return out


def main(argv):
    configs = variants()
    if "--list" in argv:
        for cfg, opts in configs:
            print(cfg.describe(), opts or "")
        return 0
    from flashsim.commands.verify import make_case_inputs
    from flashsim.gpu import attention

    for cfg, opts in configs:
        opts = dict(opts)
        hk = 1 if opts.pop("gqa", False) else 2
        q, k, v = make_case_inputs(
            "normal", 1, 2, 137, 201, cfg.head_dim, 1, heads_kv=hk, dtype=cfg.dtype, layout=cfg.layout
        )
        o, lse = attention(q, k, v, config=cfg, **opts)
        assert np.isfinite(np.asarray(o, np.float32)).all(), f"non-finite output: {cfg.describe()}"
        print(f"ran {cfg.describe()} {opts or ''}", flush=True)
    print(f"sanitize_kernel: {len(configs)} variants launched")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
