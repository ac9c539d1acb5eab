"""SASS opcode counts of kernel/flash_fwd.cu for given configurations: the NVRTC build the launcher runs
(flashsim.gpu.launch.build_kernel, no GPU), disassembled by cuobjdump or nvdisasm.

    PYTHONPATH=. python3 tools/sass_ops.py [--arch sm_90] [--ops I2F,MUFU,F2FP,HMMA,IMMA,QMMA] [--source FILE] CONFIG...

    PYTHONPATH=. python3 tools/sass_ops.py --peak [--arch sm_90] [--source FILE]
    PYTHONPATH=. python3 tools/sass_ops.py --file capture/mma_k32.cu [--arch sm_90]

CONFIG: comma-separated KernelConfig.default overrides, e.g. head_dim=128,quant=int8,pv_accum=f16. Prints one line
per configuration: the static count of each opcode (by its first dotted part) in the kernel's SASS. ``--source``:
another flash_fwd.cu (an experiment's patched kernel) built with the same defines. ``--peak``: the mma.sync ceiling
probe instead (kernel/bench/mma_peak.cu, or ``--source``), per instruction: its mma opcodes by full name and the
adds and conversions around them, which show whether ptxas kept the mma's in the timed loop. ``--file``: every
kernel of another kernel/ file (the one-mma capture kernels show how ptxas lowers each mma.sync). The disassembler:
nvdisasm or cuobjdump on PATH (the CUDA toolkit), else the nvdisasm of the pip package nvidia-cuda-nvdisasm (the
test extra installs it), so that this runs on a machine without the toolkit's binaries.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

from flashsim.config import KernelConfig
from flashsim.gpu.build import compile_file
from flashsim.gpu.launch import build_kernel


def _value(text: str):
    return int(text) if text.lstrip("-").isdigit() else {"true": True, "false": False}.get(text.lower(), text)


def disassembler() -> list[str]:
    """The command that prints a cubin's SASS: nvdisasm or cuobjdump -sass from PATH, else the pip package's
    nvdisasm; FileNotFoundError naming the package when there is none."""
    for name, args in (("nvdisasm", ["-c"]), ("cuobjdump", ["-sass"])):
        found = shutil.which(name)
        if found:
            return [found, *args]
    spec = importlib.util.find_spec("nvidia")
    for root in spec.submodule_search_locations if spec else []:
        for exe in sorted(pathlib.Path(root).glob("*/bin/nvdisasm")):
            return [str(exe), "-c"]
    raise FileNotFoundError(
        "no SASS disassembler: install the CUDA toolkit's cuobjdump / nvdisasm, or "
        "pip install 'nvidia-cuda-nvdisasm>=13,<14'"
    )


def sass_opcodes(cubin: bytes) -> collections.Counter:
    """Static count of each opcode (its first dotted part, predicates dropped) in a cubin's SASS."""
    ops = collections.Counter()
    for op, n in sass_opcodes_full(cubin).items():
        ops[op.split(".")[0]] += n
    return ops


def disassemble(cubin: bytes) -> str:
    """The SASS text of every code section of ``cubin`` (``disassembler``)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        return subprocess.run(disassembler() + [path], check=True, capture_output=True, text=True).stdout


def _full_opcode(line: str) -> str | None:
    """An instruction line's full opcode (MUFU.EX2, HMMA.16816.F32, ...), predicate dropped; None for other lines."""
    parts = line.split("*/")
    if len(parts) < 2 or not line.strip().startswith("/*") or not parts[1].strip():
        return None
    words = parts[1].split()
    return (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).rstrip(";")


def _opcode(line: str) -> str | None:
    """An instruction line's opcode, predicate dropped; the mma family keeps its full name (HMMA.16816.F32)."""
    op = _full_opcode(line)
    return op if op is None or "MMA" in op else op.split(".")[0]


def sass_sequence(cubin: bytes) -> list[str]:
    """Every instruction's full opcode (``_full_opcode``), in program order."""
    return [op for op in map(_full_opcode, disassemble(cubin).splitlines()) if op]


def sass_by_function(cubin: bytes) -> dict:
    """{kernel name: Counter of opcodes (sass_opcodes_full's naming)} for every function of a cubin."""
    out, cur = {}, None
    for line in disassemble(cubin).splitlines():
        head = line.strip()
        if head.startswith(".section") and ".text." in head:  # nvdisasm
            cur = out.setdefault(head.split(".text.", 1)[1].split(",", 1)[0].strip('"'), collections.Counter())
        elif head.startswith("Function : "):  # cuobjdump -sass
            cur = out.setdefault(head[len("Function : ") :].strip(), collections.Counter())
        elif cur is not None:
            op = _opcode(line)
            if op:
                cur[op] += 1
    return out


def sass_opcodes_full(cubin: bytes) -> collections.Counter:
    """Static count of each opcode in a cubin's SASS (all functions), the mma opcodes under their full name
    (HMMA.16816.F32, QMMA.16832.F32.E4M3.E4M3...), the others by their first dotted part."""
    total = collections.Counter()
    for ops in sass_by_function(cubin).values():
        total.update(ops)
    return total


def file_report(relative: str, arch: str) -> list[str]:
    """One line per kernel of kernel/<relative> (built with no defines): its mma opcodes by full name and the FP8
    unpacking, adds and conversions around them."""
    lines = []
    for name, ops in sorted(sass_by_function(compile_file(relative, arch=arch).cubin).items()):
        mma = ", ".join(f"{o} {n}" for o, n in sorted(ops.items()) if "MMA" in o) or "none"
        rest = ", ".join(f"{o} {ops[o]}" for o in ("F2FP", "FADD", "HADD2"))
        lines.append(f"{arch} {name:34} mma: {mma}; {rest}")
    return lines


def peak_report(arch: str, source: str | None = None, chains: int = 8, iters: int = 4096) -> list[str]:
    """One line per instruction of the ceiling probe: mma opcodes by full name, FADD / HADD2 / F2FP / LOP3 counts."""
    from flashsim.gpu import peak

    lines = []
    for kind, (name, _) in peak.KINDS.items():
        ops = sass_opcodes_full(peak.build(kind, arch, chains, iters, source).cubin)
        mma = ", ".join(f"{o} {n}" for o, n in sorted(ops.items()) if "MMA" in o)
        rest = ", ".join(f"{o} {ops[o]}" for o in ("FADD", "HADD2", "F2FP", "LOP3"))
        lines.append(f"{arch} {name:26} mma: {mma}; {rest}")
    return lines


def opcode_counts(cfg: KernelConfig, arch: str, source: str | None = None) -> collections.Counter:
    """sass_opcodes of flash_fwd.cu (or ``source``, its text) built for ``cfg`` and ``arch`` as the launcher does."""
    return sass_opcodes(build_kernel(cfg, arch, source=source).cubin)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--ops", default="I2F,I2FP,MUFU,F2FP,FMUL,FADD,FFMA,IADD3,HMMA,IMMA,QMMA")
    p.add_argument("--source", help="another flash_fwd.cu to build (default: kernel/flash_fwd.cu)")
    p.add_argument("--peak", action="store_true", help="the ceiling probe's SASS instead of flash_fwd's")
    p.add_argument("--file", help="every kernel of kernel/FILE (e.g. capture/mma_k32.cu) instead of flash_fwd's")
    p.add_argument("configs", nargs="*")
    args = p.parse_args(argv)
    source = pathlib.Path(args.source).read_text() if args.source else None
    if args.peak:
        print("\n".join(peak_report(args.arch, source)))
        return 0
    if args.file:
        print("\n".join(file_report(args.file, args.arch)))
        return 0
    if not args.configs:
        p.error("give at least one CONFIG (or --peak)")
    for spec in args.configs:
        over = {k: _value(v) for k, v in (kv.split("=", 1) for kv in spec.split(","))}
        cfg = KernelConfig.default(args.arch, **over)
        ops = opcode_counts(cfg, args.arch, source)
        print(f"{args.arch} {spec}: " + ", ".join(f"{o} {ops[o]}" for o in args.ops.split(",")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
