"""atom / red in flashsim.ptx against a sequential oracle: Python integers and exact fractions, applied in thread
order (the serialisation the simulator documents), with random colliding addresses, in global, shared and generic
memory, every op and type, the vector forms; and the forms it refuses."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.ptx.errors import SimulationError, UnsupportedInstruction

BLOCKS, THREADS = 2, 64
N_THREADS = BLOCKS * THREADS
ELEMS = 8  # locations per block (shared) or in all (global): many lanes per location

REG = {16: ("%h", ".b16"), 32: ("%r", ".b32"), 64: ("%rd", ".b64")}
BITS = {".b16": 16, ".f16": 16, ".bf16": 16, ".f16x2": 32, ".bf16x2": 32, ".f32": 32, ".f64": 64}
FORMATS = {".f16": (5, 10), ".bf16": (8, 7), ".f32": (8, 23), ".f64": (11, 52)}


def bits_of(t: str) -> int:
    return BITS.get(t) or int(t[2:])


def kernel_text(op: str, t: str, space: str, returns: bool = True) -> str:
    """A kernel where each thread applies ``op`` to element idx[thread] of mem (global: the whole array; shared:
    its block's copy of its block's part) with operands b[thread] (c[thread]) and stores the returned value."""
    w = bits_of(t)
    R, rt = REG[w]
    nbytes = ELEMS * w // 8
    opname = "atom" if returns else "red"
    mods = {"global": ".global", "shared": ".shared", "generic": "", "generic_shared": ""}[space]
    noftz = ".noftz" if t in (".f16", ".f16x2", ".bf16", ".bf16x2") else ""
    cas = op == ".cas"
    target = "[%rd20]"
    ops = f"{R}1, {target}, {R}2" + (f", {R}3" if cas else "") if returns else f"{target}, {R}2"
    load = "ld.global" + {16: ".b16", 32: ".b32", 64: ".b64"}[w]
    shared = space in ("shared", "generic_shared")
    if shared:
        copy_in = f"""
  setp.lt.u32 %p1, %r11, {nbytes // 4};
  mul.wide.u32 %rd30, %r13, {nbytes};
  add.s64 %rd30, %rd1, %rd30;
  mul.wide.u32 %rd31, %r11, 4;
  add.s64 %rd32, %rd30, %rd31;
  mov.u64 %rd33, sm;
  add.s64 %rd34, %rd33, %rd31;
  @%p1 ld.global.b32 %r9, [%rd32];
  @%p1 st.shared.b32 [%rd34], %r9;
  bar.sync 0;
  add.s64 %rd20, %rd33, %rd12;"""
        if space == "generic_shared":
            copy_in += "\n  cvta.shared.u64 %rd20, %rd20;"
        copy_out = """
  bar.sync 0;
  @%p1 ld.shared.b32 %r9, [%rd34];
  @%p1 st.global.b32 [%rd32], %r9;"""
    else:
        copy_in = "\n  add.s64 %rd20, %rd1, %rd12;"
        copy_out = ""
    store_old = f"\n  add.s64 %rd15, %rd5, %rd13;\n  st.global{rt} [%rd15], {R}1;" if returns else ""
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_mem, .param .u64 p_idx, .param .u64 p_b, .param .u64 p_c, .param .u64 p_old)
{{
  .reg .pred %p<4>;
  .reg .b16 %h<8>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<40>;
  .shared .align 16 .b8 sm[{max(nbytes, 16)}];
  mov.u32 %r11, %tid.x;
  mov.u32 %r12, %ntid.x;
  mov.u32 %r13, %ctaid.x;
  mad.lo.u32 %r14, %r13, %r12, %r11;
  ld.param.u64 %rd1, [p_mem];
  ld.param.u64 %rd2, [p_idx];
  ld.param.u64 %rd3, [p_b];
  ld.param.u64 %rd4, [p_c];
  ld.param.u64 %rd5, [p_old];
  mul.wide.u32 %rd10, %r14, 4;
  add.s64 %rd11, %rd2, %rd10;
  ld.global.u32 %r15, [%rd11];
  mul.wide.u32 %rd12, %r15, {w // 8};
  mul.wide.u32 %rd13, %r14, {w // 8};
  add.s64 %rd14, %rd3, %rd13;
  {load} {R}2, [%rd14];
  add.s64 %rd14, %rd4, %rd13;
  {load} {R}3, [%rd14];{copy_in}
  {opname}{mods}{op}{noftz}{t} {ops};{copy_out}{store_old}
  ret;
}}
"""


# -- the oracle -----------------------------------------------------------------------------------------------


def _decode(bits: int, E: int, M: int):
    sign = bits >> (E + M)
    field = (bits >> M) & ((1 << E) - 1)
    frac = bits & ((1 << M) - 1)
    bias = (1 << (E - 1)) - 1
    if field == (1 << E) - 1:
        return ("nan", sign) if frac else ("inf", sign)
    v = (
        Fraction(frac, 1 << M) * Fraction(2) ** (1 - bias)
        if field == 0
        else (Fraction((1 << M) + frac, 1 << M) * Fraction(2) ** (field - bias))
    )
    return ("num", sign, -v if sign else v)


def _round(q: Fraction, sign_if_zero: int, E: int, M: int) -> int:
    """q to the format to nearest even: subnormals kept, overflow to infinity."""
    bias = (1 << (E - 1)) - 1
    if q == 0:
        return sign_if_zero << (E + M)
    sign = int(q < 0)
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, 1 - bias)
    scaled = a / Fraction(2) ** (e - M)
    n = scaled.numerator // scaled.denominator
    rest = scaled - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2):
        n += 1
    if n == 1 << (M + 1):
        n, e = n >> 1, e + 1
    if e > bias:
        return (sign << (E + M)) | (((1 << E) - 1) << M)
    if n < 1 << M:
        return (sign << (E + M)) | n
    return (sign << (E + M)) | ((e + bias) << M) | (n - (1 << M))


def float_add(x: int, y: int, t: str, ftz: bool = False) -> int:
    E, M = FORMATS[t]
    width = 1 + E + M
    nan = (1 << (width - 1)) - 1  # canonical: 0x7FFF, 0x7FFFFFFF (f64: the NaN operand, below)
    small = 1 << M  # below this magnitude (field 0): subnormal

    def flush(b):
        return b & (1 << (width - 1)) if ftz and (b >> M) & ((1 << E) - 1) == 0 else b

    x, y = flush(x), flush(y)
    a, b = _decode(x, E, M), _decode(y, E, M)
    if t == ".f64" and (a[0] == "nan" or b[0] == "nan"):  # DADD: y's NaN, else x's, quieted
        return (y if b[0] == "nan" else x) | (1 << 51)
    if t == ".f64" and a[0] == b[0] == "inf" and a[1] != b[1]:
        return 0xFFF8000000000000
    if a[0] == "nan" or b[0] == "nan" or (a[0] == b[0] == "inf" and a[1] != b[1]):
        return nan
    if a[0] == "inf" or b[0] == "inf":
        s = a[1] if a[0] == "inf" else b[1]
        return (s << (width - 1)) | (((1 << E) - 1) << M)
    zero_sign = int(a[1] == 1 and b[1] == 1)
    r = _round(a[2] + b[2], zero_sign, E, M)
    if ftz and (r & ((1 << (width - 1)) - 1)) < small:
        r &= 1 << (width - 1)
    return r


def apply(op: str, t: str, old: int, b: int, c: int, ftz: bool) -> int:
    w = bits_of(t)
    mask = (1 << w) - 1

    def signed(v):
        return v - (1 << w) if t[1] == "s" and v >> (w - 1) else v

    if op == ".add":
        if t in (".f16x2", ".bf16x2"):
            h = ".f16" if t == ".f16x2" else ".bf16"
            return float_add(old & 0xFFFF, b & 0xFFFF, h) | (float_add(old >> 16, b >> 16, h) << 16)
        if t in FORMATS:
            return float_add(old, b, t, ftz)
        return (old + b) & mask
    if op == ".min":
        return old if signed(old) <= signed(b) else b
    if op == ".max":
        return old if signed(old) >= signed(b) else b
    if op == ".inc":
        return 0 if old >= b else old + 1
    if op == ".dec":
        return b if old == 0 or old > b else old - 1
    if op == ".and":
        return old & b
    if op == ".or":
        return old | b
    if op == ".xor":
        return old ^ b
    if op == ".exch":
        return b
    if op == ".cas":
        return c if old == b else old
    raise AssertionError(op)


def oracle(op, t, space, mem, idx, b, c):
    """The memory after and each thread's returned value, thread by thread in index order."""
    mem = [int(v) for v in mem]
    old = [0] * N_THREADS
    shared = space in ("shared", "generic_shared")
    ftz = t == ".f32" and not shared
    for th in range(N_THREADS):
        loc = int(idx[th]) + (th // THREADS) * ELEMS if shared else int(idx[th])
        old[th] = mem[loc]
        mem[loc] = apply(op, t, mem[loc], int(b[th]), int(c[th]), ftz)
    return mem, old


# -- inputs -----------------------------------------------------------------------------------------------------

F16_EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00]
BF16_EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x7F80, 0xFF80, 0x7FC0]
F32_EDGES = [
    0,
    0x80000000,
    1,
    0x80000001,
    0x007FFFFF,
    0x00800000,
    0x3F800000,
    0xBF800000,
    0x7F7FFFFF,
    0x7F800000,
    0xFF800000,
    0x7FC00000,
    0x00400000,
    0x80400000,
]
F64_EDGES = [
    0,
    1 << 63,
    1,
    0x000FFFFFFFFFFFFF,
    0x0010000000000000,
    0x3FF0000000000000,
    0x7FEFFFFFFFFFFFFF,
    0x7FF0000000000000,
    0xFFF0000000000000,
    0x7FF8000000000000,
    0xBFF0000000000000,
]


def _floats(rng, t, n):
    """Values of a float type: its edges, random bits, and values of similar magnitude (where sums round)."""
    w = bits_of(t)
    if t in (".f16x2", ".bf16x2"):
        h = ".f16" if t == ".f16x2" else ".bf16"
        return _floats(rng, h, n) | (_floats(rng, h, n) << np.uint64(16))
    edges = {".f16": F16_EDGES, ".bf16": BF16_EDGES, ".f32": F32_EDGES, ".f64": F64_EDGES}[t]
    E, M = FORMATS[t]
    raw = rng.integers(0, 1 << min(w, 63), n, dtype=np.uint64) | (
        rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(w - 1)
    )
    bias = (1 << (E - 1)) - 1
    near = (
        (rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(w - 1))
        | (rng.integers(bias - 3, bias + 3, n, dtype=np.uint64) << np.uint64(M))
        | rng.integers(0, 1 << M, n, dtype=np.uint64)
    )
    tiny = rng.integers(0, 1 << (M + 1), n, dtype=np.uint64) | (
        rng.integers(0, 2, n, dtype=np.uint64) << np.uint64(w - 1)
    )
    pick = rng.integers(0, 4, n)
    out = np.where(pick == 0, raw, np.where(pick == 1, near, tiny))
    out[: len(edges)] = np.array(edges, np.uint64)[rng.permutation(len(edges))][: min(n, len(edges))]
    return out


def inputs(op, t, seed):
    rng = np.random.default_rng(seed)
    w = bits_of(t)
    n_mem = ELEMS * BLOCKS
    limit = 1 << w

    def ints(n):
        return (
            rng.integers(0, limit, n, dtype=np.uint64)
            if w < 64
            else rng.integers(0, 1 << 63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
        )

    if t in FORMATS or t in (".f16x2", ".bf16x2"):
        mem, b, c = _floats(rng, t, n_mem), _floats(rng, t, N_THREADS), np.zeros(N_THREADS, np.uint64)
    elif op in (".inc", ".dec"):
        mem = rng.integers(0, 12, n_mem).astype(np.uint64)
        b = rng.integers(0, 12, N_THREADS).astype(np.uint64)
        b[:4] = [0, 0xFFFFFFFF, 1, 0x80000000]
        c = np.zeros(N_THREADS, np.uint64)
    elif op == ".cas":  # few distinct values, so that compares succeed
        pool = ints(4)
        mem, b, c = (pool[rng.integers(0, 4, k)] for k in (n_mem, N_THREADS, N_THREADS))
    else:
        mem, b, c = ints(n_mem), ints(N_THREADS), ints(N_THREADS)
        if op in (".min", ".max"):  # sign edges
            b[:4] = [0, limit // 2, limit // 2 - 1, limit - 1] if w < 64 else [0, 1 << 63, (1 << 63) - 1, (1 << 64) - 1]
    spread = rng.integers(1, ELEMS + 1)  # 1..8 locations: up to all lanes on one
    idx = rng.integers(0, spread, N_THREADS).astype(np.uint32)
    return mem, idx, b, c


def dt(t):
    return np.dtype(f"u{bits_of(t) // 8}")


CASES = [
    (op, t)
    for op, types in {
        ".add": (".u32", ".s32", ".u64", ".f32", ".f64", ".f16", ".f16x2", ".bf16", ".bf16x2"),
        ".min": (".u32", ".s32", ".u64", ".s64"),
        ".max": (".u32", ".s32", ".u64", ".s64"),
        ".inc": (".u32",),
        ".dec": (".u32",),
        ".and": (".b32", ".b64"),
        ".or": (".b32", ".b64"),
        ".xor": (".b32", ".b64"),
        ".exch": (".b32", ".b64"),
        ".cas": (".b16", ".b32", ".b64"),
    }.items()
    for t in types
]
SPACES = ("global", "shared", "generic", "generic_shared")


def _run(op, t, space, returns, seed):
    mem, idx, b, c = inputs(op, t, seed)
    d = dt(t)
    args = [mem.astype(d), idx, b.astype(d), c.astype(d), np.zeros(N_THREADS, d)]
    kern = P.load(kernel_text(op, t, space, returns), arch="sm_90").kernel("k")
    P.launch(kern, BLOCKS, THREADS, args)
    want_mem, want_old = oracle(op, t, space, mem, idx, b, c)
    return args, want_mem, want_old


@pytest.mark.parametrize("space", SPACES)
@pytest.mark.parametrize("op,t", CASES, ids=[f"{o[1:]}{t}" for o, t in CASES])
def test_atom_matches_the_sequential_oracle(op, t, space):
    for seed in (1, 2):
        args, want_mem, want_old = _run(op, t, space, True, seed)
        assert args[0].tolist() == want_mem, f"final memory, seed {seed}"
        assert args[4].tolist() == want_old, f"returned values, seed {seed}"


@pytest.mark.parametrize("space", ("global", "shared"))
@pytest.mark.parametrize("op,t", [c for c in CASES if c[0] not in (".cas", ".exch")], ids=lambda x: str(x))
def test_red_matches_the_sequential_oracle(op, t, space):
    args, want_mem, _ = _run(op, t, space, False, 3)
    assert args[0].tolist() == want_mem


def test_f32_add_flushes_subnormals_on_global_memory_only():
    """The ISA: atom.add.f32 on global memory flushes subnormal inputs and results, on shared memory keeps them."""
    op, t = ".add", ".f32"
    sub = 0x00000010
    for space, want in (("global", 0), ("shared", 2 * sub)):
        kern = P.load(kernel_text(op, t, space), arch="sm_90").kernel("k")
        mem = np.zeros(ELEMS * BLOCKS, np.uint32)
        idx = np.zeros(N_THREADS, np.uint32)
        b = np.zeros(N_THREADS, np.uint32)
        b[[0, 1, THREADS, THREADS + 1]] = sub
        args = [mem, idx, b, np.zeros(N_THREADS, np.uint32), np.zeros(N_THREADS, np.uint32)]
        P.launch(kern, BLOCKS, THREADS, args)
        assert int(mem[0]) == (want if space == "shared" else 0)


VECTOR = [(".f32", 2), (".f32", 4), (".f16", 2), (".f16", 8), (".bf16", 4), (".f16x2", 2), (".bf16x2", 4)]


def vector_text(t: str, n: int, returns: bool) -> str:
    w = bits_of(t)
    R = REG[w][0]
    vec = lambda base: "{" + ", ".join(f"{R}{base + k}" for k in range(n)) + "}"  # noqa: E731
    load = "".join(f"\n  ld.global.b{w} {R}{8 + k}, [%rd14+{k * w // 8}];" for k in range(n))
    store = "".join(f"\n  st.global.b{w} [%rd15+{k * w // 8}], {R}{0 + k};" for k in range(n)) if returns else ""
    body = (
        f"atom.global.add.noftz.v{n}{t} {vec(0)}, [%rd20], {vec(8)};"
        if returns
        else (f"red.global.add.noftz.v{n}{t} [%rd20], {vec(8)};")
    )
    if t == ".f32":
        body = body.replace(".noftz", "")
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p_mem, .param .u64 p_idx, .param .u64 p_b, .param .u64 p_old)
{{
  .reg .b16 %h<24>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<40>;
  mov.u32 %r20, %tid.x;
  ld.param.u64 %rd1, [p_mem];
  ld.param.u64 %rd2, [p_idx];
  ld.param.u64 %rd3, [p_b];
  ld.param.u64 %rd5, [p_old];
  mul.wide.u32 %rd10, %r20, 4;
  add.s64 %rd11, %rd2, %rd10;
  ld.global.u32 %r21, [%rd11];
  mul.wide.u32 %rd12, %r21, {n * w // 8};
  mul.wide.u32 %rd13, %r20, {n * w // 8};
  add.s64 %rd14, %rd3, %rd13;
  add.s64 %rd15, %rd5, %rd13;
  add.s64 %rd20, %rd1, %rd12;{load}
  {body}{store}
  ret;
}}
"""


@pytest.mark.parametrize("returns", (True, False))
@pytest.mark.parametrize("t,n", VECTOR, ids=[f"v{n}{t}" for t, n in VECTOR])
def test_vector_forms_are_one_atomic_per_element(t, n, returns):
    rng = np.random.default_rng(n)
    threads = 64
    mem = _floats(rng, t, ELEMS * n)
    b = _floats(rng, t, threads * n)
    idx = rng.integers(0, 3, threads).astype(np.uint32)
    d = dt(t)
    args = [mem.astype(d), idx, b.astype(d), np.zeros(threads * n, d)]
    P.launch(P.load(vector_text(t, n, returns), arch="sm_90").kernel("k"), 1, threads, args)
    want = [int(v) for v in mem]
    old = [0] * (threads * n)
    for th in range(threads):
        for k in range(n):
            loc = int(idx[th]) * n + k
            old[th * n + k] = want[loc]
            want[loc] = apply(".add", t, want[loc], int(b[th * n + k]), 0, ftz=t == ".f32")
    assert args[0].tolist() == want
    if returns:
        assert args[3].tolist() == old


@pytest.mark.parametrize(
    "line,why",
    [
        ("atom.global.add.f16 %h1, [%rd1], %h2;", "noftz"),
        ("atom.global.add.noftz.f32 %r1, [%rd1], %r2;", "noftz"),
        ("atom.global.inc.u64 %rd2, [%rd1], %rd3;", "inc.u64"),
        ("atom.global.add.s64 %rd2, [%rd1], %rd3;", "add.s64"),
        ("red.global.cas.b32 [%rd1], %r2, %r3;", "red.cas"),
        ("atom.shared.add.v2.f32 {%r1, %r2}, [%rd1], {%r3, %r4};", ".global"),
        ("atom.global.min.v2.f32 {%r1, %r2}, [%rd1], {%r3, %r4};", "vector .min"),
        (
            "atom.global.add.v8.f32 {%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8}, [%rd1], "
            "{%r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8};",
            "v8",
        ),
        ("atom.local.add.u32 %r1, [%rd1], %r2;", "local"),
    ],
)
def test_forms_outside_the_isa_are_refused(line, why):
    text = f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{{
  .reg .b16 %h<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  {line}
  ret;
}}
"""
    kern = P.load(text, arch="sm_90").kernel("k")
    assert [e.line for e in kern.program.unsupported] == [11]  # the decoder names it ...
    with pytest.raises(UnsupportedInstruction, match=why.split()[-1]):  # ... and a thread that reaches it raises
        P.launch(kern, 1, 32, [np.zeros(4, np.uint32)])


def test_an_atomic_on_a_generic_local_address_is_an_error():
    text = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  .local .align 4 .b8 buf[16];
  mov.u64 %rd1, buf;
  cvta.local.u64 %rd2, %rd1;
  atom.add.u32 %r1, [%rd2], 1;
  ret;
}
"""
    with pytest.raises(SimulationError, match="local"):
        P.launch(P.load(text, arch="sm_90").kernel("k"), 1, 32, [np.zeros(1, np.uint32)])


# -- the silicon probes of flashsim.ptx.probes.memory: what they compare holds in the simulator ---------------------


def _collide_probes():
    from flashsim.ptx import probes

    return [
        p
        for p in probes.probes("memory")
        if p.name.startswith("collide") and len(p.args) > 3 and p.args[3].name == "chain"
    ]


@pytest.mark.nvrtc
def test_the_chain_check_of_every_colliding_probe_is_zero():
    """Each colliding probe's chain check is 0 for any serialisation, so the GPU's must be 0 too: here the
    simulator's is."""
    from flashsim.ptx import probes

    for p in _collide_probes():
        args, _ = probes.simulate(p)
        assert not args[3].any(), p.key


@pytest.mark.nvrtc
def test_the_chain_check_sees_returns_no_order_gives(monkeypatch):
    """Were every lane given the location's value from before the instruction (no serialisation), the chain
    check of the colliding probes would not be 0."""
    from flashsim.ptx import probes
    from flashsim.ptx.semantics import atomic

    real = atomic.serialise

    def unserialised(op, t, init, b, c, segment, ftz):
        _, after = real(op, t, init, b, c, segment, ftz)
        return init.copy(), after

    monkeypatch.setattr(atomic, "serialise", unserialised)
    for p in _collide_probes():
        if "_add_" in p.name or "_xor_" in p.name or "_exch_" in p.name:
            args, _ = probes.simulate(p)
            assert args[3][: probes.memory.LOCS].any(), p.key
