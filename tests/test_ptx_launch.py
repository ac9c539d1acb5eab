"""flashsim.ptx.launch: arguments (arrays, scalars of every width, by-value structs with address()), waves, the
report's counts, the address map, trace=, and every bad input the launch refuses, each with one clear error raised
before anything runs (the output arrays are untouched), or at run time naming the thread (an array too small).

Oracles: numpy's IEEE float32 multiply for the kernel's one rounding, Python integers for indices and addresses,
a per-line regular expression over the PTX text for the instruction counts.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.ptx.program import SPACE_BASE
from flashsim.ptx.trace import Trace

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"

SCALE = (
    HEADER
    + """
.visible .entry scale(.param .u64 out, .param .u64 in, .param .u32 n, .param .f32 s)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<6>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [in];
    ld.param.u32 %r1, [n];
    ld.param.f32 %f1, [s];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f2, [%rd4];
    mul.rn.f32 %f3, %f2, %f1;
    add.s64 %rd5, %rd1, %rd3;
    st.global.f32 [%rd5], %f3;
DONE:
    ret;
}
"""
)


def line_of(text: str, needle: str) -> int:
    return next(i for i, s in enumerate(text.split("\n"), 1) if needle in s)


@pytest.fixture(scope="module")
def scale():
    return P.load(SCALE).kernel("scale")


def inputs(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n).astype(np.float32)
    x[:4] = [np.inf, -0.0, 3.4e38, 1e-45]
    return x


def test_arrays_and_scalars_in_and_out(scale):
    x, s = inputs(300), np.float32(-1.75)
    out = np.full(300, 7, np.float32)
    report = P.launch(scale, 3, 128, [out, x, np.uint32(300), s])
    with np.errstate(over="ignore"):  # 3.4e38 * -1.75 rounds to -inf, as the kernel's mul.rn does
        assert np.array_equal(out.view(np.uint32), (x * s).view(np.uint32))
    assert report.kernel == "scale" and report.grid == (3, 1, 1) and report.block == (128, 1, 1)
    assert report.waves == 1 and report.seconds > 0 and report.rate > 0
    assert "warp instructions" in str(report)


def test_waves_give_the_same_bits_and_call_progress(scale):
    x, s = inputs(512, 1), np.float32(0.3)
    one, many = np.zeros(512, np.float32), np.zeros(512, np.float32)
    P.launch(scale, 8, 64, [one, x, np.uint32(512), s])
    calls = []
    report = P.launch(scale, 8, 64, [many, x, np.uint32(512), s], max_threads=128, progress=lambda *a: calls.append(a))
    assert report.waves == 4
    assert [c[:2] for c in calls] == [(2, 8), (4, 8), (6, 8), (8, 8)]
    assert np.array_equal(one.view(np.uint32), many.view(np.uint32))


def _opcodes(text: str) -> Counter:
    """Each instruction line's opcode with its modifiers (a guard dropped)."""
    counts = Counter()
    body = text[text.index("{") :]
    for line in body.split("\n"):
        line = line.strip()
        if not line or line.startswith((".", "{", "}", "//")) or line.endswith(":"):
            continue
        counts[re.sub(r"^@!?%\w+\s+", "", line).split()[0].rstrip(";")] += 1
    return counts


def test_counts_are_warp_instructions_per_opcode(scale):
    """Every thread in range runs the whole body once: each opcode counts once per warp per occurrence."""
    warps = 6
    x = inputs(32 * warps)
    report = P.launch(scale, 2, 96, [np.zeros(32 * warps, np.float32), x, np.uint32(32 * warps), np.float32(2)])
    want = {op: n * warps for op, n in _opcodes(SCALE).items()}
    assert report.counts == want
    assert report.instructions == sum(want.values())


PARAMS = (
    HEADER
    + """
.visible .entry params(.param .u64 out, .param .u16 a, .param .u64 b, .param .f64 c, .param .s8 d,
                       .param .align 8 .b8 st[24])
{
    .reg .b16 %rs<3>;
    .reg .b32 %r<3>;
    .reg .f32 %f<2>;
    .reg .f64 %fd<2>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [out];
    ld.param.u16 %rs1, [a];
    cvt.u64.u16 %rd2, %rs1;
    st.global.u64 [%rd1], %rd2;
    ld.param.u64 %rd3, [b];
    st.global.u64 [%rd1+8], %rd3;
    ld.param.f64 %fd1, [c];
    mov.b64 %rd4, %fd1;
    st.global.u64 [%rd1+16], %rd4;
    ld.param.s8 %rs2, [d];
    cvt.s64.s8 %rd5, %rs2;
    st.global.u64 [%rd1+24], %rd5;
    ld.param.u64 %rd6, [st];
    ld.param.u32 %r1, [st+8];
    ld.param.f32 %f1, [st+12];
    ld.param.u64 %rd7, [st+16];
    st.global.u32 [%rd6], %r1;
    st.global.f32 [%rd6+4], %f1;
    st.global.u64 [%rd1+32], %rd7;
    st.global.u64 [%rd1+40], %rd1;
    ret;
}
"""
)

STRUCT = np.dtype([("ptr", "<u8"), ("n", "<u4"), ("s", "<f4"), ("tag", "<u8")])


@pytest.fixture(scope="module")
def params():
    return P.load(PARAMS).kernel("params")


def _struct(target: np.ndarray):
    return np.array((P.address(target), 123456, 0.5, 2**63 + 5), STRUCT)[()]


def test_scalars_of_every_width_and_a_struct_with_an_address(params):
    out, target = np.zeros(6, np.uint64), np.zeros(2, np.uint32)
    args = [out, np.uint16(0xBEEF), np.uint64(2**64 - 3), np.float64(-2.5), np.int8(-7), _struct(target)]
    P.launch(params, 1, 1, args)
    assert out[:5].tolist() == [0xBEEF, 2**64 - 3, int(np.float64(-2.5).view(np.uint64)), 2**64 - 7, 2**63 + 5]
    assert int(out[5]) == P.address(out)  # a pointer parameter is the array's address
    assert target.tolist() == [123456, int(np.float32(0.5).view(np.uint32))]
    # the same struct as bytes
    target[:] = 0
    P.launch(params, 1, 1, args[:5] + [_struct(target).tobytes()])
    assert target[0] == 123456


def test_the_address_map():
    text = (
        HEADER
        + """
.visible .entry where(.param .u64 out)
{
    .reg .b64 %rd<6>;
    .shared .align 8 .b8 first[16];
    .shared .align 16 .b8 second[16];
    .local .align 8 .b8 mine[8];
    ld.param.u64 %rd1, [out];
    cvta.shared.u64 %rd2, first;
    cvta.shared.u64 %rd3, second;
    cvta.local.u64 %rd4, mine;
    st.global.u64 [%rd1], %rd2;
    st.global.u64 [%rd1+8], %rd3;
    st.global.u64 [%rd1+16], %rd4;
    ret;
}
"""
    )
    out = np.zeros(3, np.uint64)
    P.launch(P.load(text).kernel("where"), 1, 1, [out])
    shared, local = SPACE_BASE[".shared"], SPACE_BASE[".local"]
    assert int(out[0]) - shared in (0, 16) and int(out[1]) - shared in (0, 16) and out[0] != out[1]
    assert int(out[1]) % 16 == 0
    assert local <= int(out[2]) < local + 2**32


# -- bad input: one clear error, before anything runs ---------------------------------------------------------


def _refused(kernel, grid, block, args, match, error=P.LaunchError, **kw):
    sentinel = args[0].copy()
    with pytest.raises(error, match=match):
        P.launch(kernel, grid, block, args, **kw)
    assert np.array_equal(args[0], sentinel)  # nothing ran


@pytest.mark.parametrize(
    "args, match",
    [
        (
            lambda o, x: [o, x, np.uint32(4)],
            r"scale takes 4 arguments \(out \(\.u64\), in .*n \(\.u32\), s \(\.f32\)\), got 3",
        ),
        (lambda o, x: [o, x, np.uint32(4), np.float32(1), np.float32(1)], "takes 4 arguments"),
        (lambda o, x: [o, x, 4, np.float32(1)], r"argument 2 \(n, \.u32\): pass a numpy scalar .* not a Python int"),
        (lambda o, x: [o, x, np.uint32(4), np.int32(1)], r"argument 3 \(s, \.f32\): expects a float of 4 bytes"),
        (lambda o, x: [o, x, np.uint64(4), np.float32(1)], r"argument 2 \(n, \.u32\): 4 bytes expected, got 8"),
        (lambda o, x: [o, x, x, np.float32(1)], r"argument 2 .*passed by its 8-byte address"),
        (lambda o, x: [o, [1.0, 2.0], np.uint32(4), np.float32(1)], r"argument 1 .*got list"),
    ],
    ids=["too few", "too many", "python int", "int for float", "wrong width", "array for scalar", "list"],
)
def test_wrong_arguments(scale, args, match):
    out, x = np.zeros(4, np.float32), inputs(4)
    _refused(scale, 1, 32, args(out, x), match)


def test_args_must_be_a_sequence(scale):
    with pytest.raises(P.LaunchError, match="args must be a list or tuple"):
        P.launch(scale, 1, 32, np.zeros(4, np.float32))


@pytest.mark.parametrize(
    "grid, block, shared_mem, match",
    [
        ((1, 65536), 32, 0, r"grid\.y = 65536 is past the limit 65535"),
        (2**31, 32, 0, r"grid\.x = 2147483648 is past the limit"),
        (1, 1025, 0, r"block\.x = 1025 is past the limit 1024"),
        (1, (1, 1, 65), 0, r"block\.z = 65 is past the limit 64"),
        (1, (64, 32), 0, r"block \(64, 32, 1\) has 2048 threads, past 1024"),
        (0, 32, 0, "grid must be 1 to 3 positive ints"),
        ((1, 2, 3, 4), 32, 0, "grid must be 1 to 3 positive ints"),
        (1, "32", 0, "block must be an int or a tuple"),
        (1, 32, 300_000, r"300000 bytes of shared memory per block \(0 static \+ 300000 dynamic\) past sm_90's 232448"),
        (1, 32, -1, "shared_mem must be a number of bytes >= 0"),
    ],
)
def test_grid_block_and_shared_memory_past_the_limits(scale, grid, block, shared_mem, match):
    out, x = np.zeros(4, np.float32), inputs(4)
    _refused(scale, grid, block, [out, x, np.uint32(4), np.float32(1)], match, shared_mem=shared_mem)


def test_reqntid_and_maxntid_are_enforced():
    text = SCALE.replace(".visible .entry scale(", ".visible .entry fixed(").replace(
        ".param .f32 s)\n{", ".param .f32 s)\n.reqntid 64\n{"
    )
    kernel = P.load(text).kernel("fixed")
    out, x = np.zeros(4, np.float32), inputs(4)
    _refused(kernel, 1, 32, [out, x, np.uint32(4), np.float32(1)], r"declares \.reqntid 64; block is \(32, 1, 1\)")
    P.launch(kernel, 1, 64, [out, x, np.uint32(4), np.float32(1)])
    capped = P.load(text.replace(".reqntid 64", ".maxntid 64")).kernel("fixed")
    _refused(capped, 1, 96, [out, x, np.uint32(4), np.float32(1)], r"declares \.maxntid 64")


def test_bad_check_and_bad_kernel_object(scale):
    out, x = np.zeros(4, np.float32), inputs(4)
    _refused(scale, 1, 32, [out, x, np.uint32(4), np.float32(1)], "check must be None", check="asan")
    with pytest.raises(P.LaunchError, match="kernel must be a flashsim.ptx Kernel"):
        P.launch("scale", 1, 32, [out, x, np.uint32(4), np.float32(1)])


def test_unknown_kernel_lists_the_kernels():
    module = P.load(SCALE)
    with pytest.raises(P.UnknownKernel, match=r"no kernel 'scal' in this module; the kernels are:\n  scale"):
        module.kernel("scal")


def test_ptx_that_does_not_parse_names_line_and_column():
    text = SCALE.replace("mad.lo.s32 %r5, %r2, %r3, %r4;", "mad.lo.s32 %r5, %r2, %r3 %r4;")
    with pytest.raises(P.PTXSyntaxError) as info:
        P.load(text)
    assert info.value.line == line_of(text, "mad.lo.s32")
    assert info.value.column == info.value.source_line.index("%r3 %r4") + 1  # the operand that is not one
    assert f"PTX line {info.value.line}, column {info.value.column}" in str(info.value)


def test_an_instruction_the_simulator_lacks_is_named_before_anything_runs():
    text = SCALE.replace(
        "mul.rn.f32 %f3, %f2, %f1;",
        "mul.rn.f32 %f3, %f2, %f1;\n    mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 "
        "{%f1,%f1,%f1,%f1,%f1,%f1,%f1,%f1}, {%r1,%r1}, {%r1,%r1}, {%f1,%f1,%f1,%f1,%f1,%f1,%f1,%f1};",
    )
    kernel = P.load(text).kernel("scale")
    out, x = np.zeros(4, np.float32), inputs(4)
    with pytest.raises(P.UnsupportedInstruction) as info:
        P.launch(kernel, 1, 32, [out, x, np.uint32(4), np.float32(1)])
    e = info.value
    assert e.opcode.startswith("mma.sync.aligned.m8n8k4") and e.kernel == "scale" and e.line == line_of(text, "m8n8k4")
    assert np.array_equal(out, np.zeros(4, np.float32))


def test_an_array_too_small_is_a_memory_fault_naming_it(scale):
    x = inputs(64)
    out = np.zeros(100, np.float32)
    with pytest.raises(P.MemoryFault) as info:
        P.launch(scale, 1, 128, [out, x, np.uint32(100), np.float32(1)])
    e = info.value
    assert "4-byte global load outside every buffer at address" in str(e)
    assert "(argument 1, 256 bytes: the access starts at its end)" in str(e)
    assert e.thread == (64, 0, 0) and e.block == (0, 0, 0) and e.line == line_of(SCALE, "ld.global.f32")


# -- trace= ----------------------------------------------------------------------------------------------------


def test_trace_records_registers_before_a_line_for_chosen_threads(scale):
    x, s = inputs(256, 3), np.float32(1.5)
    line = line_of(SCALE, "st.global.f32")
    trace = Trace(["%r5", "%f3", "%tid.x"], lines=[line], threads=[0, 5, (1, 3), ((1, 0, 0), (127, 0, 0))])
    report = P.launch(scale, 2, 128, [np.zeros(256, np.float32), x, np.uint32(256), s], trace=trace)
    rec = report.trace.records
    assert report.trace is trace and len(trace) == 4
    assert rec["line"].tolist() == [line] * 4
    assert rec["%r5"].tolist() == [0, 5, 131, 255]
    assert rec["%tid.x"].tolist() == [0, 5, 3, 127]
    assert rec["block"][:, 0].tolist() == [0, 0, 1, 1] and rec["thread"][:, 0].tolist() == [0, 5, 3, 127]
    assert np.array_equal(rec["%f3"], (x[[0, 5, 131, 255]] * s).view(np.uint32))
    assert np.array_equal(trace.values("%f3"), x[[0, 5, 131, 255]] * s)
    table = trace.table()
    assert f"0x{int(rec['%f3'][1]):08x}" in table and "%tid.x" in table.split("\n")[0]


def test_trace_by_pc_every_thread_and_a_limit(scale):
    pc = next(i for i, op in enumerate(scale.program.ops) if op.name == "setp.ge.u32")
    args = lambda: [np.zeros(64, np.float32), inputs(64), np.uint32(40), np.float32(2)]  # noqa: E731
    every = Trace("%r5", pcs=[pc])
    P.launch(scale, 1, 64, args(), trace=every)
    assert sorted(every.records["%r5"].tolist()) == list(range(64))
    capped = Trace("%r5", pcs=[pc], limit=10)
    P.launch(scale, 1, 64, args(), trace=capped)
    assert len(capped) == 10 and capped.truncated and "limit=10" in capped.table()
    # a line only threads in range reach: the guard's branch skipped it for the others
    inside = Trace("%r5", lines=[line_of(SCALE, "ld.global.f32")])
    P.launch(scale, 1, 64, args(), trace=inside)
    assert sorted(inside.records["%r5"].tolist()) == list(range(40))


LOOP = (
    HEADER
    + """
.visible .entry loop(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<5>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
AGAIN:
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra DONE;
    add.u32 %r3, %r3, %r2;
    add.u32 %r2, %r2, 1;
    bra AGAIN;
DONE:
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r3;
    ret;
}
"""
)


def test_trace_in_a_loop_gives_one_row_per_visit():
    kernel = P.load(LOOP).kernel("loop")
    trace = Trace(["%r2", "%r3"], lines=[line_of(LOOP, "add.u32 %r3")], threads=[0, 3, 7])
    out = np.zeros(8, np.uint32)
    P.launch(kernel, 1, 8, [out], trace=trace)
    rec = trace.records
    for t in (0, 3, 7):
        mine = rec[rec["thread"][:, 0] == t]
        assert mine["%r2"].tolist() == list(range(t))
        assert mine["%r3"].tolist() == [sum(range(k)) for k in range(t)]
    assert np.all(np.diff(rec["seq"]) == 1)
    assert out.tolist() == [sum(range(t)) for t in range(8)]


SHUFFLE = (
    HEADER
    + """
.visible .entry rotate(.param .u64 out)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    mov.u32 %r1, %tid.x;
    mul.lo.u32 %r2, %r1, 10;
    setp.lt.u32 %p1, %r1, 16;
    @%p1 bra LATE;
    add.u32 %r2, %r2, 1;
LATE:
    add.u32 %r3, %r1, 1;
    and.b32 %r3, %r3, 31;
    shfl.sync.idx.b32 %r2, %r2, %r3, 31, -1;
    add.u32 %r2, %r2, 0;
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
    ret;
}
"""
)


def test_trace_before_and_after_an_instruction():
    """when="both": a row before and a row after each visit, the after-row holding the instruction's result (here a
    warp-synchronous shuffle after a divergent branch: each lane's value before, its neighbour's after)."""
    kernel = P.load(SHUFFLE).kernel("rotate")
    line = line_of(SHUFFLE, "shfl.sync")
    mine_before = (np.arange(32) * 10 + (np.arange(32) >= 16)).astype(np.uint32)
    out = np.zeros(32, np.uint32)
    trace = Trace(["%r2"], lines=[line], when="both")
    P.launch(kernel, 1, 32, [out], trace=trace)
    rec = trace.records
    before, after = rec[~rec["after"]], rec[rec["after"]]
    assert sorted(after["thread"][:, 0].tolist()) == list(range(32)) and len(before) == 32
    assert np.array_equal(out, np.roll(mine_before, -1))
    for t in range(32):
        mine = rec[rec["thread"][:, 0] == t]
        assert mine["after"].tolist() == [False, True]
        assert mine["%r2"].tolist() == [mine_before[t], out[t]]
    only_after = Trace(["%r2"], lines=[line], when="after")
    P.launch(kernel, 1, 32, [np.zeros(32, np.uint32)], trace=only_after)
    assert only_after.records["after"].all() and len(only_after) == 32
    assert "when" in trace.table().split("\n")[0] and "after" in trace.table()
    with pytest.raises(ValueError, match="when is one of"):
        Trace(["%r2"], lines=[line], when="during")


@pytest.mark.nvrtc
def test_trace_by_cuda_source_line():
    source = (
        'extern "C" __global__ void tri(unsigned *out) {\n'
        "  unsigned t = threadIdx.x;\n"
        "  unsigned sq = t * t + 3u;\n"
        "  out[t] = sq;\n"
        "}\n"
    )
    module = P.compile(source, options=("-lineinfo",))
    kernel = module.kernel("tri")
    store = next(op for op in kernel.program.ops if op.name.startswith("st.global"))
    reg = next(r for r in re.findall(r"%r\d+", module.ptx.split("\n")[store.line - 1]))
    trace = Trace([reg], source_lines=[4], threads=[2, 9])
    P.launch(kernel, 1, 16, [np.zeros(16, np.uint32)], trace=trace)
    assert trace.records[reg].tolist() == [7, 84] and trace.records["source"][0].endswith(":4")
    with_file = Trace([reg], source_lines=["flashsim.cu:4"], threads=[1])
    P.launch(kernel, 1, 16, [np.zeros(16, np.uint32)], trace=with_file)
    assert with_file.records[reg].tolist() == [4]


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Trace(["%r99"], lines=[line_of(SCALE, "ret;")]), r"%r99 is not a register of scale"),
        (lambda: Trace(["%r5"], lines=[3]), r"no instruction starts on PTX line 3 \(nearest: "),
        (lambda: Trace(["%r5"], pcs=[10_000]), "outside the program's"),
        (lambda: Trace(["%r5"], lines=[line_of(SCALE, "ret;")], threads=[64]), "outside the launch's 64 threads"),
        (lambda: Trace(["%r5"], lines=[line_of(SCALE, "ret;")], threads=[(0, (0, 1, 0))]), "outside thread"),
        (lambda: Trace(["%r5"], source_lines=[5]), r"the PTX has no \.loc \(compile with -lineinfo\)"),
        (lambda: Trace(["%tid.y"], lines=[line_of(SCALE, "ret;")]), "%tid.y is not a register"),
    ],
)
def test_trace_errors_come_before_the_launch_runs(scale, make, match):
    out, x = np.zeros(64, np.float32), inputs(64)
    _refused(scale, 1, 64, [out, x, np.uint32(64), np.float32(1)], match, error=ValueError, trace=make())


def test_a_trace_needs_registers_and_a_place():
    with pytest.raises(ValueError, match="at least one register"):
        Trace([], lines=[1])
    with pytest.raises(ValueError, match="lines=, pcs= or source_lines="):
        Trace(["%r1"])
    with pytest.raises(ValueError, match="a PTX register name"):
        Trace(["r1"], lines=[1])


@pytest.mark.nvrtc
def test_the_benchmark_gemm_equals_the_tensor_core_model():
    """kernel/bench/ptx_gemm.cu (benchmarks/ptx/bench_ptx.py): every bit of C is flashsim.mma chained over K."""
    import flashsim
    from flashsim.gpu.build import kernel_dir

    kernel = P.compile((kernel_dir() / "bench/ptx_gemm.cu").read_text(), arch="sm_90").kernel("ptx_gemm")
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((256, 256)).astype(np.float16) for _ in range(2))
    c = np.zeros((256, 256), np.float32)
    report = P.launch(kernel, (4, 4), 128, [c, a.view(np.uint16), np.ascontiguousarray(b.T).view(np.uint16)])
    assert report.counts["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"] == 16 * 32 * 16  # tiles x k steps
    at = a.reshape(16, 16, 16, 16).transpose(0, 2, 1, 3)
    bt = b.reshape(16, 16, 32, 8).transpose(0, 2, 1, 3)
    acc = np.zeros((16, 32, 16, 8), np.float32)
    for k in range(16):
        acc = flashsim.mma(np.ascontiguousarray(at[:, k, None]), np.ascontiguousarray(bt[k][None]), acc)
    assert np.array_equal(c.view(np.uint32), acc.transpose(0, 2, 1, 3).reshape(256, 256).view(np.uint32))


@pytest.mark.nvrtc
def test_a_launch_split_into_block_ranges_writes_what_the_whole_launch_writes():
    """``blocks=``: two workers' shares of one launch (README: a launch's blocks over Ray or Dask), merged, equal the
    whole launch, and each share leaves the other's blocks untouched."""
    from flashsim.gpu.build import kernel_dir

    kernel = P.compile((kernel_dir() / "bench/ptx_gemm.cu").read_text(), arch="sm_90").kernel("ptx_gemm")
    rng = np.random.default_rng(8)
    a, b = (rng.standard_normal((256, 256)).astype(np.float16) for _ in range(2))
    bt = np.ascontiguousarray(b.T).view(np.uint16)
    whole, first, second = (np.zeros((256, 256), np.float32) for _ in range(3))
    P.launch(kernel, (4, 4), 128, [whole, a.view(np.uint16), bt])
    P.launch(kernel, (4, 4), 128, [first, a.view(np.uint16), bt], blocks=range(0, 6))
    P.launch(kernel, (4, 4), 128, [second, a.view(np.uint16), bt], blocks=range(6, 16))
    written = first != 0
    assert written.any() and not (written & (second != 0)).any()
    assert np.array_equal(np.where(written, first, second).view(np.uint32), whole.view(np.uint32))
    with pytest.raises(P.LaunchError, match="blocks must be a range"):
        P.launch(kernel, (4, 4), 128, [whole, a.view(np.uint16), bt], blocks=range(0, 17))
