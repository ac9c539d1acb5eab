"""GPU: one small launch per serving kernel variant, meant to run under compute-sanitizer (memcheck, racecheck).

Usage: compute-sanitizer --tool memcheck python3 benchmarks/serving/sanitize_serving.py   (run_device.sh beside it)
       python3 benchmarks/serving/sanitize_serving.py --list                               (the variants; no GPU)
       ... sanitize_serving.py --fused: every call with its index check inside flash_fwd
       (flashsim.gpu.serving.FUSED), the same variants
The variants: decode with splits (contiguous cache, GQA packed, rows of 0 and 1 keys), decode whose block's warps
split the keys (KernelConfig.warp_split: the decode rule's choices on a contiguous and a paged cache, paged by hand,
causal bf16, d 256 f16x2, 2 splits of 3 warps, which keeps its separate check under --fused), paged caches of 16 and
256 keys per page in random order with a page two rows share, speculative rows (causal) with a window, group 1
(not packed) and MQA, bf16 and f16x2, variable-length batches with empty sequences, and flash_combine after every
split launch; then the same paged decode (one-warp split and warp_split) with check_indices=False and indices that
point outside the pages and lengths past the cache: the kernel clamps every index it reads, so the sanitizer must find
nothing there either; then those bad indices as torch GPU tensors with the check on (kernel/serving_check.cu before
flash_fwd, its record in mapped host memory, read by flashsim.gpu.check_index_errors, which must raise the ValueError
naming block_table or cache_seqlens), and a good varlen call through torch with its check.
"""

import sys

import numpy as np

from flashsim import tuning
from flashsim.commands.verify_serving import ServingCase, problem_of

VARIANTS = [
    ServingCase("kvcache", 8, 2, 128, nq=1, n_cache=300, seqlens=(300, 0, 1, 77), num_splits=4),
    ServingCase(
        "kvcache", 8, 2, 128, nq=1, n_cache=300, seqlens=(300, 0, 1, 170), page_size=16, num_splits=3, pages="shared"
    ),
    ServingCase(
        "kvcache",
        8,
        2,
        128,
        nq=3,
        n_cache=600,
        seqlens=(600, 257),
        page_size=256,
        num_splits=None,
        options=dict(causal=True),
    ),
    ServingCase(
        "kvcache",
        8,
        2,
        128,
        nq=16,
        n_cache=400,
        seqlens=(400, 150),
        num_splits=3,
        options=dict(causal=True, window_size=(40, 0)),
    ),
    ServingCase("kvcache", 4, 4, 64, nq=2, n_cache=300, seqlens=(300, 40, 17), page_size=32, num_splits=2),
    ServingCase("kvcache", 8, 1, 64, nq=4, n_cache=200, seqlens=(200, 64), options=dict(dtype="bf16")),
    ServingCase(
        "kvcache",
        4,
        2,
        256,
        nq=1,
        n_cache=150,
        seqlens=(150, 99),
        num_splits=2,
        options=dict(pv_accum="f16x2", softcap=10.0),
    ),
    ServingCase("kvcache", 8, 2, 128, nq=1, n_cache=256, seqlens=(200, 1, 77)),  # the decode rule: 4 warps split
    ServingCase(  # the paged rule's form, named (these 6 row groups are too few for the rule to take it)
        "kvcache",
        8,
        2,
        128,
        nq=1,
        n_cache=256,
        seqlens=(256, 0, 100),
        page_size=16,
        warp_split=tuning.WARP_SPLIT_PAGED_WARPS,
        stages=tuning.WARP_SPLIT_PAGED_STAGES,
    ),
    ServingCase("kvcache", 8, 2, 128, nq=1, n_cache=300, seqlens=(300, 0, 1, 170), page_size=16, warp_split=3),
    ServingCase(
        "kvcache",
        8,
        2,
        64,
        nq=3,
        n_cache=500,
        seqlens=(500, 333, 7),
        warp_split=6,
        options=dict(causal=True, dtype="bf16"),
    ),
    ServingCase(
        "kvcache", 4, 2, 256, nq=1, n_cache=400, seqlens=(400, 150), warp_split=6, options=dict(pv_accum="f16x2")
    ),
    ServingCase(  # warp_split with splits across blocks too: 2 x 3 parts, flash_combine after
        "kvcache", 8, 2, 128, nq=1, n_cache=300, seqlens=(300, 0, 1, 170), page_size=16, warp_split=3, num_splits=2
    ),
    ServingCase("varlen", 4, 2, 128, q_lens=(3, 0, 130, 1, 64), k_lens=(50, 7, 260, 0, 64), options=dict(causal=True)),
    ServingCase("varlen", 8, 1, 64, q_lens=(77, 150), k_lens=(200, 150), options=dict(window_size=(30, 10))),
]


def main(argv):
    if "--list" in argv:
        for case in VARIANTS:
            print(case.name())
        print("unchecked: paged decode with block_table entries outside the pages and cache_seqlens past the cache")
        return 0
    import flashsim
    from flashsim.gpu import serving as gs

    gs.FUSED = "--fused" in argv
    for case in VARIANTS:
        a = case.arrays()
        kw = case.call_kwargs()
        if case.call == "kvcache":
            if case.warp_split > 1:  # its configuration (the warps splitting the keys) as the call's config
                kw["config"] = problem_of(case, a, "sm_90")[0].config
            o, lse = flashsim.gpu.attention_with_kvcache(
                a["q"],
                a["k_cache"],
                a["v_cache"],
                cache_seqlens=a.get("cache_seqlens"),
                block_table=a.get("block_table"),
                check_overflow=False,
                **kw,
            )
        else:
            o, lse = flashsim.gpu.attention_varlen(
                a["q"],
                a["k"],
                a["v"],
                a["cu_seqlens_q"],
                a["cu_seqlens_k"],
                a["max_seqlen_q"],
                a["max_seqlen_k"],
                check_overflow=False,
                **kw,
            )
        print(f"ran {case.name()}", flush=True)
    case = VARIANTS[1]
    a = case.arrays()
    table = a["block_table"].copy()
    table[0, 2], table[1, -1] = 10**6, -7  # outside [0, num_pages)
    lengths = np.array([10**5, 1, 5000, 2], np.int32)  # past the cache
    ws = next(c for c in VARIANTS if c.warp_split > 1 and c.page_size)  # the same bad indices, warps splitting keys
    wa = ws.arrays()
    for arrays, how in ((a, dict(num_splits=3)), (wa, dict(config=problem_of(ws, wa, "sm_90")[0].config))):
        flashsim.gpu.attention_with_kvcache(
            arrays["q"],
            arrays["k_cache"],
            arrays["v_cache"],
            cache_seqlens=lengths,
            block_table=table,
            check_indices=False,
            check_overflow=False,
            **how,
        )
    print("ran unchecked bad indices (clamped), one-warp split and warp_split builds", flush=True)
    checked = 0
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        gpu = {n: torch.from_numpy(np.ascontiguousarray(x)).cuda() for n, x in a.items() if isinstance(x, np.ndarray)}
        flashsim.gpu.attention_with_kvcache(
            gpu["q"],
            gpu["k_cache"],
            gpu["v_cache"],
            cache_seqlens=torch.from_numpy(lengths).cuda(),
            block_table=torch.from_numpy(table).cuda(),
            num_splits=3,
        )
        try:
            flashsim.gpu.check_index_errors()
        except ValueError as exc:
            print(f"ran checked bad indices on the GPU: {exc}", flush=True)
        else:
            print("ERROR: the device check found no bad index", flush=True)
            return 1
        v = VARIANTS[-2].arrays()
        t = {n: torch.from_numpy(np.ascontiguousarray(v[n])).cuda() for n in ("q", "k", "v")}
        cu = [torch.from_numpy(v[n]).cuda() for n in ("cu_seqlens_q", "cu_seqlens_k")]
        flashsim.gpu.attention_varlen(t["q"], t["k"], t["v"], *cu, v["max_seqlen_q"], v["max_seqlen_k"], causal=True)
        flashsim.gpu.check_index_errors()
        print("ran a checked varlen call through torch", flush=True)
        checked = 2
    how = (
        "the index check inside flash_fwd (fused)"
        if gs.FUSED
        else "flash_fwd as the index check's programmatic dependent"
        if gs.OVERLAP_CHECK
        else "the index check launched first"
    )
    how += ", each split launch followed by flash_combine"
    print(f"sanitize_serving: {len(VARIANTS) + 2 + checked} calls ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
