"""Kernel sources A/B: the same configurations built from several versions of kernel/flash_fwd.cu, timed in
alternating rounds on this GPU, each candidate first checked bit for bit against the emulator of this checkout.

    PYTHONPATH=. python3 benchmarks/experiments/softmax_chains/ab_probe.py --json OUT.json \\
        --source before=PATH_A.cu --source after=kernel/flash_fwd.cu [--check after]

This round (ab.txt): before = kernel/flash_fwd.cu of 7286d43; permt = that kernel with tree_per_tile.patch applied
(the patch also changes the emulator's row sum to the same tree, hence --check); joint = permt with
joint_vs_per_tile.diff applied (every row's softmax before one rescale for the warp):

    git show 7286d43:kernel/flash_fwd.cu > /tmp/before.cu && git apply softmax_chains/tree_per_tile.patch
    cp kernel/flash_fwd.cu /tmp/permt.cu && patch -o /tmp/joint.cu /tmp/permt.cu softmax_chains/joint_vs_per_tile.diff
    PYTHONPATH=. python3 .../ab_probe.py --json ab.json --source before=/tmp/before.cu --source joint=/tmp/joint.cu \\
        --source permt=/tmp/permt.cu --check joint --check permt --rounds 5

The first source is the baseline (speed-ups are against it). Only the sources named by --check are compared with
the emulator (an older source follows an older emulator). Times: CUDA events, the attention kernel alone (a
quantized configuration's pass is run once beforehand and its scratch kept), medians over alternating rounds.
"""

from __future__ import annotations

import argparse
import json
import pathlib

REPS = 20
B, H, N = 4, 16, 4096
# (label, head dim, pv_accum, quant, causal, tiling or None for the default)
CASES = (
    ("f16 P@V", 128, "f16", "none", False, None),
    ("f32 P@V", 128, "f32", "none", False, None),
    ("f16x2 P@V", 128, "f16x2", "none", False, None),
    ("f16 P@V causal", 128, "f16", "none", True, None),
    ("f32 P@V causal", 128, "f32", "none", True, None),
    ("f16 P@V", 64, "f16", "none", False, None),
    ("f32 P@V", 64, "f32", "none", False, None),
    ("int8 f16 P@V", 128, "f16", "int8", False, None),
    ("int8-fp8 f32", 128, "f32", "int8-fp8", False, None),
    ("int8-fp8 f16x2", 128, "f16x2", "int8-fp8", False, None),
    ("int8-fp8 f32", 64, "f32", "int8-fp8", False, None),
    ("int8-fp8 f32 4x2x32", 64, "f32", "int8-fp8", False, (4, 2, 32, 2)),
)
CHECKS = (((1, 2, 77, 333), "normal", False), ((2, 1, 200, 130), "adversarial", True), ((1, 3, 96, 96), "wide", True))


def main(argv=None):
    import numpy as np
    import torch

    from flashsim import gpu
    from flashsim.commands.bench import cuda_time_alternating, kernel_alone
    from flashsim.commands.verify import emulator_outputs, gpu_outputs, make_case_inputs
    from flashsim.config import KernelConfig
    from flashsim.gpu import launch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    p.add_argument("--source", action="append", required=True, help="NAME=PATH of a flash_fwd.cu")
    p.add_argument("--check", action="append", default=[], help="a source NAME to check against the emulator")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    sources = dict(s.split("=", 1) for s in args.source)

    plain_build = launch.build_kernel
    texts = {name: pathlib.Path(path).read_text() for name, path in sources.items()}

    def use(name):
        launch.build_kernel = lambda config, arch: plain_build(config, arch, source=texts[name])
        launch.clear_caches()

    result = dict(gpu=torch.cuda.get_device_name(), sources=sources, checks=[], rows=[])
    for name in args.check:
        use(name)
        for (b, h, nq, nk), kind, causal in CHECKS:
            for _, d, acc, quant, _, tiling in CASES:
                cfg = KernelConfig.default("sm_90", head_dim=d, pv_accum=acc, quant=quant, causal=causal)
                if tiling:
                    cfg = cfg.with_(warps=tiling[0], m_tiles=tiling[1], kv_tile=tiling[2], stages=tiling[3])
                q, k, v = make_case_inputs(kind, b, h, nq, nk, d, 5)
                og, lg, _ = gpu_outputs(q, k, v, cfg)
                oe, le, _ = emulator_outputs(q, k, v, cfg, "sm_90")
                same = bool(
                    np.array_equal(og.view(np.uint16), oe.view(np.uint16))
                    and np.array_equal(lg.view(np.uint32), le.view(np.uint32))
                )
                result["checks"].append(
                    dict(source=name, config=cfg.describe(), kind=kind, shape=[b, h, nq, nk], bit_exact=same)
                )
                print(f"check {name:8} {kind:12} {cfg.describe():60} {'bit-exact' if same else 'DIFFERS'}", flush=True)

    rnd = lambda d: torch.randn(B, H, N, d, device="cuda", dtype=torch.float16)
    for label, d, acc, quant, causal, tiling in CASES:
        q, k, v = rnd(d), rnd(d), rnd(d)
        k = k + 2.0 * torch.randn(B, H, 1, d, device="cuda", dtype=torch.float16)  # keys with a mean
        cfg = KernelConfig.default("sm_90", head_dim=d, pv_accum=acc, quant=quant, causal=causal)
        if tiling:
            cfg = cfg.with_(warps=tiling[0], m_tiles=tiling[1], kv_tile=tiling[2], stages=tiling[3])
        flops = 4.0 * B * H * N * N * d / (2 if causal else 1)
        gos = {}
        for name in sources:
            use(name)
            gos[name] = kernel_alone(gpu.prepared_launch(q, k, v, config=cfg)[0], quant != "none")
        med = {name: t[0] for name, t in cuda_time_alternating(gos, REPS, args.rounds).items()}
        base = med[next(iter(sources))]
        row = dict(
            label=f"d {d} {label}",
            config=cfg.describe(),
            ms=med,
            tflops={n: flops / (m * 1e-3) / 1e12 for n, m in med.items()},
            speedup={n: base / m for n, m in med.items()},
        )
        result["rows"].append(row)
        print(
            f"{row['label']:28} "
            + "  ".join(f"{n} {row['tflops'][n]:6.1f} ({row['speedup'][n]:.3f}x)" for n in sources)
            + f"   {cfg.describe()}",
            flush=True,
        )
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
