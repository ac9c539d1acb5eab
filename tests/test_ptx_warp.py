"""flashsim.ptx's warp instructions (shfl.sync, vote.sync, match.sync, redux.sync, elect.sync, activemask) against a
direct per-warp oracle written here from the PTX ISA's text, with divergent member masks.

Each kernel loads its operands on every thread, then splits the warp three ways by an input byte: lanes of "run" 0
exit, lanes 1 run the instruction in one branch, lanes 2 the same instruction in another branch (a second PC),
each with its own member mask (the lanes of its branch, plus any exited lanes: the ISA counts only non-exited
threads of membermask). Blocks of 48 threads give every other warp 16 lanes. The oracle works lane by lane with
Python ints; where the ISA leaves a value unpredictable (shfl reading a lane that does not take part), it is not
compared.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim import ptx

GRID, BLOCK = 2, 48
T = GRID * BLOCK

TEMPLATE = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 A, .param .u64 B, .param .u64 C, .param .u64 M, .param .u64 RUN, .param .u64 D,
                  .param .u64 P)
{{
  .reg .b32 %i, %t, %n, %a, %b, %c, %m, %d, %bit;
  .reg .b64 %a64, %d64, %off, %ptr;
  .reg .b16 %run, %byte;
  .reg .pred %q, %p, %other, %skip;
  mov.u32 %i, %ctaid.x;
  mov.u32 %n, %ntid.x;
  mov.u32 %t, %tid.x;
  mad.lo.u32 %i, %i, %n, %t;
  mul.wide.u32 %off, %i, 4;
  ld.param.u64 %ptr, [A];
  add.s64 %ptr, %ptr, %off;
  ld.global.u32 %a, [%ptr];
  ld.param.u64 %ptr, [B];
  add.s64 %ptr, %ptr, %off;
  ld.global.u32 %b, [%ptr];
  ld.param.u64 %ptr, [C];
  add.s64 %ptr, %ptr, %off;
  ld.global.u32 %c, [%ptr];
  ld.param.u64 %ptr, [M];
  add.s64 %ptr, %ptr, %off;
  ld.global.u32 %m, [%ptr];
  cvt.u64.u32 %off, %i;
  ld.param.u64 %ptr, [RUN];
  add.s64 %ptr, %ptr, %off;
  ld.global.u8 %run, [%ptr];
  and.b32 %bit, %a, 1;
  setp.ne.b32 %q, %bit, 0;
  mov.b64 %a64, {{%a, %b}};
  mov.u32 %d, 0;
  mov.u64 %d64, 0;
  setp.eq.u16 %skip, %run, 0;
  @%skip bra DONE;
  setp.eq.u16 %other, %run, 2;
  @%other bra OTHER;
  {body}
  bra STORE;
OTHER:
  {body}
STORE:
  {tail}
  mul.wide.u32 %off, %i, 4;
  ld.param.u64 %ptr, [D];
  add.s64 %ptr, %ptr, %off;
  st.global.u32 [%ptr], %d;
  cvt.u64.u32 %off, %i;
  ld.param.u64 %ptr, [P];
  add.s64 %ptr, %ptr, %off;
  selp.u16 %byte, 1, 0, %p;
  st.global.u8 [%ptr], %byte;
DONE:
  ret;
}}
"""


@functools.cache
def kernel(body: str, tail: str = ""):
    return ptx.load(TEMPLATE.format(body=body, tail=tail), contraction="none").kernel("k")


@functools.cache
def lanes_exist() -> np.ndarray:
    """(warps, 32) bool: the lane exists (blocks of 48 threads: every other warp has 16 lanes)."""
    out = []
    for _block in range(GRID):
        for w0 in range(0, BLOCK, 32):
            out.append([w0 + j < BLOCK for j in range(32)])
    return np.array(out)


def thread_of(warp: int, lane: int) -> int:
    per = -(-BLOCK // 32)
    return (warp // per) * BLOCK + (warp % per) * 32 + lane


def setup(raw: bytes):
    """Operands and a launch configuration from raw bits: a, b, c (u32), run (0 exit / 1 / 2 per lane) and each
    running lane's member mask (its branch's lanes, plus some exited lanes)."""
    words = np.frombuffer(raw, np.uint32).reshape(5, T)
    a, b, c = (words[k].copy() for k in range(3))
    run = (words[3] % 3).astype(np.uint8)
    extra = words[4]
    members = np.zeros(T, np.uint32)
    exist = lanes_exist()
    for w in range(exist.shape[0]):
        lanes = [j for j in range(32) if exist[w, j]]
        ts = [thread_of(w, j) for j in lanes]
        sets = {k: sum(1 << j for j, t in zip(lanes, ts) if run[t] == k) for k in (0, 1, 2)}
        for t in ts:
            if run[t]:
                members[t] = sets[run[t]] | (int(extra[t]) & sets[0])
    return a, b, c, members, run


def launch(body: str, tail: str, a, b, c, m, run):
    d, p = np.zeros(T, np.uint32), np.zeros(T, np.uint8)
    ptx.launch(kernel(body, tail), (GRID,), (BLOCK,), [a, b, c, m, run, d, p])
    return d, p


def lanes_of_warp(w):
    return [j for j in range(32) if lanes_exist()[w, j]]


def per_lane(run, m):
    """For each running thread: (warp, lane, thread, the member lanes (non-exited lanes of its mask))."""
    out = []
    for w in range(lanes_exist().shape[0]):
        for j in lanes_of_warp(w):
            t = thread_of(w, j)
            if run[t]:
                mem = [k for k in lanes_of_warp(w) if (m[t] >> k) & 1 and run[thread_of(w, k)]]
                out.append((w, j, t, mem))
    return out


RAW = st.binary(min_size=5 * 4 * T, max_size=5 * 4 * T)


# -- shfl.sync -------------------------------------------------------------------------------------------


def shfl_oracle(mode, lane, bval, cval):
    """(source lane j, pval) of shfl.sync (PTX ISA semantics: bval = b[4:0], clamp c[4:0], segmask c[12:8])."""
    bval &= 0x1F
    clamp, seg = cval & 0x1F, (cval >> 8) & 0x1F
    max_lane = (lane & seg) | (clamp & ~seg)
    min_lane = lane & seg
    if mode == "up":
        j = lane - bval
        pval = j >= max_lane
    elif mode == "down":
        j = lane + bval
        pval = j <= max_lane
    elif mode == "bfly":
        j = lane ^ bval
        pval = j <= max_lane
    else:
        j = min_lane | (bval & ~seg)
        pval = j <= max_lane
    return (j if pval else lane), pval


@pytest.mark.parametrize("mode", ["up", "down", "bfly", "idx"])
@settings(max_examples=8, deadline=None)
@given(raw=RAW, shape=st.sampled_from(["random", "segments", "plain"]))
def test_shfl(mode, raw, shape):
    a, b, c, m, run = setup(raw)
    if shape == "segments":  # width 8 / 16 segments as __shfl_*_sync(width) passes them: c = ((32-w) << 8) | clamp
        width = np.where(b & 1, 8, 16).astype(np.uint32)
        clamp = 0 if mode == "up" else 31
        c = (((32 - width) << 8) | np.uint32(clamp)).astype(np.uint32) if mode != "idx" else ((32 - width) << 8 | 31)
        c = c.astype(np.uint32)
        b = (b % 40).astype(np.uint32)
    elif shape == "plain":
        c = np.full(T, 0 if mode == "up" else 0x1F, np.uint32)
        b = (b % 34).astype(np.uint32)
    d, p = launch(f"shfl.sync.{mode}.b32 %d|%p, %a, %b, %c, %m;", "", a, b, c, m, run)
    for w, j, t, mem in per_lane(run, m):
        src, pval = shfl_oracle(mode, j, int(b[t]), int(c[t]))
        assert bool(p[t]) == pval, (mode, w, j, hex(b[t]), hex(c[t]))
        if src in mem:  # a source outside the members is unpredictable (PTX ISA shfl.sync)
            assert int(d[t]) == int(a[thread_of(w, src)]), (mode, w, j, src)


def test_shfl_sink_and_immediates():
    """shfl with ``_`` for d|p's first half and immediate b / c (the form CUDA's __shfl_xor_sync emits)."""
    n = np.arange(T, dtype=np.uint32)
    a = (n * 7 + 1).astype(np.uint32)
    run = np.ones(T, np.uint8)
    m = np.array([(1 << len(lanes_of_warp(thread_warp(t)))) - 1 for t in range(T)], np.uint32)
    d, p = launch(
        "shfl.sync.bfly.b32 %d|%p, %a, 1, 0x1f, %m;\n  shfl.sync.idx.b32 _|%other, %a, 40, 0x1f, %m;",
        "",
        a,
        a,
        a,
        m,
        run,
    )
    for t in range(T):
        assert int(d[t]) == int(a[t ^ 1]) and p[t] == 1


def thread_warp(t: int) -> int:
    per = -(-BLOCK // 32)
    return (t // BLOCK) * per + (t % BLOCK) // 32


# -- vote.sync, match.sync, redux.sync, elect.sync, activemask ------------------------------------------


@pytest.mark.parametrize("mode", ["all", "any", "uni", "ballot"])
@pytest.mark.parametrize("negated", [False, True])
@settings(max_examples=6, deadline=None)
@given(raw=RAW, bias=st.sampled_from([0, 1, 2]))
def test_vote(mode, negated, raw, bias):
    a, b, c, m, run = setup(raw)
    if bias:  # mostly-true or mostly-false predicates, so that .all / .uni are true somewhere
        a = np.where(b % 8 != 0, np.uint32(bias % 2), a).astype(np.uint32)
    src = "!%q" if negated else "%q"
    body = f"vote.sync.ballot.b32 %d, {src}, %m;" if mode == "ballot" else f"vote.sync.{mode}.pred %p, {src}, %m;"
    d, p = launch(body, "", a, b, c, m, run)
    for w, j, t, mem in per_lane(run, m):
        preds = {k: bool(a[thread_of(w, k)] & 1) != negated for k in mem}
        if mode == "ballot":
            assert int(d[t]) == sum(1 << k for k in mem if preds[k]), (w, j)
        else:
            want = {"all": all(preds.values()), "any": any(preds.values()), "uni": len(set(preds.values())) == 1}[mode]
            assert bool(p[t]) == want, (mode, w, j)


@pytest.mark.parametrize("mode", ["any", "all"])
@pytest.mark.parametrize("wide", [False, True])
@settings(max_examples=6, deadline=None)
@given(raw=RAW, classes=st.sampled_from([1, 2, 5]))
def test_match(mode, wide, raw, classes):
    a, b, c, m, run = setup(raw)
    a = (a % classes).astype(np.uint32)  # few distinct values, so that lanes match
    b = np.where(c % 4 == 0, b, np.uint32(0)).astype(np.uint32) if wide else b
    src = "%a64" if wide else "%a"
    t_ = "b64" if wide else "b32"
    body = f"match.any.sync.{t_} %d, {src}, %m;" if mode == "any" else f"match.all.sync.{t_} %d|%p, {src}, %m;"
    d, p = launch(body, "", a, b, c, m, run)
    for w, j, t, mem in per_lane(run, m):
        key = (
            (lambda k: (int(a[thread_of(w, k)]), int(b[thread_of(w, k)])))
            if wide
            else (lambda k: int(a[thread_of(w, k)]))
        )
        same = [k for k in mem if key(k) == key(j)]
        if mode == "any":
            assert int(d[t]) == sum(1 << k for k in same), (w, j)
        else:
            equal = len(same) == len(mem)
            assert (int(d[t]), bool(p[t])) == ((sum(1 << k for k in mem) if equal else 0), equal), (w, j)


REDUX = {
    "add.u32": lambda xs: sum(xs) & 0xFFFFFFFF,
    "add.s32": lambda xs: sum(xs) & 0xFFFFFFFF,
    "min.u32": min,
    "max.u32": max,
    "min.s32": lambda xs: min(x - (1 << 32) if x >> 31 else x for x in xs) & 0xFFFFFFFF,
    "max.s32": lambda xs: max(x - (1 << 32) if x >> 31 else x for x in xs) & 0xFFFFFFFF,
    "and.b32": lambda xs: functools.reduce(lambda x, y: x & y, xs),
    "or.b32": lambda xs: functools.reduce(lambda x, y: x | y, xs),
    "xor.b32": lambda xs: functools.reduce(lambda x, y: x ^ y, xs),
}


@pytest.mark.parametrize("form", sorted(REDUX))
@settings(max_examples=5, deadline=None)
@given(raw=RAW)
def test_redux(form, raw):
    a, b, c, m, run = setup(raw)
    d, _ = launch(f"redux.sync.{form} %d, %a, %m;", "", a, b, c, m, run)
    for w, j, t, mem in per_lane(run, m):
        assert int(d[t]) == REDUX[form]([int(a[thread_of(w, k)]) for k in mem]), (form, w, j)


@settings(max_examples=10, deadline=None)
@given(raw=RAW)
def test_elect_and_activemask(raw):
    a, b, c, m, run = setup(raw)
    d, p = launch("elect.sync %d|%p, %m;", "", a, b, c, m, run)
    for w, j, t, mem in per_lane(run, m):
        assert (int(d[t]), bool(p[t])) == (min(mem), j == min(mem)), (w, j)
    d, _ = launch("activemask.b32 %d;", "", a, b, c, m, run)
    for w, j, t, _mem in per_lane(run, m):
        branch = [k for k in lanes_of_warp(w) if run[thread_of(w, k)] == run[t]]
        assert int(d[t]) == sum(1 << k for k in branch), (w, j)


def test_a_lane_outside_its_member_mask_is_an_error():
    """The ISA leaves a .sync instruction run by a lane outside its membermask undefined: the simulator stops."""
    a = np.zeros(T, np.uint32)
    run = np.ones(T, np.uint8)
    m = np.full(T, 1, np.uint32)  # only lane 0
    with pytest.raises(ptx.SimulationError, match="outside its member mask"):
        launch("vote.sync.ballot.b32 %d, %q, %m;", "", a, a, a, m, run)


@pytest.mark.parametrize(
    "body",
    [
        "shfl.up.b32 %d, %a, 1, 0;",
        "vote.ballot.b32 %d, %q;",
        "redux.sync.min.f32 %d, %a, %m;",
        "match.any.sync.b16 %d, %a, %m;",
    ],
)
def test_forms_without_a_model_are_unsupported(body):
    unsupported = kernel(body).program.unsupported  # named when decoded (and raised when a thread reaches it)
    assert body.split()[0] in [e.opcode for e in unsupported]
