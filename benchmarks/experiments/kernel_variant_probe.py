"""A kernel variant (a patched kernel/flash_fwd.cu, switched on by a define) against the plain loop, same tiling.

    mkdir -p /tmp/v/kernel && cp kernel/flash_fwd.cu /tmp/v/kernel/ && (cd /tmp/v && git apply $OLDPWD/PATCH)
    PYTHONPATH=. python3 benchmarks/experiments/kernel_variant_probe.py --source /tmp/v/kernel/flash_fwd.cu \
        --define FS_X=1 --cases SET --json OUT.json

Variants so far (each folder holds its patch, made against the kernel of commit 7286d43 unless said, and its logs).
Their speed figures until 2026-11-30's fix of ``variant_builder`` are void (the timed variant had its switch off;
benchmarks/RESULTS.md, sixth round): measure them again before drawing a conclusion.
  pingpong/        pingpong.patch, --define FS_PINGPONG=1 --cases eight_warps: two warp groups take turns on the
                   tensor cores (named barriers around Q K^T and P V)
  mbarrier_ring/   mbarrier_ring.patch, --define FS_MBAR=1 --cases defaults: the K / V ring synchronised by
                   mbarriers (full / empty per slot) instead of a block barrier per tile
  persistent/      persistent.patch (against the kernel of a5da63c), --define FS_PERSIST=264 --cases causal / defaults
                   (run.sh): a persistent grid, 264 resident CTAs looping over the work items
  persistent_dynamic/  persistent_dynamic.patch (against a5da63c), the same with the items drawn from a counter
  persistent_prefetch/ persistent_prefetch.patch (against a5da63c), and the next item's Q and first tiles loaded
                   under the current item's last tiles (run.sh; timing_check.py: persistence checked directly)
  lpt/             lpt.patch (against the kernel of a5da63c), --define FS_LPT=1 --cases causal --shape 4,16,4096 and
                   8,32,2048: causal blocks longest first across the whole grid (run.sh, logs)
  stage_o_wider/   no patch: today's kernel with --define FS_OSTAGE=1 --cases stage_o_wider (run.sh): O staged for
                   16-byte stores in the builds KernelConfig.stage_o leaves out, where ptxas says it removes spill or
                   registers; run_off.sh: --define FS_OSTAGE=0 --cases stage_o_off, the staged defaults of the
                   ninth round's rule without a timing of their own, against themselves unstaged
  ablation/        ablation.patch (against the kernel of 669fee1), --define FS_ABLATE=1..7 --cases ablation: the
                   defaults with the softmax, the K / V refill copies or P V left out, timing only (wrong O)
  sfu_offload/     sfu_offload.patch (against the kernel of 7b73ed6), --define FS_EX2_MODE=1..4 --cases sfu_offload:
                   the softmax's exponentials (none, half, all or a quarter) by a polynomial on the FMA pipe instead
                   of the SFU, timing only (wrong O)
  lazy_rescale/    lazy_rescale.patch (against the kernel of 7b73ed6), --define FS_LAZY_RESCALE=8 --cases lazy_rescale:
                   a row keeps its running max until a tile's exceeds it by more than 8 (exponent units), the O rescale
                   skipped by the warp vote at every d, timing only (wrong O)
  stagger/         stagger.patch (against the kernel of d1185c5), --define FS_STAGGER_CYCLES=N --cases stagger: the
                   first wave's second block on each SM waits N SM cycles, so that the two blocks of an SM run out of
                   phase (run.sh: at 16,16,1024 and 4,16,4096)
  pingpong_ring/   pingpong_ring.patch (against the kernel of f862d1d), --define FS_PINGPONG=1 or 2 --cases
                   pingpong_ring: ping-pong on the mbarrier ring, a turn being P V of tile t and Q K^T of tile t + 1
                   (1: the exponentials in the softmax phase; 2: where exp_in_pv puts them)
  mt_split/        mt_split.patch (against the kernel of 669fee1), --define FS_MT_SPLIT=1 --cases mt_split: P V of
                   m16 tile mt - 1 written beside tile mt's softmax, in one basic block
  exp_in_pv/       exp_in_pv.patch (against the kernel of a5e48f4), --define FS_EXP_IN_PV=1 --cases exp_in_pv: the
                   max, alpha and O rescale first, then each k16 slice's exponentials beside its P V mma's
                   (run.sh, run_more.sh); run_off.sh: --define FS_EXP_IN_PV=0 --cases exp_in_pv_off on the landed
                   kernel, the builds its rule turns on that no probe had timed ("variant" there is the build without);
                   run_causal.sh: --define FS_EXP_IN_PV=1 --cases exp_in_pv_causal over N
  exp_from/        exp_from.patch (against the kernel of ca98cee), --define FS_EXP_FROM=1 or 3 --cases exp_from_1 /
                   exp_from_3: exp_in_pv for the k16 slices from the given one on, the earlier ones before the vote
  prefetch_all/    prefetch_all.patch (against the kernel of e3ca176), --define FS_PREFETCH_ALL=1 --cases defaults /
                   causal (run.sh): the prologue fills every ring slot, the last one too
  prefetch_next/   prefetch_next.patch (against the kernel of 95f3766), --define FS_PREFETCH_NEXT=2 --cases defaults /
                   causal (run.sh): each block prefetches into L2 the first tiles of the block 2 x SMs later
  min_blocks/      min_blocks.patch (against the kernel of 5cb28bf), --define FS_MIN_BLOCKS=3 --cases min_blocks:
                   __launch_bounds__ asks ptxas for 3 blocks per SM (at most 168 registers a thread at 128 threads),
                   3 warps per scheduler where the tilings' 170-195 registers gave 2

For each (head dim, P@V accumulation, quant, causal) of the case set and each tiling, three builds are timed in
alternating rounds at 4 x 16 x 4096 x d (--shape; the attention kernel alone): the default configuration, the plain loop
with the tiling and the variant with it. Each variant build is first checked bit for bit against the emulator
(ragged, causal and adversarial problems): a change of schedule must not change a bit.
"""

from __future__ import annotations

import argparse
import json
import pathlib

REPS = 20
SHAPE = "4,16,4096"  # B,H,N of the timed problem (--shape)
# case set -> {(head dim, pv_accum, quant, causal) -> tilings (warps, m_tiles, kv_tile, stages); None: the default}
CASES = {
    "eight_warps": {
        (128, "f16", "none", False): [(8, 2, 64, 2), (8, 2, 32, 2), (8, 2, 32, 3), (8, 2, 64, 3)],
        (128, "f32", "none", False): [(8, 2, 32, 2), (8, 2, 32, 3), (8, 1, 64, 2)],
        (128, "f16x2", "none", False): [(8, 2, 64, 2), (8, 2, 32, 2)],
        (128, "f16", "none", True): [(8, 2, 64, 2), (8, 2, 32, 2)],
        (128, "f32", "none", True): [(8, 2, 32, 2)],
        (64, "f16", "none", False): [(8, 2, 64, 2), (8, 2, 128, 2)],
        (64, "f32", "none", False): [(8, 2, 64, 2), (8, 2, 32, 3)],
        (128, "f16", "int8", False): [(8, 2, 64, 2)],
        (128, "f32", "int8-fp8", False): [(8, 2, 32, 2)],
        (128, "f16x2", "int8-fp8", False): [(8, 2, 32, 2)],
    },
    "min_blocks": {
        (128, "f16", "none", False): [(4, 1, 32, 2), (4, 2, 16, 2), (4, 2, 32, 2)],
        (128, "f32", "none", False): [(4, 1, 64, 2), (4, 1, 32, 2)],
        (128, "f16x2", "none", False): [(4, 1, 32, 2)],
        (64, "f16", "none", False): [(4, 2, 64, 3), (4, 2, 64, 2)],
        (64, "f32", "none", False): [(4, 2, 32, 2), (4, 1, 128, 2)],
    },
    "causal": {
        (128, "f16", "none", True): [None],
        (128, "f32", "none", True): [None],
        (128, "f16x2", "none", True): [None],
        (64, "f16", "none", True): [None],
        (64, "f32", "none", True): [None],
        (128, "f16", "int8", True): [None],
        (128, "f16", "none", False): [None],
    },
    "stage_o_wider": {  # FS_OSTAGE=1 on today's kernel where KernelConfig.stage_o is off (stage_o_wider/README.md)
        (192, "f16", "none", False): [None],  # ptxas: 20 B of spill -> none
        (192, "f16", "none", True): [None],
        (224, "f16x2", "none", False): [None],  # 32 -> 16 B
        (256, "f16", "none", False): [None],  # 246 -> 241 registers
        (160, "f16x2", "none", False): [None],  # 255 -> 251
        (64, "f32", "none", False): [None],  # 220 -> 212
        (64, "f32", "none", True): [None],
    },
    "stage_o_off": {  # FS_OSTAGE=0: the defaults the ninth round's stage_o rule stages that no probe had timed staged
        (160, "f16", "none", False): [None],  # ptxas: 234 -> 231 registers staged
        (160, "f16", "none", True): [None],
        (224, "f16", "none", False): [None],  # 234 -> 230
        (192, "f16", "none", False): [None],  # a control: measured 1.025-1.034x staged (ninth round)
    },
    "mt_split": {  # mt_split/: P V of m16 tile 0 beside tile 1's softmax (two-tile defaults, the plain P V paths)
        (128, "f16", "none", False): [None],
        (128, "f16", "none", True): [None],
        (64, "f16", "none", False): [None],
        (128, "f32", "none", False): [None],  # ptxas: 0 -> 48 B of spill with the switch
        (128, "f16", "int8", False): [None],
    },
    "exp_in_pv": {  # exp_in_pv/: each k16 slice's exponentials beside the P V mma's (the builds with the rescale vote)
        (128, "f16", "none", False): [None],
        (128, "f16", "none", True): [None],
        (128, "f32", "none", False): [None],
        (128, "f32", "none", True): [None],  # ptxas: 0 -> 48 B of spill with the switch
        (160, "f16", "none", False): [None],
        (192, "f32", "none", False): [None],
        (256, "f16", "none", False): [None],
        (256, "f32", "none", False): [None],
    },
    "exp_in_pv_more": {  # exp_in_pv/: the builds the first probe left out, and f32 d = 128 tilings without spill
        (128, "f16", "none", False): [None],  # the first probe's gain again
        (128, "f16", "none", True): [None],  # first probe: 1.023 at 4,16,4096, 0.971 at 16,16,1024
        (128, "f32", "none", False): [(4, 2, 32, 2), (4, 2, 32, 3), (8, 1, 64, 2)],  # ptxas: no spill with the switch
        (160, "f16", "none", True): [None],  # 0 -> 28 B of spill
        (160, "f32", "none", False): [None],
        (192, "f32", "none", True): [None],  # 0 -> 20 B
        (224, "f16", "none", False): [None],
        (224, "f32", "none", False): [None],
        (256, "f16", "none", True): [None],
        (160, "f16", "int8", False): [None],
        (256, "f16", "int8", False): [None],  # 48 -> 0 B
    },
    "exp_in_pv_off": {  # --define FS_EXP_IN_PV=0 on the landed kernel: builds the rule turns on that no probe timed
        (224, "f16", "none", True): [None],
        (160, "f32", "none", True): [None],
        (224, "f32", "none", True): [None],  # ptxas: 20 -> 36 B of spill with it
        (256, "f32", "none", True): [None],
        (224, "f16", "int8", False): [None],
        (192, "f32", "none", False): [None],  # a control: 1.041 / 1.056 with it in the first probe
    },
    "exp_from_1": {  # exp_from/ with FS_EXP_FROM=1: slice 0's exponentials before the vote, slices 1.. in the P V loop
        (128, "f32", "none", False): [None],  # ptxas: 255 registers, no spill (full exp_in_pv: 8 B)
        (128, "f16", "none", False): [None],  # against the landed full interleave: 248 -> 239 registers
        (128, "f16", "none", True): [None],  # 241 -> 243 registers (full: 248)
    },
    "exp_from_3": {  # exp_from/ with FS_EXP_FROM=3: only the last k16 slice's exponentials in the P V loop (kv_tile 64)
        (128, "f32", "none", False): [None],  # no spill
        (128, "f16", "int8", False): [None],  # no spill (full exp_in_pv: 240 B)
        (128, "f16", "none", True): [None],  # 247 registers
    },
    "exp_in_pv_causal": {  # --define FS_EXP_IN_PV=1 on the landed kernel, over N (exp_in_pv/run_causal.sh)
        (128, "f16", "none", True): [None],  # left out by the rule: on only in the variant
        (128, "f16", "none", False): [None],  # on in both builds: the probe's own spread
    },
    "ablation": {  # ablation/: the defaults with parts of the KV loop left out (timing only: "DIFFERS" expected)
        (128, "f16", "none", False): [None],
        (128, "f32", "none", False): [None],
        (128, "f16", "none", True): [None],
        (64, "f16", "none", False): [None],
    },
    "sfu_offload": {  # sfu_offload/: some exponentials by an FMA-pipe polynomial (timing only: "DIFFERS" expected)
        (128, "f16", "none", False): [None],
        (128, "f32", "none", False): [None],
        (128, "f16", "none", True): [None],
        (64, "f16", "none", False): [None],
        (64, "f32", "none", False): [None],
    },
    "stagger": {  # stagger/: the first wave's second block on each SM starts later (non-causal defaults)
        (128, "f16", "none", False): [None],
        (128, "f32", "none", False): [None],
        (64, "f16", "none", False): [None],
    },
    "pingpong_ring": {  # pingpong_ring/: two warp groups take turns (P V + next Q K^T) on the mbarrier ring
        (128, "f16", "none", False): [(8, 2, 64, 3), (8, 2, 64, 2)],
        (128, "f32", "none", False): [(8, 2, 64, 3)],
        (128, "f16", "none", True): [(8, 2, 64, 3)],
        (64, "f16", "none", False): [(8, 2, 128, 3), (8, 2, 64, 3)],
    },
    "defaults": {
        (128, "f16", "none", False): [None],
        (128, "f32", "none", False): [None, (4, 2, 32, 2)],
        (128, "f16x2", "none", False): [None],
        (128, "f16", "none", True): [None],
        (128, "f32", "none", True): [None],
        (64, "f16", "none", False): [None],
        (64, "f32", "none", False): [None],
        (128, "f16", "int8", False): [None],
        (128, "f32", "int8-fp8", False): [None],
        (128, "f16x2", "int8-fp8", False): [None],
    },
}
CASES["lazy_rescale"] = CASES["sfu_offload"]  # lazy_rescale/ times the same softmax-side defaults
CHECKS = (((1, 2, 77, 333), "normal", False), ((2, 1, 300, 300), "adversarial", True), ((1, 3, 517, 260), "wide", True))


def with_tiling(config, tiling):
    """``config`` with a case set's tiling (warps, m_tiles, kv_tile, stages); ``tiling`` None: ``config`` itself."""
    if tiling is None:
        return config
    return config.with_(**dict(zip(("warps", "m_tiles", "kv_tile", "stages"), tiling)))


def sanitize_pairs(cases: dict) -> list[tuple[int, str]]:
    """(head dim, P@V) of --one's launches: d = 128 with f16 and f32 P@V (the sets made for d = 128 changes), or the
    set's own unquantized pairs when it has no d = 128 case (the tiling is then the set's first for the pair)."""
    own = list(dict.fromkeys((d, acc) for (d, acc, quant, _) in cases if quant == "none"))
    return [(128, acc) for acc in ("f16", "f32")] if any(d == 128 for d, _ in own) or not own else own


def variant_builder(source: str, define: str, build_kernel):
    """The variant's builder: ``build_kernel`` (flashsim.gpu.launch.build_kernel) on ``source`` with the switch
    ``define`` ("NAME=VALUE") on top of the configuration's defines. The switch is bound here, once: until
    2026-11-30 main() built it from a name that its timing loop reused as a loop variable, so every variant timed
    (and every check after a probe's first case) was the patched source with the switch off
    (benchmarks/RESULTS.md, sixth round; tests/test_variant_probe.py)."""
    key, _, value = define.partition("=")
    if not key or not value.lstrip("-").isdigit():
        raise ValueError(f"--define must be NAME=INTEGER, got {define!r}")
    switch = {key: int(value)}

    def build(config, arch):
        return build_kernel(config, arch, source=source, extra_defines=switch)

    return build


def main(argv=None):
    import numpy as np
    import torch

    from flashsim import gpu
    from flashsim.commands.bench import attention_flops, cuda_time_alternating, kernel_alone
    from flashsim.commands.verify import emulator_outputs, gpu_outputs, make_case_inputs
    from flashsim.config import KernelConfig
    from flashsim.gpu import launch

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", required=True)
    p.add_argument("--source", required=True, help="kernel/flash_fwd.cu with the variant's patch applied")
    p.add_argument("--define", required=True, help="NAME=VALUE that switches the variant on")
    p.add_argument("--cases", required=True, choices=sorted(CASES))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--shape", default=SHAPE, help="B,H,N of the timed problem (default %(default)s)")
    p.add_argument(
        "--one",
        action="store_true",
        help="only one small causal launch of the variant per (head dim, P@V) of sanitize_pairs, checked "
        "(for compute-sanitizer)",
    )
    args = p.parse_args(argv)
    plain_build = launch.build_kernel
    source = pathlib.Path(args.source).read_text()
    variant_build = variant_builder(source, args.define, plain_build)
    # the set's first build: a switch the configuration already sets (FS_OSTAGE=0 where stage_o is off) is no variant
    (d0, acc0, quant0, causal0), tilings0 = next(iter(CASES[args.cases].items()))
    probe_cfg = with_tiling(
        KernelConfig.default("sm_90", head_dim=d0, pv_accum=acc0, quant=quant0, causal=causal0), tilings0[0]
    )
    if variant_build(probe_cfg, "sm_90").cubin == plain_build(probe_cfg, "sm_90", source=source).cubin:
        print(
            f"note: {args.define} does not change the build of {args.source} for {probe_cfg.describe()}: the "
            f"variant is that source as it is",
            flush=True,
        )

    def use(build):
        launch.build_kernel = build
        launch.clear_caches()

    if args.one:
        use(variant_build)
        for d, acc in sanitize_pairs(CASES[args.cases]):
            c = with_tiling(
                KernelConfig.default("sm_90", head_dim=d, pv_accum=acc, causal=True),
                CASES[args.cases].get((d, acc, "none", False), [None])[0],
            )
            qq, kk, vv = make_case_inputs("normal", 1, 2, 300, 333, d, 7)
            og, lg, _ = gpu_outputs(qq, kk, vv, c)
            oe, le, _ = emulator_outputs(qq, kk, vv, c, "sm_90")
            print(c.describe(), "bit-exact" if np.array_equal(og.view(np.uint16), oe.view(np.uint16)) else "DIFFERS")
        return
    B, H, N = (int(x) for x in args.shape.split(","))
    result = dict(
        gpu=torch.cuda.get_device_name(), define=args.define, cases=args.cases, shape=[B, H, N], checks=[], rows=[]
    )
    rnd = lambda d: torch.randn(B, H, N, d, device="cuda", dtype=torch.float16)
    for (d, acc, quant, causal), tilings in CASES[args.cases].items():
        default = KernelConfig.default("sm_90", head_dim=d, pv_accum=acc, quant=quant, causal=causal)
        q, k, v = rnd(d), rnd(d), rnd(d)
        k = k + 2.0 * torch.randn(B, H, 1, d, device="cuda", dtype=torch.float16)  # keys with a mean
        flops = attention_flops(B, H, N, d, causal)
        for tiling in tilings:
            cfg = with_tiling(default, tiling)
            use(variant_build)
            same = True
            for (b, h, nq, nk), kind, cz in CHECKS:
                c = cfg.with_(causal=cz or causal)
                qq, kk, vv = make_case_inputs(kind, b, h, nq, nk, d, 7)
                og, lg, _ = gpu_outputs(qq, kk, vv, c)
                oe, le, _ = emulator_outputs(qq, kk, vv, c, "sm_90")
                ok = bool(
                    np.array_equal(og.view(np.uint16), oe.view(np.uint16))
                    and np.array_equal(lg.view(np.uint32), le.view(np.uint32))
                )
                result["checks"].append(dict(config=c.describe(), kind=kind, shape=[b, h, nq, nk], bit_exact=ok))
                same &= ok
            gos = {}
            for label, build, c in (
                ("default", plain_build, default),
                ("plain", plain_build, cfg),
                ("variant", variant_build, cfg),
            ):
                use(build)
                gos[label] = kernel_alone(gpu.prepared_launch(q, k, v, config=c)[0], quant != "none")
            ms = cuda_time_alternating(gos, REPS, args.rounds)
            tf = {name: flops / (t[0] * 1e-3) / 1e12 for name, t in ms.items()}
            tiling = tiling or (cfg.warps, cfg.m_tiles, cfg.kv_tile, cfg.stages)
            row = dict(
                head_dim=d,
                pv_accum=acc,
                quant=quant,
                causal=causal,
                tiling=list(tiling),
                default=default.describe(),
                tflops=tf,
                bit_exact=same,
                variant_vs_plain=tf["variant"] / tf["plain"],
                variant_vs_default=tf["variant"] / tf["default"],
            )
            result["rows"].append(row)
            print(
                f"d {d:3} {acc:5} {quant:8} {'causal' if causal else 'full  '} {'x'.join(map(str, row['tiling'])):9} "
                f"default {tf['default']:6.1f}  plain {tf['plain']:6.1f}  variant {tf['variant']:6.1f} "
                f"({row['variant_vs_plain']:.3f}x plain, {row['variant_vs_default']:.3f}x default)  "
                f"{'bit-exact' if same else 'DIFFERS'}",
                flush=True,
            )
    use(plain_build)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
