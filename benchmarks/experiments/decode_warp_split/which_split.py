"""On the GPU, a diagnosis: which split call's bits does a warp_split call give? One KV-cache row set (B 2, Hq 8,
Hkv 2, d 128, bf16, rows of 512 and 300 keys), each warp_split candidate run twice on the GPU; its O and LSE compared
with the emulator's one-warp call at every split count 1..16 of the same kv tile (bits), and with its own repeat.

    python3 benchmarks/experiments/decode_warp_split/which_split.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import torch

import flashsim
from flashsim import KernelConfig
from flashsim.emulator import kernel_program
from flashsim.emulator import serving as emulated
from flashsim.gpu import launch
from flashsim.gpu import runtime as rt
from flashsim.gpu.build import kernel_dir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from small_calls import bits, host  # noqa: E402  (this folder's CUDA-tensor-to-numpy and bit views)


def parts_of(call):
    """(lse_parts, o_parts) the emulator's ``call`` hands its combine."""
    seen, combine = {}, kernel_program.combine

    def spy(lse_parts, o_parts, **kw):
        seen.update(lse=np.asarray(lse_parts), o=np.asarray(o_parts), kw=kw)
        return combine(lse_parts, o_parts, **kw)

    kernel_program.combine = spy
    try:
        call()
    finally:
        kernel_program.combine = combine
    return seen


CASES = [(2, 64), (3, 64), (4, 32), (6, 32)]  # (W, kv tile)


# the in-block merge patched to output one warp's part alone (weight 1, its LSE): a probe of the parts
MERGE_WEIGHT = "for (int w = 0; w < KW; ++w) row_w[lr * ROW_W + w] = __fmul_rn(wt[w], inv);"
MERGE_LSE = (
    "if (col == 0) lse[lse_base + hq * lse_hs + qi] = combine_lse(rw[KW], rw[KW + 1], combine_empty(rw[KW + 1]));"
)


def probe_source(src: str, w: int) -> str:
    """kernel/flash_fwd.cu's text with the in-block merge outputting warp ``w``'s part alone (weight 1, its LSE)."""
    assert src.count(MERGE_WEIGHT) == 1 and src.count(MERGE_LSE) == 1, "the merge changed: update the probe"
    src = src.replace(MERGE_WEIGHT, MERGE_WEIGHT.replace("__fmul_rn(wt[w], inv)", f"(w == {w} ? 1.f : 0.f)"))
    lse = f"if (col == 0) lse[lse_base + hq * lse_hs + qi] = warp_part(smem, {w}, lr, WARP_M * D);"
    return src.replace(MERGE_LSE, lse)


def part_probe(cfg, w):
    """Load, in place of ``cfg``'s kernel, a build whose merge outputs warp ``w``'s part alone."""
    src = probe_source((kernel_dir() / "flash_fwd.cu").read_text(), w)
    launch.clear_caches()
    kern = rt.load(launch.build_kernel(cfg, "sm_90", source=src), launch.KERNEL_NAME)
    rt.set_dynamic_smem(kern, cfg.smem_bytes)
    launch._KERNELS[(cfg, "sm_90")] = kern


def main() -> int:
    g = torch.Generator(device="cuda").manual_seed(2)
    b, hq, hk, n, d = 2, 8, 2, 512, 128
    lens = torch.tensor([512, 300], dtype=torch.int32, device="cuda")
    q = torch.randn((b, 1, hq, d), generator=g, device="cuda").to(torch.bfloat16)
    k = torch.randn((b, n, hk, d), generator=g, device="cuda").to(torch.bfloat16)
    v = torch.randn((b, n, hk, d), generator=g, device="cuda").to(torch.bfloat16)
    hq_, hk_, hv_, hl = host(q), host(k), host(v), host(lens)
    for w, kv in CASES:
        cfg = KernelConfig(head_dim=d, dtype="bf16", warps=w, warp_split=w, kv_tile=kv, stages=2, layout="bnhd",
                           seqlens=True, pack_gqa=True)  # fmt: skip
        runs = [
            flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=lens, config=cfg, check_indices=c)
            for c in (True, False, True)
        ]
        o, lse = (host(x) for x in runs[0])
        repeat = all(np.array_equal(bits(o), bits(host(r[0]))) for r in runs[1:])
        one = cfg.with_(warps=1, warp_split=1)
        found = []
        for s in range(1, n // kv + 1):
            eo, el = emulated.attention_with_kvcache(hq_, hk_, hv_, cache_seqlens=hl, config=one, num_splits=s)
            per_b = [bool(np.array_equal(bits(o[i]), bits(eo[i])) and np.array_equal(bits(lse[i]), bits(el[i])))
                     for i in range(b)]  # fmt: skip
            if any(per_b):
                found.append((s, per_b))
        eo, el = emulated.attention_with_kvcache(hq_, hk_, hv_, cache_seqlens=hl, config=cfg)
        # the parts merged in reverse order (a merge that took the warps backwards would give these bits)
        seen = parts_of(lambda: emulated.attention_with_kvcache(hq_, hk_, hv_, cache_seqlens=hl, config=cfg))
        ro, _ = kernel_program.combine(seen["lse"][::-1], seen["o"][::-1], **seen["kw"])
        ro = np.asarray(ro).reshape(o.shape)
        print(f"  reversed-order merge == GPU O: {np.array_equal(bits(ro), bits(o))}", flush=True)
        same = np.array_equal(bits(o), bits(eo)) and np.array_equal(bits(lse), bits(el))
        diff = np.abs(o.astype(np.float32) - np.asarray(eo).astype(np.float32))
        print(f"W={w} kv={kv}: repeatable {repeat}; == emulator {same}; max |O - emulator| {diff.max():.3g}; "
              f"equal to the one-warp call with num_splits (s, per batch row): {found}", flush=True)  # fmt: skip
        # each warp's part, from the GPU (the probe build) against the emulator's part (O rounded to bf16)
        for part in range(w):
            part_probe(cfg, part)
            po, pl = (host(x) for x in flashsim.gpu.attention_with_kvcache(q, k, v, cache_seqlens=lens, config=cfg))
            eo_p = seen["o"][part].reshape(po.shape).astype(ml_dtypes.bfloat16)
            el_p = seen["lse"][part].reshape(pl.shape)
            o_rows = [
                i
                for i in range(b * hq)
                if not np.array_equal(bits(po.reshape(b * hq, d)[i]), bits(eo_p.reshape(b * hq, d)[i]))
            ]
            l_rows = [i for i in range(b * hq) if bits(pl.ravel()[i]) != bits(el_p.ravel()[i])]
            print(f"  part {part}: O rows (b * Hq + h) differing from the emulator's part {o_rows}, LSE rows {l_rows}",
                  flush=True)  # fmt: skip
        launch.clear_caches()
    return 0


if __name__ == "__main__":
    sys.exit(main())
