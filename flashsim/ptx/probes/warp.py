"""Probes of the warp instructions (kernel/capture/isa/warp.cu) under divergence.

Each warp of a probe takes one of four shapes, by its index: the whole warp in one branch (member mask all ones);
two halves in two branches (lanes 0-15 and 16-31, each half's mask); odd lanes exited and the even ones running
(mask all ones: exited members do not count); and lanes by lane % 3 (exited, branch one, branch two; each branch
its lanes plus the exited ones in its mask). The shfl probes use the first two shapes only, with the halves'
segments (c = 0x1000 | clamp, b < 16 for .bfly), so that every source lane takes part: the ISA leaves a read of
any other lane unpredictable, and a probe stores only what the ISA defines.
"""

from __future__ import annotations

import numpy as np

from . import Arg, Probe

N = 1024
SOURCE = "capture/isa/warp.cu"
_LANE = np.arange(N) % 32
_SHAPE = (np.arange(N) // 32) % 4


def _run(shapes: int) -> np.ndarray:
    """0 exit / 1 / 2 per thread for the warp shapes 0 .. shapes - 1 (warps cycle through them)."""
    shape = _SHAPE % shapes
    run = np.ones(N, np.uint32)
    run = np.where(shape == 1, np.where(_LANE < 16, 1, 2), run)
    run = np.where(shape == 2, np.where(_LANE % 2, 0, 1), run)
    run = np.where(shape == 3, _LANE % 3, run)
    return run.astype(np.uint32)


def _masks(run: np.ndarray) -> np.ndarray:
    """Each running lane's member mask: its branch's lanes of the warp plus the warp's exited lanes."""
    bits = (np.uint64(1) << _LANE.astype(np.uint64)).reshape(-1, 32)
    per_warp = {k: (bits * (run.reshape(-1, 32) == k)).sum(axis=1) for k in (0, 1, 2)}
    out = np.zeros(N, np.uint64)
    for k in (1, 2):
        out = np.where(run == k, np.repeat(per_warp[k] | per_warp[0], 32), out)
    return out.astype(np.uint32)


def _bits(rng, n=N):
    return rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)


def _biased(rng):
    """Random bits, bit 0 set in every other group of four warps (so that vote.all / .uni and match.all hold
    there)."""
    return np.where((np.arange(N) // 128) % 2 == 1, _bits(rng) | np.uint32(1), _bits(rng)).astype(np.uint32)


def _probe(name: str, shapes: int = 4, b=None, c=None) -> Probe:
    run = _run(shapes)
    args = (
        Arg("a", "in", _biased),
        Arg("b", "in", b or _bits),
        Arg("c", "in", c or _biased),
        Arg("m", "in", lambda rng: _masks(run)),
        Arg("run", "in", lambda rng: run),
        Arg("out", "out", shape=(N,), dtype="u4"),
        Arg("outp", "out", shape=(N,), dtype="u4"),
    )
    return Probe("warp", name, SOURCE, name, (N // 128,), (128,), args)


def _shfl_b(mode: str):
    def make(rng):
        b = rng.integers(0, 40, N).astype(np.uint32)  # 32..39: the ISA reads b[4:0]
        halves = _SHAPE % 2 == 1
        return np.where(halves & (mode == "bfly"), b & 15, b).astype(np.uint32)

    return make


def _shfl_c(rng):
    c = _bits(rng)
    return np.where(_SHAPE % 2 == 1, 0x1000 | (c & 0x1F), c).astype(np.uint32)  # halves: segmask 0x10


PROBES = [_probe(f"shfl_{m}", shapes=2, b=_shfl_b(m), c=_shfl_c) for m in ("up", "down", "bfly", "idx")]
PROBES += [
    _probe(n)
    for n in ("vote_all", "vote_any", "vote_uni", "vote_all_not", "vote_uni_not", "vote_ballot", "vote_ballot_not")
]
PROBES += [_probe(n) for n in ("match_any_b32", "match_all_b32", "match_any_b64", "match_all_b64")]
PROBES += [
    _probe(f"redux_{op}")
    for op in ("add_u32", "add_s32", "min_u32", "max_u32", "min_s32", "max_s32", "and_b32", "or_b32", "xor_b32")
]
PROBES += [_probe("elect"), _probe("activemask")]
