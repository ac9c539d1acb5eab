"""A ring of cp.async copies tracked by mbarriers (cp.async.mbarrier.arrive.noinc), the serving decode's load path,
under flashsim.ptx's racecheck: idle warps taking the ring's side in the live warps' loop or in a loop of their own
run clean and give the values numpy gives, and the planted race (live warps reading a slot without waiting for its
copies) is reported on every run. On an H100, compute-sanitizer's racecheck reported that race in some runs and
not in others (benchmarks/experiments/varlen_profile/race_pattern/, whose kernel and cases this runs)."""

from __future__ import annotations

import numpy as np
import pytest
from tool_modules import ROOT, load_tool

import flashsim.ptx as P

pytestmark = pytest.mark.nvrtc
rp = load_tool("race_pattern", ROOT / "benchmarks" / "experiments" / "varlen_profile" / "race_pattern")

CLEAN = [(0, 3, 2, 0, 1), (1, 1, 2, 0, 1), (1, 3, 3, 0, 0)]  # (two loops, live warps, stages, racy, prologue)
RACY = [(0, 3, 2, 1, 0), (1, 1, 2, 1, 1)]


def _launch(case):
    kernel = P.compile(rp.source(), arch="sm_90", defines=rp.options(case)).kernel("race_pattern")
    src = rp.inputs()
    out = np.zeros((rp.BLOCKS, rp.THREADS), np.uint32)
    P.launch(kernel, rp.BLOCKS, rp.THREADS, [src, out, np.int32(rp.TILES), np.int32(case[1])], check="racecheck")
    return src, out


@pytest.mark.parametrize("case", CLEAN, ids=rp.name)
def test_the_ring_is_race_free_and_reads_what_was_copied(case):
    src, out = _launch(case)
    np.testing.assert_array_equal(out, rp.expected(src, case[1], case[4]))


@pytest.mark.parametrize("case", RACY, ids=rp.name)
def test_a_read_before_the_copies_land_is_reported(case):
    with pytest.raises(P.RaceError, match="read-after-write hazard"):
        _launch(case)
