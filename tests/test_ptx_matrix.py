"""flashsim.ptx's matrix instructions: ldmatrix and stmatrix against CuTe's copy layouts (the SM75 LDSM / SM90 STSM
thread-value maps, stated here with flashsim.layout.cute), movmatrix against the PTX ISA's fragment formula, and
mma.sync against flashsim.mma on the tiles the PTX ISA's fragment formulas (written here) assemble from the lanes'
registers. Kernels are hand-written PTX; shared memory is filled from global memory, rows are placed at random,
addressed through .shared and through generic addresses.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim import ptx
from flashsim.layout.cute import Layout

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"
WARPS = 2
ROWS = 64  # 16-byte rows of shared memory per warp

# CuTe's copy traits (cute/atom/copy_traits_sm75.hpp): (thread, value) -> bit of the copied block. LDSM's source
# is the rows the lanes point at (128 bits each), its destination the registers (32 bits each); STSM (sm_90)
# swaps the two.
LDSM = {
    (1, False): (Layout(((8, 4), 128), ((128, 0), 1)), Layout((32, 32), (32, 1))),
    (2, False): (Layout(((16, 2), 128), ((128, 0), 1)), Layout((32, (32, 2)), (32, (1, 1024)))),
    (4, False): (Layout((32, 128), (128, 1)), Layout((32, (32, 4)), (32, (1, 1024)))),
    (1, True): (Layout(((8, 4), 128), ((128, 0), 1)), Layout(((4, 8), (16, 2)), ((256, 16), (1, 128)))),
    (2, True): (Layout(((16, 2), 128), ((128, 0), 1)), Layout(((4, 8), (16, 2, 2)), ((256, 16), (1, 128, 1024)))),
    (4, True): (Layout((32, 128), (128, 1)), Layout(((4, 8), (16, 2, 4)), ((256, 16), (1, 128, 1024)))),
}


def cute_map(num: int, trans: bool):
    """For each (lane, register, half): (row-giving lane, 16-bit element in its row) by the CuTe layouts."""
    src, dst = LDSM[num, trans]
    src_bits = src.table().reshape(128, 32).T  # [thread, bit]
    owner = {}
    for t in range(32):
        for b in range(0, 128, 16):
            owner.setdefault(int(src_bits[t, b]), (t, b // 16))  # stride-0 threads repeat the first ones
    dst_bits = dst.table().reshape(-1, 32).T  # [thread, value bit]
    out = np.zeros((32, num, 2, 2), np.int64)
    for t in range(32):
        for j in range(num):
            for h in range(2):
                out[t, j, h] = owner[int(dst_bits[t, 32 * j + 16 * h])]
    return out


def smem_kernel(body: str, regs_in: int, regs_out: int) -> str:
    """A kernel k(global rows in, row selectors, register inputs, register outputs, rows out): each warp's 64 rows
    of 16 bytes go to shared memory, each lane computes the address of row sel[lane] of its warp ({addr} shared,
    {gaddr} generic), ``body`` runs with {r0}.. ({regs_in} loaded per lane) and {d0}.. ({regs_out} stored per
    lane); then shared memory goes back out."""
    fmt = {"addr": "%sa", "gaddr": "%ga"}
    fmt.update({f"r{k}": f"%r{k}" for k in range(max(regs_in, 1))})
    fmt.update({f"d{k}": f"%d{k}" for k in range(max(regs_out, 1))})
    lines = [
        ".visible .entry k(.param .u64 IN, .param .u64 SEL, .param .u64 RIN, .param .u64 ROUT, .param .u64 OUT)",
        "{",
        f".shared .align 16 .b8 smem[{16 * ROWS * WARPS}];",
        f".reg .b32 %t, %w, %s, %sa, %x<4>, %r<{max(regs_in, 1)}>, %d<{max(regs_out, 1)}>;",
        ".reg .b64 %ptr, %off, %ga;",
        "mov.u32 %t, %tid.x;",
        "shr.u32 %w, %t, 5;",
    ]
    for rep in range(ROWS * WARPS // 64):  # 64 threads copy 16 bytes each, per round
        lines += [
            f"add.u32 %s, %t, {64 * rep};",
            "mul.wide.u32 %off, %s, 16;",
            "ld.param.u64 %ptr, [IN];",
            "add.s64 %ptr, %ptr, %off;",
            "ld.global.v4.u32 {%x0, %x1, %x2, %x3}, [%ptr];",
            "mul.lo.u32 %s, %s, 16;",
            "mov.u32 %sa, smem;",
            "add.u32 %sa, %sa, %s;",
            "st.shared.v4.u32 [%sa], {%x0, %x1, %x2, %x3};",
        ]
    lines += [
        "bar.sync 0;",
        "mul.wide.u32 %off, %t, 4;",
        "ld.param.u64 %ptr, [SEL];",
        "add.s64 %ptr, %ptr, %off;",
        "ld.global.u32 %s, [%ptr];",
        f"mad.lo.u32 %s, %w, {ROWS}, %s;",
        "mul.lo.u32 %s, %s, 16;",
        "mov.u32 %sa, smem;",
        "add.u32 %sa, %sa, %s;",
        "cvta.shared.u64 %ga, smem;",
        "cvt.u64.u32 %off, %s;",
        "add.s64 %ga, %ga, %off;",
    ]
    for k in range(regs_in):
        lines += [
            f"mul.wide.u32 %off, %t, {4 * regs_in};",
            "ld.param.u64 %ptr, [RIN];",
            "add.s64 %ptr, %ptr, %off;",
            f"ld.global.u32 %r{k}, [%ptr+{4 * k}];",
        ]
    lines.append(body.format(**fmt))
    lines.append("bar.sync 0;")
    for k in range(regs_out):
        lines += [
            f"mul.wide.u32 %off, %t, {4 * regs_out};",
            "ld.param.u64 %ptr, [ROUT];",
            "add.s64 %ptr, %ptr, %off;",
            f"st.global.u32 [%ptr+{4 * k}], %d{k};",
        ]
    for rep in range(ROWS * WARPS // 64):
        lines += [
            f"add.u32 %s, %t, {64 * rep};",
            "mul.lo.u32 %s, %s, 16;",
            "mov.u32 %sa, smem;",
            "add.u32 %sa, %sa, %s;",
            "ld.shared.v4.u32 {%x0, %x1, %x2, %x3}, [%sa];",
            "cvt.u64.u32 %off, %s;",
            "ld.param.u64 %ptr, [OUT];",
            "add.s64 %ptr, %ptr, %off;",
            "st.global.v4.u32 [%ptr], {%x0, %x1, %x2, %x3};",
        ]
    lines += ["ret;", "}"]
    return HEADER + "\n".join(lines) + "\n"


@functools.cache
def kernel(body: str, regs_in: int, regs_out: int):
    return ptx.load(smem_kernel(body, regs_in, regs_out), contraction="none").kernel("k")


def launch(body: str, regs_in: int, regs_out: int, rows, sel, rin):
    rout = np.zeros((32 * WARPS, max(regs_out, 1)), np.uint32)
    out = np.zeros_like(rows)
    ptx.launch(kernel(body, regs_in, regs_out), (1,), (32 * WARPS,), [rows, sel, rin, rout, out])
    return rout, out


def vec(prefix: str, n: int) -> str:
    """A brace vector of template fields, e.g. ``{{{d0}, {d1}}}`` (``{%d0, %d1}`` once formatted)."""
    return "{{" + ", ".join(f"{{{prefix}{k}}}" for k in range(n)) + "}}"


def address_form(space: str) -> tuple[str, str]:
    """(address field, state-space qualifier) of a test's form: a shared address with .shared; a 64-bit generic
    address without one; or "generic32", no state space with the 32-bit shared address: ptxas compiles that to
    LDSM / STSM on the register as it is (SASS read with nvdisasm: no conversion, the generic address's low 32 bits
    are the shared address), the form the CuTe DSL emits."""
    if space == "generic32":
        return "{addr}", ""
    return ("{addr}" if space else "{gaddr}"), space


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("space", [".shared", ".shared::cta", "", "generic32"])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_ldmatrix_against_cute(num, trans, space, seed):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, 1 << 16, (ROWS * WARPS, 8), dtype=np.uint64).astype(np.uint16)
    sel = np.concatenate([rng.permutation(ROWS)[:32] for _ in range(WARPS)]).astype(np.uint32)
    addr, space = address_form(space)
    body = f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}{space}.b16 {vec('d', num)}, [{addr}];"
    rout, _ = launch(body, 0, num, rows, sel, np.zeros((32 * WARPS, 1), np.uint32))
    where = cute_map(num, trans)
    for w in range(WARPS):
        for t in range(32):
            for j in range(num):
                halves = [rows[w * ROWS + sel[32 * w + where[t, j, h, 0]], where[t, j, h, 1]] for h in range(2)]
                assert int(rout[32 * w + t, j]) == int(halves[0]) | int(halves[1]) << 16, (w, t, j)


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("space", [".shared", "", "generic32"])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_stmatrix_against_cute(num, trans, space, seed):
    """STSM's maps are LDSM's reversed: the registers are the source, the addressed rows the destination."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((ROWS * WARPS, 8), np.uint16)
    sel = np.concatenate([rng.permutation(ROWS)[:32] for _ in range(WARPS)]).astype(np.uint32)
    rin = rng.integers(0, 1 << 32, (32 * WARPS, num), dtype=np.uint64).astype(np.uint32)
    addr, space = address_form(space)
    body = f"stmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}{space}.b16 [{addr}], {vec('r', num)};"
    _, out = launch(body, num, 0, rows, sel, rin)
    want = np.zeros_like(rows)
    where = cute_map(num, trans)
    for w in range(WARPS):
        for t in range(32):
            for j in range(num):
                for h in range(2):
                    lane, elem = where[t, j, h]
                    want[w * ROWS + sel[32 * w + lane], elem] = (int(rin[32 * w + t, j]) >> (16 * h)) & 0xFFFF
    np.testing.assert_array_equal(out, want)


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_movmatrix_transposes(seed):
    """PTX ISA movmatrix: lane l holds row l / 4, columns 2 (l % 4) + {0, 1} of a, and of the transpose in d."""
    rng = np.random.default_rng(seed)
    rin = rng.integers(0, 1 << 32, (32 * WARPS, 1), dtype=np.uint64).astype(np.uint32)
    rows = np.zeros((ROWS * WARPS, 8), np.uint16)
    rout, _ = launch("movmatrix.sync.aligned.m8n8.trans.b16 {d0}, {r0};", 1, 1, rows, np.zeros(64, np.uint32), rin)
    for w in range(WARPS):
        m = np.zeros((8, 8), np.int64)
        for t in range(32):
            for h in range(2):
                m[t // 4, 2 * (t % 4) + h] = (int(rin[32 * w + t, 0]) >> (16 * h)) & 0xFFFF
        for t in range(32):
            want = int(m.T[t // 4, 2 * (t % 4)]) | int(m.T[t // 4, 2 * (t % 4) + 1]) << 16
            assert int(rout[32 * w + t, 0]) == want, (w, t)


# -- mma.sync ----------------------------------------------------------------------------------------------
# The PTX ISA's fragment formulas (lane = 4 g + t): element i of a lane's A / B / C fragment.


def a_elem(g, t, i, eight):
    if eight:
        return g + 8 * ((i >> 2) & 1), 4 * t + (i & 3) + 16 * (i >> 3)
    return g + 8 * ((i >> 1) & 1), 2 * t + (i & 1) + 8 * (i >> 2)


def b_elem(g, t, i, eight):
    if eight:
        return 4 * t + (i & 3) + 16 * (i >> 2), g
    return 2 * t + (i & 1) + 8 * (i >> 1), g


def c_elem(g, t, i):
    return g + 8 * (i >> 1), 2 * t + (i & 1)


FORMS = [  # (shape, d/c type, a type, b type)
    ("m16n8k16", "f32", "f16", "f16"),
    ("m16n8k16", "f16", "f16", "f16"),
    ("m16n8k16", "f32", "bf16", "bf16"),
    ("m16n8k32", "s32", "s8", "s8"),
    ("m16n8k32", "f32", "e4m3", "e4m3"),
    ("m16n8k32", "f32", "e4m3", "e5m2"),
    ("m16n8k32", "f32", "e5m2", "e5m2"),
    ("m16n8k32", "f16", "e4m3", "e4m3"),
    ("m16n8k32", "f16", "e5m2", "e4m3"),
]
DTYPES = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "s8": np.dtype(np.int8),
    "s32": np.dtype(np.int32),
    "e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
    "e5m2": np.dtype(ml_dtypes.float8_e5m2),
}


def fragments(tile, coord, n_elem, per_reg):
    """(W, 32, regs) uint32 registers of tiles (W, rows, cols) by the formula ``coord(g, t, i)``."""
    W = tile.shape[0]
    bits = np.ascontiguousarray(tile).view(np.dtype(f"u{tile.dtype.itemsize}"))
    out = np.zeros((W, 32, n_elem // per_reg), np.uint64)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for i in range(n_elem):
            r, c = coord(g, t, i)
            out[:, lane, i // per_reg] |= bits[:, r, c].astype(np.uint64) << np.uint64(
                8 * tile.dtype.itemsize * (i % per_reg)
            )
    return out.astype(np.uint32)


def random_tile(rng, dt, shape):
    raw = rng.integers(0, 1 << (8 * dt.itemsize), shape, dtype=np.uint64).astype(np.dtype(f"u{dt.itemsize}"))
    if dt.kind == "f" or dt in (DTYPES["bf16"], DTYPES["e4m3"], DTYPES["e5m2"]):  # mostly moderate values
        scaled = rng.standard_normal(shape).astype(np.float32)
        vals = scaled.astype(dt).view(raw.dtype)
        raw = np.where(rng.random(shape) < 0.9, vals, raw)
    return raw.view(dt)


@functools.cache
def mma_kernel(shape, dt, at, bt):
    eight = shape == "m16n8k32"
    na, nb = 4, (2 if not eight else 2)
    nc = 2 if dt == "f16" else 4
    a, b, c = (["%r" + str(k) for k in range(lo, hi)] for lo, hi in ((0, na), (na, na + nb), (na + nb, na + nb + nc)))
    body = (
        f"mma.sync.aligned.{shape}.row.col.{dt}.{at}.{bt}.{dt} {vec('d', nc)}, "
        + ", ".join("{{" + ", ".join(x) + "}}" for x in (a, b, c))
        + ";"
    )
    return body, na + nb + nc, nc


@pytest.mark.parametrize("form", FORMS, ids=["-".join(f) for f in FORMS])
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_mma_against_flashsim_mma(form, seed):
    shape, dt, at, bt = form
    eight = shape == "m16n8k32"
    K = 32 if eight else 16
    rng = np.random.default_rng(seed)
    a = random_tile(rng, DTYPES[at], (WARPS, 16, K))
    b = random_tile(rng, DTYPES[bt], (WARPS, K, 8))
    c = (
        random_tile(rng, DTYPES[dt], (WARPS, 16, 8))
        if dt != "s32"
        else rng.integers(-(2**31), 2**31, (WARPS, 16, 8)).astype(np.int32)
    )
    per = 4 // DTYPES[at].itemsize
    ra = fragments(a, lambda g, t, i: a_elem(g, t, i, eight), 4 * per, per)
    rb = fragments(b, lambda g, t, i: b_elem(g, t, i, eight), 2 * per, per)
    cper = 4 // DTYPES[dt].itemsize
    rc = fragments(c, c_elem, 4, cper)
    body, nin, nc = mma_kernel(shape, dt, at, bt)
    rin = np.concatenate([ra, rb, rc], axis=2).reshape(32 * WARPS, nin)
    rout, _ = launch(body, nin, nc, np.zeros((ROWS * WARPS, 8), np.uint16), np.zeros(64, np.uint32), rin)
    want = flashsim.mma(a, b, c, arch="sm_90")
    np.testing.assert_array_equal(rout.reshape(WARPS, 32, nc), fragments(want, c_elem, 4, cper))


def test_ldmatrix_feeds_mma():
    """ldmatrix.x4 (A, row-major in shared), ldmatrix.x2.trans (B from K x N rows) and mma.m16n8k16 f16 -> f32:
    the kernel's own path through shared memory, against flashsim.mma on the same tiles."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((WARPS, 16, 16)).astype(np.float16)
    b = rng.standard_normal((WARPS, 16, 8)).astype(np.float16)
    rows = np.zeros((WARPS, ROWS, 8), np.uint16)
    rows[:, 0:32] = a.view(np.uint16).reshape(WARPS, 16, 2, 8).reshape(WARPS, 32, 8)  # row m, half k // 8
    rows[:, 32:48] = b.view(np.uint16)  # row k: the 8 columns n
    lane = np.arange(32)
    sel_a = 2 * (lane % 16) + lane // 16  # lane l: A row l % 16, columns 8 (l // 16): ldmatrix.x4's A order
    sel_b = 32 + lane % 16  # lanes 0..15: B rows k
    sel_a = np.tile(sel_a, WARPS).astype(np.uint32)  # the kernel's row selector: A's rows for the x4 load
    sel_b = np.tile(sel_b, WARPS).reshape(-1, 1).astype(np.uint32)  # B's, passed as a register input
    # A: x4 load then B: x2.trans load, then the mma; written as one body
    full = (
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%x0, %x1, %x2, %x3}}, [{addr}];\n"
        f"mad.lo.u32 %s, %w, {ROWS}, %r0;\n"
        "mul.lo.u32 %s, %s, 16;\n"
        "mov.u32 %sa, smem;\n"
        "add.u32 %sa, %sa, %s;\n"
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{%d0, %d1}}, [%sa];\n"
        "mov.b64 %off, {{%d0, %d1}};\n"
        "mov.b32 %d0, 0;\n"
        "mov.b32 %d1, 0;\n"
        "mov.b32 %d2, 0;\n"
        "mov.b32 %d3, 0;\n"
        "mov.b64 {{%sa, %s}}, %off;\n"
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {{%d0, %d1, %d2, %d3}}, {{%x0, %x1, %x2, %x3}}, "
        "{{%sa, %s}}, {{%d0, %d1, %d2, %d3}};"
    )
    rout, _ = launch(full, 1, 4, rows.reshape(-1, 8), sel_a, sel_b)
    want = flashsim.mma(a, b, np.zeros((WARPS, 16, 8), np.float32), arch="sm_90")
    np.testing.assert_array_equal(rout.reshape(WARPS, 32, 4), fragments(want, c_elem, 4, 1))


def regs(prefix: str, n: int) -> str:
    return "{{" + ", ".join(f"%{prefix}{k}" for k in range(n)) + "}}"


def mma_text(form: str, nd: int, na: int, nb: int) -> str:
    b = regs("r", nb).replace("%r", "%x")
    return f"mma.sync.aligned.{form} {regs('d', nd)}, {regs('r', na)}, {b}, {regs('d', nd)};"


@pytest.mark.parametrize(
    "body",
    [
        mma_text("m16n8k8.row.col.f32.f16.f16.f32", 4, 2, 1),
        mma_text("m16n8k32.row.col.s32.u8.u8.s32", 4, 4, 2),
        mma_text("m16n8k32.row.col.satfinite.s32.s8.s8.s32", 4, 4, 2),
        mma_text("m16n8k16.row.col.f16.bf16.bf16.f16", 2, 4, 2),
        "ldmatrix.sync.aligned.m8n16.x1.b8x16.b6x16_p32 {{%d0}}, [{addr}];",
        "stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [{addr}], {{%r0}};",
    ],
)
def test_forms_flashsim_mma_does_not_model_are_unsupported(body):
    unsupported = kernel(body, 6, 4).program.unsupported  # named when decoded (and raised when a thread reaches it)
    assert body.split()[0] in [e.opcode for e in unsupported]
