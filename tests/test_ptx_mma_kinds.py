"""flashsim.ptx's sm_120a mma.sync kinds (kind::f8f6f4 and the block-scaled mxf8f6f4 / mxf4 / mxf4nvf4 forms) in
hand-written kernels: each lane loads its fragment registers, scale registers and selectors, runs the instruction
and stores d; the result, bit for bit, is the matrix-level model's (flashsim.mma_block_scale / flashsim.mma, itself
held to mmasim) on the tiles the registers hold through flashsim.layout's maps and selectors. ptxas 13.0 accepts
every kernel with -arch=sm_120a (when ptxas is on PATH); arch="sm_90" refuses them."""

from __future__ import annotations

import functools
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim import ptx
from flashsim.layout import A4, A8, B4, B8, C_F16, C_F32, blockscale, pack4, pack8
from flashsim.numerics.tensorcore.types import KIND_FORMS
from flashsim.ptx import UnsupportedInstruction

WARPS = 2
HEADER = ".version 8.8\n.target sm_120a\n.address_size 64\n"
PTXAS = shutil.which("ptxas")

# (kind, scale_vec or None, scale format, a format, b format, accumulator, selectors (byte-a, thread-a, byte-b,
# thread-b) or None, selectors in registers, .scale_vec written)
FORMS = [
    ("f8f6f4", None, None, "e2m1", "e3m2", "f32", None, False, False),
    ("f8f6f4", None, None, "e4m3", "e2m3", "f16", None, False, False),
    ("f8f6f4", None, None, "e5m2", "e5m2", "f32", None, False, False),
    ("mxf8f6f4", 1, "ue8m0", "e5m2", "e2m1", "f32", (3, 1, 2, 3), False, True),
    ("mxf8f6f4", 1, "ue8m0", "e3m2", "e4m3", "f32", (1, 0, 0, 2), True, False),
    ("mxf4", 2, "ue8m0", "e2m1", "e2m1", "f32", (2, 1, 0, 2), False, True),
    ("mxf4", 2, "ue8m0", "e2m1", "e2m1", "f32", (0, 0, 2, 1), True, False),
    ("mxf4nvf4", 2, "ue8m0", "e2m1", "e2m1", "f32", (2, 0, 2, 3), False, True),
    ("mxf4nvf4", 4, "ue4m3", "e2m1", "e2m1", "f32", (0, 1, 0, 1), False, True),
    ("mxf4nvf4", 4, "ue4m3", "e2m1", "e2m1", "f32", (0, 0, 0, 3), True, True),
    ("mxf4nvf4", 4, "ue8m0", "e2m1", "e2m1", "f32", (0, 1, 0, 2), False, True),  # PTX ISA 9.1: not ptxas 13.0's
]
CODES = {"e2m1": 16, "e2m3": 64, "e3m2": 64, "e4m3": 256, "e5m2": 256, "ue8m0": 256, "ue4m3": 128}


def instruction(form) -> tuple[str, int, int]:
    """(the mma's text over registers %r0.., registers in, registers out)."""
    kind, n, sf, af, bf, acc, sel, in_regs, say_vec = form
    K = 64 if kind in ("mxf4", "mxf4nvf4") else 32
    nc = 2 if acc == "f16" else 4
    regs = iter(f"%r{i}" for i in range(64))
    a = [next(regs) for _ in range(4)]
    b = [next(regs) for _ in range(2)]
    c = [next(regs) for _ in range(nc)]
    d = ", ".join(f"%d{i}" for i in range(nc))
    vec = ", ".join("{" + ", ".join(x) + "}" for x in (a, b, c))
    if kind == "f8f6f4":
        return f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.{acc}.{af}.{bf}.{acc} {{{d}}}, {vec};", 6 + nc, nc
    sa, sb = next(regs), next(regs)
    nin = 6 + nc + 2
    if in_regs:
        ba, ta, bb, tb = (f"%h{i}" for i in range(4))
        nin += 4
    else:
        ba, ta, bb, tb = sel
    vec_mod = f".scale_vec::{n}X" if say_vec else ""
    text = (
        f"mma.sync.aligned.m16n8k{K}.row.col.kind::{kind}.block_scale{vec_mod}.f32.{af}.{bf}.f32.{sf} "
        f"{{{d}}}, {vec}, {sa}, {{{ba}, {ta}}}, {{{sb}}}, {{{bb}, {tb}}};"
    )
    return text, nin, nc


def kernel_text(form) -> str:
    body, nin, nout = instruction(form)
    lines = [
        ".visible .entry k(.param .u64 RIN, .param .u64 ROUT)",
        "{",
        f".reg .b32 %t, %r<{nin}>, %d<{nout}>;",
        ".reg .b16 %h<4>;",
        ".reg .b64 %p, %off;",
        "mov.u32 %t, %tid.x;",
        f"mul.wide.u32 %off, %t, {4 * nin};",
        "ld.param.u64 %p, [RIN];",
        "add.s64 %p, %p, %off;",
    ]
    lines += [f"ld.global.u32 %r{k}, [%p+{4 * k}];" for k in range(nin)]
    if form[7]:  # the selectors: the last four words, as .u16 registers
        lines += [f"cvt.u16.u32 %h{i}, %r{nin - 4 + i};" for i in range(4)]
    lines += [
        body,
        f"mul.wide.u32 %off, %t, {4 * nout};",
        "ld.param.u64 %p, [ROUT];",
        "add.s64 %p, %p, %off;",
    ]
    lines += [f"st.global.u32 [%p+{4 * k}], %d{k};" for k in range(nout)]
    lines += ["ret;", "}"]
    return HEADER + "\n".join(lines) + "\n"


@functools.cache
def kernel(form, arch="sm_120"):
    return ptx.load(kernel_text(form), arch=arch).kernel("k")


def operands(form, rng):
    """Tiles (W, 16, K), (W, K, 8), c (W, 16, 8), scales and the registers (W, 32, nin) that hold them."""
    kind, n, sf, af, bf, acc, sel, in_regs, _ = form
    K = 64 if kind in ("mxf4", "mxf4nvf4") else 32
    a = rng.integers(0, CODES[af], (WARPS, 16, K)).astype(np.uint8)
    b = rng.integers(0, CODES[bf], (WARPS, K, 8)).astype(np.uint8)
    c = (rng.standard_normal((WARPS, 16, 8)) * 8).astype(np.float16 if acc == "f16" else np.float32)
    if K == 64:
        ra, rb = pack4(A4.gather(a)), pack4(B4.gather(b))
    else:  # one code per byte, in its container (e2m1 in bits 2..5); the padding bits set, which the mma ignores
        pad = {"e2m1": 0xC3, "e2m3": 0xC0, "e3m2": 0xC0}.get
        ca = blockscale.to_container(a, af) | np.uint8(pad(af, 0))
        cb = blockscale.to_container(b, bf) | np.uint8(pad(bf, 0))
        ra, rb = pack8(A8.gather(ca)), pack8(B8.gather(cb))
    cmap = C_F16 if acc == "f16" else C_F32
    rc = np.ascontiguousarray(cmap.gather(c)).view(np.uint32)
    words = [ra, rb, rc]
    sa = sb = None
    if n is not None:
        sa = rng.integers(0, CODES[sf], (WARPS, 16, n)).astype(np.uint8)
        sb = rng.integers(0, CODES[sf], (WARPS, n, 8)).astype(np.uint8)
        sa[rng.random(sa.shape) < 0.8] = 127 if sf == "ue8m0" else 0x38  # mostly ~1: finite results to compare
        sb[rng.random(sb.shape) < 0.8] = 127 if sf == "ue8m0" else 0x38
        ba, ta, bb, tb = sel
        top = 0x80 if sf == "ue4m3" else 0  # ue4m3's padding bit 7 set: ignored
        words += [blockscale.scale_words(sa | top, "a", ba, ta, fill=0x5A)[..., None]]
        words += [blockscale.scale_words(sb | top, "b", bb, tb, fill=0xA5)[..., None]]
        if in_regs:
            words += [np.broadcast_to(np.array(sel, np.uint32), (WARPS, 32, 4))]
    return a, b, c, sa, sb, np.concatenate(words, axis=2)


def model(form, a, b, c, sa, sb):
    kind, n, sf, af, bf, *_ = form
    if kind == "f8f6f4":
        return flashsim.mma(a, b, c, arch="sm_120", kind="f8f6f4", a_format=af, b_format=bf)
    return flashsim.mma_block_scale(
        a, b, c, sa, sb, kind=kind, scale_vec=n, a_format=af, b_format=bf, scale_format=sf, arch="sm_120"
    )


def run(form, rin, arch="sm_120"):
    nout = 2 if form[5] == "f16" else 4
    rout = np.zeros((WARPS * 32, nout), np.uint32)
    ptx.launch(kernel(form, arch), (1,), (32 * WARPS,), [np.ascontiguousarray(rin.reshape(WARPS * 32, -1)), rout])
    return rout.reshape(WARPS, 32, nout)


def form_id(form):
    kind, n, sf, af, bf, acc, sel, in_regs, _ = form
    return f"{kind}-{n}X-{sf}-{af}.{bf}-{acc}-{sel}-{'regs' if in_regs else 'imm'}"


@pytest.mark.parametrize("form", FORMS, ids=form_id)
@pytest.mark.parametrize("seed", [0, 1])
def test_kernel_against_the_matrix_model(form, seed):
    a, b, c, sa, sb, rin = operands(form, np.random.default_rng(seed))
    got = run(form, rin)
    want = model(form, a, b, c, sa & 0x7F if form[2] == "ue4m3" else sa, sb)
    cmap = C_F16 if form[5] == "f16" else C_F32
    expect = np.ascontiguousarray(cmap.gather(want)).view(np.uint32)
    np.testing.assert_array_equal(got, expect)


@pytest.mark.skipif(PTXAS is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("form", [f for f in FORMS if f[2] != "ue8m0" or f[1] != 4], ids=form_id)
def test_ptxas_accepts_the_kernels(form, tmp_path):
    """The forms are real: ptxas 13.0 assembles each kernel for sm_120a (scale_vec::4X with ue8m0 is PTX ISA 9.1's,
    after ptxas 13.0: left out)."""
    src = tmp_path / "k.ptx"
    src.write_text(kernel_text(form))
    r = subprocess.run(
        [PTXAS, "-arch=sm_120a", str(src), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("form", FORMS[:1] + FORMS[3:4] + FORMS[8:9], ids=form_id)
def test_refused_on_sm_90(form):
    rin = operands(form, np.random.default_rng(0))[-1]
    with pytest.raises(UnsupportedInstruction, match="requires sm_120a"):
        run(form, rin, "sm_90")


BAD = [
    ("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue4m3", "ue4m3"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.f32.e2m1.e2m1.f32.ue4m3", "needs .scale_vec"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue8m0", "4X"),
    ("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.f32.e4m3.e2m1.f32.ue8m0", "e4m3"),
    ("mma.sync.aligned.m16n8k32.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0", "m16n8k64"),
    ("mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.f32.e4m3.e4m3.f32.ue8m0", "needs .block_scale"),
]


@pytest.mark.parametrize("opcode, match", BAD)
def test_invalid_forms_are_refused(opcode, match):
    k64 = "m16n8k64" in opcode
    text = (
        HEADER
        + ".visible .entry k()\n{\n.reg .b32 %r<16>;\n.reg .f32 %f<8>;\n"
        + f"{opcode} {{%f0, %f1, %f2, %f3}}, {{%r0, %r1, %r2, %r3}}, {{%r4, %r5}}, {{%f4, %f5, %f6, %f7}}, "
        + "%r8, {0, 0}, %r9, {0, 0};\nret;\n}\n"
    )
    assert k64 or "m16n8k32" in opcode
    with pytest.raises(UnsupportedInstruction, match=match):
        ptx.launch(ptx.load(text, arch="sm_120").kernel("k"), (1,), (32,), [])


def test_selectors_outside_table_37():
    """An immediate selector ptxas refuses is refused; a register selector outside the table, or one that differs
    within a warp, stops the run with an error naming the thread."""
    form = ("mxf4", 2, "ue8m0", "e2m1", "e2m1", "f32", (1, 0, 0, 0), False, True)
    with pytest.raises(UnsupportedInstruction, match="byte-id-a = 1 with scale_vec::2X"):
        run(form, operands(form, np.random.default_rng(5))[-1])
    form = ("mxf4", 2, "ue8m0", "e2m1", "e2m1", "f32", (0, 0, 2, 1), True, True)
    a, b, c, sa, sb, rin = operands(form, np.random.default_rng(5))
    bad = rin.copy()
    bad[..., -3] = 2  # thread-id-a = 2
    with pytest.raises(ptx.SimulationError, match="thread-id-a = 2 with scale_vec::2X"):
        run(form, bad)
    bad = rin.copy()
    bad[1, 7, -4] = 2  # byte-id-a differs in lane 7 of warp 1
    with pytest.raises(ptx.SimulationError, match="different selectors"):
        run(form, bad)


@settings(max_examples=12, deadline=None, derandomize=True)
@given(st.sampled_from(KIND_FORMS), st.data())
def test_any_form_and_selector(model_form, data):
    """Any of the 79 forms with any valid selectors of Table 37, immediate or in registers, .scale_vec written or
    defaulted where the ISA allows: the kernel's d is the matrix model's."""
    kind, n, sf, af, bf, acc = model_form
    sel, in_regs, say_vec = None, False, True
    if n is not None:
        sel = tuple(data.draw(st.sampled_from(v)) for v in blockscale.SELECTORS[n])
        in_regs = data.draw(st.booleans())
        say_vec = kind == "mxf4nvf4" or data.draw(st.booleans())
    form = (kind, n, sf, af, bf, acc, sel, in_regs, say_vec)
    a, b, c, sa, sb, rin = operands(form, np.random.default_rng(data.draw(st.integers(0, 2**16))))
    want = model(form, a, b, c, sa & 0x7F if sf == "ue4m3" else sa, sb)
    cmap = C_F16 if acc == "f16" else C_F32
    np.testing.assert_array_equal(run(form, rin), np.ascontiguousarray(cmap.gather(want)).view(np.uint32))
