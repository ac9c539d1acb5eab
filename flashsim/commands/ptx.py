"""Run a kernel's PTX on the CPU (flashsim.ptx): ``run`` a launch, ``diff`` it against the GPU, list ``kernels``,
list what an arch accepts (``isa``).

    flashsim ptx isa [--arch sm_120] [--refused]
    flashsim ptx kernels FILE.cu|FILE.ptx
    flashsim ptx run FILE.cu|FILE.ptx --kernel NAME --grid G --block B [--cluster C] [--shared-mem S] --arg SPEC ...
                     [--out DIR] [--check memcheck|racecheck|initcheck] [--arch sm_90] [--define K=V ...]
                     [--trace REGS --trace-at WHERE [--trace-threads T]] [--executor local:N|ADDRESS] [--progress]
    flashsim ptx diff (the same launch options): the launch on the GPU and in the simulator, the first difference

A .cu file is compiled with NVRTC (no GPU; with -lineinfo; its folder and kernel/ on the include path, --define as
-D); a .ptx file is loaded as it is. G and B: "128" or "16,8" or "16,8,2". Each --arg is one kernel parameter, in order:

    a.npy           an array (a global buffer passed by address; written back after the launch)
    out:f32:1024    a zero-filled array of that dtype and shape ("out:f16:4x256")
    i32:128         a by-value scalar: i8 i16 i32 i64 u8 u16 u32 u64 (decimal or 0x...), f16 f32 f64

``run`` prints the report (warp instructions per opcode, time, rate), any printf output and the trace, and with
--out writes every array argument after the launch to DIR/arg<i>.npy (i its position), the trace to DIR/trace.npy.
A kernel that faults, deadlocks or trips a sanitizer exits 1 with the simulator's message; bad input is a one-line
error (exit 2). ``diff`` exits 0 when every output bit is equal, 1 naming the first differing element otherwise,
2 without a GPU. ``isa`` prints the instruction table of flashsim.ptx.isa for the arch: every opcode the simulator
runs there and the arch-restricted forms it accepts (with --refused, those it refuses, each with its rule).
--trace takes PTX register names ("%r5,%f3"), --trace-at PTX lines or source lines ("148",
"flash_fwd.cu:88"), --trace-threads launch-wide thread indices ("0,33"; default 0).
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

import numpy as np

from .. import ptx
from ..gpu import runtime as rt
from ..gpu.build import Build, assemble_ptx, assembler_for, compile_ptx
from ..ptx import SimulationError, UnknownKernel, WorkerError
from ..ptx import isa as ptx_isa
from ..ptx.names import demangle
from ..ptx.trace import Trace

__all__ = ["add_arguments", "run", "parse_arg", "parse_dims", "first_difference"]

SCALARS = {
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
    "f16": np.float16,
    "f32": np.float32,
    "f64": np.float64,
}
CHECKS = ("memcheck", "racecheck", "initcheck")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ptx_command", metavar="{run,diff,kernels,isa}", parser_class=type(parser))
    sub.required = True
    table = sub.add_parser("isa", help="list the instruction forms an arch accepts (flashsim.ptx.isa.forms)")
    table.add_argument("--arch", default="sm_90", help="the arch (default sm_90; sm_120 means sm_120a)")
    table.add_argument("--refused", action="store_true", help="list the arch-restricted forms it refuses instead")
    kernels = sub.add_parser("kernels", help="list the file's kernels and their parameters")
    kernels.add_argument("file", type=pathlib.Path, help="a .cu or .ptx file")
    _add_build_options(kernels)
    for name, text in (
        ("run", "run a launch in the simulator"),
        ("diff", "run a launch on the GPU and in the simulator and name the first differing element"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("file", type=pathlib.Path, help="a .cu or .ptx file")
        _add_build_options(p)
        p.add_argument("--kernel", help="the kernel (PTX or C++ name); optional when the file has one")
        p.add_argument("--grid", required=True, type=parse_dims, help='blocks: "G" or "X,Y[,Z]"')
        p.add_argument("--block", required=True, type=parse_dims, help='threads per block: "B" or "X,Y[,Z]"')
        p.add_argument(
            "--cluster", type=parse_dims, default=None, help='blocks per thread-block cluster: "C" or "X,Y[,Z]"'
        )
        p.add_argument("--shared-mem", type=_nonnegative, default=0, help="dynamic shared memory in bytes")
        p.add_argument("--arg", action="append", default=[], metavar="SPEC", help="one kernel parameter (in order)")
        p.add_argument("--out", type=pathlib.Path, help="write the arrays after the launch to DIR/arg<i>.npy")
        p.add_argument("--check", choices=CHECKS, help="a sanitizer (flashsim.ptx.sanitize)")
        p.add_argument(
            "--executor",
            metavar="ADDRESS",
            help='spread the blocks over a cluster engine\'s workers: "local:N" (N processes here) or a Dask '
            'scheduler\'s address ("tcp://host:8786"); flashsim.ptx.distributed',
        )
        p.add_argument(
            "--communicating",
            action="store_true",
            help="the blocks wait on each other through global memory: run them all on one worker",
        )
        p.add_argument("--progress", action="store_true", help="show progress on stderr (default: on a terminal)")
        if name == "run":
            p.add_argument("--trace", help='registers to record, e.g. "%%r5,%%f3"')
            p.add_argument("--trace-at", help='PTX lines or source lines, e.g. "148" or "flash_fwd.cu:88"')
            p.add_argument("--trace-threads", default="0", help='launch-wide thread indices, e.g. "0,33"')
            p.add_argument("--max-threads", type=int, default=1 << 15, help="simulated threads per wave")


def _add_build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--arch", default="sm_90", help="the arch whose numerics run (default sm_90)")
    p.add_argument("--define", action="append", default=[], metavar="K=V", help="a -D for a .cu (V an int)")
    p.add_argument(
        "--contraction",
        choices=("sass", "none", "all"),
        default="sass",
        help="which unrounded mul / add pairs fuse (flashsim.ptx.contraction; default: as ptxas did)",
    )


def _nonnegative(text: str) -> int:
    value = int(text, 0)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def parse_dims(text: str) -> tuple[int, ...]:
    """ "128" -> (128,); "16,8" or "16x8" -> (16, 8): a grid or block of 1 to 3 positive ints."""
    parts = [p for p in re.split(r"[,x]", str(text).strip()) if p]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f'expected "N" or "X,Y[,Z]" of positive ints, got {text!r}') from None
    if not 1 <= len(dims) <= 3 or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f'expected "N" or "X,Y[,Z]" of positive ints, got {text!r}')
    return dims


def _dtype(name: str) -> np.dtype:
    if name == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    if name in SCALARS:
        return np.dtype(SCALARS[name])
    try:
        return np.dtype(name)
    except TypeError:
        raise ValueError(f"unknown dtype {name!r} (i8..i64, u8..u64, f16, bf16, f32, f64)") from None


def parse_arg(spec: str):
    """One --arg: an array from a .npy file, a zero-filled ``out:DTYPE:SHAPE`` array, or a ``TYPE:VALUE`` scalar."""
    if spec.endswith(".npy"):
        path = pathlib.Path(spec)
        if not path.is_file():
            raise ValueError(f"--arg {spec}: no such file")
        try:
            return np.load(path, allow_pickle=False)
        except ValueError as exc:
            raise ValueError(f"--arg {spec}: not a .npy array ({exc})") from None
    parts = spec.split(":")
    if parts[0] == "out":
        if len(parts) != 3:
            raise ValueError(f"--arg {spec}: an output array is out:DTYPE:SHAPE, e.g. out:f32:1024 or out:f16:4x256")
        dtype = _dtype(parts[1])
        try:
            shape = tuple(int(s) for s in re.split(r"[x,]", parts[2]))
        except ValueError:
            raise ValueError(f"--arg {spec}: the shape must be ints such as 1024 or 4x256") from None
        if any(s < 1 for s in shape):
            raise ValueError(f"--arg {spec}: every extent must be >= 1")
        return np.zeros(shape, dtype)
    if len(parts) != 2 or parts[0] not in SCALARS:
        raise ValueError(
            f"--arg {spec}: expected FILE.npy, out:DTYPE:SHAPE or TYPE:VALUE with TYPE one of {', '.join(SCALARS)}"
        )
    kind, text = parts
    dtype = np.dtype(SCALARS[kind])
    if dtype.kind == "f":
        try:
            return dtype.type(float(text))
        except ValueError:
            raise ValueError(f"--arg {spec}: {text!r} is not a number") from None
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f"--arg {spec}: {text!r} is not an integer") from None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise ValueError(f"--arg {spec}: {value} is outside {kind}'s range {info.min}..{info.max}")
    return dtype.type(value)


def _defines(items) -> dict:
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise ValueError(f"--define {item}: expected NAME=INT")
        try:
            out[name] = int(value, 0)
        except ValueError:
            raise ValueError(f"--define {item}: the value must be an int") from None
    return out


def load_module(path: pathlib.Path, arch: str, defines, contraction: str = "sass"):
    """The flashsim.ptx Module of a .cu (NVRTC) or .ptx file."""

    text = path.read_text()
    if path.suffix == ".ptx":
        if defines:
            raise ValueError("--define applies to a .cu file, not to PTX")
        return ptx.load(text, arch=arch, contraction=contraction)
    if path.suffix not in (".cu", ".cuh", ".cpp"):
        raise ValueError(f"{path}: expected a .cu or a .ptx file")
    # named by its path, so that .loc names the file; -lineinfo: the PTX gets .loc (trace by source line, errors
    # naming the source line) and the same code
    text = compile_ptx(
        text,
        name=str(path),
        defines=_defines(defines),
        arch=arch,
        include_dirs=(str(path.parent),),
        line_info=True,
    )
    return ptx.load(text, arch=arch, contraction=contraction)


def _kernel(module, name: str | None):
    if name is None:
        if len(module.kernels) != 1:
            raise ValueError(f"the file has {len(module.kernels)} kernels ({', '.join(module.kernels)}): pick --kernel")
        name = module.kernels[0]
    try:
        return module.kernel(name)
    except UnknownKernel as exc:  # its listing of the kernels, on the one line of a user error
        raise ValueError("; ".join(line.strip() for line in str(exc).splitlines())) from None


def _describe_params(kernel) -> list[str]:
    out = []
    for i, p in enumerate(kernel.params):
        shape = f"[{p.count}]" if p.count > 1 else ""
        ptr = " pointer" + (f" to {p.ptr_space}" if p.ptr_space else "") if p.ptr else ""
        out.append(f"  {i}: {p.name} {p.type}{shape} ({p.size} bytes{ptr})")
    return out


def _kernels(args) -> int:
    module = load_module(args.file, args.arch, args.define, args.contraction)
    for name in module.kernels:
        k = module.kernel(name)
        readable = demangle(name)
        print(name + (f"  ({readable})" if readable is not None else ""))
        print("\n".join(_describe_params(k)) or "  (no parameters)")
    return 0


def _trace(args):
    if not args.trace:
        if args.trace_at:
            raise ValueError("--trace-at needs --trace REGS")
        return None
    if not args.trace_at:
        raise ValueError("--trace needs --trace-at LINES (PTX lines, or file.cu:LINE source lines)")
    lines, source = [], []
    for item in args.trace_at.split(","):
        item = item.strip()
        if ":" in item:
            source.append(item)
        elif item.isdigit():
            lines.append(int(item))
        else:
            raise ValueError(f"--trace-at {item}: expected a PTX line number or file.cu:LINE")
    try:
        threads = [int(t, 0) for t in args.trace_threads.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--trace-threads {args.trace_threads}: expected ints such as 0,33") from None
    regs = [r.strip() for r in args.trace.split(",") if r.strip()]
    return Trace(regs, lines=lines, source_lines=source, threads=threads)


def _launch_inputs(args):
    module = load_module(args.file, args.arch, args.define, args.contraction)
    kernel = _kernel(module, args.kernel)
    values = [parse_arg(s) for s in args.arg]
    if len(values) != len(kernel.params):
        listing = "; ".join(line.strip() for line in _describe_params(kernel))
        raise ValueError(f"{kernel.name} takes {len(kernel.params)} --arg, got {len(values)} ({listing})")
    return module, kernel, values


def _simulate(kernel, args, values, trace=None, max_threads: int = 1 << 15):
    return ptx.launch(
        kernel,
        args.grid,
        args.block,
        values,
        shared_mem=args.shared_mem,
        check=args.check,
        trace=trace,
        cluster=args.cluster,
        max_threads=max_threads,
        progress=True if args.progress else None,
        executor=args.executor or None,
        communicating=True if args.communicating else None,
    )


def _write(out: pathlib.Path | None, values) -> list[str]:
    if out is None:
        return []
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray) and v.ndim > 0:
            np.save(out / f"arg{i}.npy", v)
            written.append(str(out / f"arg{i}.npy"))
    return written


def _run(args) -> int:
    trace = _trace(args)
    _, kernel, values = _launch_inputs(args)
    try:
        report = _simulate(kernel, args, values, trace, args.max_threads)
    except (SimulationError, WorkerError) as exc:
        print(f"flashsim ptx run: {exc}", file=sys.stderr)
        return 1
    print(report)
    if report.printf:
        print(f"printf ({len(report.printf)} calls):")
        text = "".join(report.printf)
        print(text, end="" if text.endswith("\n") else "\n")
    if trace is not None:
        print(f"trace ({len(trace)} records):")
        print(trace.table())
    written = _write(args.out, values)
    if trace is not None and args.out is not None:
        np.save(args.out / "trace.npy", trace.records)
        written.append(str(args.out / "trace.npy"))
    if written:
        print(f"wrote {len(written)} file(s) to {args.out}")
    return 0


def _bits(a: np.ndarray) -> np.ndarray:
    """``a``'s elements as unsigned integers of their width (bytes for a width other than 1, 2, 4 or 8)."""
    a = np.ascontiguousarray(a)
    width = a.dtype.itemsize
    if width in (1, 2, 4, 8) and a.dtype.names is None:
        return a.view(f"u{width}")
    return a.view(np.uint8)


def first_difference(sim: list, gpu: list):
    """The first differing element of the array arguments: (argument index, multi-index, simulator bits, GPU bits,
    number of differing elements of that argument), or None when every bit is equal (non-arrays are skipped)."""
    for i, (a, b) in enumerate(zip(sim, gpu)):
        if not (isinstance(a, np.ndarray) and a.ndim > 0):
            continue
        x, y = _bits(a), _bits(b)
        if x.shape != y.shape:
            raise ValueError(f"argument {i}: shapes {x.shape} and {y.shape} differ")
        diff = x != y
        if diff.any():
            flat = int(np.flatnonzero(diff.reshape(-1))[0])
            where = np.unravel_index(flat, x.shape)
            return i, tuple(int(w) for w in where), int(x[where]), int(y[where]), int(diff.sum())
    return None


def run_on_gpu(module, kernel, grid, block, values, shared_mem: int, cluster=None) -> list:
    """The arguments after a launch of ``kernel`` on the GPU at hand, from ptxas' cubin of the module's very PTX
    (so the GPU runs the instructions the simulator runs); GPUError without a usable GPU."""
    arch = rt.current_arch()
    if arch != module.arch:
        raise ValueError(f"the GPU is {arch} and the simulator runs {module.arch}: run with --arch {arch}")
    ptxas, target = assembler_for(module.ptx, arch)  # its own .target (sm_90a), a ptxas that reads its .version
    cubin = assemble_ptx(module.ptx, target, (), ptxas)
    build = Build.of_cubin(cubin, arch, kernel.name)
    k = rt.load(build, kernel.name)
    device = []
    for i, v in enumerate(values):
        if isinstance(v, np.ndarray) and v.ndim > 0:
            device.append(rt.to_device(np.ascontiguousarray(v)))
        elif isinstance(v, np.generic) and v.dtype.kind in "iuf":
            device.append(v)
        else:
            raise ValueError(f"argument {i}: diff passes arrays and numpy scalars to the GPU, not {type(v).__name__}")
    rt.launch(k, grid, block, *device, smem_bytes=int(shared_mem), cluster=cluster)
    return [d.to_numpy() if isinstance(v, np.ndarray) else v for d, v in zip(device, values)]


def _show(bits: int, dtype: np.dtype) -> str:
    width = dtype.itemsize
    text = f"0x{bits:0{width * 2}x}"
    if dtype.kind == "f" and width in (2, 4, 8):
        text += f" ({np.array([bits], f'u{width}').view(dtype)[0]!r})"
    return text


def _diff(args) -> int:
    module, kernel, values = _launch_inputs(args)
    rt.require_gpu()  # no GPU: one line (GPUError) before the simulation runs
    gpu_values = run_on_gpu(
        module, kernel, args.grid, args.block, [_copy(v) for v in values], args.shared_mem, args.cluster
    )
    sim_values = [_copy(v) for v in values]
    try:
        report = _simulate(kernel, args, sim_values)
    except (SimulationError, WorkerError) as exc:
        print(f"flashsim ptx diff: the simulator failed where the GPU ran: {exc}", file=sys.stderr)
        return 1
    print(report)
    _write(args.out, sim_values)
    found = first_difference(sim_values, gpu_values)
    if found is None:
        n = sum(v.size for v in sim_values if isinstance(v, np.ndarray) and v.ndim > 0)
        print(f"every bit equal: {n:,} elements of {sum(isinstance(v, np.ndarray) for v in values)} arrays")
        return 0
    i, where, s, g, count = found
    dt = sim_values[i].dtype
    param = kernel.params[i].name
    print(
        f"argument {i} ({param}) differs at index {where}: simulator {_show(s, dt)}, GPU {_show(g, dt)} "
        f"({count:,} of {sim_values[i].size:,} elements differ)"
    )
    return 1


def _copy(v):
    return v.copy() if isinstance(v, np.ndarray) else v


def run(args) -> int:
    return {"kernels": _kernels, "run": _run, "diff": _diff, "isa": _isa}[args.ptx_command](args)


def _isa(args) -> int:
    """Print flashsim.ptx.isa.forms(arch): one form a line."""
    table = ptx_isa.forms(args.arch)  # an unknown arch: ValueError, the CLI's one-line error
    print("\n".join(table["refused" if args.refused else "accepted"]))
    return 0
