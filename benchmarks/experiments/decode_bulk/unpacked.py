"""On the GPU: the decode without GQA packing and without splits, against the packed, split default.

    python3 benchmarks/experiments/decode_bulk/unpacked.py [--json FILE]

The packed decode (a block holds a K / V head's query heads, so each K / V tile is read once per group) has B * Hkv
row groups, 64 at B=8 Hkv=8: too few blocks for 132 SMs, hence split-KV and flash_combine after it, whose 2.5-4.5 us
at the grid's tail are the call's distance to cuDNN. Without packing a block holds one query head (its one row in
16), B * Hq blocks, 256 at B=8: enough to fill the GPU without splits, so no combine, at the price of reading each K /
V tile once per query head (the group's other heads, running at the same time, may find it in L2). Each build is
the kernel's own (flashsim.serving's problem with pack_gqa switched off: the same per-row operations, so without
splits the bits are the packed single-split call's, checked here), launched through flashsim.gpu.serving and timed
as bench_serving times (CUDA-graph replays, do_bench's loop), with the L2 emptied by zeroing and by reading.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[2])]  # benchmarks/
import bench_serving as bs  # noqa: E402

from flashsim.gpu import runtime as rt  # noqa: E402
from flashsim.gpu import serving as gs  # noqa: E402
from flashsim.problem import resolve_options  # noqa: E402
from flashsim.serving import prepare_kvcache  # noqa: E402


def launcher(q, k, v, sl, splits, packed):
    """(fn launching the decode with ``splits`` splits, packed or not; o; lse)."""
    opts = resolve_options(None, None, None, None, None, None, "bnhd", None)
    prob = prepare_kvcache(q, k, v, sl, None, splits, opts=opts, arch=rt.current_arch(), sm_count=rt.sm_count())
    if not packed:
        prob = replace(prob, config=prob.config.with_(pack_gqa=False))
    plan = gs.plan_for(prob)
    o = torch.empty(prob.o_shape, dtype=q.dtype, device="cuda")
    lse = torch.empty(prob.lse_shape, dtype=torch.float32, device="cuda")
    parts = torch.empty((max(plan.part_bytes, 1),), dtype=torch.uint8, device="cuda")
    ptrs = dict(q=q.data_ptr(), k=k.data_ptr(), v=v.data_ptr(), o=o.data_ptr(), lse=lse.data_ptr())
    ptrs.update(seqlens_k=sl.data_ptr(), parts=parts.data_ptr())

    def fn():  # on the stream current at the call (a graph capture's own)
        gs.launch_serving(plan, torch.cuda.current_stream().cuda_stream, ptrs, check=False)

    fn.keep = (parts, prob)  # the scratch its launches write lives as long as the launcher
    return fn, o, lse


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json")
    a = p.parse_args(argv)
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    print(out["device"])
    for name, b, n, d in bs.DECODE_SHAPES[:3]:
        q, k, v = bs.cache(b, n, 32, 8, d, torch.bfloat16)
        sl = torch.full((b,), n, dtype=torch.int32, device="cuda")
        qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        default = bs.ours(q, k, v, cache_seqlens=sl)[1].num_splits
        forms = {f"packed, {default} splits (the default)": (default, True), "packed, 1 split": (1, True)}
        forms.update({f"unpacked, {s} split{'s' * (s > 1)}": (s, False) for s in (1, 2)})
        fns = {form: launcher(q, k, v, sl, s, packed) for form, (s, packed) in forms.items()}
        fns["FA2"] = (bs.sdpa("FA2", qt, kt, vt), None, None)
        fns["cuDNN"] = (bs.sdpa("cuDNN", qt, kt, vt), None, None)
        _, o1, l1 = fns["packed, 1 split"]
        _, o2, l2 = fns["unpacked, 1 split"]
        fns["packed, 1 split"][0](), fns["unpacked, 1 split"][0]()
        torch.cuda.synchronize()
        same = torch.equal(o1.view(torch.int16), o2.view(torch.int16)) and torch.equal(
            l1.view(torch.int32), l2.view(torch.int32)
        )
        row = {"name": name, "unpacked_bits_equal_packed": bool(same)}
        for form, (fn, _, _) in fns.items():
            for flush in bs.FLUSHES:
                row[f"{form} | {flush}"] = bs.timed(fn, flush)[0] * 1e3
        out["rows"].append(row)
        print(f"{name}: unpacked 1 split bit-equal to packed 1 split: {same}")
        for form in fns:
            print(f"  {form:34} zero {row[f'{form} | zero']:7.1f} us   read {row[f'{form} | read']:7.1f} us")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
