"""Run a Triton kernel on the CPU as on a GPU (flashsim.triton), or compare it with Triton's interpreter.

    flashsim triton run FILE.py:KERNEL --grid G --arg SPEC ... [--meta NAME=VALUE ...] [--target sm_90] [--arch A]
                        [--num-warps 4] [--num-stages 3] [--check memcheck|racecheck|initcheck] [--out DIR]
                        [--executor local:N|ADDRESS]
    flashsim triton compare FILE.py:KERNEL (the same options, without --check)

FILE.py is imported and KERNEL is its @triton.jit function. G: "8" or "8,4" (Triton's grid). Each --arg is one
positional argument, in order:

    a.npy              an array (a buffer, written in place)
    out:f32:1024       a zero-filled array of that dtype and shape ("out:f16:64x64"; bf16, e4m3, e5m2 too)
    randn:f16:64x64    standard normals of that dtype and shape, seeded by --seed
    1024, 0.5, true    a Python int, float or bool, specialized as Triton's JIT does (a 1 becomes a constant)

--meta passes keyword arguments (constexprs such as BLOCK=128, Triton options such as enable_fp_fusion=false).
``run`` prints the report; with --out it writes every array argument after the launch to DIR/<parameter>.npy.
``compare`` runs the same launch in flashsim and under TRITON_INTERPRET=1 and prints, per buffer written, how many
elements differ, the ulp histogram and the first difference; it exits 0 when every bit agrees, 1 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import re
import sys

import numpy as np

from ..triton.support import TARGETS
from .ptx import parse_arg, parse_dims

__all__ = ["add_arguments", "run", "parse_triton_arg", "parse_meta", "load_kernel"]

CHECKS = ("memcheck", "racecheck", "initcheck")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="triton_command", metavar="{run,compare}", parser_class=type(parser))
    sub.required = True
    for name, text in (
        ("run", "run a launch in the simulator"),
        ("compare", "run a launch in the simulator and under Triton's interpreter, and say what differs"),
    ):
        p = sub.add_parser(name, help=text, description=text)
        p.add_argument("kernel", help="FILE.py:KERNEL, a @triton.jit function of that file")
        p.add_argument("--grid", required=True, type=parse_dims, help='programs: "G" or "X,Y[,Z]"')
        p.add_argument("--arg", action="append", default=[], metavar="SPEC", help="one positional argument (in order)")
        p.add_argument("--meta", action="append", default=[], metavar="NAME=VALUE", help="a keyword argument")
        p.add_argument("--target", default="sm_90", choices=sorted(TARGETS), help="Triton's build (default sm_90)")
        p.add_argument("--arch", help="the GPU that runs the build (default: sm_90, the H200; sm_120 for sm_120)")
        p.add_argument("--num-warps", type=int, default=4)
        p.add_argument("--num-stages", type=int, default=3)
        p.add_argument("--seed", type=int, default=0, help="seed of randn: arguments")
        p.add_argument("--out", type=pathlib.Path, help="write the arrays after the launch to DIR/<parameter>.npy")
        if name == "run":
            p.add_argument("--check", choices=CHECKS, help="a sanitizer (flashsim.ptx.sanitize)")
            p.add_argument(
                "--executor",
                metavar="ADDRESS",
                help="spread the programs over a cluster engine's workers: \"local:N\" or a Dask scheduler's address",
            )


def load_kernel(spec: str):
    """The @triton.jit function named by "FILE.py:KERNEL" (its module imported from the file)."""
    path, _, name = spec.rpartition(":")
    if not path or not name:
        raise ValueError(f"kernel: expected FILE.py:KERNEL, got {spec!r}")
    file = pathlib.Path(path)
    if not file.is_file():
        raise ValueError(f"kernel: no such file {path}")
    module_name = re.sub(r"\W", "_", file.stem)
    loader = importlib.util.spec_from_file_location(module_name, file)
    module = importlib.util.module_from_spec(loader)
    sys.modules[module_name] = module  # Triton and compare's child re-import it by name and file
    loader.loader.exec_module(module)
    if not hasattr(module, name):
        raise ValueError(f"kernel: {path} has no {name!r}")
    return getattr(module, name)


def _scalar(text: str):
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text, 0)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def parse_triton_arg(spec: str, rng: np.random.Generator):
    """One --arg (the module docstring): an array, or a Python scalar."""
    value = _scalar(spec)
    if value is not None:
        return value
    if spec.startswith("randn:"):
        zeros = parse_arg("out:" + spec[len("randn:") :])
        return rng.standard_normal(zeros.shape).astype(zeros.dtype)
    return parse_arg(spec)


def parse_meta(items) -> dict:
    out = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name.isidentifier():
            raise ValueError(f"--meta {item}: expected NAME=VALUE")
        value = _scalar(text)
        out[name] = text if value is None else value
    return out


def _names(kernel, n: int) -> list[str]:
    params = [p.name for p in getattr(kernel, "params", [])]
    return [params[i] if i < len(params) else f"arg{i}" for i in range(n)]


def _write(out: pathlib.Path, named: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, a in named.items():
        if isinstance(a, np.ndarray):
            np.save(out / f"{name}.npy", a)


def run(args) -> int:
    import flashsim.triton as ft
    from flashsim.ptx import SimulationError, WorkerError

    kernel = load_kernel(args.kernel)
    rng = np.random.default_rng(args.seed)
    values = [parse_triton_arg(s, rng) for s in args.arg]
    meta = parse_meta(args.meta)
    options = dict(target=args.target, arch=args.arch, num_warps=args.num_warps, num_stages=args.num_stages)
    if args.triton_command == "compare":
        result = ft.compare(kernel, args.grid, *values, **options, **meta)
        print(result)
        if args.out:
            _write(args.out, {f"{k}.flashsim": v[0] for k, v in result.results.items()})
            _write(args.out, {f"{k}.interpreter": v[1] for k, v in result.results.items()})
        return 0 if result.equal else 1
    try:
        report = ft.launch(
            kernel, args.grid, *values, check=args.check, executor=args.executor or None, **options, **meta
        )
    except (SimulationError, WorkerError) as exc:
        print(f"flashsim triton run: {exc}", file=sys.stderr)
        return 1
    print(report)
    for line in report.printf:
        print(line)
    if args.out:
        _write(args.out, dict(zip(_names(kernel, len(values)), values)))
    return 0
