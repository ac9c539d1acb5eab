"""Unrounded mul / add pairs: which ones flashsim.ptx.contraction lists, how flashsim.ptx.sass reads ptxas's
decision from the SASS (one .loc per instruction, verified against the plain build), and that the simulator's bits
follow it: one rounding for a fused pair, two for a kept one, against an exact Fraction oracle written here."""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest

from flashsim.errors import CompileError
from flashsim.gpu import build
from flashsim.ptx import contraction, load, sass
from flashsim.ptx import probes as P
from flashsim.ptx.parser import parse

HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n"


def kernel(name: str, body: str, regs: str = ".reg .f32 %f<12>;\n\t.reg .b32 %r<4>;") -> str:
    loads = "".join(f"\tld.global.f32 %f{k}, [%rd1+{4 * (k - 1)}];\n" for k in (1, 2, 3, 4))
    return (
        f".visible .entry {name}(.param .u64 p, .param .u32 n)\n{{\n\t{regs}\n\t.reg .pred %p<3>;\n"
        f"\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd1, [p];\n\tld.param.u32 %r1, [n];\n"
        f"{loads}{body}\tret;\n}}\n"
    )


# The pairs ptxas 13.0 fuses and keeps for sm_90 (each kernel reads x, y, z, w = %f1..%f4 and stores at p; halves
# reads f16 / bf16 / bf16x2 operands after them).
PAIRS = HEAD + "".join(
    (
        kernel("fused", "\tmul.f32 %f5, %f1, %f2;\n\tadd.f32 %f6, %f5, %f3;\n\tst.global.f32 [%rd1], %f6;\n"),
        kernel(
            "after_barrier",
            "\tmul.f32 %f5, %f1, %f2;\n\tbar.sync 0;\n\tld.global.f32 %f3, [%rd1+8];\n"
            "\tsub.f32 %f6, %f3, %f5;\n\tst.global.f32 [%rd1], %f6;\n",
        ),
        kernel(
            "two_readers",
            "\tmul.f32 %f5, %f1, %f2;\n\tadd.f32 %f6, %f5, %f3;\n\tsub.f32 %f7, %f4, %f5;\n"
            "\tst.global.f32 [%rd1], %f6;\n\tst.global.f32 [%rd1+4], %f7;\n",
        ),
        kernel(
            "two_products",
            "\tmul.f32 %f5, %f1, %f2;\n\tmul.f32 %f6, %f3, %f4;\n\tadd.f32 %f7, %f6, %f5;\n"
            "\tst.global.f32 [%rd1], %f7;\n",
        ),
        kernel(
            "stored",
            "\tmul.f32 %f5, %f1, %f2;\n\tadd.f32 %f6, %f5, %f3;\n\tst.global.f32 [%rd1], %f6;\n"
            "\tst.global.f32 [%rd1+4], %f5;\n",
        ),
        kernel(
            "guarded_add",
            "\tmul.f32 %f5, %f1, %f2;\n\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra $L_end;\n"
            "\tadd.f32 %f6, %f5, %f3;\n\tst.global.f32 [%rd1], %f6;\n$L_end:\n",
        ),
        kernel(
            "loop_between",
            "\tmul.f32 %f5, %f1, %f2;\n\tmov.u32 %r2, 0;\n$L_loop:\n\tld.global.f32 %f3, [%rd1+8];\n"
            "\tadd.u32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra $L_loop;\n"
            "\tadd.f32 %f6, %f5, %f3;\n\tst.global.f32 [%rd1], %f6;\n",
        ),
        kernel(
            "f64_pair",
            "\tcvt.f64.f32 %fd1, %f1;\n\tcvt.f64.f32 %fd2, %f2;\n\tcvt.f64.f32 %fd3, %f3;\n"
            "\tmul.f64 %fd4, %fd1, %fd2;\n\tsub.f64 %fd5, %fd3, %fd4;\n\tst.global.f64 [%rd1], %fd5;\n",
            ".reg .f32 %f<12>;\n\t.reg .b32 %r<4>;\n\t.reg .f64 %fd<8>;",
        ),
        kernel(
            "halves",
            "\tld.global.b16 %h1, [%rd1+16];\n\tld.global.b16 %h2, [%rd1+18];\n\tld.global.b32 %r2, [%rd1+20];\n"
            "\tld.global.b32 %r3, [%rd1+24];\n\tmul.f16 %h3, %h1, %h2;\n\tadd.f16 %h4, %h3, %h1;\n"
            "\tmul.bf16 %h5, %h1, %h2;\n\tsub.bf16 %h6, %h2, %h5;\n\tmul.bf16x2 %r4, %r2, %r3;\n"
            "\tadd.bf16x2 %r5, %r4, %r2;\n\tst.global.b16 [%rd1], %h4;\n\tst.global.b16 [%rd1+2], %h6;\n"
            "\tst.global.b32 [%rd1+4], %r5;\n",
            ".reg .f32 %f<12>;\n\t.reg .b16 %h<8>;\n\t.reg .b32 %r<8>;",
        ),
    )
)


def _index(module, fn: str, text: str) -> int:
    """The index in ``fn``'s body of the instruction whose PTX line is ``text`` (stripped)."""
    lines = module.ptx.splitlines()
    body = module.ir.functions[fn].body
    return next(i for i, ins in enumerate(body) if lines[ins.line - 1].strip() == text)


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    """ptxas and nvdisasm (skips without them), with flashsim's cache root in a fresh folder for this module."""
    try:
        build.cuda_tool("ptxas")
        build.cuda_tool("nvdisasm")
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLASHSIM_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.setattr(sass, "_VERDICTS", {})
        yield


@pytest.fixture(scope="module")
def pairs(tools):
    return load(PAIRS, arch="sm_90")


# -- candidates --------------------------------------------------------------------------------------------------


def test_candidates_pair_every_add_reader_and_the_product_ptxas_fuses():
    m = load(PAIRS, arch="sm_90", contraction="none")
    found = contraction.candidates(m.ir)
    mul = _index(m, "two_readers", "mul.f32 %f5, %f1, %f2;")
    assert found[("two_readers", mul + 1)] == mul and found[("two_readers", mul + 2)] == mul
    # a*b + c*d: the first operand's product (ptxas fuses it, and rounds the other)
    assert found[("two_products", _index(m, "two_products", "add.f32 %f7, %f6, %f5;"))] == _index(
        m, "two_products", "mul.f32 %f6, %f3, %f4;"
    )
    assert ("stored", _index(m, "stored", "add.f32 %f6, %f5, %f3;")) in found  # the SASS decides it
    assert len(found) == 12


def test_candidates_exclude_what_ptxas_cannot_fuse():
    body = (
        "\tmul.rn.f32 %f5, %f1, %f2;\n\tadd.f32 %f6, %f5, %f3;\n"  # rounded product
        "\tmul.f32 %f7, %f1, %f2;\n\tadd.rn.f32 %f8, %f7, %f3;\n"  # rounded add
        "\tmul.ftz.f32 %f9, %f1, %f2;\n\tadd.f32 %f10, %f9, %f3;\n"  # .ftz product, plain add
        "\tmul.sat.f32 %f11, %f1, %f2;\n\tadd.f32 %f1, %f11, %f3;\n"  # .sat product
        "\tmul.f32 %f4, %f1, %f2;\n\tmov.f32 %f4, %f3;\n\tadd.f32 %f2, %f4, %f3;\n"  # product written twice
    )
    ir = parse(HEAD + kernel("none", body))
    assert contraction.candidates(ir) == {}
    # the first product has another reader, the second has none: ptxas fuses the second
    ir = parse(
        HEAD
        + kernel(
            "second",
            "\tmul.f32 %f5, %f1, %f2;\n\tmul.f32 %f6, %f3, %f4;\n\tadd.f32 %f7, %f5, %f6;\n"
            "\tst.global.f32 [%rd1], %f7;\n\tst.global.f32 [%rd1+4], %f5;\n",
        )
    )
    [product] = contraction.candidates(ir).values()
    assert ir.functions["second"].body[product].operands[0].name == "%f6"


# -- annotation --------------------------------------------------------------------------------------------------

AWKWARD = (
    '.version 9.0\n.target sm_90\n.address_size 64\n.file 1 "a.cu"\n.file 2 "b.h", 1700000000, 12\n'
    ".visible .entry k(.param .u64 p)\n{\n\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<3>;\n\t.reg .pred %p<2>;\n"
    "\t.loc 1 3 5\n\tld.param.u64 %rd1, [p]; ld.global.f32 %f1, [%rd1];  // mul.f32 %f9, %f1, %f1; in a comment\n"
    "\tsetp.gt.f32 %p1, %f1, 0f00000000;\n$L_a: @%p1 bra $L_b;\n"
    "\t{ .reg .f32 t; mul.f32 t, %f1, %f1; add.f32 %f2, t, %f1; }\n"
    "\t.loc 2 7 1\n$L_b:\n\tst.global.f32 [%rd1], %f2; @!%p1 st.global.f32 [%rd1+4], %f1;\n\tret;\n}\n"
    ".section .debug_str\n{\n$L__info_string0:\n.b8 107\n.b8 0\n}\n"
)


def test_annotate_gives_every_instruction_its_own_loc():
    ir = parse(AWKWARD)
    out = parse(sass.annotate(AWKWARD, ir))
    before, after = ir.functions["k"].body, out.functions["k"].body
    assert [(i.opcode, i.mods, i.operands, i.pred) for i in after] == [
        (i.opcode, i.mods, i.operands, i.pred) for i in before
    ]
    assert [i.loc for i in after] == [(1, k, 0) for k in range(1, len(before) + 1)]
    assert {k: f.path for k, f in out.files.items()} == {1: sass.ID_FILE}
    assert ".debug_str" not in sass.annotate(AWKWARD, ir)


def test_classify_reads_the_sass_forms():
    seen = {
        "FFMA R7, R0.reuse, R5.reuse, R7": "fma",
        "@P0 FFMA.FTZ R9, -R5, R7, R0": "fma",
        "FFMA R7, R0.reuse, 2, R5.reuse": "fma",
        "HFMA2.MMA.BF16_V2 R7, R4, R7, -R6": "fma",
        "DFMA R4, -R4, R6, R8": "fma",
        "HFMA2.MMA R9, -RZ, RZ, 0, 0": "move",
        "HFMA2.BF16_V2 R0, R1, R2, -RZ": "mul",
        "HFMA2 R0, R1, 1, 1, R2": "add",
        "FMUL.FTZ R4, R0.reuse, R5": "mul",
        "HMUL2.BF16_V2 R0, R0.H0_H0, R5.H0_H0": "mul",
        "FADD R21, R0.reuse, R21": "add",
        "DADD R2, R4, -R6": "add",
        "IMAD.WIDE R2, R9, 0x4, R2": None,
        "FSETP.GT.AND P0, PT, R1, RZ, PT": None,
    }
    assert {text: sass.classify(text) for text in seen} == seen


# -- ptxas's decisions ---------------------------------------------------------------------------------------------


def test_the_sass_decides_fused_and_kept_pairs(pairs):
    table = pairs.contraction
    decided = {fn for fn, _ in table}
    assert decided == {"fused", "after_barrier", "two_readers", "two_products", "f64_pair", "halves"}
    found = contraction.candidates(pairs.ir)
    kept = {fn for (fn, add) in found if (fn, add) not in table}
    assert kept == {"stored", "guarded_add", "loop_between"}
    assert all(table[k] == found[k] for k in table)  # a subset of the candidates, each with its product
    assert sum(fn == "two_readers" for fn, _ in table) == 2 and sum(fn == "halves" for fn, _ in table) == 3


def _f32(bits: int) -> Fraction:
    return Fraction(float(np.uint32(bits).view(np.float32)))


def _round_f32(q: Fraction) -> int:
    """The binary32 bits nearest the non-zero ``q`` (ties to even), subnormals and overflow included."""
    sign, a = (1 << 31 if q < 0 else 0), abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, -126)
    scaled = a * Fraction(2) ** (23 - e)
    m = int(scaled)
    rest = scaled - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m % 2):
        m += 1
    if m == 1 << 24:
        m, e = 1 << 23, e + 1
    if m < 1 << 23:  # subnormal (e == -126)
        return sign | m
    if e > 127:
        return sign | 0x7F800000
    return sign | ((e + 127) << 23) | (m - (1 << 23))


def _tiny_before_rounding(q: Fraction) -> bool:
    """Whether non-zero ``q`` rounded to 24 bits (ties to even) with no bound on the exponent is below 2^-126:
    what .ftz flushes on the H200 (the silicon probe contraction/mul_add_ftz)."""
    a = abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e -= Fraction(2) ** e > a
    quantum = Fraction(2) ** (e - 23)
    return round(a / quantum) * quantum < Fraction(2) ** -126  # round(): ties to even


def fma_oracle(x: int, y: int, z: int, ftz: bool = False) -> int:
    """x * y + z rounded once to binary32 (bits in, bits out); NaN as the H200's canonical 0x7FFFFFFF. mul is
    fma(x, y, -0) and add fma(x, 1, z): the same exact sums. ``ftz``: subnormal operands and results tiny before
    rounding flushed."""

    def flush(b):
        return b & 0x80000000 if ftz and (b & 0x7F800000) == 0 else b

    x, y, z = flush(x), flush(y), flush(z)
    fx, fy, fz = (float(np.uint32(b).view(np.float32)) for b in (x, y, z))
    with np.errstate(all="ignore"):
        approx = np.float64(fx) * np.float64(fy) + np.float64(fz)  # the product is exact in float64
    if np.isnan(approx):
        return 0x7FFFFFFF
    if np.isinf(approx):
        return 0xFF800000 if approx < 0 else 0x7F800000
    exact = _f32(x) * _f32(y) + _f32(z)
    if exact == 0:
        product_negative = (x ^ y) >> 31 == 1
        if _f32(x) * _f32(y) == 0 and _f32(z) == 0:
            return 0x80000000 if product_negative and z >> 31 else 0
        return 0
    if ftz and _tiny_before_rounding(exact):
        return 0x80000000 if exact < 0 else 0
    return _round_f32(exact)


def _oracle(kind, x, y, z):
    neg = 0x80000000
    one = 0x3F800000
    if kind == "fused":
        return fma_oracle(x, y, z)
    if kind == "fused_sub":  # z - x * y
        return fma_oracle(x ^ neg, y, z)
    if kind == "fused_ftz":
        return fma_oracle(x, y, z, ftz=True)
    if kind == "kept":
        return fma_oracle(fma_oracle(x, y, neg), one, z)
    if kind == "product":
        return fma_oracle(x, y, neg)
    if kind == "two_products":  # x * y + fl(z * x)
        return fma_oracle(x, y, fma_oracle(z, x, neg))
    if kind == "product_minus_z":
        return fma_oracle(x, y, z ^ neg)
    raise ValueError(kind)


EXPECTED = {  # probe -> the arithmetic of each output
    "mul_add": ("fused",),
    "mul_sub": ("fused_sub", "product_minus_z"),
    "mul_add_ftz": ("fused_ftz",),
    "two_readers": ("fused", "fused_sub"),
    "two_products": ("two_products",),
    "product_stored": ("kept", "product"),
    "across_blocks": ("kept",),
}


@pytest.fixture(scope="module")
def probe_runs(tools):
    runs = {}
    for probe in P.probes("contraction"):
        args, _ = P.simulate(probe)
        runs[probe.name] = args
    return runs


@pytest.mark.nvrtc
@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_simulator_rounds_as_ptxas_decided(probe_runs, name):
    """Every output element against the exact oracle of what the SASS does: one rounding where ptxas fused the
    pair, two where it kept them apart. The operands hit both ways apart (the near-cancelling quarter)."""
    xyz = probe_runs[name][0]
    count = xyz.size // 3
    x, y, z = xyz[:count], xyz[count : 2 * count], xyz[2 * count :]
    if name == "across_blocks":
        z = np.where(np.arange(count) & 1, z, np.uint32(0))  # s = z on odd threads, else +0
    for out, kind in zip(probe_runs[name][1:], EXPECTED[name]):
        want = np.array([_oracle(kind, int(a), int(b), int(c)) for a, b, c in zip(x, y, z)], np.uint32)
        bad = np.flatnonzero(out != want)
        assert bad.size == 0, (name, kind, bad[:5], [hex(out[i]) for i in bad[:5]], [hex(want[i]) for i in bad[:5]])
    if EXPECTED[name][0] in ("fused", "kept"):
        other = "kept" if EXPECTED[name][0] == "fused" else "fused"
        alt = np.array([_oracle(other, int(a), int(b), int(c)) for a, b, c in zip(x, y, z)], np.uint32)
        assert np.count_nonzero(alt != probe_runs[name][1]) > count // 8  # the two roundings do differ here


def test_an_undecidable_pair_is_an_error_naming_its_lines(tools):
    text = HEAD + kernel(
        "times_one", "\tmul.f32 %f5, %f1, 0f3F800000;\n\tadd.f32 %f6, %f5, %f2;\n\tst.global.f32 [%rd1], %f6;\n"
    )
    with pytest.raises(sass.ContractionUndecided) as info:
        load(text, arch="sm_90")
    message = str(info.value)
    mul_line = 1 + text.splitlines().index("\tmul.f32 %f5, %f1, 0f3F800000;")
    assert f"mul at PTX line {mul_line}, add at PTX line {mul_line + 1}" in message
    assert "contraction='none'" in message and "'all'" in message and "FADD" in message
    assert load(text, arch="sm_90", contraction="none").contraction == {}
    assert len(load(text, arch="sm_90", contraction="all").contraction) == 1


def test_a_product_fused_through_a_copy_is_an_error(tools):
    text = HEAD + kernel(
        "through_mov",
        "\tmul.f32 %f5, %f1, %f2;\n\tmov.f32 %f6, %f5;\n\tadd.f32 %f7, %f6, %f3;\n\tst.global.f32 [%rd1], %f7;\n",
    )
    assert contraction.candidates(parse(text)) == {}
    with pytest.raises(sass.ContractionUndecided, match=r"add at PTX line \d+ is in no candidate pair.*FFMA"):
        load(text, arch="sm_90")


def _refuse(*args, **kwargs):
    raise AssertionError("ptxas ran")


def test_modules_without_a_pair_never_run_ptxas(tools, monkeypatch):
    monkeypatch.setattr(sass, "assemble_ptx", _refuse)
    rounded = "\tmul.rn.f32 %f5, %f1, %f2;\n\tadd.rn.f32 %f6, %f5, %f3;\n\tst.global.f32 [%rd1], %f6;\n"
    products_only = "\tmul.f32 %f5, %f1, %f2;\n\tst.global.f32 [%rd1], %f5;\n"
    for body in (rounded, products_only):
        assert load(HEAD + kernel("k", body), arch="sm_90").contraction == {}


def test_ptx_ptxas_rejects_is_a_clear_error(tools, monkeypatch):
    text = PAIRS.replace(".version 9.0", ".version 9.5")  # newer than ptxas 13.0 reads
    old = next((p for p in build.cuda_tools("ptxas") if build.tool_release(p) == (13, 0)), None)
    if old is None:
        pytest.skip("needs a ptxas of CUDA 13.0")
    monkeypatch.setattr(build, "select_ptxas", lambda version: old)
    with pytest.raises(
        CompileError, match=r"ptxas \(.*release 13.0.*\) rejects this PTX for sm_90.*contraction='none'"
    ):
        load(text, arch="sm_90")


def test_a_ptx_version_no_ptxas_reads_names_the_extra(tools):
    text = PAIRS.replace(".version 9.0", ".version 9.9")
    with pytest.raises(sass.MissingTools, match=r"no ptxas here reads PTX .version 9.9.*flashsim\[ptx\]"):
        load(text, arch="sm_90")


def test_the_ptxas_of_the_release_that_writes_the_version_is_chosen(monkeypatch):
    releases = {"/a/ptxas": (13, 0), "/b/ptxas": (13, 5), "/c/ptxas": (12, 9), "/d/ptxas-blackwell": (13, 4)}
    monkeypatch.setattr(build, "cuda_tools", lambda name: list(releases))
    monkeypatch.setattr(build, "tool_release", releases.__getitem__)
    assert build.select_ptxas((9, 0)) == "/a/ptxas"  # NVRTC 13.0's PTX: ptxas 13.0
    assert build.select_ptxas((9, 4)) == "/d/ptxas-blackwell"  # Triton 3.9's sm_90a PTX: its own ptxas 13.4
    assert build.select_ptxas((8, 8)) == "/c/ptxas"  # Triton 3.9's sm_80 PTX: its own ptxas 12.9
    assert build.select_ptxas((9, 2)) == "/b/ptxas"  # no 13.2 here: the newest that reads 9.2
    assert build.select_ptxas((8, 0)) == "/b/ptxas"
    with pytest.raises(
        FileNotFoundError, match=r"no ptxas here reads PTX .version 9.6.*13.5, reads up to 9.5.*flashsim\[ptx\]"
    ):
        build.select_ptxas((9, 6))
    assert [build.ptx_isa_of_release(r) for r in ((12, 4), (12, 6), (12, 8), (13, 0), (13, 5))] == [
        (8, 4),
        (8, 5),
        (8, 7),
        (9, 0),
        (9, 5),
    ]


def test_results_are_cached_in_process_and_on_disk(pairs, monkeypatch):
    monkeypatch.setattr(sass, "assemble_ptx", _refuse)
    assert load(PAIRS, arch="sm_90").contraction == pairs.contraction  # in-process
    monkeypatch.setattr(sass, "_VERDICTS", {})
    assert load(PAIRS, arch="sm_90").contraction == pairs.contraction  # from disk
    path = sass._disk_path(sass._key(PAIRS, "sm_90"))
    path.write_text("{not json")
    monkeypatch.setattr(sass, "_VERDICTS", {})
    monkeypatch.setattr(sass, "assemble_ptx", build.assemble_ptx)
    assert load(PAIRS, arch="sm_90").contraction == pairs.contraction  # an unreadable record is rebuilt
    assert '"format"' in path.read_text()


def test_line_info_leaves_the_machine_code_alone_and_a_difference_is_named(pairs):
    annotated = sass.annotate(PAIRS, pairs.ir)
    plain = sass.code_sections(build.assemble_ptx(PAIRS, "sm_90"))
    lined = sass.code_sections(build.assemble_ptx(annotated, "sm_90", ("-lineinfo",)))
    assert sorted(plain) == sorted(f".text.{fn}" for fn in pairs.ir.functions) and plain == lined
    ops = ["FMUL R5, R0, R5", "FADD R7, R4, R5"]
    sass._compare({"k": ops}, {"k": list(ops)}, pairs)
    with pytest.raises(sass.LineInfoChangedCode, match=r"function k, SASS instruction 1: 'FADD R7, R4, R5' against"):
        sass._compare({"k": ops}, {"k": [ops[0], "FFMA R7, R0, R5, R4"]}, pairs)


# -- NVRTC's PTX ---------------------------------------------------------------------------------------------------

CUDA = r"""
#include <cuda_fp16.h>
extern "C" __global__ void across(float* o, const float* a, int n) {
    int i = threadIdx.x; float p = a[i] * a[i + 32]; float s = 0.f; if (n > 3) s = o[i]; o[i] = p + s; }
extern "C" __global__ void halves(__half2* o, const __half2* a) {
    int i = threadIdx.x; o[i] = __hadd2(__hmul2(a[i], a[i + 32]), o[i]); }
"""


def _nvrtc_ptx(options=()):
    try:
        return build.compile_ptx(
            CUDA, name="pairs.cu", defines={}, arch="sm_90", include_dirs=build.cuda_include_dirs(), options=options
        )
    except build.NvrtcUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.nvrtc
def test_nvrtc_leaves_pairs_to_ptxas(tools):
    """Plain C++ across two blocks gives mul.f32 + add.f32, kept apart; cuda_fp16's __hmul2 / __hadd2 give
    mul.f16x2 + add.f16x2, fused into one HFMA2."""
    m = load(_nvrtc_ptx(), arch="sm_90")
    found = contraction.candidates(m.ir)
    assert {fn for fn, _ in found} == {"across", "halves"}
    assert {fn for fn, _ in m.contraction} == {"halves"}


@pytest.mark.nvrtc
def test_line_info_that_changes_the_code_is_an_error(tools):
    """-G PTX (.target sm_90, debug) is a debug build for plain ptxas and not once its debug sections are gone:
    the two SASS differ, and the reader says so instead of deciding."""
    with pytest.raises(sass.LineInfoChangedCode, match="other functions|other code"):
        load(_nvrtc_ptx(("-G",)), arch="sm_90")


@pytest.mark.nvrtc
def test_flash_fwd_has_no_pair_and_its_unrounded_twin_is_decided_quickly(tools, monkeypatch):
    """kernel/flash_fwd.cu rounds every mul / add explicitly: no ptxas run. With the .rn taken off its f32
    mul / add / sub (thousands of PTX lines, hundreds of unrounded instructions) the reader decides every pair."""
    from flashsim import KernelConfig
    from flashsim.gpu import launch as gpu_launch

    config = KernelConfig.default("sm_90")
    try:
        ptx = build.compile_ptx(
            build.kernel_path(gpu_launch.KERNEL_FILE).read_text(),
            name=gpu_launch.KERNEL_FILE,
            defines=gpu_launch.build_defines(config),
            arch="sm_90",
            include_dirs=(str(build.kernel_dir()), *build.cuda_include_dirs()),
        )
    except build.NvrtcUnavailable as exc:
        pytest.skip(str(exc))
    with monkeypatch.context() as mp:
        mp.setattr(sass, "assemble_ptx", _refuse)
        assert load(ptx, arch="sm_90").contraction == {}
    unrounded = re.sub(r"\b(mul|add|sub)\.rn\.(ftz\.)?f32", lambda m: f"{m[1]}.{m[2] or ''}f32", ptx)
    m = load(unrounded, arch="sm_90", contraction="none")
    assert len(contraction.candidates(m.ir)) > 0
    fused = sass.fused_pairs(m, contraction.candidates(m.ir))
    assert set(fused) <= set(contraction.candidates(m.ir))


QUOTIENT = (
    HEAD
    + """
.visible .entry quotient(.param .u64 p, .param .u64 q)
{
\t.reg .f32 %f<8>;
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<8>;
\tld.param.u64 %rd1, [p];
\tld.param.u64 %rd2, [q];
\tmov.u32 %r1, %tid.x;
\tmul.wide.u32 %rd3, %r1, 12;
\tadd.s64 %rd4, %rd1, %rd3;
\tld.global.f32 %f1, [%rd4];
\tld.global.f32 %f2, [%rd4+4];
\tld.global.f32 %f3, [%rd4+8];
\tdiv.full.f32 %f4, %f1, %f2;
\tadd.f32 %f5, %f4, %f3;
\tmul.wide.u32 %rd5, %r1, 4;
\tadd.s64 %rd6, %rd2, %rd5;
\tst.global.f32 [%rd6], %f5;
\tret;
}
"""
)


def test_an_approximate_quotient_fuses_into_its_add_as_ptxas_does(tools):
    """Triton writes div.full.f32 for `/`; ptxas fuses its final multiply (dividend times MUFU.RCP of the divisor)
    into an add of the quotient: one fma of the dividend and the reciprocal, after the division's range scalings."""
    from flashsim.numerics import ieee, sfu
    from flashsim.numerics.formats import F32
    from flashsim.ptx import launch

    fused = load(QUOTIENT, arch="sm_90")
    body = fused.ir.functions["quotient"].body
    div = next(i for i, ins in enumerate(body) if ins.opcode == "div")
    assert fused.contraction == {("quotient", div + 1): div}
    rng = np.random.default_rng(7)
    n = 512
    xyz = rng.standard_normal((n, 3)).astype(np.float32)
    xyz[:, 1] = xyz[:, 1] * np.exp2(rng.integers(-130, 126, n))  # the divisors the scalings are for, too
    with np.errstate(over="ignore"):  # cancellation, where the unrounded product shows; inf where it overflows
        xyz[:, 2] = -xyz[:, 0].astype(np.float64) / xyz[:, 1] * (1 + 2**-20)
    out = {}
    for mode in ("sass", "none"):
        o = np.zeros(n, np.float32)
        launch(load(QUOTIENT, arch="sm_90", contraction=mode).kernel("quotient"), 1, n, [xyz.copy(), o])
        out[mode] = o.view(np.uint32)
    x, y, z = (xyz[:, k].copy() for k in range(3))
    big, small = np.abs(y) > 2.0**126, np.abs(y) < 2.0**-126
    with np.errstate(over="ignore"):
        x = np.where(big, x * np.float32(0.25), np.where(small, x * np.float32(2.0**24), x))
        y = np.where(big, y * np.float32(0.25), np.where(small, y * np.float32(2.0**24), y))
    r = np.asarray(sfu.rcp(y.astype(np.float32), arch="sm_90"), np.float32)
    u32 = lambda a: a.view(np.uint32).astype(np.uint64)  # noqa: E731
    want = np.asarray(ieee.fma(u32(x), u32(r), u32(z), F32, "rne")).astype(np.uint32)
    assert np.array_equal(out["sass"], want)
    assert np.count_nonzero(out["sass"] != out["none"]) > n // 4  # the two roundings really differ here
