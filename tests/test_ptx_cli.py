"""``flashsim ptx run | diff | kernels``: a launch from the command line writes its arrays back bit for bit, prints
its report, printf and trace; every bad input is one line on stderr with exit status 2 (no traceback); a kernel that
faults exits 1 with the simulator's message; ``diff`` without a GPU says so in one line. Oracles: numpy's float32
multiply (the kernel's one rounding) and Python integers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from test_ptx_launch import SCALE, line_of  # tests/test_ptx_launch.py: the same hand-written kernel

from flashsim.cli import main
from flashsim.commands.ptx import first_difference, parse_arg, parse_dims
from flashsim.gpu.runtime import gpu_available

CU = """\
extern "C" __global__ void tri(unsigned *out, unsigned bias) {
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned sq = t * t + bias + EXTRA;
  out[t] = sq;
  if (t == 1) printf("t=%u sq=%u\\n", t, sq);
}
"""


@pytest.fixture
def files(tmp_path):
    (tmp_path / "scale.ptx").write_text(SCALE)
    x = np.random.default_rng(0).standard_normal(200).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    return tmp_path, x


def ptx_run(tmp_path, *extra, n=200):
    return [
        "ptx",
        "run",
        str(tmp_path / "scale.ptx"),
        "--grid",
        "2",
        "--block",
        "128",
        "--arg",
        f"out:f32:{n}",
        "--arg",
        str(tmp_path / "x.npy"),
        "--arg",
        f"u32:{n}",
        "--arg",
        "f32:-0.375",
        *extra,
    ]


def test_run_writes_every_array_and_prints_the_report(files, capsys):
    tmp_path, x = files
    assert main(ptx_run(tmp_path, "--out", str(tmp_path / "o"))) == 0
    out = capsys.readouterr().out
    assert np.array_equal(np.load(tmp_path / "o/arg0.npy").view(np.uint32), (x * np.float32(-0.375)).view(np.uint32))
    assert np.array_equal(np.load(tmp_path / "o/arg1.npy"), x)
    assert "scale: grid (2, 1, 1), block (128, 1, 1):" in out and "warp instructions" in out and "ld.global.f32" in out
    assert "wrote 2 file(s)" in out


def test_run_traces_registers_at_a_line(files, capsys):
    tmp_path, x = files
    line = line_of(SCALE, "st.global.f32")
    argv = ptx_run(tmp_path, "--trace", "%r5,%f3", "--trace-at", str(line), "--trace-threads", "0,130", "--out")
    assert main([*argv, str(tmp_path / "o")]) == 0
    rec = np.load(tmp_path / "o/trace.npy")
    assert rec["%r5"].tolist() == [0, 130]
    assert np.array_equal(rec["%f3"], (x[[0, 130]] * np.float32(-0.375)).view(np.uint32))
    assert "trace (2 records):" in capsys.readouterr().out


def test_kernels_lists_entries_and_parameters(files, capsys):
    tmp_path, _ = files
    assert main(["ptx", "kernels", str(tmp_path / "scale.ptx")]) == 0
    assert capsys.readouterr().out.split("\n")[:5] == [
        "scale",
        "  0: out .u64 (8 bytes)",
        "  1: in .u64 (8 bytes)",
        "  2: n .u32 (4 bytes)",
        "  3: s .f32 (4 bytes)",
    ]


@pytest.mark.nvrtc
def test_run_a_cu_file_with_defines_printf_and_a_source_line_trace(tmp_path, capsys):
    src = tmp_path / "tri.cu"
    src.write_text(CU)
    argv = ["ptx", "run", str(src), "--grid", "2", "--block", "32", "--arg", "out:u32:64", "--arg", "u32:5"]
    argv += ["--define", "EXTRA=100", "--out", str(tmp_path / "o"), "--trace", "%r1", "--trace-at", "tri.cu:4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert np.load(tmp_path / "o/arg0.npy").tolist() == [(t * t + 105) & 0xFFFFFFFF for t in range(64)]
    assert "printf (1 calls):\nt=1 sq=106\n" in out
    rec = np.load(tmp_path / "o/trace.npy")
    assert rec["source"][0] == f"{src}:4" and rec["thread"][0].tolist() == [0, 0, 0]


def _one_line_error(argv, capsys, needle, status=2):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == status, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert needle in err, err
    return err


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda a: a[:-2], "scale takes 4 --arg, got 3 (0: out .u64 (8 bytes); 1: in"),
        (lambda a: a[:-1] + ["f33:1"], "--arg f33:1: expected FILE.npy, out:DTYPE:SHAPE or TYPE:VALUE"),
        (lambda a: a[:-1] + ["f32:abc"], "--arg f32:abc: 'abc' is not a number"),
        (lambda a: a[:-3] + ["u32:-1", "--arg", "f32:1"], "--arg u32:-1: -1 is outside u32's range 0..4294967295"),
        (lambda a: a[:-7] + ["out:f32:0", *a[-6:]], "--arg out:f32:0: every extent must be >= 1"),
        (lambda a: a[:-7] + ["out:q9:4", *a[-6:]], "unknown dtype 'q9'"),
        (lambda a: a[:-5] + ["nothere.npy", *a[-4:]], "--arg nothere.npy: no such file"),
        (lambda a: a + ["--kernel", "scal"], "no kernel 'scal' in this module; the kernels are:; scale"),
        (lambda a: a[:3] + ["--grid", "0"] + a[5:], 'argument --grid: expected "N" or "X,Y[,Z]" of positive ints'),
        (lambda a: a[:5] + ["--block", "2048"] + a[7:], "block.x = 2048 is past the limit 1024"),
        (lambda a: a + ["--shared-mem", "999999"], "999999 bytes of shared memory per block"),
        (lambda a: a + ["--check", "asan"], "argument --check: invalid choice: 'asan'"),
        (lambda a: a + ["--trace", "%r5"], "--trace needs --trace-at LINES"),
        (lambda a: a + ["--trace", "%r77", "--trace-at", "2"], "no instruction starts on PTX line 2"),
        (lambda a: a + ["--define", "X=1"], "--define applies to a .cu file, not to PTX"),
    ],
)
def test_bad_input_is_one_line_with_status_2(files, capsys, change, needle):
    tmp_path, _ = files
    _one_line_error(change(ptx_run(tmp_path)), capsys, needle)


def test_files_that_are_not_there_or_not_ptx(tmp_path, capsys):
    _one_line_error(["ptx", "kernels", str(tmp_path / "none.ptx")], capsys, "No such file or directory")
    (tmp_path / "k.txt").write_text("x")
    _one_line_error(["ptx", "kernels", str(tmp_path / "k.txt")], capsys, "expected a .cu or a .ptx file")
    (tmp_path / "bad.ptx").write_text(SCALE.replace("ld.param.u32 %r1, [n];", "ld.param.u32 %r1 [n];"))
    line = line_of(SCALE, "ld.param.u32")
    _one_line_error(["ptx", "kernels", str(tmp_path / "bad.ptx")], capsys, f"PTX line {line}, column ")


def test_a_kernel_that_faults_exits_1_with_the_simulators_message(files, capsys):
    tmp_path, _ = files
    argv = ptx_run(tmp_path, n=256)  # the kernel reads 256 floats of a 200-float array
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "thread (72, 0, 0)" in err and "(argument 1, 800 bytes: the access starts at its end)" in err, err


def test_no_traceback_from_a_fresh_process(files):
    tmp_path, _ = files
    argv = [sys.executable, "-m", "flashsim.cli", *ptx_run(tmp_path)[:-1], "i32:1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == "flashsim ptx: argument 3 (s, .f32): expects a float of 4 bytes, got int32"


@pytest.mark.skipif(gpu_available()[0], reason="a GPU is here: test_diff_on_the_gpu runs instead")
def test_diff_without_a_gpu_says_so_in_one_line(files, capsys):
    tmp_path, _ = files
    argv = ptx_run(tmp_path)
    argv[1] = "diff"
    _one_line_error(argv, capsys, "flashsim ptx: no usable GPU: ")


@pytest.mark.gpu
def test_diff_on_the_gpu(files, capsys):
    tmp_path, _ = files
    argv = ptx_run(tmp_path)
    argv[1] = "diff"
    assert main(argv) == 0, capsys.readouterr().err
    assert "every bit equal" in capsys.readouterr().out


def test_first_difference_names_argument_index_and_bits():
    a = np.zeros((3, 4), np.float32)
    b = a.copy()
    assert first_difference([a, np.int32(1), a], [b, np.int32(2), b]) is None  # scalars are not compared
    b[2, 1] = -0.0  # equal as floats, not as bits
    b[2, 3] = 1.0
    assert first_difference([a.copy(), a], [a.copy(), b]) == (1, (2, 1), 0, 0x80000000, 2)
    nan1, nan2 = np.array([0x7FC00000], np.uint32).view(np.float32), np.array([0x7FC00001], np.uint32).view(np.float32)
    assert first_difference([nan1], [nan2]) == (0, (0,), 0x7FC00000, 0x7FC00001, 1)


def test_parse_arg_and_dims():
    assert parse_arg("u64:0xffffffffffffffff") == np.uint64(2**64 - 1)
    assert parse_arg("i8:-128").dtype == np.int8
    assert np.isinf(parse_arg("f32:-inf")) and parse_arg("f32:-inf").dtype == np.float32
    assert parse_arg("f16:0.5").dtype == np.float16
    z = parse_arg("out:bf16:4x3")
    assert z.shape == (4, 3) and z.dtype.name == "bfloat16" and not z.view(np.uint16).any()
    assert parse_dims("16,8") == (16, 8) and parse_dims("4x2x2") == (4, 2, 2) and parse_dims("7") == (7,)
