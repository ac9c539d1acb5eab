"""Where the block scheduler puts a grid's blocks, and whether an SM's two co-resident blocks start in step.

    PYTHONPATH=. python3 benchmarks/experiments/stagger/placement.py [--blocks 2048] [--spin-us 50] --json F

The stagger experiment (README.md here) assumed that the first wave's blocks [SMs, 2 SMs) are each SM's second
block. This probe checks it on a stand-in for the attention kernel with the same residency: 128 threads and 96 KB of
dynamic shared memory a block (two blocks per SM, like the d = 128 defaults), every block spinning for the same
time. Each block records its SM (%smid) and its start and end (%globaltimer, ns). Printed: how many SMs the first
wave's blocks [0, SMs) and [SMs, 2 SMs) cover, whether block i and i + SMs share an SM, and over the whole grid how far
apart the starts of the two blocks an SM runs at once lie (in step: a few hundred ns; out of step: comparable to a
block's time). Needs cupy and a GPU.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

SRC = r"""
extern "C" __global__ void __launch_bounds__(128, 1) placement(unsigned long long* out, long long spin_ns) {
    // the dynamic shared memory the launch reserves sets the residency; the block need not touch it
    unsigned smid;
    unsigned long long t0, t1;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    } while ((long long)(t1 - t0) < spin_ns);
    if (threadIdx.x == 0) {
        out[3 * blockIdx.x] = smid; out[3 * blockIdx.x + 1] = t0; out[3 * blockIdx.x + 2] = t1;
    }
}
"""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--blocks", type=int, default=2048, help="grid size (16,16,1024 and 4,16,4096 both launch 2048)")
    p.add_argument("--spin-us", type=float, default=50.0, help="each block's time (about a block's at N = 1024)")
    p.add_argument("--smem", type=int, default=96 * 1024 + 64, help="dynamic shared memory a block (bytes)")
    p.add_argument("--json", required=True)
    a = p.parse_args(argv)
    import cupy as cp

    kern = cp.RawKernel(SRC, "placement")
    kern.max_dynamic_shared_size_bytes = a.smem
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    out = cp.zeros(3 * a.blocks, dtype=cp.uint64)
    for _ in range(2):  # the first launch warms up; the second is recorded
        kern((a.blocks,), (128,), (out, np.int64(a.spin_us * 1000)), shared_mem=a.smem)
        cp.cuda.Device().synchronize()
    rec = cp.asnumpy(out).reshape(-1, 3)
    smid, t0, t1 = rec[:, 0].astype(int), rec[:, 1].astype(np.int64), rec[:, 2].astype(np.int64)
    base = t0.min()
    t0, t1 = t0 - base, t1 - base
    first, second = smid[:sms], smid[sms : 2 * sms]
    same = int(np.sum(first == second))
    # per SM: its blocks in start order; pair each block with the one that started closest on the same SM while both ran
    gaps = []
    for s in np.unique(smid):
        idx = np.where(smid == s)[0]
        order = idx[np.argsort(t0[idx])]
        for i in range(1, len(order)):
            prev, cur = order[i - 1], order[i]
            if t0[cur] < t1[prev]:  # co-resident with the block before it
                gaps.append(int(t0[cur] - t0[prev]))
    gaps = np.array(gaps)
    res = dict(
        sms=int(sms),
        blocks=a.blocks,
        spin_us=a.spin_us,
        smem=a.smem,
        first_wave_sms_covered_by_0_to_sms=int(len(np.unique(first))),
        second_sms_blocks_sms_covered=int(len(np.unique(second))),
        block_i_and_i_plus_sms_same_sm=same,
        blocks_per_sm=np.bincount(smid).tolist(),
        co_resident_start_gap_ns=dict(
            n=int(gaps.size), median=float(np.median(gaps)), p90=float(np.percentile(gaps, 90)), max=float(gaps.max())
        ),
        first_64_smids=smid[:64].tolist(),
        makespan_us=float(t1.max() / 1000),
    )
    with open(a.json, "w") as f:
        json.dump(res, f, indent=1)
    print(f"{sms} SMs, {a.blocks} blocks of 128 threads and {a.smem} B of shared memory, {a.spin_us} us each")
    print(
        f"blocks [0, {sms}) run on {res['first_wave_sms_covered_by_0_to_sms']} distinct SMs, blocks [{sms}, {2 * sms}) "
        f"on {res['second_sms_blocks_sms_covered']}; block i and i + {sms} share an SM for {same} of {sms}"
    )
    print(f"first 64 blocks' SMs: {res['first_64_smids']}")
    g = res["co_resident_start_gap_ns"]
    print(
        f"start gap between an SM's co-resident blocks: median {g['median']:.0f} ns, 90th percentile "
        f"{g['p90']:.0f} ns, max {g['max']:.0f} ns over {g['n']} pairs; makespan {res['makespan_us']:.1f} us"
    )


if __name__ == "__main__":
    main()
