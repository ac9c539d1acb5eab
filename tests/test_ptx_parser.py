"""flashsim.ptx's parser and kernel names: hand-written PTX (tests/data/ptx, each file valid for ptxas), errors with
their line and column, real PTX from NVRTC (kernel/) and nvcc (kernels written here), and properties.

Oracles that do not come from the parser: ptxas (the fixtures assemble; the initial values and relocations it
writes into the cubin equal the parser's), a plain per-line regular expression (the instruction count per opcode),
c++filt (the demangled kernel names), the CUDA source (the line a .loc names holds the instruction's asm).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import struct
import subprocess
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flashsim
from flashsim import provenance
from flashsim.gpu import launch
from flashsim.gpu.build import cuda_include_dirs, kernel_dir, kernel_path
from flashsim.ptx.errors import PTXSyntaxError, UnknownKernel
from flashsim.ptx.ir import (
    SPECIAL_REGISTERS,
    Addr,
    AddrTuple,
    Call,
    Directive,
    Imm,
    Not,
    Pair,
    Param,
    Reg,
    Reloc,
    Sink,
    SourceFile,
    Sym,
    Vec,
)
from flashsim.ptx.names import demangle, find_kernel
from flashsim.ptx.parser import OPCODES, parse

DATA = pathlib.Path(__file__).parent / "data" / "ptx"
PTXAS = shutil.which("ptxas")
NVCC = shutil.which("nvcc")
CXXFILT = shutil.which("c++filt")


def fixture(name: str):
    return parse((DATA / name).read_text())


def body_of(module, name):
    return module.functions[name].body


def at_line(module, fn: str, line: int):
    """The instruction of ``fn`` that starts on PTX line ``line``."""
    (ins,) = [i for i in module.functions[fn].body if i.line == line]
    return ins


def line_of(path: pathlib.Path, text: str) -> int:
    """1-based line of the first line of ``path`` containing ``text``."""
    for n, line in enumerate(path.read_text().split("\n"), 1):
        if text in line:
            return n
    raise AssertionError(f"{text!r} not in {path}")


def registers_of(op):
    """Every Reg inside an operand."""
    if isinstance(op, Reg):
        yield op
    elif isinstance(op, (Vec, AddrTuple)):
        for x in op.items:
            yield from registers_of(x)
    elif isinstance(op, Addr):
        yield from registers_of(op.base)
    elif isinstance(op, Not):
        yield op.reg
    elif isinstance(op, Pair):
        yield from registers_of(op.first)
        yield op.second


def symbols_of(op):
    if isinstance(op, Sym):
        yield op
    elif isinstance(op, (Vec, AddrTuple)):
        for x in op.items:
            yield from symbols_of(x)
    elif isinstance(op, Addr):
        yield from symbols_of(op.base)


def check_module(module):
    """The invariants every parsed module must satisfy; returns the instruction count per opcode."""
    counts = Counter()
    for fn in module.functions.values():
        vector_regs = {r for r, t in fn.regs.items() if t.startswith(".v")}
        for ins in fn.body:
            assert ins.opcode in OPCODES
            counts[ins.opcode] += 1
            for op in ins.operands:
                for reg in registers_of(op):
                    base, _, comp = reg.name.rpartition(".")
                    declared = (
                        reg.name in fn.regs
                        or reg.name in SPECIAL_REGISTERS
                        or (base in vector_regs and comp in "xyzwrgba")
                    )
                    assert declared, f"{fn.name}: {reg.name} used at line {ins.line} is not declared"
            if ins.pred is not None:
                assert fn.regs[ins.pred[0]] == ".pred"
            if ins.opcode == "bra":
                (target,) = ins.operands
                assert target.name in fn.labels, f"{fn.name}: bra at line {ins.line} to {target.name}"
            if ins.opcode == "brx":
                assert ins.operands[-1].name in fn.branch_targets
            if isinstance(ins, Call):
                if isinstance(ins.callee, Sym):
                    assert ins.callee.name in module.functions
                else:
                    table = ins.targets.name
                    assert table in fn.prototypes or table in fn.call_targets or table in module.vars
            for op in ins.operands:
                for sym in symbols_of(op):
                    known = (
                        sym.name in fn.labels
                        or sym.name in fn.vars
                        or sym.name in module.vars
                        or sym.name in module.functions
                        or sym.name in fn.prototypes
                        or sym.name in fn.call_targets
                        or sym.name in fn.branch_targets
                        or any(p.name == sym.name for p in (*fn.params, *fn.returns))
                    )
                    assert known, f"{fn.name}: {sym.name} at line {ins.line}"
            if ins.loc is not None:
                assert ins.loc[0] in module.files
        assert all(0 <= i <= len(fn.body) for i in fn.labels.values())
    return counts


# an independent count: words that are PTX opcodes where a statement starts (a line start, or after ';', '{', '}'
# or a label), after an optional guard, outside comments
_STATEMENT_START = re.compile(
    r"(?:^|(?<=[;{}]))[ \t]*(?:[\w$]+[ \t]*:(?!:)[ \t]*)?(?:@!?[%\w$]+[ \t]+)?([a-z][a-z0-9_]*)(?=[.\s;])", re.M
)


def regex_opcode_counts(text: str) -> Counter:
    text = re.sub(r"//[^\n]*", "", text)
    return Counter(w for w in _STATEMENT_START.findall(text) if w in OPCODES)


# -- hand-written PTX: operands ------------------------------------------------------------------------------------


def test_operand_forms():
    m = fixture("operands.ptx")
    src = (DATA / "operands.ptx").read_text()
    n = lambda text: line_of(DATA / "operands.ptx", text)  # noqa: E731
    ins = lambda text: at_line(m, "operands", n(text))  # noqa: E731
    assert src and m.entries() == ["operands"]
    # special registers
    assert ins("%tid.x").operands == (Reg("%r2"), Reg("%tid.x"))
    assert ins("%ctaid.y").operands[1] == Reg("%ctaid.y")
    for special in ("%laneid", "%clock64", "%smid", "%envreg3"):
        assert ins(special).operands[1] == Reg(special)
    # integer literals
    lits = [ins(t).operands[2] for t in ("42;", "0x1F;", "017;", "0b101;", "7U;", "-4;", "+3;")]
    assert [x.value for x in lits] == [42, 31, 15, 5, 7, -4, 3]
    assert [x.kind for x in lits] == ["int"] * 4 + ["uint", "int", "int"]
    assert lits[1].text == "0x1F"
    # floating-point literals: bit patterns, decimals read as doubles
    assert ins("0f3F800000").operands[1] == Imm(0x3F800000, "0f3F800000", "f32")
    assert ins("0d3FF0000000000000").operands[1] == Imm(0x3FF0000000000000, "0d3FF0000000000000", "f64")
    for text, value in (("1.5;", 1.5), ("-2.25;", -2.25), ("1e3;", 1000.0), (", .5;", 0.5)):
        imm = ins(text).operands[2]
        assert imm.kind == "f64" and imm.value == struct.unpack("<Q", struct.pack("<d", value))[0]
        assert imm.as_float() == value
    assert ins("0f3F800000").operands[1].as_float().dtype == np.float32
    # vector register components
    assert ins("%v.x, %f1").operands == (Reg("%v.x"), Reg("%f1"))
    assert ins("%f3, %v.x").operands[1:] == (Reg("%v.x"), Reg("%v.y"))
    assert m.functions["operands"].regs["%v"] == ".v4.f32"
    # vector operands with a sink
    assert ins("ld.global.v4.f32").operands == (Vec((Reg("%f4"), Reg("%f5"), Sink(), Reg("%f7"))), Addr(Reg("%rd2")))
    assert ins("st.global.v2.f32").operands == (Addr(Reg("%rd2"), 16), Vec((Reg("%f4"), Reg("%f5"))))
    assert ins("{%rs1, %rs2}").operands[1] == Vec((Reg("%rs1"), Reg("%rs2")))
    # addresses
    assert ins("[%rd2+16];").operands[1] == Addr(Reg("%rd2"), 16)
    assert ins("[%rd2+-4]").operands[1] == Addr(Reg("%rd2"), -4)
    assert ins("[table];").operands[1] == Addr(Sym("table"))
    assert ins("[table+8]").operands[1] == Addr(Sym("table"), 8)
    assert ins("%rd4, table;").operands[1] == Sym("table")
    assert ins("%rd5, table+8").operands[1] == Sym("table", 8)
    assert ins("[%r10];").operands[1] == Addr(Reg("%r10"))
    assert ins("[%r10+4]").operands[1] == Addr(Reg("%r10"), 4)
    assert ins("cvta.to.global").operands == (Reg("%rd2"), Reg("%rd1"))
    assert ins("ld.param.u64").operands[1] == Addr(Sym("operands_param_0"))
    tex = ins("tex.2d")
    assert tex.mods == (".2d", ".v4", ".f32", ".f32")
    assert tex.operands[1] == AddrTuple((Sym("tex_ref"), Vec((Reg("%f1"), Reg("%f2")))))
    # predicates
    assert ins("setp.eq.and").operands[3] == Not(Reg("%p1"))
    assert ins("shfl.sync.idx").operands[0] == Pair(Reg("%r13"), Reg("%p3"))
    assert ins("shfl.sync.idx").operands[-1] == Imm(-1, "-1", "int")
    assert ins("@%p1 bra").pred == ("%p1", False) and ins("@%p1 bra").operands == (Sym("$L__BB0_2"),)
    assert ins("@!%p2 bra.uni").pred == ("%p2", True) and ins("@!%p2 bra.uni").mods == (".uni",)
    labels = m.functions["operands"].labels
    body = body_of(m, "operands")
    assert body[labels["$L__BB0_2"]].line == n("[%rd2], %r12")
    assert body[labels["$L__BB0_3"]].line == n("[%rd2+4], %f3")
    assert body[-1].opcode == "ret" and body[-1].operands == ()
    check_module(m)


def test_instruction_fields():
    m = fixture("operands.ptx")
    mma_like = at_line(m, "operands", line_of(DATA / "operands.ptx", "ld.global.v4.f32"))
    assert (mma_like.opcode, mma_like.mods, mma_like.loc) == ("ld", (".global", ".v4", ".f32"), None)
    text = """.version 8.0
.target sm_90
.address_size 64
.visible .entry k()
{
\t.reg .b32 \t%r<16>;
\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r0, %r1, %r2, %r3},
\t\t{%r4, %r5, %r6, %r7}, {%r8, %r9}, {%r10, %r11, %r12, %r13};
\tcp.async.cg.shared.global.L2::128B [%r0], [%r1], 16, %r2;
\tmbarrier.try_wait.parity.shared::cta.b64 %r3, [%r4], %r5;
\tret;
}
"""
    mma, cp, wait, _ = parse(text).functions["k"].body
    assert mma.opcode == "mma"
    assert mma.mods == (".sync", ".aligned", ".m16n8k16", ".row", ".col", ".f32", ".f16", ".f16", ".f32")
    assert [len(v.items) for v in mma.operands] == [4, 4, 2, 4] and mma.line == 7
    assert cp.mods == (".async", ".cg", ".shared", ".global", ".L2::128B")
    assert wait.mods == (".try_wait", ".parity", ".shared::cta", ".b64")


def test_literal_edge_cases():
    def op(lit, ty="s64"):
        return parse(_LITERAL_KERNEL.format(f"add.{ty} %rd, %rd, {lit};")).functions["k"].body[0].operands[2]

    assert op("0").value == 0 and op("0").kind == "int"
    assert op("18446744073709551615").value == 2**64 - 1
    assert op("-9223372036854775808").value == -(2**63)
    assert op("0XFF").value == 255 and op("0xffU").kind == "uint"
    assert op("0d7FF8000000000001", "f64").value == 0x7FF8000000000001  # a NaN payload survives
    with pytest.raises(PTXSyntaxError, match="64-bit range"):
        op("18446744073709551616")
    with pytest.raises(PTXSyntaxError, match="bad operand"):
        op("09")
    with pytest.raises(PTXSyntaxError, match="negative literal cannot be unsigned"):
        op("-1U")


# -- hand-written PTX: scopes, calls, variables, directives --------------------------------------------------------


def test_scopes_rename_inner_declarations_and_labels():
    m = fixture("scopes.ptx")
    fn = m.functions["scopes"]
    path = DATA / "scopes.ptx"
    ins = lambda text, k=0: [i for i in fn.body if i.line == line_of(path, text)][k]  # noqa: E731
    # inner declarations are renamed per block, outer ones keep their names
    assert {r: t for r, t in fn.regs.items() if "{" in r} == {
        "%temp{1}": ".b32",
        "done{1}": ".pred",
        "done{2}": ".pred",
        "%temp{3}": ".b32",
        "%r1{4}": ".b32",
    }
    assert fn.regs["%temp"] == ".b32" and fn.regs["%r1"] == ".b32"
    assert ins("mov.u32 %temp, 20").operands[0] == Reg("%temp{1}")
    assert ins("add.u32 %temp, %temp, 1").operands[:2] == (Reg("%temp{1}"), Reg("%temp{1}"))
    assert ins("mov.u32 %temp, 30").operands[0] == Reg("%temp{3}")
    # after the blocks, the outer names are back in view
    assert ins("add.u32 \t%r4").operands == (Reg("%r4"), Reg("%temp"), Reg("%r1"))
    assert ins("mov.u32 %r5, %r1").operands == (Reg("%r5"), Reg("%r1{4}"))
    # sibling blocks reuse the label AGAIN; each branch reaches its own block's label
    assert fn.labels == {"AGAIN{1}": 4, "AGAIN{2}": 8, "DONE": 14}
    first, second = [i for i in fn.body if i.opcode == "bra" and i.operands[0].name.startswith("AGAIN")]
    assert (first.operands, first.pred) == ((Sym("AGAIN{1}"),), ("done{1}", False))
    assert (second.operands, second.pred) == ((Sym("AGAIN{2}"),), ("done{2}", True))
    # a branch in a nested block to the function's label; the guard is the enclosing block's register
    assert ins("@done bra DONE").operands == (Sym("DONE"),) and ins("@done bra DONE").pred == ("done{2}", False)
    check_module(m)


def test_inner_label_shadows_outer_label():
    text = """.version 8.0
.target sm_90
.visible .entry k()
{
L:
\tret;
\t{
\tbra L;
L:
\tret;
\t}
\tbra L;
}
"""
    fn = parse(text).functions["k"]
    assert fn.labels == {"L": 0, "L{1}": 2}
    assert fn.body[1].operands == (Sym("L{1}"),) and fn.body[3].operands == (Sym("L"),)


def test_calls():
    m = fixture("calls.ptx")
    fns = m.functions
    assert list(fns) == ["_Z5twicei", "vprintf", "__assertfail", "add_one", "calls"]
    assert fns["_Z5twicei"].declaration_only is False and len(fns["_Z5twicei"].body) == 4
    assert fns["vprintf"].declaration_only and fns["vprintf"].linkage == ".extern"
    assert fns["vprintf"].params == (
        Param("vprintf_param_0", ".b64", None, 1, ".param"),
        Param("vprintf_param_1", ".b64", None, 1, ".param"),
    )
    assert fns["vprintf"].returns == (Param("func_retval0", ".b32", None, 1, ".param"),)
    assert fns["__assertfail"].directive(".noreturn") == Directive(".noreturn", (), None)
    add_one = fns["add_one"]
    assert add_one.params == (Param("a", ".b32", None, 1, ".reg"),) and add_one.regs == {"rv": ".b32", "a": ".b32"}
    assert add_one.body[0].operands == (Reg("rv"), Reg("a"), Imm(1, "1", "int"))
    calls = fns["calls"]
    c0, c1, c2, c3, c4 = [i for i in calls.body if isinstance(i, Call)]
    assert (c0.mods, c0.returns, c0.callee, c0.args, c0.targets) == (
        (".uni",),
        (Sym("retval0{1}"),),
        Sym("_Z5twicei"),
        (Sym("param0{1}"),),
        None,
    )
    assert c0.operands == (Sym("retval0{1}"), Sym("_Z5twicei"), Sym("param0{1}"))
    assert (c1.returns, c1.callee, c1.args) == ((Reg("%r3"),), Sym("add_one"), (Reg("%r2"),))
    assert (c2.callee, c2.targets) == (Reg("%rd2"), Sym("prototype_1{2}"))
    proto = calls.prototypes["prototype_1{2}"]
    assert proto.returns == proto.params == (Param("_", ".b32", None, 1, ".param"),)
    assert (c3.targets, calls.call_targets) == (Sym("Ftgt{3}"), {"Ftgt{3}": ("_Z5twicei",)})
    assert c4.targets == Sym("jump_table")
    assert {"param0{1}", "retval0{1}", "param0{4}", "retval0{4}"} <= set(calls.vars)
    assert calls.vars["param0{1}"].space == ".param" and calls.vars["param0{1}"].type == ".b32"
    # the scoped .param declarations are renamed where they are stored and where they are used
    st0 = [i for i in calls.body if i.opcode == "st" and i.mods == (".param", ".b32")][0]
    assert st0.operands[0] == Addr(Sym("param0{1}"), 0)
    # brx.idx over a .branchtargets table; the table's label is not an instruction label
    brx = next(i for i in calls.body if i.opcode == "brx")
    assert brx.mods == (".idx",) and brx.operands == (Reg("%r7"), Sym("ts"))
    assert calls.branch_targets == {"ts": ("$L__case0", "$L__case1")}
    assert "ts" not in calls.labels and "prototype_1{2}" not in calls.labels
    assert m.vars["jump_table"].relocs == (
        Reloc(0, "_Z5twicei", 0, False, 8),
        Reloc(8, "add_one", 0, False, 8),
    )
    check_module(m)


def test_variables_and_initialisers():
    m = fixture("variables.ptx")
    v = m.vars

    def ints(name, dtype):
        return np.frombuffer(v[name].init, dtype=dtype).tolist()

    assert ints("counter", "<u4") == [7] and v["counter"].size == 4 and v["counter"].count == 1
    assert ints("negative", "<i4") == [-2] and v["negative"].linkage == ".visible"
    assert ints("wrapped", "u1") == [0, 0x7F, 0xFF] and v["wrapped"].linkage == ".weak"  # modulo 2**8, as ptxas
    assert v["scale"].init == np.float32(1.5).tobytes()
    # decimals are doubles rounded to f32; 1 + 2**-24 is a tie and rounds to even (1.0)
    assert v["decimals"].init == np.array([1.5, -0.25, 1.0], dtype="<f4").tobytes()
    assert v["dbl"].init == np.float64(np.pi).tobytes()
    assert ints("partial", "<u4") == [1, 2, 0, 0]
    assert (v["grid"].dims, v["grid"].count, ints("grid", "<u2")) == ((2, 3), 6, [1, 2, 3, 4, 5, 6])
    assert (v["pairs"].vector, v["pairs"].count, v["pairs"].size, ints("pairs", "<u4")) == (2, 2, 16, [1, 2, 3, 4])
    assert (v["sized"].dims, ints("sized", "<u4")) == ((3,), [9, 8, 7])
    assert v["bytes"].space == ".const" and v["bytes"].init == bytes([1, 2, 3, 4, 0, 0, 0, 0])
    assert v["counter_ptr"].relocs == (Reloc(0, "counter", 0, True, 8),) and v["counter_ptr"].init == bytes(8)
    assert v["ptrs"].relocs == (Reloc(0, "grid", 4, True, 8), Reloc(8, "counter", 0, False, 8))
    # eight byte-masked bytes of one address in order are one 64-bit relocation; two alone stay byte-wise
    assert v["packed"].relocs == (Reloc(1, "counter", 0, True, 8),)
    assert v["packed"].init == bytes([97]) + bytes(8) + bytes([7])
    assert v["halfptr"].relocs == (Reloc(0, "counter", 3, False, 1, 0), Reloc(1, "counter", 3, False, 1, 1))
    assert v["shared_counter"].linkage == ".common" and v["shared_counter"].init is None
    dyn = v["dyn_smem"]
    assert (dyn.space, dyn.count, dyn.size, dyn.align, dyn.linkage) == (".shared", None, None, 16, ".extern")
    fn = m.functions["variables"]
    assert fn.params == (
        Param("variables_param_0", ".b8", 8, 48, ".param"),
        Param("variables_param_1", ".u64", None, 1, ".param", True, ".global", 16),
    )
    assert [p.size for p in fn.params] == [48, 8]
    assert (fn.vars["__local_depot0"].space, fn.vars["__local_depot0"].size) == (".local", 16)
    assert (fn.vars["tile"].space, fn.vars["tile"].size, fn.vars["tile"].align) == (".shared", 512, 4)
    assert fn.directive(".maxntid") == Directive(".maxntid", (128, 1, 1), None)
    movs = [i.operands[1] for i in fn.body if i.opcode == "mov"]
    assert movs == [Sym("__local_depot0"), Sym("tile"), Sym("dyn_smem")]
    check_module(m)


def test_directives_lines_and_debug_sections():
    m = fixture("directives.ptx")
    assert (m.version, m.target, m.target_options, m.address_size) == ((8, 0), "sm_90a", (), 64)
    assert m.pragmas == ("nounroll",)
    assert m.files == {1: SourceFile("/src/kernel.cu", 1700000000, 1234), 2: SourceFile("/src/helpers.cuh")}
    tuned = m.functions["tuned"]
    assert tuned.directives == (
        Directive(".reqntid", (64, 2), None),
        Directive(".minnctapersm", (2,), None),
        Directive(".maxnreg", (128,), None),
        Directive(".pragma", ("nounroll",), 3),
    )
    assert tuned.labels == {"$L__loop": 3}  # the body .pragma is a marker before instruction 3
    assert [i.loc for i in tuned.body] == [(1, 10, 3), (2, 4, 1), (2, 4, 1)] + [(1, 12, 5)] * 5
    bounded = m.functions["bounded"]
    assert bounded.directives == (Directive(".maxntid", (256,), None), Directive(".pragma", ("nounroll",), None))
    assert bounded.directive(".maxntid").args == (256,) and bounded.directive(".reqntid") is None
    assert m.entries() == ["tuned", "bounded"]
    check_module(m)


def test_cluster_tensor_copy_sinks_and_aliases():
    m = fixture("misc.ptx")
    fn = m.functions["clustered"]
    ins = lambda text: at_line(m, "clustered", line_of(DATA / "misc.ptx", text))  # noqa: E731
    assert m.aliases == {"helper_alias": "helper"} and m.functions["helper_alias"].declaration_only
    assert m.vars["managed_flag"].attributes == (".managed",) and m.vars["managed_flag"].init == (1).to_bytes(
        4, "little"
    )
    assert fn.params[0] == Param("clustered_param_0", ".u64", None, 1, ".param", True, None, 64)
    assert [d.name for d in fn.directives] == [".explicitcluster", ".reqnctapercluster", ".maxntid"]
    assert fn.directive(".reqnctapercluster").args == (2, 1, 1)
    assert fn.regs["%v1"] == ".v2.b32" and ins("%v1.x, %r3").operands == (Reg("%v1.x"), Reg("%r3"))
    assert ins("%cluster_ctarank").operands[1] == Reg("%cluster_ctarank")
    assert ins("elect.sync").operands == (Pair(Sink(), Reg("%p1")), Imm(-1, "-1", "int"))
    assert ins("expect_tx").operands[0] == Sink()
    copy = ins("cp.async.bulk.tensor")
    assert copy.mods[-1] == ".mbarrier::complete_tx::bytes"
    assert copy.operands == (
        Addr(Reg("%r2")),
        AddrTuple((Reg("%rd1"), Vec((Reg("%v1.x"), Reg("%v1.y"))))),
        Addr(Reg("%r1")),
    )
    assert ins("barrier.cluster.wait").operands == ()
    assert ins("[tile]").operands[1] == Addr(Sym("tile")) and fn.vars["bar"].type == ".b64"
    check_module(m)


def test_unified_address():
    text = _HEAD + ".visible .entry k(.param .u64 p)\n{\n.reg .b64 %rd<2>;\nld.b64 %rd1, [%rd0].unified;\nret;\n}\n"
    assert parse(text).functions["k"].body[0].operands[1] == Addr(Reg("%rd0"), 0, True)


def test_module_header_forms():
    base = ".visible .entry k()\n{\nret;\n}\n"
    m = parse(".version 7.8\n.target sm_80, texmode_independent, debug\n" + base)
    assert (m.version, m.target, m.target_options, m.address_size) == (
        (7, 8),
        "sm_80",
        ("texmode_independent", "debug"),
        32,
    )
    assert parse(".version 8.8\n.target sm_120a\n.address_size 64\n" + base).target == "sm_120a"


# -- ptxas as the oracle for the fixtures --------------------------------------------------------------------------


def _elf_symbols_and_relocations(cubin: bytes):
    """{name: (section index, value, size)}, {section index: bytes}, [(target section, offset, symbol, addend)] of
    an ELF64 little-endian object: just what comparing initial values needs."""
    shoff, shentsize, shnum = struct.unpack_from("<Q", cubin, 0x28)[0], *struct.unpack_from("<HH", cubin, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    data = {i: cubin[s[4] : s[4] + s[5]] for i, s in enumerate(sections) if s[1] != 8}  # not NOBITS
    symtab_index = next(i for i, s in enumerate(sections) if s[1] == 2)
    symtab, strtab = sections[symtab_index], data[sections[symtab_index][6]]
    names = []
    symbols = {}
    for k in range(symtab[5] // 24):
        name_off, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", cubin, symtab[4] + 24 * k)
        name = strtab[name_off : strtab.index(b"\0", name_off)].decode()
        names.append(name)
        if info & 0xF == 1:  # STT_OBJECT
            symbols[name] = (shndx, value, size)
    relocations = []
    for s in sections:
        if s[1] == 4:  # SHT_RELA
            for k in range(s[5] // 24):
                offset, info, addend = struct.unpack_from("<QQq", cubin, s[4] + 24 * k)
                relocations.append((s[7], offset, names[info >> 32], addend))
    return symbols, data, relocations


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not installed")
@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.ptx")))
def test_fixtures_are_valid_ptx(name, tmp_path):
    """Every hand-written fixture assembles with ptxas, so the parser is tested on real PTX, not on a dialect."""
    out = subprocess.run(
        [PTXAS, "-arch=sm_90a", str(DATA / name), "-o", str(tmp_path / "x.cubin")], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr


@pytest.mark.skipif(PTXAS is None, reason="ptxas (CUDA toolkit) is not installed")
def test_initial_values_and_relocations_match_ptxas(tmp_path):
    """The bytes ptxas writes for each initialised variable equal Var.init outside the relocated bytes, and every
    relocation ptxas emits inside a variable falls in one of Var.relocs, with its symbol and addend."""
    cubin = tmp_path / "variables.cubin"
    subprocess.run([PTXAS, "-arch=sm_90", str(DATA / "variables.ptx"), "-o", str(cubin)], check=True)
    symbols, data, relocations = _elf_symbols_and_relocations(cubin.read_bytes())
    m = fixture("variables.ptx")
    compared = 0
    for var in m.vars.values():
        if var.init is None:
            continue
        shndx, value, size = symbols[var.name]
        assert size == var.size == len(var.init)
        theirs = data[shndx][value : value + size]
        relocated = {r.offset + k for r in var.relocs for k in range(r.width)}
        assert [b for k, b in enumerate(theirs) if k not in relocated] == [
            b for k, b in enumerate(var.init) if k not in relocated
        ], var.name
        inside = [
            (off - value, sym, add)
            for sec, off, sym, add in relocations
            if sec == shndx and value <= off < value + size
        ]
        for off, sym, add in inside:
            assert any(r.offset <= off < r.offset + r.width and (r.symbol, r.addend) == (sym, add) for r in var.relocs)
        for r in var.relocs:
            assert any(r.offset <= off < r.offset + r.width for off, _, _ in inside), (var.name, r)
        compared += 1
    assert compared == 15


# -- errors --------------------------------------------------------------------------------------------------------

_HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n"
_KERNEL = (
    _HEAD + ".visible .entry k(.param .u64 p)\n{\n\t.reg .b32 \t%r<4>;\n\t.reg .pred \t%p<2>;\n"
)  # body from line 8

ERRORS = [
    # (text, line, column, words in the reason)
    (_HEAD + ".visible .entry k()\n{\n\tret;\n}\n.bogus 1\n", 8, 1, "unknown directive .bogus"),
    (_KERNEL + "\t.bogus 3;\n\tret;\n}\n", 8, 2, "unknown directive .bogus in a function body"),
    (_KERNEL + "\tmov.u32 \t%r1, 1;\n\tret;\n", 5, 1, "unbalanced braces"),
    (_KERNEL + "\t{\n\tmov.u32 \t%r1, 1;\n\tret;\n}\n", 5, 1, "unbalanced braces"),
    (_KERNEL + "\tret;\n}\n}\n", 10, 1, "unbalanced braces"),
    (_KERNEL + "\tmov.u32 \t%r1, %r2 %r3;\n\tret;\n}\n", 8, 16, "bad operand"),
    (_KERNEL + "\tadd.s32 \t%r1, %r2, ;\n\tret;\n}\n", 8, 21, "missing operand"),
    (_KERNEL + "\tmov.u32 \t%r1, %r9;\n\tret;\n}\n", 8, 16, "undeclared register '%r9'"),
    (_KERNEL + "\tst.global.u32 \t[%rd1], %r1;\n\tret;\n}\n", 8, 18, "undeclared register '%rd1'"),
    (_KERNEL + "\tmov.u32 \t%r1, x;\n\tret;\n}\n", 8, 16, "undeclared identifier 'x'"),
    (_KERNEL + "\tmov.u32 \t%r1, %r9.x;\n\tret;\n}\n", 8, 16, "undeclared register '%r9.x'"),
    (_KERNEL + "L1:\n\tret;\nL1:\n\tret;\n}\n", 10, 1, "duplicate label 'L1'"),
    (_KERNEL + "\tbra \tL2;\nL1:\n\tret;\n}\n", 8, 7, "branch target 'L2' is not a label"),
    (_KERNEL + "\t{\nL1:\n\t}\n\tbra \tL1;\n\tret;\n}\n", 11, 7, "branch target 'L1' is not a label"),
    (_KERNEL + "\tmovx.u32 \t%r1, 1;\n\tret;\n}\n", 8, 2, "unknown instruction 'movx'"),
    (_KERNEL + "\tmov.u32 \t%r1, 1\n\tret;\n}\n", 8, 17, "expected ';' at the end of the instruction"),
    (_KERNEL + "\tmov.u32 \t%r1, 1\n}\n", 8, 2, "not terminated by ';'"),
    (_KERNEL + "\tneg.s32 \t%r1, -%r2;\n\tret;\n}\n", 8, 16, "no negated register"),
    (_KERNEL + "\tadd.s32 \t%r1, %r2, (1<<4);\n\tret;\n}\n", 8, 21, "constant expressions are not supported"),
    (_KERNEL + "\tmov.f32 \t%r1, -0f3F800000;\n\tret;\n}\n", 8, 16, "takes no sign"),
    (_KERNEL + "\tld.global.u32 \t%r1, [%r2-4];\n\tret;\n}\n", 8, 22, "bad address"),
    (_KERNEL + "\t@%r1 bra \tL;\nL:\n\tret;\n}\n", 8, 3, "not .pred"),
    (_KERNEL + "\tselp.b32 \t%r1, 1, 0, !%r2;\n\tret;\n}\n", 8, 24, "'!' applies to a declared predicate register"),
    (_KERNEL + "\t.reg .b32 \t%r2;\n\tret;\n}\n", 8, 13, "declared twice in the same block"),
    (_KERNEL + "\t.reg .b33 \t%x;\n\tret;\n}\n", 8, 7, "not a register type"),
    (_KERNEL + "\tcall.uni \tnowhere, ();\n\tret;\n}\n", 8, 12, "call of 'nowhere': not declared"),
    (".target sm_90\n", 1, 1, "must begin with .version"),
    (".version 8.0\n.address_size 64\n", 2, 1, "followed by .target"),
    (_HEAD + ".global .u32 a[2][2] = {{1}, {2, 3}};\n", 4, 24, "short inner initialiser list is ambiguous"),
    (_HEAD + ".global .u32 a[2] = {1, 2, 3};\n", 4, 21, "3 initialiser elements for a dimension of 2"),
    (_HEAD + ".global .f32 a = 1;\n", 4, 18, "integer literal initialising a .f32"),
    (_HEAD + ".global .u32 a = 1.5;\n", 4, 18, "floating-point literal initialising a .u32"),
    (_HEAD + ".global .u64 a = b;\n.global .u32 b;\n", 4, 18, "not declared before it"),
    (_HEAD + ".global .f16 a = 0x3c00;\n", 4, 17, "no initial value is allowed for .f16"),
    (_HEAD + ".global .u32 a[2] = {};\n", 4, 22, "empty initialiser list"),
    (_HEAD + ".global .u32 a[2] = {1,};\n", 4, 24, "empty initialiser element"),
    (_HEAD + ".global .u32 a;\n.global .u32 a;\n", 5, 1, "declared twice at module scope"),
    (_HEAD + ".shared .u32 a = 1;\n", 4, 17, "cannot be initialised"),
    (_HEAD + ".global .u8 a[2] = {0xFF(x), 0xFF00(x)};\n", 4, 21, "not declared before it"),
    (_HEAD + ".global .u32 x;\n.global .u8 a[1] = {0xF0(x)};\n", 5, 21, "byte mask 0xF0"),
    (_HEAD + ".visible .entry k()\n{\n\tret;\n}\n.visible .entry k()\n{\n\tret;\n}\n", 8, 10, "defined twice"),
    (_HEAD + ".func f(.param .b32 a);\n.func f(.param .b64 a)\n{\n\tret;\n}\n", 5, 1, "does not match its earlier"),
    (_HEAD + ".visible .entry k()\n.maxntid 1, 2, 3, 4\n{\n\tret;\n}\n", 5, 1, ".maxntid takes 1..3 numbers"),
    (_HEAD + ".visible .entry k()\n{\n\t.loc 3 1 1\n\tret;\n}\n", 6, 2, ".loc names file 3"),
    (_HEAD + ".section .debug_info\n{\n.b32 12\nnot data\n}\n", 7, 1, "unexpected text in .debug_info"),
    (_HEAD + "/* never closed\n", 4, 1, "unterminated /* comment"),
]


@pytest.mark.parametrize("text, line, column, reason", ERRORS)
def test_errors_name_line_and_column(text, line, column, reason):
    with pytest.raises(PTXSyntaxError) as info:
        parse(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert (err.line, err.column) == (line, column), str(err)
    assert reason in err.reason, str(err)
    shown = text.split("\n")[line - 1]
    assert err.source_line == shown and f"line {line}, column {column}" in str(err)
    assert shown.expandtabs(1).strip() in str(err)


def test_error_caret_points_at_the_column():
    with pytest.raises(PTXSyntaxError) as info:
        parse(_KERNEL + "\tmov.u32 \t%r1, %r9;\n\tret;\n}\n")
    _, shown, caret = str(info.value).split("\n")
    assert shown[caret.index("^")] == "%"


def test_not_text():
    with pytest.raises(TypeError):
        parse(b".version 8.0")


# -- properties ----------------------------------------------------------------------------------------------------

_LITERAL_KERNEL = _HEAD + ".visible .entry k()\n{{\n.reg .b64 %rd;\n.reg .f32 %f;\n{}\nret;\n}}\n"


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63), 2**64 - 1), st.sampled_from(["{:d}", "0x{:X}", "0x{:x}", "0{:o}", "0b{:b}"]))
def test_integer_literals_read_back(value, form):
    text = ("-" + form.format(-value)) if value < 0 else form.format(value)
    if form == "0{:o}" and value == 0:
        text = "0"
    (ins,) = parse(_LITERAL_KERNEL.format(f"add.s64 %rd, %rd, {text};")).functions["k"].body[:1]
    assert ins.operands[2] == Imm(value, text, "int")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(allow_nan=False, allow_infinity=False))
def test_float_literals_keep_their_bits(bits, x):
    body = f"mov.f32 %f, 0f{bits:08X};\nadd.f32 %f, %f, {x!r};"
    f32, dec = parse(_LITERAL_KERNEL.format(body)).functions["k"].body[:2]
    assert f32.operands[1].value == bits and f32.operands[1].kind == "f32"
    assert dec.operands[2].value == struct.unpack("<Q", struct.pack("<d", x))[0]


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([(".u8", "<u1"), (".s16", "<i2"), (".b32", "<u4"), (".s64", "<i8")]),
    st.lists(st.integers(-(2**63), 2**64 - 1), min_size=1, max_size=20),
    st.integers(0, 5),
)
def test_integer_initialisers_wrap_and_fill(types, values, extra):
    """Elements wrap modulo 2**bits (what ptxas stores) and a short list is zero-filled."""
    ptx_type, dtype = types
    bits = 8 * np.dtype(dtype).itemsize
    var = parse(_HEAD + f".global {ptx_type} a[{len(values) + extra}] = {{{', '.join(map(str, values))}}};\n").vars["a"]
    wrapped = [v % (1 << bits) for v in values] + [0] * extra
    assert var.init == np.array(wrapped, dtype=dtype.replace("i", "u")).tobytes()


def test_parse_is_deterministic_and_reparses_to_itself():
    for path in sorted(DATA.glob("*.ptx")):
        text = path.read_text()
        m = parse(text)
        assert parse(text) == m and parse(m.text) == m and m.text == text


# -- kernel names --------------------------------------------------------------------------------------------------


def test_demangle_names():
    cases = {
        "_Z9flash_fwdPK6__halfS1_i": ("flash_fwd", "flash_fwd", False),
        "_ZN5flash6kernelILi128EEEvPKf": ("flash::kernel", "kernel", True),
        "_Z9flash_fwdILi128ELi4EEvv": ("flash_fwd", "flash_fwd", True),
        "_ZN12_GLOBAL__N_16kernelEPf": ("(anonymous namespace)::kernel", "kernel", False),
        "_ZN3fsq11fold_tokensINS_5AddOpEEEfPKtixT_": ("fsq::fold_tokens", "fold_tokens", True),
        "_ZL6kernelPf": ("kernel", "kernel", False),
        "_Z3fooIJifEEvT_": ("foo", "foo", True),
        "_Z1kIDF16_EvPT_": ("k", "k", True),
    }
    for mangled, (qualified, base, template) in cases.items():
        d = demangle(mangled)
        assert (d.qualified, d.base, d.template) == (qualified, base, template), mangled
    assert demangle("flash_fwd") is None and demangle("_Z") is None and demangle("_Z1kIXadL_Z1fvEEEvv") is None


def _module_with_entries(*names):
    text = _HEAD + "".join(f".visible .entry {n}()\n{{\n\tret;\n}}\n" for n in names)
    text += ".func helper()\n{\n\tret;\n}\n"
    return parse(text)


def test_find_kernel():
    m = _module_with_entries(
        "plain", "_Z9flash_fwdPK6__halfS1_i", "_ZN5flash6kernelILi128EEEvPKf", "_ZN5flash6kernelILi64EEEvPKf"
    )
    assert find_kernel(m, "plain").name == "plain"
    assert find_kernel(m, "flash_fwd").name == "_Z9flash_fwdPK6__halfS1_i"
    assert find_kernel(m, "_ZN5flash6kernelILi64EEEvPKf").name == "_ZN5flash6kernelILi64EEEvPKf"
    with pytest.raises(UnknownKernel, match="names 2 kernels; pass the mangled name") as info:
        find_kernel(m, "flash::kernel")
    assert "_ZN5flash6kernelILi128EEEvPKf" in str(info.value) and "_ZN5flash6kernelILi64EEEvPKf" in str(info.value)
    with pytest.raises(UnknownKernel, match="names 2 kernels"):
        find_kernel(m, "kernel")
    with pytest.raises(UnknownKernel) as info:
        find_kernel(m, "nothing")
    assert isinstance(info.value, ValueError) and isinstance(info.value, LookupError)
    assert "_Z9flash_fwdPK6__halfS1_i  (flash_fwd)" in str(info.value) and "(flash::kernel<...>)" in str(info.value)
    with pytest.raises(UnknownKernel, match="is a .func, not a kernel"):
        find_kernel(m, "helper")
    with pytest.raises(UnknownKernel, match="template arguments and parameter types are not matched"):
        find_kernel(m, "flash::kernel<64>")


# -- real PTX: NVRTC builds of kernel/ -----------------------------------------------------------------------------


def nvrtc_ptx(source: str, arch: str, defines: dict, name: str, lineinfo: bool = False) -> str:
    """PTX of ``source`` from NVRTC with the options flashsim.gpu.build.compile_cuda gives it (name, arch, C++17,
    the defines, kernel/ and the CUDA headers on the include path). cuda.core's Program compiles to PTX only with a
    driver present (it asks the driver's version), so the options go to NVRTC through cuda.bindings directly."""
    nvrtc = pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC (cuda-bindings) is not installed")
    core = pytest.importorskip("cuda.core", reason="cuda.core is not installed")
    options = core.ProgramOptions(
        name=name,
        arch=arch,
        std="c++17",
        define_macro=[(k, str(v)) for k, v in defines.items()] or None,
        include_path=[str(kernel_dir()), *cuda_include_dirs()],
        lineinfo=lineinfo,
    ).as_bytes("nvrtc", "ptx")
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(options), options)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise AssertionError(f"NVRTC failed on {name}: {log.decode(errors='replace')}")
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        ptx = b" " * size
        nvrtc.nvrtcGetPTX(prog, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return ptx.rstrip(b"\0").decode()


def flash_fwd_ptx(config, arch, lineinfo=False) -> str:
    """The PTX of the kernel flashsim.gpu.launch.build_kernel(config, arch) compiles: the same source and defines."""
    return nvrtc_ptx(
        kernel_path(launch.KERNEL_FILE).read_text(), arch, launch.build_defines(config), launch.KERNEL_FILE, lineinfo
    )


FLASH_CONFIGS = {
    "sm_90 default": ("sm_90", {}),
    "sm_120 default": ("sm_120", {}),
    "sm_90 causal softcap bf16": ("sm_90", {"causal": True, "softcap": True, "dtype": "bf16"}),
    "sm_120 d64 f16 accumulation": ("sm_120", {"head_dim": 64, "pv_accum": "f16"}),
    "sm_90 int8 local bnhd": ("sm_90", {"quant": "int8", "local": True, "layout": "bnhd"}),
}


@pytest.fixture(scope="module")
def flash_default_sm90():
    return flash_fwd_ptx(flashsim.KernelConfig.default("sm_90"), "sm_90")


@pytest.mark.slow
@pytest.mark.parametrize("label", list(FLASH_CONFIGS))
def test_flash_fwd_ptx(label, flash_default_sm90):
    arch, changes = FLASH_CONFIGS[label]
    config = flashsim.KernelConfig.default(arch).with_(**changes)
    text = flash_default_sm90 if label == "sm_90 default" else flash_fwd_ptx(config, arch)
    m = parse(text)
    assert m.entries() == ["flash_fwd"] and m.target == arch and m.address_size == 64
    counts = check_module(m)
    assert counts == regex_opcode_counts(text)
    assert counts["mma"] > 0 and counts["ldmatrix"] > 0
    fn = find_kernel(m, "flash_fwd")
    assert fn.directive(".maxntid").args[0] == config.warps * 32
    # the cubin build_kernel makes from the same source and defines has exactly these kernels
    build = launch.build_kernel(config, arch)
    assert sorted(e.mangled for e in build.entry_points.values()) == m.entries()
    assert m.vars["smem"].count is None and m.vars["smem"].linkage == ".extern"  # dynamic shared memory
    # NVRTC's inline-asm blocks (indented, unlike the body's own brace) that declare registers: renamed apart
    if re.search(r"\n[ \t]+\{\s*\.reg", text):
        assert any("{" in r for r in fn.regs)


@pytest.mark.slow
def test_flash_fwd_opcode_counts_match_a_plain_regex(flash_default_sm90):
    """An independent statement of what the parser read: per opcode, the instructions it built equal the lines of
    the text that start with that opcode."""
    counts = Counter(i.opcode for f in parse(flash_default_sm90).functions.values() for i in f.body)
    assert counts == regex_opcode_counts(flash_default_sm90)
    assert sum(counts.values()) > 1000


@pytest.mark.slow
def test_flash_fwd_parses_well_under_a_second(flash_default_sm90):
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        parse(flash_default_sm90)
        best = min(best, time.perf_counter() - t0)
    assert len(flash_default_sm90.split("\n")) > 3000
    assert best < 0.5, f"parsing flash_fwd's PTX took {best:.3f} s"


@pytest.mark.slow
def test_flash_fwd_lineinfo_maps_to_the_source():
    m = parse(flash_fwd_ptx(flashsim.KernelConfig.default("sm_90"), "sm_90", lineinfo=True))
    check_module(m)
    # flash_fwd.cu and the kernel/ headers it includes (async_copy.cuh holds the mbarrier wrappers)
    names = {index: pathlib.PurePath(f.path).name for index, f in m.files.items()}
    assert "flash_fwd.cu" in names.values() and "async_copy.cuh" in names.values(), names
    sources = {index: kernel_path(name).read_text().split("\n") for index, name in names.items()}
    asm = [i for i in m.functions["flash_fwd"].body if i.opcode in ("mma", "ldmatrix", "ex2", "mbarrier")]

    def statement(file: int, line: int) -> str:
        """The asm statement that ends on (or holds) 1-based ``line`` of ``file``: a multi-line asm string gets the
        .loc of the line its statement ends on, so the text runs back to the line that opens it."""
        source = sources[file]
        first = max(k for k in range(line) if "asm" in source[k])
        return "\n".join(source[first:line])

    assert asm and all(i.loc is not None and i.opcode in statement(i.loc[0], i.loc[1]) for i in asm)
    assert {names[i.loc[0]] for i in asm} == {"flash_fwd.cu", "async_copy.cuh"}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_quantize_and_capture_kernels_ptx(arch):
    config = flashsim.KernelConfig.default(arch)
    builds = {"quantize.cu": provenance.build_defines("quantize", config)}
    for capture in ("mma", "mma_k32", "layout", "sfu"):
        builds[f"capture/{capture}.cu"] = provenance.build_defines(f"{capture}_capture")
    for rel, defines in builds.items():
        text = nvrtc_ptx(kernel_path(rel).read_text(), arch, defines, rel)
        m = parse(text)
        assert m.entries(), rel
        assert check_module(m) == regex_opcode_counts(text), rel
        assert parse(m.text) == m


# -- real PTX: nvcc builds of kernels written here -----------------------------------------------------------------

NVCC_SOURCE = r"""#include <cstdio>
__constant__ float coeffs[4] = {1.0f, -2.5f, 3.25f, 0.0f};
__constant__ int table2[2][3] = {{1, 2, 3}, {4, 5, 6}};
__device__ int counter = 7;
__device__ int *counter_ptr = &counter;
__device__ __noinline__ int twice(int x) { return 2 * x; }
typedef int (*fn_t)(int);
__device__ __noinline__ int thrice(int x) { return 3 * x; }
__device__ fn_t fns[2] = {twice, thrice};
namespace ns {
template <int N> __global__ void scaled(float *out) { out[threadIdx.x] *= N; }
template __global__ void scaled<2>(float *);
template __global__ void scaled<3>(float *);
}
extern "C" __global__ void kern(float *out, const int *in, int n, int which) {
    extern __shared__ float dyn[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned r;
    asm volatile("{\n .reg .b32 %%temp;\n add.u32 %%temp, %1, 1;\n mul.lo.u32 %0, %%temp, 3;\n}"
                 : "=r"(r) : "r"(in[i]));
    dyn[threadIdx.x] = coeffs[i & 3] * r + table2[i & 1][i % 3];
    __syncthreads();
    int t = twice(in[i]) + fns[which & 1](i) + *counter_ptr;
    if (t == 12345) printf("i=%d t=%d\n", i, t);
    out[i] = dyn[(threadIdx.x + 1) % blockDim.x] + t;
}
"""


@pytest.fixture(scope="module")
def nvcc_ptx(tmp_path_factory):
    if NVCC is None:
        pytest.skip("nvcc (CUDA toolkit) is not installed")
    folder = tmp_path_factory.mktemp("nvcc")
    cu = folder / "kern.cu"
    cu.write_text(NVCC_SOURCE)
    out = {}
    for label, flags in (("plain", []), ("lineinfo", ["-lineinfo"]), ("debug", ["-G"])):
        ptx = folder / f"kern_{label}.ptx"
        subprocess.run([NVCC, "-arch=sm_90", "-ptx", *flags, str(cu), "-o", str(ptx)], check=True)
        out[label] = ptx.read_text()
    return cu, out


@pytest.mark.slow
def test_nvcc_kernel(nvcc_ptx):
    cu, texts = nvcc_ptx
    m = parse(texts["plain"])
    assert check_module(m) == regex_opcode_counts(texts["plain"])
    kern = find_kernel(m, "kern")
    # the __noinline__ functions are .func definitions, called directly and through the function-pointer table
    twice = next(f for f in m.functions.values() if demangle(f.name) and demangle(f.name).base == "twice")
    assert not twice.entry and not twice.declaration_only and twice.body
    calls = [i for i in kern.body if isinstance(i, Call)]
    assert any(c.callee == Sym(twice.name) for c in calls)
    assert any(isinstance(c.callee, Reg) and c.targets.name in kern.prototypes for c in calls)
    # printf is a call to the extern vprintf
    assert m.functions["vprintf"].declaration_only and any(c.callee == Sym("vprintf") for c in calls)
    # the inline asm block's register was renamed apart
    assert any(r.startswith("%temp{") for r in kern.regs)
    # __constant__ data with initialisers, byte for byte as the C++ initialiser lays it out
    assert m.vars["coeffs"].space == ".const"
    assert m.vars["coeffs"].init == np.array([1.0, -2.5, 3.25, 0.0], dtype="<f4").tobytes()
    assert m.vars["table2"].init == np.arange(1, 7, dtype="<i4").tobytes()
    assert m.vars["counter_ptr"].relocs == (Reloc(0, "counter", 0, True, 8),)
    assert [r.symbol for r in m.vars["fns"].relocs] == [twice.name, next(n for n in m.functions if "thrice" in n)]
    assert m.vars["dyn"].count is None
    # template instances in a namespace: found by their mangled names, ambiguous by their C++ name
    scaled = [e for e in m.entries() if demangle(e) and demangle(e).qualified == "ns::scaled"]
    assert len(scaled) == 2 and all(find_kernel(m, e).name == e for e in scaled)
    with pytest.raises(UnknownKernel, match="names 2 kernels"):
        find_kernel(m, "ns::scaled")


@pytest.mark.slow
@pytest.mark.skipif(CXXFILT is None, reason="c++filt (binutils) is not installed")
def test_demangled_names_agree_with_cxxfilt(nvcc_ptx):
    _, texts = nvcc_ptx
    m = parse(texts["plain"])
    names = [n for n in m.functions if n.startswith("_Z")]
    out = subprocess.run([CXXFILT, *names], capture_output=True, text=True, check=True).stdout.split("\n")
    for mangled, full in zip(names, out):
        bare = full.split("(")[0]
        while "<" in bare:
            bare = re.sub(r"<[^<>]*>", "", bare)
        assert demangle(mangled).qualified == bare.split()[-1], (mangled, full)  # without a template's return type


@pytest.mark.slow
def test_nvcc_lineinfo_and_debug_sections(nvcc_ptx):
    cu, texts = nvcc_ptx
    m = parse(texts["lineinfo"])
    check_module(m)
    (index,) = m.files
    assert pathlib.Path(m.files[index].path).name == cu.name
    kern = m.functions["kern"]
    printf_line = line_of(cu, "printf(")
    vprintf = next(i for i in kern.body if isinstance(i, Call) and i.callee == Sym("vprintf"))
    assert vprintf.loc == (index, printf_line, vprintf.loc[2])
    asm_lines = set(range(line_of(cu, "asm volatile"), line_of(cu, '"r"(in[i])') + 1))  # the statement's two lines
    asm_locs = {i.loc[1] for i in kern.body if "%temp{" in repr(i.operands)}
    assert len(asm_locs) == 1 and asm_locs <= asm_lines
    # -G: DWARF sections are skipped; the code is the same kind of PTX
    debug = parse(texts["debug"])
    check_module(debug)
    assert ".section" in texts["debug"] and debug.entries() == m.entries()
