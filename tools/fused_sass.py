"""The fused Pallas kernel's SASS without a GPU: registers, loops and where each instruction comes from.

Usage (CPU machine, repo root; a second Python with `pip install triton==3.9.0` (about 290 MB), kept apart because
its MLIR and jaxlib's must not share a process):
    python tools/fused_sass.py --triton-python /path/to/venv/bin/python [--shape B,Hq,Hkv,Nq,Nk,d] [--rows 16]
        [--warps 8] [--ptx] [--options '{"pv_accum": "f32"}'] [--out DIR] [--top 30]

1. engine_pallas.lower_for_gpu (jax's cross-platform lowering) gives the Triton module XLA would compile, as MLIR
   bytecode; jaxlib's own MLIR (with its Triton dialect) prints it as text with its locations;
2. every operation's location becomes its innermost frame in flashsim's numerics or program, coded into the line
   number (file index x 10000 + line: Triton keeps one file per kernel);
3. pip's Triton compiles the text for sm_90 with the program's warps (3-4 minutes on two cores for the landed
   build, 20-25 s with --ptx), and its bundled nvdisasm / cuobjdump give the SASS with line information and the
   resource usage;
4. the report: Triton's compilation time, registers and stack; the KV-tile loop and the two chain loops inside it
   (Q K^T: d / 16 steps, then P V: kv_tile / 16 steps, in program order); warp instructions per KV tile (each chain
   loop weighted by its trip count), thread instructions per emulated product, and the weighted count per source
   line and per opcode.

What it measured (benchmarks/experiments/jax_staged/README.md): 28.3 K warp instructions per tile, 27.6 thread
instructions per product, for the build Nsight Compute counted at 26.8 on the H200 (XLA's bundled Triton there,
pip's 3.9 here). Exit status 0 on success, 2 when a step fails (with its reason).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FILES = (
    "ieee32.py",
    "rounding.py",
    "sfu.py",
    "tensorcore.py",
    "kernel_program.py",
    "masking.py",
    "kernel_math.py",
    "formats.py",
    "engine_pallas.py",
    "xp.py",
)
COMPILE = r"""
import sys
from triton.compiler import compile as tcompile
from triton.backends.compiler import GPUTarget
k = tcompile(sys.argv[1], target=GPUTarget("cuda", int(sys.argv[3]), 32),
             options={"num_warps": int(sys.argv[2]), "num_stages": 1})
open(sys.argv[4], "wb").write(k.asm["cubin"])
"""


def lowered_module(shape, options, rows, warps, ptx) -> tuple:
    """(Triton module bytes, Problem) of the fused kernel for a problem of ``shape`` with ``options``."""
    import numpy as np

    from flashsim.emulator import engine_pallas
    from flashsim.problem import prepare

    B, H, Hkv, nq, nk, d = shape
    rng = np.random.default_rng(0)
    q = rng.standard_normal((B, H, nq, d)).astype(np.float16)
    k, v = (rng.standard_normal((B, Hkv, nk, d)).astype(np.float16) for _ in range(2))
    prob = prepare(q, k, v, **options)
    text = engine_pallas.lower_for_gpu(q, k, v, prob, engine_pallas.Layout(rows, warps, ptx))
    start = text.index('ir = "') + 6
    out, i = bytearray(), start
    while text[i] != '"':  # the MLIR string literal: \XX hex escapes, \\ and \"
        if text[i] == "\\":
            if text[i + 1] in '\\"':
                out.append(ord(text[i + 1]))
                i += 2
            else:
                out.append(int(text[i + 1 : i + 3], 16))
                i += 3
        else:
            out += text[i].encode()
            i += 1
    return bytes(out), prob


def module_text(data: bytes) -> str:
    """The bytecode as MLIR text with locations (jaxlib's MLIR and Triton dialect); gpu.barrier, which that context
    does not register, printed in its short form."""
    from jaxlib.mlir import ir
    from jaxlib.triton import dialect as tt

    ctx = ir.Context()
    tt.register_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    text = ir.Module.parse(data, context=ctx).operation.get_asm(enable_debug_info=True)
    return re.sub(r'^( *)"gpu\.barrier"\(\) <.*$', r"\1gpu.barrier", text, flags=re.M)


def relocate(text: str) -> str:
    """Each operation's location -> its innermost frame in FILES, as loc("k.py": code * 10000 + line)."""
    defs = dict(re.findall(r"^(#loc\d+) = loc\((.*)\)$", text, re.M))
    memo: dict = {}

    def frames(expr: str) -> list:
        expr = expr.strip()
        if expr in memo:
            return memo[expr]
        out: list = []
        if re.fullmatch(r"#loc\d+", expr):
            out = frames(defs.get(expr, "unknown"))
        elif expr.startswith("callsite("):
            inner, depth, cut = expr[len("callsite(") : -1], 0, None
            for i, c in enumerate(inner):
                depth += 1 if c in "([" else -1 if c in ")]" else 0
                if depth == 0 and inner.startswith(" at ", i):
                    cut = i
                    break
            out = frames(inner[:cut]) + frames(inner[cut + 4 :]) if cut else frames(inner)
        else:
            m = re.match(r'^"([^"]*)":(\d+):', expr)
            if m:
                out = [(m.group(1).rsplit("/", 1)[-1], int(m.group(2)))]
            else:
                m = re.match(r'^"[^"]*"\((.*)\)$', expr) or re.search(r"(#loc\d+)", expr)
                out = frames(m.group(1)) if m else []
        memo[expr] = out
        return out

    def code(m) -> str:
        for name, line in frames(m.group(1)):
            if name in FILES[:-1]:  # xp's shims count for their caller
                return f'loc("k.py":{(FILES.index(name) + 1) * 10000 + line}:0)'
        return 'loc("k.py":0:0)'

    sys.setrecursionlimit(100000)
    start = text.index("module @")
    end = text.index("\n} loc(#loc)", start)
    return text[:start] + re.sub(r"loc\((#loc\d+)\)", code, text[start:end]) + text[end:]


def sass_rows(sass: str) -> list:
    """[(file, line) or None, instruction text, label names at it] per instruction of the disassembly."""
    rows, cur, pending = [], None, []
    for raw in sass.splitlines():
        m = re.search(r'//## File "[^"]*", line (\d+)', raw)
        if m:
            n = int(m.group(1))
            cur = (FILES[n // 10000 - 1], n % 10000) if n >= 10000 else ("other", 0)
            continue
        m = re.match(r"^\s*(\.L_x_\d+):", raw)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", raw)
        if m:
            rows.append((cur, m.group(1), pending))
            pending = []
    return rows


def analyse(rows: list, trips: list) -> dict:
    """Loops from backward branches; weights: the outermost loop (the KV tiles) 1, the loops inside it their trip
    counts in program order."""
    where = {lab: i for i, (_, _, labs) in enumerate(rows) for lab in labs}
    loops = []
    for i, (_, text, _) in enumerate(rows):
        m = re.search(r"BRA\s+`?\(?(\.L_x_\d+)", text)
        if m and where.get(m.group(1), i) < i:
            loops.append((where[m.group(1)], i))
    if not loops:
        raise RuntimeError("no loop in the SASS")
    outer = max(loops, key=lambda r: r[1] - r[0])
    inner = sorted(r for r in loops if r != outer and outer[0] <= r[0] and r[1] <= outer[1])
    weight = {i: 1 for i in range(outer[0], outer[1] + 1)}
    for (lo, hi), trip in zip(inner, trips):
        for i in range(lo, hi + 1):
            weight[i] = trip
    per_line, per_op, per_file = collections.Counter(), collections.Counter(), collections.Counter()
    for i, w in weight.items():
        src, text, _ = rows[i]
        op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
        per_line[src] += w
        per_op[op] += w
        per_file[src[0] if src else "other"] += w
    return dict(
        total=sum(weight.values()),
        loops=[(hi - lo + 1) for lo, hi in inner],
        outer=outer[1] - outer[0] + 1,
        per_line=per_line,
        per_op=per_op,
        per_file=per_file,
    )


def source_line(name: str, line: int) -> str:
    for root in ("flashsim/numerics", "flashsim/emulator"):
        path = os.path.join(root, name)
        if os.path.exists(path):
            with open(path) as f:
                lines = f.read().splitlines()
            return lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--triton-python", required=True, help="a Python with pip's triton 3.9 installed")
    ap.add_argument("--shape", default="1,1,1,256,256,128", help="B,Hq,Hkv,Nq,Nk,d")
    ap.add_argument("--options", default="{}", help="flashsim.attention options as JSON")
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--warps", type=int, default=8)
    ap.add_argument("--ptx", action="store_true", help="the inline PTX form (engine_pallas.Layout.inline_ptx)")
    ap.add_argument("--arch", type=int, default=90, help="compute capability for Triton (90: sm_90)")
    ap.add_argument("--out", help="keep the module, cubin and SASS here (default: a temporary folder)")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    print("$ python tools/fused_sass.py " + " ".join(sys.argv[1:] if argv is None else argv), flush=True)
    shape = tuple(int(x) for x in args.shape.split(","))
    out = args.out or tempfile.mkdtemp(prefix="fused_sass_")
    os.makedirs(out, exist_ok=True)
    try:
        data, prob = lowered_module(shape, json.loads(args.options), args.rows, args.warps, args.ptx)
        ttir = os.path.join(out, "kernel.ttir")
        with open(ttir, "w") as f:
            f.write(relocate(module_text(data)))
        cubin = os.path.join(out, "kernel.cubin")
        t0 = time.perf_counter()
        subprocess.run(
            [args.triton_python, "-c", COMPILE, ttir, str(args.warps), str(args.arch), cubin],
            check=True,
            capture_output=True,
            text=True,
            env=dict(os.environ, TRITON_DEFAULT_FP_FUSION="1", TRITON_ALWAYS_COMPILE="1"),
        )
        compile_s = time.perf_counter() - t0
        tools = subprocess.run(
            [
                args.triton_python,
                "-c",
                "import triton, os; print(os.path.join(os.path.dirname(triton.__file__), 'backends', 'nvidia', 'bin'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        sass = subprocess.run(
            [os.path.join(tools, "nvdisasm"), "-c", "-gi", cubin], check=True, capture_output=True, text=True
        ).stdout
        with open(os.path.join(out, "kernel.sass"), "w") as f:
            f.write(sass)
        usage = subprocess.run(
            [os.path.join(tools, "cuobjdump"), "-res-usage", cubin], check=True, capture_output=True, text=True
        ).stdout
    except subprocess.CalledProcessError as e:
        print(f"fused_sass: {' '.join(e.cmd[:2])} failed: {(e.stderr or '').strip().splitlines()[-1:]}")
        return 2
    cfg = prob.config
    trips = [prob.head_dim // 16, cfg.kv_tile // 16]
    res = analyse(sass_rows(sass), trips)
    m = re.search(r"REG:(\d+) STACK:(\d+)", usage)
    products = 2 * args.rows * cfg.kv_tile * prob.head_dim  # Q K^T and P V of one KV tile, per program
    per_product = res["total"] * 32 / (products / args.warps)
    print(f"config {cfg}; program {args.rows} rows x {args.warps} warps, ptx {args.ptx}, sm_{args.arch}")
    print(f"Triton's compilation (pip's triton, this machine): {compile_s:.1f} s")
    print(
        f"registers {m.group(1)}, stack {m.group(2)} B; KV-tile loop {res['outer']} instructions, chain loops "
        f"{res['loops']} (trips {trips[: len(res['loops'])]})"
    )
    print(
        f"per KV tile and warp: {res['total']:,} warp instructions; {per_product:.1f} thread instructions per "
        f"emulated product"
    )
    print("by file: " + ", ".join(f"{k} {v:,}" for k, v in res["per_file"].most_common()))
    print("by opcode: " + ", ".join(f"{k} {v:,}" for k, v in res["per_op"].most_common(args.top)))
    print("by source line:")
    for src, n in res["per_line"].most_common(args.top):
        name, line = src if src else ("other", 0)
        print(f"  {n:7,}  {name}:{line}  {source_line(name, line)[:90]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                dict(
                    config=str(cfg),
                    compile_s=compile_s,
                    rows=args.rows,
                    warps=args.warps,
                    ptx=args.ptx,
                    registers=int(m.group(1)),
                    stack=int(m.group(2)),
                    per_tile_warp=res["total"],
                    per_product=per_product,
                    loops=res["loops"],
                    per_file=dict(res["per_file"]),
                    per_op=dict(res["per_op"].most_common(60)),
                ),
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
