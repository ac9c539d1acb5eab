"""KernelConfig.default's tiling table, from the ptxas sweep (tools/register_sweep.py) and the H200 timings
(tools/tile_sweep.py):

    python tools/choose_defaults.py REGISTER_SWEEP.json TILE_SWEEP.json [TILE_SWEEP.json ...]

sm_90 (measured): per head dim and P@V accumulation, the fastest timed tiling (4 x 16 x 4096 x d, non-causal, f16)
among those that build without spills, or with at most MAX_SPILL bytes where that is measured 3% faster than every
spill-free one (where no tiling builds within MAX_SPILL: the fastest of the least-spilling, d = 256 with f32). f16x2 (not timed for every d): the f32 choice when it builds without spills under f16x2, else the
spill-free f16x2 tiling with the most rows per block, then the largest kv_tile.
sm_120 (predicted, nothing runs here): _predict_sm120, occupancy first.
Prints the Python table that flashsim/config.py holds (DEFAULT_TILES).
"""
from __future__ import annotations

import json
import sys

CAPS = {"sm_90": 232448, "sm_120": 101376}
MAX_SPILL = 32
# Kept from an earlier measurement instead of this sweep's (none since tile_sweep_f16x2_d64_128.json timed them)
PREVIOUS: dict = {}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    regs = json.load(open(argv[0]))
    times = [t for path in argv[1:] for t in json.load(open(path)) if t.get("tflops")]
    spill = {(r["arch"], r["pv_accum"], r["head_dim"], r["warps"], r["m_tiles"], r["kv_tile"]): r for r in regs}
    table = {}
    for d in range(32, 257, 32):
        for acc in ("f32", "f16", "f16x2"):
            if ("sm_90", acc, d) in PREVIOUS:
                table[("sm_90", acc, d)] = PREVIOUS[("sm_90", acc, d)]
                continue
            timed = [t for t in times if t["head_dim"] == d and t["pv_accum"] == acc and t["spill_bytes"] <= MAX_SPILL]
            clean = [t for t in timed if t["spill_bytes"] == 0]
            best_clean = max(clean, key=lambda t: t["tflops"], default=None)
            best = max(timed, key=lambda t: t["tflops"], default=None)
            pick = best if best_clean is None or (best and best["tflops"] > best_clean["tflops"] * 1.03) else best_clean
            if pick is None:      # nothing builds within MAX_SPILL: the fastest of the least-spilling (all timed)
                pick = max((t for t in times if t["head_dim"] == d and t["pv_accum"] == acc), key=lambda t: t["tflops"])
            table[("sm_90", acc, d)] = (pick["warps"], pick["m_tiles"], pick["kv_tile"], pick["stages"])
        for acc in ("f32", "f16", "f16x2"):
            table[("sm_120", acc, d)] = _predict_sm120(spill, acc, d)
    print("DEFAULT_TILES = {   # (arch, pv_accum, head_dim) -> (warps, m_tiles, kv_tile, stages): tools/choose_defaults.py")
    for key, val in sorted(table.items()):
        print(f"    {key!r}: {val!r},")
    print("}")


SM120_SMEM_PER_SM, SM120_RESERVED, SM120_REGS = 102400, 1024, 65536    # per SM (RTX Blackwell, CUDA guide)


def _predict_sm120(spill, acc, d):
    """The spill-free tiling that fits 99 KB with the most warps per SM (latency hiding: the 99 KB blocks leave
    room for one or two per SM), then the most rows per block (K/V shared-memory reads per flop), the widest
    kv_tile, the fewest registers; three stages when they keep the blocks per SM."""
    best = None
    for r in spill.values():
        if r["arch"] != "sm_120" or r["pv_accum"] != acc or r["head_dim"] != d or r["spill_bytes"]:
            continue
        w, mt, kv = r["warps"], r["m_tiles"], r["kv_tile"]
        for stages in (2, 3):
            sm = _smem(d, w, mt, kv, stages)
            if sm > CAPS["sm_120"]:
                continue
            blocks = min(SM120_SMEM_PER_SM // (sm + SM120_RESERVED), SM120_REGS // (r["registers"] * 32 * w))
            key = (blocks * w, 16 * mt * w, kv, -r["registers"], stages)
            if blocks and (best is None or key > best[0]):
                best = (key, (w, mt, kv, stages))
    return best[1]


def _smem(d, warps, mt, kv, stages):
    return 2 * d * (16 * mt * warps + 2 * stages * kv)


def _fallback(spill, arch, acc, d, prefer):
    w, mt, kv, st = prefer
    r = spill.get((arch, acc, d, w, mt, kv))
    if r is not None and r["spill_bytes"] == 0 and _smem(d, w, mt, kv, 2) <= CAPS[arch]:
        stages = st if _smem(d, w, mt, kv, st) <= CAPS[arch] else 2
        if arch == "sm_120" and _smem(d, w, mt, kv, 3) <= CAPS[arch]:
            stages = 3
        return (w, mt, kv, stages)
    ok = [r for r in spill.values() if r["arch"] == arch and r["pv_accum"] == acc and r["head_dim"] == d
          and r["spill_bytes"] == 0 and _smem(d, r["warps"], r["m_tiles"], r["kv_tile"], 2) <= CAPS[arch]]
    if not ok:
        least = min(r["spill_bytes"] for r in spill.values() if r["arch"] == arch and r["pv_accum"] == acc
                    and r["head_dim"] == d and _smem(d, r["warps"], r["m_tiles"], r["kv_tile"], 2) <= CAPS[arch])
        ok = [r for r in spill.values() if r["arch"] == arch and r["pv_accum"] == acc and r["head_dim"] == d
              and r["spill_bytes"] == least and _smem(d, r["warps"], r["m_tiles"], r["kv_tile"], 2) <= CAPS[arch]]
    r = max(ok, key=lambda r: (16 * r["m_tiles"] * r["warps"], r["kv_tile"], -r["registers"]))
    stages = 3 if _smem(d, r["warps"], r["m_tiles"], r["kv_tile"], 3) <= CAPS[arch] else 2
    return (r["warps"], r["m_tiles"], r["kv_tile"], stages)


if __name__ == "__main__":
    main()
